"""Tokens as the unit of work for a probed sequence workload: --tokens converted to samples by the
tokens per sample its probe counted, and the per-token figures of a candidate (tokens/s, $ per
million tokens, MFU). A declared transformer shape (--model-shape) has its own path (recommend/llm.py).
"""

from __future__ import annotations

import math

from catalog import accelerators as acc
from catalog.hardware import device_count, device_kind
from catalog.models import InstanceType

from ..errors import AdvisorError
from ..estimate.points import PEAK_DTYPE
from .jobspec import JobSpec


def counted_tokens_per_sample(results: list) -> float | None:
    """The tokens per sample the newest result that counted them counted (the workload's results,
    newest first); None: none did (not a sequence workload, or probed before result schema 8)."""
    return next((r.shape.tokens_per_sample for r in results
                 if getattr(r, "shape", None) is not None and r.shape.tokens_per_sample), None)


def resolve_work(job: JobSpec, model: str, workload_id: str, results: list) -> JobSpec:
    """The job with its work in samples: --tokens over the probe's tokens per sample, rounded up to
    whole samples. The job keeps the tokens per sample wherever the probe counted them, so that a
    --samples job of a token workload is shown in tokens as well."""
    per = counted_tokens_per_sample(results)
    if job.tokens is not None and per is None:
        raise AdvisorError(f"--tokens needs a workload whose probe counted tokens, and the stored results of {model!r} "
                           f"(id {workload_id}) did not: give the work with --samples, or probe it again with batches "
                           "of [batch, sequence] token ids or a tokens_in_batch() hook (docs/llm-memory.md)")
    if per is None:
        return job
    samples = job.samples if job.tokens is None else max(1, math.ceil(job.tokens / per))
    return job.model_copy(update={"samples": samples, "tokens_per_sample": per})


def instance_peak_tflops(it: InstanceType, precision: str) -> float | None:
    """The instance's GPUs' dense peak at the precision they run at, all its devices together: the
    datasheet's (catalog/data/accelerators.json via catalog.accelerators, each figure sourced there),
    the denominator of MFU. None: not a GPU, or its peak at that precision is not known."""
    if device_kind(it) != "gpu":
        return None
    spec = acc.lookup(it.accelerator_model or "", it.accelerator_memory_gib)
    dtype = PEAK_DTYPE.get(precision)
    if spec is None or dtype is None:
        return None
    peak = acc.peak_tflops(spec, dtype)
    if dtype == "tf32" and not peak:
        peak = acc.peak_tflops(spec, "fp32")  # Volta/Turing: no TF32 (as estimate/points.py gpu_device)
    return device_count(it) * peak if peak else None


def mfu(samples_per_sec: float, flops_per_sample: float | None, count: int, peak_tflops: float | None) -> float | None:
    """Model FLOPs utilisation (derived): achieved FLOP/s (samples/s x the probe's counted training
    FLOPs per sample, forward and backward) over `count` instances' peak. None where either is unknown."""
    if not flops_per_sample or not math.isfinite(flops_per_sample) or not peak_tflops:
        return None
    return samples_per_sec * flops_per_sample / (count * peak_tflops * 1e12)
