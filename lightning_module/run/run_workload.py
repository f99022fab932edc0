"""What a training run trained, named as the probe names it: the module's and DataModule's
constructor arguments (their saved hyper-parameters), and the optimizer and scheduler LightningCLI
built in place of the module's configure_optimizers(), so that a run's workload id is the id
`advisor probe --config` files the same config under (contract/result.py WorkloadSpec.workload_id).

A value left at its constructor's default is not part of the name, as it is not typed in a config:
LightningCLI (jsonargparse) fills every default into what it parsed, so they are dropped again here.
"""

from __future__ import annotations

import importlib
import inspect
import json
from functools import partial

import torch

from ..contract.result import TUNED_ARGS
from ..contract.workload_config import SHORT_NAMES, WorkloadConfigError, optimizer_section

# A scheduler's own counter, not its configuration: read back it is where the run has got to.
_SCHEDULER_STATE = ("last_epoch", "verbose")
# What LightningCLI adds to a module's saved hyper-parameters to reload it from a checkpoint
# (lightning/pytorch/core/mixins/hparams_mixin.py; core/saving.py pops them): no constructor's.
_CLI_HPARAMS = ("_class_path", "_instantiator")
# What an optimizer's or scheduler's constructor is given besides its configuration.
_BUILT_ON = {"optimizer": "params", "lr_scheduler": "optimizer"}


class TrainingRunError(ValueError):
    """The callback cannot measure this run, or was set up wrong; the message is one line."""


def class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _parameters(cls: type) -> dict[str, inspect.Parameter]:
    """The constructor's keyword parameters, through the classes whose **kwargs it passes on (as
    jsonargparse reads them: LightningCLI's ReduceLROnPlateau takes torch's arguments so)."""
    out: dict[str, inspect.Parameter] = {}
    for c in cls.__mro__:
        if "__init__" not in vars(c) or c is object:
            continue
        try:
            params = inspect.signature(c.__init__).parameters.values()
        except (TypeError, ValueError):
            break
        for p in params:
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                out.setdefault(p.name, p)
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            break
    return out


def typed_args(cls: type, values: dict, noun: str, fix: str) -> dict:
    """The arguments among `values` that differ from `cls`'s constructor defaults, as JSON: what one
    types in a config. `fix` says what to pass instead when a value is not JSON."""
    params = _parameters(cls)
    out = {}
    for k, v in values.items():
        p = params.get(k)
        has_default = p is not None and p.default is not p.empty
        try:
            as_json = json.loads(json.dumps(v))  # a tuple as the list a config writes
        except (TypeError, ValueError):
            if has_default and p.default is v:
                continue
            raise TrainingRunError(f"{noun} {k!r} of {cls.__name__} is a {type(v).__name__}, not JSON: "
                                   f"{fix} to name the workload") from None
        if has_default:
            try:
                if json.loads(json.dumps(p.default)) == as_json:
                    continue
            except (TypeError, ValueError):  # a default that is no JSON: a JSON value differs from it
                pass
        out[k] = as_json
    return out


def chosen_args(obj) -> dict:
    """The constructor arguments Lightning saved (save_hyperparameters), without those left at their
    defaults nor the loader's knobs the probe tunes: what one types after --init-args."""
    hp = getattr(obj, "hparams", None)
    if not hp:
        return {}
    values = {k: v for k, v in dict(hp).items() if k not in TUNED_ARGS and k not in _CLI_HPARAMS}
    return typed_args(type(obj), values, "hyper-parameter", "pass init_args= (or data_init_args=)")


def cli_optimizers(pl_module, trainer) -> tuple[dict | None, dict | None]:
    """The optimizer and scheduler LightningCLI put in place of the module's configure_optimizers()
    (LightningCLI._add_configure_optimizers_method_to_model: a partial of configure_optimizers
    holding the built optimizer and scheduler), as the probe's config names them (a ClassSpec's
    fields, which WorkloadSpec checks); (None, None) when the module's own configure_optimizers()
    runs (the probe records nothing then either)."""
    fn = getattr(pl_module.configure_optimizers, "__func__", None)
    if not (isinstance(fn, partial) and getattr(fn.func, "__name__", "") == "configure_optimizers"
            and isinstance(fn.keywords.get("optimizer"), torch.optim.Optimizer)):
        return None, None
    config = _saved_config(trainer)
    out = []
    for kind in ("optimizer", "lr_scheduler"):
        built = fn.keywords.get(kind)
        if built is None:
            out.append(None)
            continue
        cls = type(built)
        args = _configured(config, kind, cls)
        if args is None:
            args = _read_back(built, kind)
        args = typed_args(cls, args, f"{kind} argument", "pass workload= (a WorkloadSpec)")
        try:
            section = optimizer_section({"class_path": _public_path(cls, kind), "init_args": args}, kind,
                                        f"LightningCLI's {kind}")
        except WorkloadConfigError as e:
            raise TrainingRunError(str(e)) from None
        out.append(section)
    return out[0], out[1]


def _saved_config(trainer):
    """What LightningCLI parsed, as its SaveConfigCallback holds it (there unless the CLI was given
    save_config_callback=None)."""
    from lightning.pytorch.cli import SaveConfigCallback

    for cb in trainer.callbacks:
        if isinstance(cb, SaveConfigCallback):
            return cb.config
    return None


def _configured(config, kind: str, cls: type) -> dict | None:
    """The section's init_args as parsed, when the section names the class that was built."""
    section = getattr(config, kind, None) if config is not None else None
    path = getattr(section, "class_path", None)
    if not isinstance(path, str) or "." not in path:
        return None
    mod, _, name = path.rpartition(".")
    try:
        if getattr(importlib.import_module(mod), name, None) is not cls:
            return None
    except Exception:  # noqa: BLE001 - a class path that does not import is not the class built
        return None
    args = getattr(section, "init_args", None) or {}
    return args.as_dict() if hasattr(args, "as_dict") else dict(args)


def _read_back(built, kind: str) -> dict:
    """The arguments off the built object: a torch optimizer keeps every hyper-parameter in its
    `defaults`, a scheduler as attributes of the same names; one that does not cannot be named."""
    where = built.defaults if kind == "optimizer" else vars(built)
    names = [k for k in _parameters(type(built)) if k != _BUILT_ON[kind] and k not in _SCHEDULER_STATE]
    missing = [k for k in names if k not in where]
    if missing:
        raise TrainingRunError(f"{type(built).__name__}'s argument(s) {', '.join(missing)} cannot be read back and "
                               "LightningCLI's SaveConfigCallback is not in the Trainer: keep it, or pass workload=")
    return {k: where[k] for k in names if k in where}


def _public_path(cls: type, kind: str) -> str:
    """torch.optim.AdamW, not torch.optim.adamw.AdamW: the name a config uses, as the probe spells it."""
    public = SHORT_NAMES[kind].format(cls.__name__)
    mod, _, name = public.rpartition(".")
    if getattr(importlib.import_module(mod), name, None) is cls:
        return public
    return f"{cls.__module__}.{cls.__qualname__}"
