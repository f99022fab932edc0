"""Hardware facts about an instance type that the estimates rest on: its devices, their links,
its network. Beside accelerators.py (per-device peaks); knows nothing of the advisor. The links are
InstanceType's fields, which each cloud's fetcher fills (AWS's: catalog/aws/families.py).

Every figure here carries its source in the comment above it.
"""

from __future__ import annotations

from . import accelerators as acc
from .models import InstanceType

# AWS's "Up to N Gigabit" is a burst figure; hours of all-reduce run at the instance's baseline
# (InstanceType.network_baseline_gbps). For a type without it (p3, dl1: not in moto's copy of
# DescribeInstanceTypes), assume 1/8 of the burst: BaselineBandwidthInGbps /
# PeakBandwidthInGbps in DescribeInstanceTypes is 0.125 for the smallest GPU sizes (g5g.xlarge,
# g6e.xlarge) and ranges 0.03-0.8 over the snapshot's 58 "up to" types (larger sizes keep more).
UP_TO_BASELINE_SHARE = 0.125


def device_kind(it: InstanceType) -> str:
    return "cpu" if it.accelerator_kind == "none" else it.accelerator_kind


def gpu_spec(it: InstanceType) -> acc.AcceleratorSpec | None:
    """The whole device's spec (for a fractional GPU too: device_share says how much of it)."""
    if it.accelerator_kind == "none" or not it.accelerator_model:
        return None
    mem = it.accelerator_memory_gib
    if mem and it.accelerator_fraction:
        mem = mem / it.accelerator_fraction
    return acc.lookup(it.accelerator_model, mem)


# The GPU architectures PyTorch's published aarch64 (arm64) CUDA wheels carry kernels for: its
# aarch64 wheel build sets TORCH_CUDA_ARCH_LIST="8.0;9.0;10.0;11.0;12.0;12.1" (CUDA 12.9), source
# below; earlier commits of the same script: "9.0" (CUDA 12.6), "9.0;10.0;12.0" (CUDA 12.8). No
# 7.x in any: sm_80 code runs on 8.6 and 8.9 (CUDA's binary compatibility within a major version,
# derived), none runs on a Turing (7.5: the T4G of g5g) or a Volta (7.0), which get "no kernel image
# is available for execution on the device".
ARM64_CUDA_ARCHITECTURES = ("Ampere", "Ada Lovelace", "Hopper", "Blackwell")
ARM64_CUDA_SOURCE = ("https://github.com/pytorch/pytorch/blob/04c5727d0cd4a683768e3b503daf94a6a4c6547d/"
                     ".ci/aarch64_linux/aarch64_ci_build.sh")


# The accelerators the probe's stack (PyTorch's CUDA wheels, the default Deep Learning AMI's) cannot
# drive: each needs its vendor's own SDK, so there is no number for them without a user's measurement.
VENDOR_SDKS = {"neuron": "Neuron SDK", "gaudi": "SynapseAI (Habana) SDK"}


def vendor_sdk(it: InstanceType) -> str | None:
    """The SDK this instance's accelerator needs that the probe's stack lacks, or None."""
    return VENDOR_SDKS.get(it.accelerator_kind)


def undrivable_gpu(it: InstanceType) -> str | None:
    """Why the probe's stack (PyTorch's published CUDA wheels) cannot drive this instance's GPU, or
    None: an arm64 host's GPU of an architecture PyTorch's aarch64 CUDA wheels carry no kernels for."""
    spec = gpu_spec(it)
    if it.arch != "arm64" or spec is None or spec.kind != "gpu" or spec.architecture is None:
        return None
    if spec.architecture in ARM64_CUDA_ARCHITECTURES:
        return None
    return (f"{it.accelerator_model} ({spec.architecture}) behind an arm64 host: PyTorch publishes no aarch64 CUDA "
            f"build with kernels for it (its aarch64 wheels target {', '.join(ARM64_CUDA_ARCHITECTURES)}: "
            f"{ARM64_CUDA_SOURCE}), so the probe cannot drive it and there is no number without your own measurement")


def device_share(it: InstanceType) -> float:
    """Share of the device's compute the instance gets: 1, or a g6f's GpuPartitionSize."""
    return it.accelerator_fraction or 1.0


def best_dtype(it: InstanceType) -> str | None:
    """bf16 where the device computes it natively, else fp16, else fp32."""
    if it.accelerator_kind == "none":
        return "bf16" if acc.cpu_native_bf16(acc.cpu_isa(it), acc.cpu_manufacturer(it)) else "fp32"
    spec = gpu_spec(it)
    if spec is None:
        return None
    if spec.bf16_supported and spec.bf16_tflops:
        return "bf16"
    if spec.fp16_supported and spec.fp16_tflops:
        return "fp16"
    return "fp32" if spec.fp32_tflops else None


def device_count(it: InstanceType) -> int:
    return it.accelerator_count if it.accelerator_kind != "none" else 1


def interconnect(it: InstanceType) -> tuple[str, float] | None:
    """(words, GB/s per direction) between the instance's devices; None for one device, or where
    the catalog does not say (the published n-GPU scaling alone then applies)."""
    if device_count(it) <= 1 or it.interconnect_gbs is None:
        return None
    return it.interconnect, it.interconnect_gbs


def sustained_network_gbps(it: InstanceType) -> tuple[float | None, str | None]:
    """(Gbit/s the scale-out model uses, a note when it is an assumption)."""
    if it.network_baseline_gbps:
        return it.network_baseline_gbps, None
    if not it.network_gbps:
        return None, None
    if it.network_up_to:
        used = it.network_gbps * UP_TO_BASELINE_SHARE
        return used, f"network 'up to' {it.network_gbps:g} Gbit/s is a burst; assumed {used:g} sustained"
    return it.network_gbps, None
