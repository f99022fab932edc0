"""The workloads a probe can train: builtin torchvision models, a tiny MLP, or the user's own
LightningModule (optionally with its own LightningDataModule) named as "package.module:Class"."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import Any

from ..contract.result import BUILTIN_MODELS, WorkloadSpec


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


def check_args(cls, args: dict[str, Any], what: str, ref: str, offered: tuple[str, ...] = ()) -> None:
    """The arguments fit the constructor: none it does not take, none it needs missing."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    named = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = [k for k in args if k not in named and not takes_any]
    if unknown:
        raise WorkloadError(f"{what} {ref!r} takes no argument {', '.join(map(repr, unknown))} "
                            f"(its constructor takes: {', '.join(named) or 'nothing'})")
    missing = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
               and p.default is inspect.Parameter.empty and n not in args and n not in offered]
    if missing:
        raise WorkloadError(f"{what} {ref!r} needs {', '.join(map(repr, missing))}: give them with --init-args "
                            "(--data-init-args for the DataModule) or --config")


def instantiate(value: Any) -> Any:
    """LightningCLI's nested {class_path, init_args} values (a backbone, a tokenizer) built as jsonargparse would."""
    if isinstance(value, dict) and "class_path" in value and set(value) <= {"class_path", "init_args"}:
        from ..contract.workload_config import class_ref

        cls = load_object(class_ref(value["class_path"], "class_path"), "class_path")
        args = {k: instantiate(v) for k, v in (value.get("init_args") or {}).items()}
        try:
            return cls(**args)
        except Exception as e:  # noqa: BLE001
            raise WorkloadError(f"{value['class_path']} could not be constructed: {type(e).__name__}: {e}".splitlines()[0]) from None
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


def _check_builtin(spec: WorkloadSpec) -> None:
    if spec.model == "vit_b_16" and spec.image_size % 16:
        raise WorkloadError(f"vit_b_16 needs --image-size divisible by 16 (got {spec.image_size})")


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
    return _construct(module_cls, spec.model, "workload", spec.init_args, _offered_module(spec, batch_size))


def build_user_datamodule(spec: WorkloadSpec, batch_size: int | None, num_workers: int, pin_memory: bool):
    """The user's DataModule, given its arguments and those of the probe's that its constructor takes."""
    _, dm_cls = user_classes(spec)
    return _construct(dm_cls, spec.datamodule, "datamodule", spec.data_init_args,
                      _offered_data(batch_size, num_workers, pin_memory))
