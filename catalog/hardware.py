"""Hardware facts about an instance type that the estimates rest on: its devices, their links,
its network. Beside accelerators.py (per-device peaks); knows nothing of the advisor.

Every figure here carries its source in the comment above it.
"""

from __future__ import annotations

from . import accelerators as acc
from .models import InstanceType

# Per-device one-direction interconnect bandwidth inside an instance, GB/s. NVLink: NVIDIA
# datasheets give the bidirectional total per GPU (V100 300, A100 600, H100/H200 900, B200 1800
# GB/s); a ring all-reduce sends and receives at once, so one direction is half. PCIe (PCI-SIG):
# Gen3 x16 ~15.75 GB/s, Gen4 x16 ~31.5 GB/s per direction; GPUs talk through the host bridge.
INTERCONNECT: dict[str, tuple[str, float]] = {
    "p3": ("NVLink 2 (V100 SXM2 datasheet: 300 GB/s bidirectional)", 150.0),
    "p3dn": ("NVLink 2 (V100 SXM2 datasheet: 300 GB/s bidirectional)", 150.0),
    "p4d": ("NVLink 3 (A100 datasheet: 600 GB/s bidirectional)", 300.0),
    "p4de": ("NVLink 3 (A100 datasheet: 600 GB/s bidirectional)", 300.0),
    "p5": ("NVLink 4 (H100 SXM datasheet: 900 GB/s bidirectional)", 450.0),
    "p5e": ("NVLink 4 (H200 SXM datasheet: 900 GB/s bidirectional)", 450.0),
    "p5en": ("NVLink 4 (H200 SXM datasheet: 900 GB/s bidirectional)", 450.0),
    "p6-b200": ("NVLink 5 (HGX B200: 1.8 TB/s bidirectional)", 900.0),
    "g4dn": ("PCIe Gen3 x16 (PCI-SIG: ~15.75 GB/s per direction)", 15.75),
}
PCIE4 = ("PCIe Gen4 x16 (PCI-SIG: ~31.5 GB/s per direction)", 31.5)

# Each GPU's host link, which every input sample crosses (the probe feeds uint8 images and
# normalises on the device). Scaling another workload's utilisation by FLOPs alone put a tiny MLP
# at 578k samples/s on one A10G, 87 GB/s of 224 px images; this link bounds it. Gen3 x16: T4 and
# V100 datasheets; Gen4 x16: A10G/L4/L40S/A100 datasheets, and p5/p5e, whose hosts (3rd-gen EPYC)
# are Gen4; Gen5 x16 (~63 GB/s): AWS's p5en launch ("PCIe Gen5 between CPU and GPU") and p6-b200.
PCIE3 = ("PCIe Gen3 x16 (PCI-SIG: ~15.75 GB/s per direction)", 15.75)
PCIE5 = ("PCIe Gen5 x16 (PCI-SIG: ~63 GB/s per direction)", 63.0)
HOST_LINK: dict[str, tuple[str, float]] = {
    "g4dn": PCIE3, "g5g": PCIE3, "p3": PCIE3, "p3dn": PCIE3,
    "p5en": PCIE5, "p6-b200": PCIE5,
}

# vCPUs of one CPU socket, per family. Article A found data-parallel training across the two
# NUMA nodes (sockets) of a c6i.32xlarge no faster than one, so a CPU estimate counts one socket
# only (the band's high end still allows linear scaling). Socket sizes: Article A (c6i.32xlarge
# = 2 NUMA nodes of 64 vCPUs); the largest sizes of the other families are two sockets of the
# processor AWS names on the family page (Xeon 8488C 48 cores x 2 threads; EPYC 9R14 96 cores,
# one thread per vCPU; Graviton4 96 cores); Graviton3 is one 64-core socket.
SOCKET_VCPUS: dict[str, int] = {
    "c6i": 64, "m6i": 64, "r6i": 64,
    "c7i": 96, "m7i": 96, "r7i": 96,
    "c7a": 96, "m7a": 96, "r7a": 96,
    "c7g": 64, "m7g": 64, "r7g": 64,
    "c8g": 96, "m8g": 96, "r8g": 96,
}

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


def device_share(it: InstanceType) -> float:
    """Share of the device's compute the instance gets: 1, or a g6f's GpuPartitionSize."""
    return it.accelerator_fraction or 1.0


def best_dtype(it: InstanceType) -> str | None:
    """bf16 where the device computes it natively, else fp16, else fp32."""
    if it.accelerator_kind == "none":
        isa = acc.cpu_isa(it)
        man = acc.cpu_manufacturer(it)
        native_bf16 = acc.cpu_flops_per_cycle_per_core(isa, "bf16", man) > acc.cpu_flops_per_cycle_per_core(isa, "fp32", man)
        return "bf16" if native_bf16 else "fp32"
    spec = gpu_spec(it)
    if spec is None:
        return None
    if spec.bf16_supported and spec.bf16_tflops:
        return "bf16"
    if spec.fp16_supported and spec.fp16_tflops:
        return "fp16"
    return "fp32" if spec.fp32_tflops else None


def device_peak_tflops(it: InstanceType, dtype: str) -> float | None:
    """Peak of one device (for a CPU instance: the whole host CPU; for a fractional GPU: its share)."""
    if it.accelerator_kind == "none":
        return acc.instance_cpu_peak_tflops(it, dtype)
    spec = gpu_spec(it)
    peak = acc.peak_tflops(spec, dtype) if spec else None
    return peak * device_share(it) if peak else peak


def device_count(it: InstanceType) -> int:
    return it.accelerator_count if it.accelerator_kind != "none" else 1


def interconnect(it: InstanceType) -> tuple[str, float] | None:
    if device_count(it) <= 1:
        return None
    return INTERCONNECT.get(it.family, PCIE4)


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
