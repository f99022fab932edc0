"""Host cap: an instance cannot train faster than its CPUs and host links feed its GPUs.

The probe's data pipeline (uint8 images made once, indexed and collated by DataLoader workers,
normalised on the device) costs CPU time per sample. Without a measurement of it on the user's
own probe, the default below is what that pipeline cost on the development machine:
scripts/measure_pipeline.py times the probe's SyntheticDataModule with one worker at four image
sizes and counts the worker's and the main process's CPU seconds (CPU time, not wall time, so a
busy machine does not inflate it). Its output on the 2-vCPU AMD EPYC development VM:
224 px 239.8 us, 112 px 90.5 us, 64 px 56.0 us, 32 px 30.3 us of CPU per sample, fitted as
PIPELINE_FIXED_US + bytes / PIPELINE_BYTES_PER_US (4,171 samples/s per vCPU at 224 px). Other hosts differ (faster memory, other
page-fault costs), hence the spread the band allows above it.
"""

from __future__ import annotations

from catalog.hardware import HOST_LINK, PCIE4, device_count
from catalog.models import InstanceType

PIPELINE_FIXED_US = 34.2  # CPU microseconds per sample independent of its size
PIPELINE_BYTES_PER_US = 727.0  # bytes of uint8 image through the pipeline per CPU microsecond
DEFAULT_CAP_SPREAD = 2.0  # the default cap may be this far off on another host, either way
MEASURED_CAP_SPREAD = 1.25  # a rate the user's own probe measured


def default_rate_per_vcpu(image_size: int) -> float:
    """Samples/s one vCPU feeds through the probe's synthetic pipeline (the stated default)."""
    return 1e6 / (PIPELINE_FIXED_US + 3 * image_size**2 / PIPELINE_BYTES_PER_US)


def host_cap(it: InstanceType, image_size: int, measured_rate: float | None = None) -> dict | None:
    """The most samples/s the host can feed all the instance's GPUs, and how that was worked out.

    None for CPU instances: there the data pipeline shares the cores with training, which the CPU
    estimate already rests on."""
    if it.accelerator_kind == "none":
        return None
    rate = measured_rate or default_rate_per_vcpu(image_size)
    cpu_cap = rate * it.vcpus
    link_words, link_gbs = HOST_LINK.get(it.family, PCIE4)
    link_cap = device_count(it) * link_gbs * 1e9 / (3 * image_size**2)  # uint8 RGB crosses the link
    binding = "vCPUs" if cpu_cap <= link_cap else "host link"
    return {
        "max_samples_per_sec": min(cpu_cap, link_cap),
        "binding": binding,
        "pipeline_samples_per_sec_per_vcpu": round(rate, 1),
        "pipeline_rate_from": "your probe" if measured_rate else
        "default: the probe's synthetic pipeline on the development machine (scripts/measure_pipeline.py)",
        "vcpus": it.vcpus,
        "host_link": link_words,
        "spread": MEASURED_CAP_SPREAD if measured_rate else DEFAULT_CAP_SPREAD,
    }


def apply_cap(mid: float, low: float, high: float, cap: dict | None) -> tuple[float, float, float, bool]:
    """(mid, low, high) after the cap; True when it binds the middle figure."""
    if cap is None:
        return mid, low, high, False
    c, s = cap["max_samples_per_sec"], cap["spread"]
    return min(mid, c), min(low, c / s), min(high, c * s), mid > c
