"""Host cap: an instance cannot train faster than its CPUs and host links feed its GPUs.

The probe's data pipeline (uint8 images made once, indexed and collated by DataLoader workers,
handed to the training process, normalised on the device) costs CPU time per sample in two
places: in the workers, which share the instance's vCPUs, and in each GPU's training process,
which receives every batch. Without a measurement of it on the user's own probe, the defaults
below are what that pipeline cost on the development machine: scripts/measure_pipeline.py times
the probe's SyntheticDataModule with one worker at four image sizes and counts CPU seconds (not
wall time, so a busy machine does not inflate them). Its output on the 2-vCPU AMD EPYC VM:

    224 px: worker 185.1 + main process 41.1 CPU us per sample
    112 px: worker  71.7 + main process 21.4
     64 px: worker  34.8 + main process 13.0
     32 px: worker  21.9 + main process  9.9
    fit, worker: 23.0 us + bytes / 919 bytes per us
    fit, main process: 10.9 us + bytes / 4885 bytes per us

So at 224 px a worker vCPU feeds ~5,350 samples/s and one training process takes in ~24,000.
Other hosts differ (faster memory, other page-fault costs), hence the spread the band allows.
"""

from __future__ import annotations

from catalog.hardware import device_count
from catalog.models import InstanceType

WORKER_FIXED_US, WORKER_BYTES_PER_US = 23.0, 919.0
MAIN_FIXED_US, MAIN_BYTES_PER_US = 10.9, 4885.0
DEFAULT_CAP_SPREAD = 2.0  # the default cap may be this far off on another host, either way
MEASURED_CAP_SPREAD = 1.25  # a rate the user's own probe measured


def default_rate_per_vcpu(image_size: int) -> float:
    """Samples/s one worker vCPU feeds through the probe's synthetic pipeline (the stated default)."""
    return 1e6 / (WORKER_FIXED_US + 3 * image_size**2 / WORKER_BYTES_PER_US)


def default_rate_per_process(image_size: int) -> float:
    """Samples/s one GPU's training process can take in from its workers."""
    return 1e6 / (MAIN_FIXED_US + 3 * image_size**2 / MAIN_BYTES_PER_US)


def host_cap(it: InstanceType, image_size: int, measured_rate: float | None = None,
             images: bool = True) -> dict | None:
    """The most samples/s the host can feed all the instance's GPUs, and how that was worked out.

    None for CPU instances: there the data pipeline shares the cores with training, which the CPU
    estimate already rests on. `images`: a builtin workload, fed uint8 images; a user's own
    workload is capped only by the rate its own probe measured for its pipeline (None without one:
    the image figures say nothing about a token or tabular loader)."""
    if it.accelerator_kind == "none" or (not images and not measured_rate):
        return None
    n = device_count(it)
    rate = measured_rate or default_rate_per_vcpu(image_size)
    workers = max(1, it.vcpus - n)  # one vCPU per GPU runs its training process
    caps = {"vCPUs": rate * workers}
    if images:  # what a training process takes in and the host link carries, in image bytes
        caps["training processes"] = n * default_rate_per_process(image_size)
    if images and it.host_link_gbs is not None:  # a catalog that does not say bounds nothing here
        caps["host link"] = n * it.host_link_gbs * 1e9 / (3 * image_size**2)  # uint8 RGB
    binding = min(caps, key=caps.get)
    return {
        "max_samples_per_sec": caps[binding],
        "binding": binding,
        "caps": {k: round(v) for k, v in caps.items()},
        "pipeline_samples_per_sec_per_vcpu": round(rate, 1),
        "pipeline_rate_from": "your probe" if measured_rate else
        "default: the probe's synthetic pipeline on the development machine (scripts/measure_pipeline.py)",
        "worker_vcpus": workers,
        "host_link": it.host_link,
        "spread": MEASURED_CAP_SPREAD if measured_rate else DEFAULT_CAP_SPREAD,
    }


def apply_cap(mid: float, low: float, high: float, cap: dict | None) -> tuple[float, float, float, bool]:
    """(mid, low, high) after the cap; True when it binds the middle figure."""
    if cap is None:
        return mid, low, high, False
    c, s = cap["max_samples_per_sec"], cap["spread"]
    return min(mid, c), min(low, c / s), min(high, c * s), mid > c
