"""Whether a probe's `--instance-type` label can be the machine it ran on: the catalog's facts of
that type against the hardware fingerprint (CPU vendor, vCPUs, GPU model and count). A label that
contradicts them would file this machine's speed under another type's name, and every estimate
re-anchored on it would carry the error. Torch-free: it reads a catalog type and a fingerprint."""

from __future__ import annotations

import re

from catalog import accelerators as acc
from catalog.models import InstanceType

from .result import HardwareFingerprint

VENDOR = {"intel": "intel", "amd": "amd", "aws": "arm", "arm": "arm", "ampere": "arm"}  # catalog words -> cpuinfo's


def _words(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def contradictions(it: InstanceType, hw: HardwareFingerprint) -> list[str]:
    """What about this machine says it is not `it` (empty: nothing does, or nothing is known)."""
    out = []
    vendor = acc.cpu_manufacturer(it)
    want = VENDOR.get((vendor or "").lower().split()[0]) if vendor else None
    if want and hw.cpu_manufacturer and hw.cpu_manufacturer != want:
        out.append(f"{it.name} has {vendor} CPUs, this machine an {hw.cpu_model or hw.cpu_manufacturer}")
    if hw.logical_cpus and hw.logical_cpus != it.vcpus:
        out.append(f"{it.name} has {it.vcpus} vCPUs, this machine {hw.logical_cpus}")
    gpus = it.accelerator_count if it.accelerator_kind == "gpu" else 0
    if gpus != len(hw.gpus) and it.accelerator_kind in ("gpu", "none"):
        have = f"{len(hw.gpus)}x {hw.gpus[0].name}" if hw.gpus else "no GPU"
        out.append(f"{it.name} has {f'{gpus}x ' + (it.accelerator_model or 'GPU') if gpus else 'no GPU'}, this machine {have}")
    elif gpus and it.accelerator_model and hw.gpus:
        model = _words(it.accelerator_model.split("-")[0])
        if model and model not in _words(hw.gpus[0].name):
            out.append(f"{it.name} has {it.accelerator_model} GPUs, this machine {hw.gpus[0].name}")
    return out
