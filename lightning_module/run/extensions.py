"""The ladder's extension rungs, detected at run time: each is tried where it can run here, and
otherwise recorded as not-installed / not-applicable with the reason. None is ever required.

- run_cpu: torch.backends.xeon.run_cpu's allocator / OpenMP / affinity set-up (run_cpu.py), in a
  child process.
- ipex: Intel Extension for PyTorch's ipex.optimize (discontinued after 2.8; must match torch).
- zentorch: AMD's ZenDNN plugin as a torch.compile backend, on AMD CPUs.
- xla: torch_xla on the CPU (PJRT_DEVICE=CPU), in a child process; must match torch.
"""

from __future__ import annotations

import importlib.util

import torch

from ..contract.ladder import Extension
from ..contract.result import HardwareFingerprint, WorkloadSpec
from . import run_cpu
from .hardware import _version
from .workloads import is_builtin


def _minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def package_missing(module: str, dist: str) -> str | None:
    """None when `module` can be imported and its distribution matches torch's major.minor."""
    if importlib.util.find_spec(module) is None:
        return f"{module} is not installed"
    have = _version(dist)
    if have is not None and _minor(have) != _minor(torch.__version__):
        return f"{module} {have} does not match torch {_minor(torch.__version__)}"
    return None


def ipex_missing() -> str | None:
    """None when Intel Extension for PyTorch imports and matches torch; else why not."""
    try:
        import intel_extension_for_pytorch as ipex
    except Exception as e:  # noqa: BLE001
        return f"intel_extension_for_pytorch is not installed ({type(e).__name__})"
    have = str(getattr(ipex, "__version__", ""))
    if _minor(have) != _minor(torch.__version__):
        return f"intel_extension_for_pytorch {_minor(have)} does not match torch {_minor(torch.__version__)}"
    return None


def detect(accelerator: str, hw: HardwareFingerprint, spec: WorkloadSpec, ranks: int) -> tuple[Extension, ...]:
    on_cpu = accelerator == "cpu"
    vendor = hw.cpu_manufacturer
    single = ranks == 1

    def na(name: str, why: str) -> Extension:
        return Extension(name, status="not-applicable", why=why)

    out = []
    # run_cpu
    if not on_cpu:
        out.append(na("run_cpu", "a CPU process set-up: not for a GPU or XLA device"))
    elif not single:
        out.append(na("run_cpu", "measured for a single training process (--devices 1)"))
    else:
        p = run_cpu.plan_here(vendor)
        if p.missing:
            out.append(Extension("run_cpu", status="not-installed", why=p.missing))
        else:
            out.append(Extension("run_cpu", {"run_cpu": True, "allocator": p.allocator, "openmp": p.openmp}))
    # ipex
    if not (on_cpu and is_builtin(spec)):
        out.append(Extension("ipex", status="skipped", why="ipex.optimize is applied to builtin workloads on CPU only"))
    elif why := ipex_missing():
        out.append(Extension("ipex", status="not-installed", why=why))
    else:
        out.append(Extension("ipex", {"ipex": True}))
    # zentorch
    if not on_cpu or vendor != "amd":
        out.append(na("zentorch", f"AMD's ZenDNN plugin is for AMD CPUs (this is {vendor or 'an unknown'} CPU)"
                      if on_cpu else f"AMD's ZenDNN plugin is a CPU backend: not for a {accelerator} device"))
    elif why := package_missing("zentorch", "zentorch"):
        out.append(Extension("zentorch", status="not-installed", why=why))
    else:
        # zentorch/_optimize.py skips its graph rewrites without AVX-512 (it logs so): the backend
        # is then Inductor alone. Measured all the same, and said.
        note = (None if "avx512f" in hw.isa_flags else
                "zentorch rewrites graphs only on AVX-512 CPUs: here its backend compiled with Inductor alone")
        out.append(Extension("zentorch", {"compile": True, "compile_backend": "zentorch"}, note=note))
    # xla
    if not on_cpu:
        out.append(na("xla", "the xla rung runs torch_xla on the CPU; probe an XLA device with --accelerator tpu"))
    elif not single:
        out.append(na("xla", "measured for a single training process (--devices 1)"))
    elif why := package_missing("torch_xla", "torch-xla"):
        out.append(Extension("xla", status="not-installed", why=why))
    else:
        out.append(Extension("xla", {"xla": True}))
    return tuple(out)
