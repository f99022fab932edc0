"""Turn EC2 DescribeInstanceTypes records (live API or moto's shipped copy) into InstanceType.

Shared by the live refresh and the snapshot build so both read AWS's fields the same way.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from ..accelerators import cpu_families, lookup
from ..models import AcceleratorKind, InstanceType
from .families import facts

log = logging.getLogger(__name__)

_NETWORK_RE = re.compile(r"^\s*(up to\s+)?(?:(\d+)\s*x\s+)?(\d+(?:\.\d+)?)\s*(gigabit|megabit)\s*$", re.IGNORECASE)


def parse_network(text: str | None) -> tuple[float | None, bool]:
    """'Up to 12.5 Gigabit' -> (12.5, True); '3200 Gigabit' -> (3200, False);
    '4x 100 Gigabit' -> (400, False). Qualitative labels ('Moderate', 'High') -> (None, False)."""
    if not text:
        return None, False
    m = _NETWORK_RE.match(text)
    if not m:
        return None, False
    up_to, mult, value, unit = m.groups()
    gbps = float(value) * (int(mult) if mult else 1)
    if unit.lower() == "megabit":
        gbps /= 1000
    return gbps, bool(up_to)


_GEN_RE = re.compile(r"\d+")


def family_of(name: str) -> str:
    return name.split(".", 1)[0]


def generation_of(family: str) -> int | None:
    """The digit in the family ('c7i' -> 7, 'p6-b200' -> 6, 'g4dn' -> 4)."""
    m = _GEN_RE.search(family)
    return int(m.group()) if m else None


def _arch(archs: list[str]) -> str | None:
    if "x86_64" in archs:
        return "x86_64"
    if "arm64" in archs:
        return "arm64"
    return None  # Mac hosts (x86_64_mac / arm64_mac) are not training targets


def baseline_gbps(net: dict[str, Any]) -> float | None:
    """Sustained Gbit/s from a NetworkInfo record.

    The instance's NetworkPerformance when it is a fixed figure: summing the cards'
    BaselineBandwidthInGbps is wrong for multi-card types (g6e.48xlarge's four 400 Gbit/s cards
    share "400 Gigabit"; p6-b200.48xlarge's eight 200s make "3200 Gigabit") and for some single
    cards (trn2.3xlarge: 50 for "200 Gigabit"). For "Up to N Gigabit" N is a burst: the smaller
    of the cards' baseline and N (c7i.2xlarge: 3.125). Qualitative labels ("High"): the cards'."""
    gbps, up_to = parse_network(net.get("NetworkPerformance"))
    cards = sum(c.get("BaselineBandwidthInGbps") or 0 for c in net.get("NetworkCards") or []) or None
    if gbps is None:
        return cards
    if not up_to:
        return gbps
    return min(cards, gbps) if cards else None


def _accelerator(d: dict[str, Any]) -> tuple[AcceleratorKind, str | None, int, float | None, float | None]:
    """(kind, model, count per instance, memory GiB per device, share of one device or None).

    The model is the canonical key from accelerators.json when the device is known (so
    `accelerators.lookup(model)` finds it again), else AWS's own name. A fractional GPU (g6f,
    gr6f: Count 0 with GpuPartitionSize < 1) is one device at that share, its memory the
    partition's."""
    neuron = (d.get("NeuronInfo") or {}).get("NeuronDevices") or []
    gpus = (d.get("GpuInfo") or {}).get("Gpus") or []
    fraction = None
    if neuron:
        dev = neuron[0]
        name, count, maker, default_kind = dev.get("Name", ""), sum(x.get("Count", 0) for x in neuron), "AWS", "neuron"
    elif gpus:
        dev = gpus[0]
        name, count, maker = dev.get("Name", ""), sum(x.get("Count", 0) for x in gpus), dev.get("Manufacturer", "")
        default_kind = "gaudi" if "habana" in maker.lower() or "gaudi" in name.lower() else "gpu"
        part = dev.get("GpuPartitionSize")
        if count == 0 and part and 0 < part < 1:
            count, fraction = 1, float(part)
    else:
        # InferenceAcceleratorInfo alone (dl2q's Qualcomm AI100, Elastic Inference) names devices
        # PyTorch training cannot drive: such a type is a CPU instance for this advisor.
        return "none", None, 0, None, None
    if count <= 0:
        return "none", None, 0, None, None
    mib = (dev.get("MemoryInfo") or {}).get("SizeInMiB")
    mem_gib = round(mib / 1024, 2) if mib else None
    whole_gib = mem_gib / fraction if mem_gib and fraction else mem_gib
    spec = lookup(name, whole_gib)
    if spec is not None:
        return spec.kind, spec.key, count, mem_gib, fraction
    log.debug("accelerator %r (%s) not in the accelerator table", name, maker)
    return default_kind, name or None, count, mem_gib, fraction


def instance_type_from_describe(d: dict[str, Any]) -> InstanceType | None:
    """One DescribeInstanceTypes record -> InstanceType; None for types that are no training
    target (Mac hosts)."""
    name = d["InstanceType"]
    proc = d.get("ProcessorInfo") or {}
    arch = _arch(proc.get("SupportedArchitectures") or [])
    if arch is None:
        return None
    family = family_of(name)
    net = d.get("NetworkInfo") or {}
    gbps, up_to = parse_network(net.get("NetworkPerformance"))
    kind, model, count, mem, fraction = _accelerator(d)
    fam = cpu_families().get(family)
    return InstanceType(
        name=name,
        family=family,
        generation=generation_of(family),
        vcpus=d["VCpuInfo"]["DefaultVCpus"],
        physical_cores=d["VCpuInfo"].get("DefaultCores"),
        memory_gib=d["MemoryInfo"]["SizeInMiB"] / 1024,
        arch=arch,
        cpu_manufacturer=proc.get("Manufacturer"),
        # DescribeInstanceTypes names no CPU model; the family table (AWS instance pages) does.
        cpu_model=fam.cpu_model if fam else None,
        cpu_clock_ghz=proc.get("SustainedClockSpeedInGhz"),
        accelerator_kind=kind,
        accelerator_model=model,
        accelerator_count=count,
        accelerator_memory_gib=mem,
        accelerator_fraction=fraction,
        network_gbps=gbps,
        network_up_to=up_to,
        network_baseline_gbps=baseline_gbps(net),
        efa=bool(net.get("EfaSupported")),
        usage_classes=[str(u) for u in d.get("SupportedUsageClasses") or []],
        **facts(family, kind, count),  # per-family facts DescribeInstanceTypes does not carry
    )
