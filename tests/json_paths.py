"""Paths into a JSON document, for tests that mutate one leaf (or branch) at a time."""

from __future__ import annotations


def leaves(node, path: tuple = ()):
    """Every path in the document, innermost first (a branch's path follows its children's)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from leaves(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from leaves(v, (*path, i))
    if path:
        yield path


def get_path(doc, path: tuple):
    for p in path:
        doc = doc[p]
    return doc


def set_path(doc: dict, path: tuple, value) -> dict:
    """A deep copy of doc with the value at path replaced."""
    import copy

    doc = copy.deepcopy(doc)
    node = doc
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return doc


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _field_annotation(model, path: tuple):
    """The type a pydantic model declares at a path of its JSON (list indexes step into the items)."""
    import typing

    from pydantic import BaseModel

    ann = model
    for p in path:
        if isinstance(p, int):
            ann = next((a for a in typing.get_args(ann) if a is not type(None)), ann)
            continue
        inner = [a for a in (typing.get_args(ann) or (ann,)) if isinstance(a, type) and issubclass(a, BaseModel)]
        if not inner:
            return None
        ann = inner[0].model_fields[p].annotation
    return ann


def numeric_paths(doc: dict, model) -> list[tuple]:
    """Every path of `doc` that holds a number, and every null one `model` types as a number."""
    out = []
    for p in leaves(doc):
        node = doc
        for k in p:
            node = node[k]
        if _is_number(node) or (node is None and any(t in str(_field_annotation(model, p)) for t in ("float", "int"))):
            out.append(p)
    return out
