"""The workloads a probe can train: builtin torchvision models, a tiny MLP, or the user's own
LightningModule (optionally with its own LightningDataModule) named as "package.module:Class"."""

from __future__ import annotations

import importlib
import inspect
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
        if not accepts(dm_cls, "batch_size"):
            raise WorkloadError(f"datamodule {spec.datamodule!r} must accept a batch_size argument")
    return module_cls, dm_cls


def check(spec: WorkloadSpec) -> None:
    """Fail early, before any training, on a workload that cannot be built."""
    if is_builtin(spec):
        _check_builtin(spec)
        return
    user_classes(spec)


def _check_builtin(spec: WorkloadSpec) -> None:
    if spec.model == "vit_b_16" and spec.image_size % 16:
        raise WorkloadError(f"vit_b_16 needs --image-size divisible by 16 (got {spec.image_size})")


def build_user_module(spec: WorkloadSpec, batch_size: int):
    module_cls, _ = user_classes(spec)
    offered = {"batch_size": batch_size, "num_classes": spec.num_classes, "image_size": spec.image_size}
    try:
        return module_cls(**_kwargs_for(module_cls, offered))
    except Exception as e:  # noqa: BLE001
        raise WorkloadError(f"workload {spec.model!r} could not be constructed: {type(e).__name__}: {e}".splitlines()[0]) from None


def build_user_datamodule(spec: WorkloadSpec, batch_size: int, num_workers: int, pin_memory: bool):
    """The user's DataModule, given those of the arguments its constructor takes."""
    _, dm_cls = user_classes(spec)
    offered = {"batch_size": batch_size, "num_workers": num_workers, "pin_memory": pin_memory}
    try:
        return dm_cls(**_kwargs_for(dm_cls, offered))
    except Exception as e:  # noqa: BLE001
        raise WorkloadError(f"datamodule {spec.datamodule!r} could not be constructed: {type(e).__name__}: {e}".splitlines()[0]) from None
