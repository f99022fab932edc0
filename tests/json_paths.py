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
