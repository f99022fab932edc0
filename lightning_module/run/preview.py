"""A look at the workload before anything is timed: where its batches come from, what one holds,
whether its batch size can be changed, and how fast its data pipeline alone delivers.

A user's module is set up by a real Trainer on the CPU (its prepare_data, setup and
train_dataloader run as in training) and stopped at on_train_start, before any step: the first
batch is taken from the loader Lightning built, then the loader alone is timed.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback
from torch import nn

from ..contract.result import ProbeConfig, WorkloadSpec
from . import workloads
from .batches import (
    batch_holders,
    describe,
    first_tensor,
    leading_dim,
    read_batch_size,
    samples_counter,
    tokens_per_sample,
)
from .builders import build_workload
from .data import SyntheticDataModule
from .workloads import WorkloadError

PIPELINE_SECONDS = 0.5  # the loader alone is timed this long at most
PIPELINE_BATCHES = 200  # ... or this many batches


@dataclass
class Preview:
    data_source: str  # "datamodule" | "module" | "synthetic"
    batch_size: int  # per device: the leading dimension of the first batch, where the probe starts
    batch_tunable: bool
    batch_note: str | None  # why it is not
    samples_counted_by: str  # "batch" | "hook"
    workers_note: str | None  # why the workers rung cannot change the loader's workers (None: it can)
    pipeline_samples_per_sec_per_worker: float | None
    first_batch: Any  # on the CPU, as the loader gave it
    # Whether channels_last can mean anything: the module has 2-D or 3-D convolutions (a CNN, a
    # vision transformer's patch embedding); not a language model's or a recommender's layers.
    convolutional: bool = False
    # Tokens per sample of the first batch and how they were counted (batches.tokens_per_sample);
    # None: the workload's batches hold no tokens.
    tokens_per_sample: float | None = None
    tokens_counted_by: str | None = None


class _Taken(Exception):
    pass


class _TakeLoader(Callback):
    def __init__(self):
        self.loader = None

    def on_train_start(self, trainer, pl_module):
        self.loader = trainer.train_dataloader
        raise _Taken


def _loader_of(module, dm, spec: WorkloadSpec):
    """The train loader as Lightning builds it for fit (None: it yielded nothing to train on)."""
    take = _TakeLoader()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "GPU available but not used": this Trainer only builds the loader
            trainer = pl.Trainer(accelerator="cpu", devices=1, max_steps=1, logger=False, enable_checkpointing=False,
                                 enable_model_summary=False, enable_progress_bar=False, num_sanity_val_steps=0,
                                 limit_val_batches=0, callbacks=[take])
            trainer.fit(module, datamodule=dm)
    except _Taken:
        pass
    except WorkloadError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's setup / train_dataloader: one line, not a traceback
        where = f"datamodule {spec.datamodule!r}" if dm is not None else f"workload {spec.model!r}"
        raise WorkloadError(f"{where}: setting up its train dataloader failed: {type(e).__name__}: {e}".splitlines()[0]) from None
    return take.loader


def pipeline_rate(it, count, workers: int) -> float | None:
    """Samples/s the loader alone delivers after its first batch, per worker process (the main
    process when it has none). The probe's measurement, and the training run's (training_run.py)."""
    n = batches = 0
    t0 = time.perf_counter()
    while batches < PIPELINE_BATCHES and time.perf_counter() - t0 < PIPELINE_SECONDS:
        try:
            b = next(it)
        except StopIteration:
            break
        n += count(b) or 0
        batches += 1
    elapsed = time.perf_counter() - t0
    if not batches or not n or elapsed <= 0:
        return None
    return n / elapsed / max(1, workers)


def preview(spec: WorkloadSpec, own_batch: bool = False) -> Preview:
    """own_batch: start from the batch size the author set (the module's or DataModule's
    batch_size, or its constructor's default) rather than spec.batch_size."""
    source = workloads.data_source(spec)
    start = spec.batch_size
    if source == "synthetic":
        loader = SyntheticDataModule(spec.image_size, spec.num_classes, start).train_dataloader()
        it = iter(loader)
        batch = next(it)
        rate = pipeline_rate(it, leading_dim, loader.num_workers)
        return Preview(source, start, True, None, "batch", None, rate, batch, workloads.is_vision(spec))

    module_cls, dm_cls = workloads.user_classes(spec)
    by_constructor = (workloads.accepts(module_cls, "batch_size")
                      or (dm_cls is not None and workloads.accepts(dm_cls, "batch_size")))
    if own_batch:
        module = workloads.build_user_module(spec, None)
        dm = workloads.build_user_datamodule(spec, None, 0, False) if dm_cls is not None else None
        own = read_batch_size(module, dm)
        if own is None and by_constructor:
            own = next((d for c in (dm_cls, module_cls) if c is not None
                        and isinstance(d := workloads.default_of(c, "batch_size"), int) and d > 0), None)
        start = own or start
    cfg = ProbeConfig(accelerator="cpu", batch_size=start)
    module, dm = build_workload(spec, cfg)
    tunable = bool(batch_holders(module, dm)) or by_constructor
    loader = _loader_of(module, dm, spec)
    where = f"the train dataloader of {'datamodule ' + repr(spec.datamodule) if dm is not None else repr(spec.model)}"
    if loader is None:
        raise WorkloadError(f"{where} yielded no batch: it is empty")
    try:
        it = iter(loader)
        batch = next(it)
    except StopIteration:
        raise WorkloadError(f"{where} yielded no batch: it is empty") from None
    except Exception as e:  # noqa: BLE001
        raise WorkloadError(f"{where} failed on its first batch: {type(e).__name__}: {e}".splitlines()[0]) from None
    if first_tensor(batch) is None:
        raise WorkloadError(f"a batch from {where} holds no tensor (it is {describe(batch)}): "
                            "the probe counts samples and moves batches to the device by their tensors")
    lead = leading_dim(batch)
    count, counted_by = samples_counter(module, dm)
    try:
        n = count(batch)
    except Exception as e:  # noqa: BLE001
        raise WorkloadError(f"samples_in_batch() failed on the first batch: {type(e).__name__}: {e}".splitlines()[0]) from None
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        what = "samples_in_batch() returned" if counted_by == "hook" else "the first tensor of a batch has leading dimension"
        raise WorkloadError(f"{what} {n!r} on {where}'s first batch: a batch must hold at least one sample"
                            + ("" if counted_by == "hook" else " (or define samples_in_batch(batch) on the module)"))
    try:
        tokens, tokens_by = tokens_per_sample(batch, n, module, dm)
    except ValueError as e:
        raise WorkloadError(f"{e} on {where}'s first batch") from None
    note = None
    if not tunable:
        note = ("no batch_size attribute or hparam on the module or DataModule (Lightning's convention), "
                "nor a constructor argument")
    elif lead != start:
        tunable, note = False, f"batch_size is set to {start}, but the loader yields batches of {lead}"
    workers_note = None
    if source == "module":
        workers_note = "the module's own train_dataloader() sets its workers"
    elif not workloads.accepts(dm_cls, "num_workers"):
        workers_note = "the DataModule does not take num_workers"
    rate = pipeline_rate(it, count, getattr(loader, "num_workers", 0) or 0)
    del it
    convolutional = any(isinstance(m, (nn.Conv2d, nn.Conv3d)) for m in module.modules())
    return Preview(source, lead or start, tunable, note, counted_by, workers_note, rate, batch, convolutional,
                   tokens, tokens_by)
