"""The workloads a probe can train: builtin torchvision models, a tiny MLP, or the user's own
LightningModule (optionally with its own LightningDataModule) named as "package.module:Class"."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
from types import MethodType
from typing import Any

from ..contract.result import BUILTIN_MODELS, TUNED_ARGS, ClassSpec, WorkloadSpec, misfit_patch
from ..contract.workload_source import constructor_misfit


class WorkloadError(ValueError):
    """A workload that cannot be built; the message is one line for the user."""


def is_builtin(spec: WorkloadSpec) -> bool:
    return spec.model in BUILTIN_MODELS


def is_vision(spec: WorkloadSpec) -> bool:
    """channels_last only means something for convolutions over images."""
    return spec.model in ("resnet50", "resnet18")


def build_net(spec: WorkloadSpec):
    """A randomly initialised network (no weight download) for a builtin workload."""
    from torch import nn

    if spec.model == "mlp":
        # Tiny on purpose: tests and quick checks of the probe machinery itself.
        return nn.Sequential(
            nn.Flatten(), nn.Linear(3 * spec.image_size**2, 64), nn.ReLU(), nn.Linear(64, spec.num_classes)
        )
    import torchvision.models as tvm

    if spec.model == "resnet50":
        return tvm.resnet50(weights=None, num_classes=spec.num_classes)
    if spec.model == "resnet18":
        return tvm.resnet18(weights=None, num_classes=spec.num_classes)
    if spec.model == "vit_b_16":
        _check_builtin(spec)
        return tvm.vit_b_16(weights=None, num_classes=spec.num_classes, image_size=spec.image_size)
    raise WorkloadError(f"{spec.model!r} is not a builtin workload")


def load_object(ref: str, what: str) -> Any:
    """Import "package.module:Name"; any failure is a one-line WorkloadError."""
    mod_name, _, name = ref.partition(":")
    if not mod_name or not name:
        raise WorkloadError(f"{what} {ref!r}: expected 'package.module:ClassName'")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # the user's project, as `python -m` would find it (last: never shadows)
    try:
        mod = importlib.import_module(mod_name)
    except Exception as e:  # noqa: BLE001 - ImportError, or the user's module failing at import time
        raise WorkloadError(f"{what} {ref!r}: cannot import {mod_name}: {type(e).__name__}: {e}".splitlines()[0]) from None
    try:
        return getattr(mod, name)
    except AttributeError:
        raise WorkloadError(f"{what} {ref!r}: module {mod_name} has no {name}") from None


def _kwargs_for(cls, offered: dict[str, Any]) -> dict[str, Any]:
    """The offered keyword arguments that cls's constructor accepts."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(offered)
    return {k: v for k, v in offered.items() if k in params}


def accepts(cls, name: str) -> bool:
    return name in _kwargs_for(cls, {name: None})


def default_of(cls, name: str) -> Any:
    """The constructor's default for `name` (None when it has none)."""
    try:
        p = inspect.signature(cls).parameters.get(name)
    except (TypeError, ValueError):
        return None
    return None if p is None or p.default is inspect.Parameter.empty else p.default


def constructor_defaults(cls) -> dict[str, Any]:
    """The constructor's defaults that JSON can say (a tuple as the list a config gives), the tuned
    arguments aside: what the id resolves a user's arguments against (WorkloadSpec.init_arg_defaults).
    An object default is left out: a config names its value by class_path, never the same JSON."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return {}
    out: dict[str, Any] = {}
    for name, p in params.items():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) or p.default is p.empty or name in TUNED_ARGS:
            continue
        try:
            out[name] = json.loads(json.dumps(p.default, allow_nan=False))
        except (TypeError, ValueError):
            continue
    return out


def with_defaults(spec: WorkloadSpec) -> WorkloadSpec:
    """The workload with its constructors' defaults recorded (a builtin has none)."""
    if is_builtin(spec):
        return spec
    module_cls, dm_cls = user_classes(spec)
    return spec.model_copy(update={"init_arg_defaults": constructor_defaults(module_cls),
                                   "data_init_arg_defaults": constructor_defaults(dm_cls) if dm_cls else {}})


def check_args(cls, args: dict[str, Any], what: str, ref: str, offered: tuple[str, ...] = ()) -> None:
    """The arguments fit the constructor: none it does not take, none it needs missing."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    named = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    required = [n for n in named if params[n].default is inspect.Parameter.empty]
    if (why := constructor_misfit(what, ref, args, named, takes_any, required, offered)) is not None:
        raise WorkloadError(why)


def instantiate(value: Any) -> Any:
    """LightningCLI's nested {class_path, init_args} values (a backbone, a tokenizer) built as jsonargparse would."""
    if isinstance(value, dict) and "class_path" in value and set(value) <= {"class_path", "init_args"}:
        from ..contract.workload_config import class_ref

        cls = load_object(class_ref(value["class_path"], "class_path"), "class_path")
        args = {k: instantiate(v) for k, v in (value.get("init_args") or {}).items()}
        try:
            return cls(**args)
        except Exception as e:  # noqa: BLE001
            msg = f"{value['class_path']} could not be constructed: {type(e).__name__}: {e}"
            raise WorkloadError(msg.splitlines()[0]) from None
    if isinstance(value, list):
        return [instantiate(v) for v in value]
    if isinstance(value, dict):
        return {k: instantiate(v) for k, v in value.items()}
    return value


def user_classes(spec: WorkloadSpec) -> tuple[type, type | None]:
    """The user's LightningModule class and DataModule class (or None), checked."""
    import lightning.pytorch as pl

    module_cls = load_object(spec.model, "workload")
    if not (inspect.isclass(module_cls) and issubclass(module_cls, pl.LightningModule)):
        raise WorkloadError(f"workload {spec.model!r} is not a LightningModule class")
    dm_cls = None
    if spec.datamodule:
        dm_cls = load_object(spec.datamodule, "datamodule")
        if not (inspect.isclass(dm_cls) and issubclass(dm_cls, pl.LightningDataModule)):
            raise WorkloadError(f"datamodule {spec.datamodule!r} is not a LightningDataModule class")
    return module_cls, dm_cls


def has_own_loader(module_cls: type) -> bool:
    import lightning.pytorch as pl

    return getattr(module_cls, "train_dataloader", None) is not pl.LightningModule.train_dataloader


def data_source(spec: WorkloadSpec) -> str:
    """Where a workload's batches come from: --datamodule, else the module's own
    train_dataloader(), else (builtin workloads only) synthetic images."""
    if spec.datamodule:
        return "datamodule"
    if is_builtin(spec):
        return "synthetic"
    module_cls, _ = user_classes(spec)
    if not has_own_loader(module_cls):
        raise WorkloadError(f"workload {spec.model!r} has no train_dataloader() and no --datamodule was given: "
                            "give the LightningDataModule that feeds it (--datamodule package.module:Class)")
    return "module"


def check(spec: WorkloadSpec) -> None:
    """Fail early, before any training, on a workload that cannot be built."""
    if is_builtin(spec):
        _check_builtin(spec)
        return
    module_cls, dm_cls = user_classes(spec)
    check_args(module_cls, spec.init_args, "workload", spec.model, offered=_offered_module(spec, 1))
    if dm_cls is not None:
        check_args(dm_cls, spec.data_init_args, "datamodule", spec.datamodule, offered=_offered_data(1, 0, False))
    data_source(spec)
    check_optimizer(spec)


def _check_builtin(spec: WorkloadSpec) -> None:
    if (patch := misfit_patch(spec.model, spec.image_size)) is not None:
        raise WorkloadError(f"{spec.model} needs --image-size divisible by {patch} (got {spec.image_size})")


def _offered_module(spec: WorkloadSpec, batch_size: int | None) -> dict[str, Any]:
    # What the probe offers a constructor that takes it: the batch size it sets (Lightning's way
    # too, on the attribute). Nothing else: the author's defaults stand (--image-size and
    # --num-classes reach the constructor as init_args, when given).
    return {} if batch_size is None else {"batch_size": batch_size}


def _offered_data(batch_size: int | None, num_workers: int, pin_memory: bool) -> dict[str, Any]:
    offered = {"num_workers": num_workers, "pin_memory": pin_memory}
    if batch_size is not None:
        offered["batch_size"] = batch_size
    return offered


def _construct(cls, ref: str, what: str, args: dict[str, Any], offered: dict[str, Any]):
    kwargs = {**_kwargs_for(cls, {k: v for k, v in offered.items() if k not in args}), **instantiate(args)}
    if what == "datamodule":  # the ladder's own knobs win over the config's
        kwargs.update(_kwargs_for(cls, {k: v for k, v in offered.items() if k in ("num_workers", "pin_memory")}))
    try:
        return cls(**kwargs)
    except WorkloadError:
        raise
    except Exception as e:  # noqa: BLE001
        raise WorkloadError(f"{what} {ref!r} could not be constructed: {type(e).__name__}: {e}".splitlines()[0]) from None


def build_user_module(spec: WorkloadSpec, batch_size: int | None):
    """The user's LightningModule with its arguments (batch_size None: the author's own)."""
    module_cls, _ = user_classes(spec)
    module = _construct(module_cls, spec.model, "workload", spec.init_args, _offered_module(spec, batch_size))
    apply_optimizer(module, spec)
    return module


# ---------------------------------------------------------------------------------------------
# A LightningCLI config's optimizer: and lr_scheduler:, applied as LightningCLI applies them
# (LightningCLI._add_configure_optimizers_method_to_model): the optimizer built on the module's
# parameters, the scheduler on the optimizer, returned by LightningCLI.configure_optimizers (which
# gives a ReduceLROnPlateau its monitor), in place of the module's own configure_optimizers().

def _optimizer_class(c: ClassSpec, kind: str) -> type:
    import torch
    from lightning.pytorch.cli import ReduceLROnPlateau

    mod, _, name = c.class_path.rpartition(".")
    try:
        cls = load_object(f"{mod}:{name}", kind)
    except WorkloadError as e:  # said with the path as the config spells it
        raise WorkloadError(str(e).replace(repr(f"{mod}:{name}"), repr(c.class_path))) from None
    if kind == "optimizer":
        if not (inspect.isclass(cls) and issubclass(cls, torch.optim.Optimizer)):
            raise WorkloadError(f"optimizer {c.class_path!r} is not a torch optimizer (a torch.optim.Optimizer subclass)")
        return cls
    if not (inspect.isclass(cls) and issubclass(cls, (torch.optim.lr_scheduler.LRScheduler,
                                                       torch.optim.lr_scheduler.ReduceLROnPlateau))):
        raise WorkloadError(f"lr_scheduler {c.class_path!r} is not a learning-rate scheduler "
                            "(a torch.optim.lr_scheduler.LRScheduler subclass)")
    if issubclass(cls, torch.optim.lr_scheduler.ReduceLROnPlateau) and not issubclass(cls, ReduceLROnPlateau):
        raise WorkloadError(f"lr_scheduler {c.class_path!r} needs the metric it watches, which LightningCLI takes "
                            "from lightning.pytorch.cli.ReduceLROnPlateau: use that class (or ReduceLROnPlateau) "
                            "with init_args: {monitor: ...}")
    return cls


def _built(cls, first, c: ClassSpec, kind: str):
    try:
        return cls(first, **instantiate(c.init_args))
    except WorkloadError:
        raise
    except Exception as e:  # noqa: BLE001 - wrong or missing init_args, a value it refuses
        raise WorkloadError(f"{kind} {c.class_path!r} could not be built from its init_args "
                            f"{json.dumps(c.init_args, sort_keys=True)[:200]}: {type(e).__name__}: {e}".splitlines()[0]) from None


def check_optimizer(spec: WorkloadSpec) -> None:
    """The optimizer and scheduler build, on a stand-in parameter: a wrong class or init_args is one
    line before any training."""
    if spec.optimizer is None:
        return
    import torch

    opt = _built(_optimizer_class(spec.optimizer, "optimizer"), [torch.nn.Parameter(torch.zeros(1))],
                 spec.optimizer, "optimizer")
    if spec.lr_scheduler is not None:
        _built(_optimizer_class(spec.lr_scheduler, "lr_scheduler"), opt, spec.lr_scheduler, "lr_scheduler")


def apply_optimizer(module, spec: WorkloadSpec) -> None:
    """The config's optimizer (and scheduler) as the module's configure_optimizers()."""
    if spec.optimizer is None:
        return
    from lightning.pytorch.cli import LightningCLI

    opt_cls = _optimizer_class(spec.optimizer, "optimizer")
    sched_cls = _optimizer_class(spec.lr_scheduler, "lr_scheduler") if spec.lr_scheduler else None

    def configure_optimizers(self):
        opt = _built(opt_cls, self.parameters(), spec.optimizer, "optimizer")
        sched = _built(sched_cls, opt, spec.lr_scheduler, "lr_scheduler") if sched_cls else None
        return LightningCLI.configure_optimizers(self, opt, sched)

    module.configure_optimizers = MethodType(configure_optimizers, module)


def build_user_datamodule(spec: WorkloadSpec, batch_size: int | None, num_workers: int, pin_memory: bool):
    """The user's DataModule, given its arguments and those of the probe's that its constructor takes."""
    _, dm_cls = user_classes(spec)
    return _construct(dm_cls, spec.datamodule, "datamodule", spec.data_init_args,
                      _offered_data(batch_size, num_workers, pin_memory))
