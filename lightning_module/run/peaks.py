"""What the winner computes and what the device could: FLOPs per sample, the measured matmul
peak and the datasheet peak."""

from __future__ import annotations

import logging
import time
import warnings

import torch
from lightning.pytorch.callbacks import Callback
from torch.utils.data import DataLoader, Dataset

from ..contract.result import ProbeConfig, WorkloadSpec
from .batches import leading_dim, samples_counter
from .builders import build_workload
from .callbacks import UnmonitoredSchedulers, synchronize
from .counting import StepCounter

log = logging.getLogger(__name__)


FLOP_SAMPLES = 2  # FLOPs are counted on this many samples of a batch: per sample, cheaply


def shrink(batch, n: int):
    """The batch's first n samples: every tensor whose leading dimension is the batch's, sliced."""
    from lightning_utilities.core.apply_func import apply_to_collection

    lead = leading_dim(batch)
    if not lead or lead <= n:
        return batch
    return apply_to_collection(batch, torch.Tensor, lambda t: t[:n] if t.dim() and t.shape[0] == lead else t)


def per_sample_traffic(small: tuple[int, float], large: tuple[int, float] | None) -> float:
    """Bytes per sample from counts at two sample counts (n, bytes): the difference, so that what
    every step moves once whatever its batch (weights, their gradients, the optimizer's state)
    is not charged to each of a couple of samples (a small MLP read 0.95 FLOP/byte that way,
    though at any real batch its weights' traffic is shared). One count only: bytes / n, an
    upper bound."""
    n, b = small
    if large is None or large[0] <= n or large[1] <= b:
        return b / n
    return (large[1] - b) / (large[0] - n)


class _StepCounts(Callback):
    """FLOPs, traffic (all, and that of the ops without FLOPs) and ops of each step (counting.StepCounter),
    from on_train_batch_start to on_train_batch_end: the module's
    training_step and its backward, as Lightning runs them (manual optimization included:
    self.optimizers(), manual_backward and self.log need a Trainer)."""

    def __init__(self):
        self.counts: list[tuple[float, float, float, int]] = []  # (flops, bytes, other bytes, ops)
        self._counter: StepCounter | None = None

    def on_train_start(self, trainer, pl_module):
        # Forward and backward are counted, not the update: each optimizer's step runs only the
        # closure Lightning gives it (its training_step and backward), so no optimizer state is
        # made on the host either (Adam's would double a large model's memory here).
        for opt in trainer.optimizers:
            opt.step = _closure_only

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._counter = StepCounter().__enter__()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        c = self._counter
        self.close()
        self.counts.append((c.flops, c.bytes, c.other_bytes, c.ops))

    def close(self) -> None:
        if self._counter is not None:
            self._counter.__exit__(None, None, None)
            self._counter = None


NOT_COUNTED = (None, None, None, None)


def per_sample_counts(spec: WorkloadSpec, batch) -> tuple[float | None, float | None, float | None, int | None]:
    """Forward + backward FLOPs, memory traffic and the traffic of the ops without FLOPs
    (counting.StepCounter) of one sample, and the ops one
    step dispatches, counted by torch on the CPU in a Trainer on the first samples of a batch (the
    preview's first): a warm-up step (lazy layers are made there), then FLOP_SAMPLES and 2 x
    FLOP_SAMPLES samples; FLOPs divided by the samples, traffic per additional sample
    (per_sample_traffic), ops of the FLOP_SAMPLES step (a step's op count does not grow with its batch).
    The optimizer's step is not run (_StepCounts), so its ops are not among them."""

    counts = _StepCounts()
    try:
        module, dm = build_workload(spec, ProbeConfig(accelerator="cpu", batch_size=spec.batch_size))
        count, _ = samples_counter(module, dm)
        small = shrink(batch, FLOP_SAMPLES)
        n = count(small)
        if not n:
            return NOT_COUNTED
        steps = [small, small]
        large = shrink(batch, 2 * FLOP_SAMPLES) if (leading_dim(batch) or 0) >= 2 * FLOP_SAMPLES else None
        if large is not None:
            steps.append(large)
        fit_listed(module, dm, steps, counts)
        if len(counts.counts) < 2:
            return NOT_COUNTED
        flops, moved, other, ops = counts.counts[1]
        traffic, other_traffic = moved / n, other / n
        if large is not None and len(counts.counts) > 2:
            m = count(large)
            traffic = per_sample_traffic((n, moved), (m, counts.counts[2][1]))
            other_traffic = per_sample_traffic((n, other), (m, counts.counts[2][2]))
        return flops / n or None, traffic or None, other_traffic or None, ops or None
    except Exception as e:  # noqa: BLE001 - the counts are optional: never fail the probe on them
        log.warning("FLOPs not counted: %s: %s", type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        return NOT_COUNTED
    finally:
        counts.close()


def fit_listed(module, dm, steps: list, callback, precision=None) -> None:
    """One quiet CPU epoch of exactly these batches with `callback` watching: they replace the
    loader's, through whoever feeds the module (its DataModule's hooks and set-up still run).
    The counting passes (per-sample counts here, activations in run/activations.py) share it."""
    import lightning.pytorch as pl

    feeder = dm if dm is not None else module
    feeder.train_dataloader = lambda: DataLoader(_Listed(steps), batch_size=None, collate_fn=_as_is)
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_epochs=1, limit_val_batches=0, precision=precision,
                         num_sanity_val_steps=0, enable_checkpointing=False, logger=False,
                         enable_model_summary=False, enable_progress_bar=False,
                         callbacks=[callback, UnmonitoredSchedulers()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(module, datamodule=dm)


def _closure_only(closure=None, **_):
    return closure() if closure is not None else None


def _as_is(batch):
    return batch


class _Listed(Dataset):
    def __init__(self, items: list):
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        return self.items[i]


def _dtype(precision: str) -> torch.dtype:
    return {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(precision, torch.float32)


def matmul_peak_tflops(accelerator: str, precision: str, seconds: float = 1.0) -> float | None:
    """A short large matmul in the precision the winner computes in: the practical peak.

    The size grows until one product takes a twentieth of the budget, so a device that emulates
    the dtype still answers within `seconds`. The product is a @ b.T, the layout nn.Linear runs
    (x @ W^T): on an AVX2-only CPU a bf16 a @ b takes a fallback path at ~1.3 GFLOP/s while
    a @ b.T and the model's own layers run at ~15, which made utilisation read 1000%.
    """
    try:
        dtype = _dtype(precision)
        if accelerator == "gpu":
            dev, n, n_max = torch.device("cuda"), 1024, 16384
        elif accelerator == "mps":
            dev, n, n_max = torch.device("mps"), 512, 8192
        elif accelerator == "cpu":
            dev, n, n_max = torch.device("cpu"), 256, 4096
        else:
            return None  # XLA: a traced matmul measures the compiler, not the chip

        def once(size: int) -> float:
            a = torch.randn(size, size, device=dev, dtype=dtype)
            b = torch.randn(size, size, device=dev, dtype=dtype)
            a @ b.T  # first call: allocation and kernel selection
            synchronize(accelerator)
            t0 = time.perf_counter()
            a @ b.T
            synchronize(accelerator)
            return time.perf_counter() - t0

        while n < n_max and once(n) < seconds / 20:
            n *= 2
        a = torch.randn(n, n, device=dev, dtype=dtype)
        b = torch.randn(n, n, device=dev, dtype=dtype)
        reps, t0 = 0, time.perf_counter()
        while True:
            a @ b.T
            reps += 1
            synchronize(accelerator)
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds and reps >= 2:
                break
        return 2 * n**3 * reps / elapsed / 1e12
    except Exception as e:  # noqa: BLE001 - a peak we cannot measure is left out, not fatal
        log.warning("matmul peak not measured: %s", e)
        return None


def datasheet_dtype(precision: str) -> str:
    if precision == "bf16-mixed":
        return "bf16"
    if precision == "16-mixed":
        return "fp16"
    return "fp32" if torch.get_float32_matmul_precision() == "highest" else "tf32"


def datasheet_peak_tflops(hw, accelerator: str, precision: str) -> float | None:
    """Per device for a GPU (catalog accelerator data), for the whole CPU (its ISA arithmetic)."""
    try:
        from catalog import accelerators as acc
    except ImportError:
        return None
    dtype = datasheet_dtype(precision)
    try:
        if accelerator == "gpu" and hw.gpus:
            spec = acc.lookup(hw.gpus[0].name, memory_gib=hw.gpus[0].memory_gib)
            return acc.peak_tflops(spec, dtype) if spec is not None else None
        if accelerator == "cpu" and hw.physical_cores and hw.cpu_clock_ghz:
            return acc.cpu_peak_tflops(hw.physical_cores, hw.cpu_clock_ghz, set(hw.isa_flags), dtype,
                                       hw.cpu_manufacturer)
    except Exception as e:  # noqa: BLE001 - the catalog's peak data is another module's: never fail the probe on it
        log.warning("datasheet peak unknown: %s", e)
    return None
