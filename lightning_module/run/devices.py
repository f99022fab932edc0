"""Which device a probe trains on, how many, with what half precision, and the memory it used
there."""

from __future__ import annotations

import gc
import os
import resource

import torch

from .workloads import WorkloadError


class NotAvailable(WorkloadError):
    """The requested accelerator is not on this machine."""


def xla_available() -> bool:
    try:
        import torch_xla  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_accelerator(requested: str) -> str:
    if requested == "auto":
        if torch.cuda.is_available():
            return "gpu"
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return "mps"
        if xla_available() and os.environ.get("PJRT_DEVICE"):
            return "tpu"
        return "cpu"
    if requested in ("gpu", "cuda"):
        if not torch.cuda.is_available():
            raise NotAvailable("accelerator gpu is not available here: torch sees no CUDA device")
        return "gpu"
    if requested == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise NotAvailable("accelerator mps is not available here: torch sees no Apple GPU")
        return "mps"
    if requested in ("tpu", "xla"):
        if not xla_available():
            raise NotAvailable("accelerator tpu (XLA) is not available here: torch_xla is not installed")
        return "tpu"
    if requested == "cpu":
        return "cpu"
    raise WorkloadError(f"unknown accelerator {requested!r}: use auto, cpu, gpu, mps or tpu")


def default_devices(accelerator: str, hw) -> tuple[int, str]:
    """All accelerators; on a CPU with several NUMA nodes, one rank per node (DDP)."""
    if accelerator == "gpu":
        n = torch.cuda.device_count()
        return n, "auto"
    if accelerator == "cpu" and (hw.numa_nodes or 1) > 1:
        return hw.numa_nodes, "ddp"
    return 1, "auto"


def half_precision(accelerator: str) -> str | None:
    """bf16 where the device computes it natively, else fp16 (T4, V100, Apple GPUs)."""
    if accelerator == "gpu":
        major, _ = torch.cuda.get_device_capability(0)
        return "bf16-mixed" if major >= 8 else "16-mixed"
    if accelerator == "mps":
        return "16-mixed"
    return "bf16-mixed"


def is_global_zero() -> bool:
    """False in the extra processes a DDP launch starts: only rank 0 writes files and the store."""
    return int(os.environ.get("LOCAL_RANK", "0")) == 0 and int(os.environ.get("NODE_RANK", "0")) == 0


# ---------------------------------------------------------------------------------------------
# Memory


def free_memory(accelerator: str) -> None:
    gc.collect()
    if accelerator == "gpu":
        torch.cuda.empty_cache()


def reset_peak_rss() -> None:
    """Restart the process's RSS high-water mark (Linux 4.0+), so a rung's peak is its own and not
    that of a bigger batch tried before it; elsewhere the peak stays the process's lifetime one."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _status_gib(key: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) / 2**20  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def peak_rss_gib() -> float:
    got = _status_gib("VmHWM:")
    return got if got is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def rss_gib() -> float | None:
    """The process's resident memory now (None: not on Linux)."""
    return _status_gib("VmRSS:")
