"""A user's workload checked from its source, before torch is imported: the module is found and
read (never run: importing it imports torch, seconds), the class is defined in it, and the
arguments given fit the constructor the source declares. What the source cannot say (a class
imported from elsewhere, a constructor inherited, **kwargs) is left to the import-time checks of
lightning_module.run.workloads, which find the same faults, only later."""

from __future__ import annotations

import ast
import os
import sys
from importlib.machinery import PathFinder

from .result import TUNED_ARGS, WorkloadSpec


class WorkloadSourceError(ValueError):
    """A workload its source shows cannot be built; the message is one line for the user."""


def _source(mod_name: str) -> str | None:
    """The module's source, found as `import` would find it (sys.path, then the working directory,
    as the probe adds it) without executing a package's __init__; None when it cannot be read here
    (an extension module, a zip import): the import-time check decides."""
    path = [*sys.path, os.getcwd()]
    spec = None
    for part in mod_name.split("."):
        spec = PathFinder.find_spec(part, path)
        if spec is None:
            return ""
        path = list(spec.submodule_search_locations or [])
    origin = getattr(spec, "origin", None)
    if not origin or not origin.endswith(".py"):
        return None
    try:
        with open(origin, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _class_def(tree: ast.Module, name: str) -> ast.ClassDef | bool | None:
    """The top-level class `name`; False when it is a function; True when the name is bound
    otherwise (an import, an assignment: not checkable here); None when the module never binds it."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return False
    for node in ast.walk(tree):  # imported, assigned, or names made at run time (__getattr__, *)
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(a.asname == name or a.name in (name, "*")
                                                                    or a.name.endswith("." + name) for a in node.names):
            return True
        if isinstance(node, (ast.Name)) and node.id == name and isinstance(node.ctx, ast.Store):
            return True
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            return True
    return None


def _check_args(cls: ast.ClassDef, given: dict, what: str, ref: str, offered: tuple[str, ...]) -> None:
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return  # inherited: the import-time check reads it
    a = init.args
    if a.vararg is not None and not a.kwonlyargs and len(a.args) <= 1 and a.kwarg is not None:
        return  # (*args, **kwargs): it says nothing
    named = [x.arg for x in (a.posonlyargs + a.args)[1:] + a.kwonlyargs]
    positional = (a.posonlyargs + a.args)[1:]
    required = [x.arg for x in positional[: len(positional) - len(a.defaults)]]
    required += [x.arg for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is None]
    if (why := constructor_misfit(what, ref, given, named, a.kwarg is not None, required, offered)) is not None:
        raise WorkloadSourceError(why)


def constructor_misfit(what: str, ref: str, given, named: list[str], takes_any: bool, required: list[str],
                       offered: tuple[str, ...]) -> str | None:
    """Why the arguments `given` do not fit a constructor that takes `named` (any keyword too when
    `takes_any`) and needs `required` (the probe supplies those `offered`); None when they fit.
    One rule for the check from the source, before any import, and the one on the imported class
    (lightning_module/run/workloads.check_args)."""
    unknown = [k for k in given if k not in named] if not takes_any else []
    if unknown:
        return (f"{what} {ref!r} takes no argument {', '.join(map(repr, unknown))} "
                f"(its constructor takes: {', '.join(named) or 'nothing'})")
    missing = [n for n in required if n not in given and n not in offered]
    if missing:
        return (f"{what} {ref!r} needs {', '.join(map(repr, missing))}: give them with --init-args "
                "(--data-init-args for the DataModule) or --config")
    return None


def _check_one(ref: str, given: dict, what: str, offered: tuple[str, ...]) -> None:
    mod_name, _, name = ref.partition(":")
    source = _source(mod_name)
    if source == "":
        raise WorkloadSourceError(f"{what} {ref!r}: cannot import {mod_name}: no module named {mod_name!r} on the "
                                  "Python path or in the working directory")
    if source is None:
        return
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise WorkloadSourceError(f"{what} {ref!r}: cannot import {mod_name}: SyntaxError: {e.msg} (line {e.lineno})") from None
    found = _class_def(tree, name)
    if found is None:
        raise WorkloadSourceError(f"{what} {ref!r}: module {mod_name} has no {name}")
    if found is False:
        kind = "LightningModule" if what == "workload" else "LightningDataModule"
        raise WorkloadSourceError(f"{what} {ref!r} is not a {kind} class (it is a function)")
    if isinstance(found, ast.ClassDef):
        _check_args(found, given, what, ref, offered)


def check_source(spec: WorkloadSpec) -> None:
    """The faults the user's source shows, found without importing it (a builtin: nothing to read)."""
    if ":" not in spec.model:
        return
    _check_one(spec.model, spec.init_args, "workload", TUNED_ARGS[:1])
    if spec.datamodule:
        _check_one(spec.datamodule, spec.data_init_args, "datamodule", TUNED_ARGS)
