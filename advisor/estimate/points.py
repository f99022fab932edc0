"""What the cross-device model sees: one device at one precision, and one observed throughput.

A Point is a published row of the reference dataset or one of the user's probes, reduced to
per-device samples/s on one device, with the device's peak FLOP/s at the precision the run used
and its memory bandwidth. Device facts come from the catalog (catalog.accelerators,
catalog.hardware); nothing here imports torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from catalog import accelerators as acc
from catalog.hardware import (
    best_dtype,
    device_kind,
    device_share,
    gpu_spec,
)
from catalog.models import Catalog, InstanceType
from lightning_module.contract.workload_facts import FACTS, REFERENCE_IMAGE_SIZE

from .references import READ_UNCERTAINTY

# Lightning precision -> the peak it runs at. fp32 on Ampere and later: PyTorch's
# torch.backends.cudnn.allow_tf32 defaults to True, so fp32 convolutions run on TF32 tensor
# cores (the published A100 "fp32" ResNet-50 rows sit at the TF32 rows' level, not at 19.5 TFLOP/s).
PEAK_DTYPE = {"32-true": "tf32", "tf32": "tf32", "16-mixed": "fp16", "bf16-mixed": "bf16"}
# Bytes each activation element moves, relative to a 16-bit one: fp32 and TF32 keep fp32 tensors.
BYTES_FACTOR = {"32-true": 2.0, "tf32": 2.0, "16-mixed": 1.0, "bf16-mixed": 1.0}
PRECISION_OF_DTYPE = {"bf16": "bf16-mixed", "fp16": "16-mixed", "fp32": "32-true"}
MIXED = ("16-mixed", "bf16-mixed")

# The stack the probe measures, in the reference dataset's terms. On a GPU the probe's ladder ends
# at AMP + channels_last (+ torch.compile, loader workers, a batch search) in plain PyTorch, and
# the dataset puts that at its "tuned" level (NHWC/DALI vendor stacks), not at the NCHW AMP
# "default" (Lambda's NGC runs): timm's plain-PyTorch RTX 3090 rows gain 1.47x on ResNet-50 from
# NHWC alone (826 -> 1,218/s; resnet18 1.26x, resnet101 1.31x), and Article A's ladder reached
# ~926/s on an A10G where Lambda's NCHW AMP A10 row is 638 (1.45x). So estimates are made at this
# level, and a GPU where channels_last does not win (the ladder keeps its best rung) is still at
# least at the default level: the band's lower end. On a CPU the rows are Article A's ladder itself.
PROBE_STACK = "tuned"


def is_mlperf(m) -> bool:
    """An MLPerf Training submission: a hand-tuned end-to-end ceiling, not a stack the probe reaches."""
    where = f"{m.source.repo or ''} {m.source.url or ''}".lower()
    return "mlcommons" in where or m.id.startswith("mlperf-")


def at_probe_stack(m) -> bool:
    """Whether a published row is at the level a probe of its instance type would reach: the
    probe's stack, the final rung of a ladder, not an MLPerf ceiling."""
    return m.stack == PROBE_STACK and not is_mlperf(m) and (not m.rung or m.tuned)


@dataclass(frozen=True)
class Device:
    """One device as the model sees it, at one precision."""

    key: str  # accelerator key ("A100-80GB") or "cpu:<family>"
    group: str  # the device model, held out together ("A100", "V100", "cpu:c7i")
    kind: str  # gpu | cpu | neuron | gaudi
    vendor: str
    peak: float  # TFLOP/s at the precision used (CPU: the counted socket)
    bandwidth: float | None  # GB/s; None for CPUs (not in the catalog)
    bytes_factor: float  # 2 for fp32/TF32 activations, 1 for 16-bit
    channels_per_core: float | None = None  # a CPU's DDR channels per socket core (None: not sourced, or a GPU)
    family: str | None = None  # vendor + architecture ("NVIDIA Ampere"); None: a CPU, or not read


@dataclass(frozen=True)
class Point:
    """One observed throughput: per device, as if on one device."""

    device: Device
    workload: str  # model name: resnet50, bert-large, ...
    precision: str
    stack: str  # tuned | default (the dataset's stacks; a probe is at PROBE_STACK)
    sps: float  # per device samples/s (multi-device runs divided by n x the scaling efficiency)
    devices: int  # devices in the run (one node)
    label: str  # reference row id, or "probe <instance type>"
    origin: str  # reference | probe
    suite: str  # rows of one benchmark suite share it (same source, workload, precision, stack)
    reliable: bool = True
    weight: float = 1.0  # its evidence against a figure read in a source (evidence_weight)
    # The publisher chose this device's batch for it (references.Measurement.batch_policy
    # "per-device"), and the batch per device where it is known: its table's device ratios carry a
    # batch gain, which the fit models (fit.batch_slopes) and a transfer's calibration leaves out
    # (calibrate.like_for_like). A user's probe and the runs it stands for keep one batch: False.
    per_device_batch: bool = False
    batch: int | None = None


def evidence_weight(m) -> float:
    """A row's weight in the fit, by its own stated uncertainty (inverse variance against a figure
    read in a source): a derived figure (the g5.2xlarge ~926 worked out from a sentence, 15%) is a
    weak anchor, a ninth of a read one (5%), not a measurement."""
    return (READ_UNCERTAINTY / m.uncertainty) ** 2


# Variants that are one chip under another name: held out together.
SAME_CHIP = {"A10G": "A10"}  # AWS's A10G is a GA102 A10 variant


def group_of(spec: acc.AcceleratorSpec) -> str:
    """The device model: variants (memory, form factor) of one chip are held out together."""
    base = spec.key.split("-")[0]
    return SAME_CHIP.get(base, base)


def family_of(spec: acc.AcceleratorSpec) -> str | None:
    """The device's architecture family ("NVIDIA Hopper"): a device with no rows of its own takes
    its family's residual (fit.Fit.log_predict)."""
    return f"{spec.vendor} {spec.architecture}" if spec.architecture else None


def gpu_device(spec: acc.AcceleratorSpec, precision: str, share: float = 1.0) -> Device | None:
    dtype = PEAK_DTYPE.get(precision)
    if dtype is None:
        return None
    peak = acc.peak_tflops(spec, dtype)
    if dtype == "tf32" and not peak:
        peak = acc.peak_tflops(spec, "fp32")  # Volta/Turing: no TF32, fp32 runs on the CUDA cores
    if not peak or not spec.bandwidth_gbs:
        return None
    return Device(spec.key, group_of(spec), spec.kind, spec.vendor, peak * share, spec.bandwidth_gbs * share,
                  BYTES_FACTOR[precision], family=family_of(spec))


def socket_share(it: InstanceType) -> float:
    """Share of a CPU instance's cores an estimate counts: one socket (Article A: DDP across the
    two NUMA nodes of a c6i.32xlarge did not raise throughput)."""
    if it.socket_vcpus:
        return min(1.0, it.socket_vcpus / it.vcpus)
    return 1.0


@dataclass(frozen=True)
class CpuHost:
    """A host CPU as the model sees it, whatever says so: an instance type's catalog facts, or a
    probe's hardware fingerprint off EC2. Its peak is the counted socket's cores x clock x ISA."""

    key: str  # "cpu:<family>", or "cpu:<model> (off EC2)"
    group: str  # the processor model: sizes and families on one chip are held out together
    vendor: str
    cores: int  # physical cores of the machine
    clock_ghz: float
    isa: frozenset[str]
    share: float = 1.0  # the share of them counted: one socket (one NUMA node off EC2)
    channels_per_core: float | None = None  # DDR channels per socket core (catalog.accelerators); None: unknown


def instance_cpu_host(it: InstanceType) -> CpuHost | None:
    """The counted socket of a CPU instance type; None without a clock figure."""
    if not it.cpu_clock_ghz:
        return None
    vendor = acc.cpu_manufacturer(it) or "unknown"  # the catalog's, else the family table's
    # One processor model is one device (c7i, m7i and r7i all run the Xeon 8488C).
    return CpuHost(f"cpu:{it.family}", f"cpu:{acc.cpu_model(it) or it.family}", vendor,
                   acc.physical_cores(it), it.cpu_clock_ghz, acc.cpu_isa(it), socket_share(it),
                   acc.memory_channels_per_core(it))


def cpu_device(host: CpuHost, precision: str) -> Device | None:
    """The device of a host CPU at a precision: bf16 where the probe trains in it, else fp32."""
    dtype = "bf16" if precision == "bf16-mixed" else "fp32"
    peak = acc.cpu_peak_tflops(host.cores, host.clock_ghz, host.isa, dtype, host.vendor)
    if not peak:
        return None
    return Device(host.key, host.group, "cpu", host.vendor, peak * host.share, None, BYTES_FACTOR.get(precision, 2.0),
                  host.channels_per_core)


# A fingerprint's vendor id (run/hardware.py) in the catalog's spelling (the CPU rates key on it).
VENDOR_NAMES = {"intel": "Intel", "amd": "AMD", "arm": "Arm"}
# A probe's measured matmul above its datasheet peak by more than this: the fingerprint is wrong
# (a clock read in a low-power moment, a flag the VM hides), not the matmul. A chosen tolerance
# (timing noise of a few percent), not a measured or published figure.
MATMUL_OVER_DATASHEET = 1.1
MATMUL_DTYPE = {v: k for k, v in PRECISION_OF_DTYPE.items()}  # the matmul run/peaks.py times at a precision


def fingerprint_cpu_host(hw, precision: str, matmul_tflops: float | None = None) -> tuple[CpuHost | None, str]:
    """The host CPU a probe off EC2 measured, from its hardware fingerprint, or None and why it
    cannot be placed. Its peak is worked out as an instance type's is (cores x clock x ISA, one
    NUMA node counted as one socket is); the probe's own measured matmul checks it."""
    if hw is None or not hw.cpu_model:
        return None, "its fingerprint names no CPU"
    missing = [what for what, v in (("core count", hw.physical_cores), ("clock", hw.cpu_clock_ghz),
                                    ("ISA flags", hw.isa_flags)) if not v]
    if missing:
        return None, f"its fingerprint has no {' or '.join(missing)} (no peak FLOP/s without cores x clock x ISA)"
    vendor = VENDOR_NAMES.get((hw.cpu_manufacturer or "").lower(), hw.cpu_manufacturer or "unknown")
    isa = frozenset(hw.isa_flags)
    whole = acc.cpu_peak_tflops(hw.physical_cores, hw.cpu_clock_ghz, isa, MATMUL_DTYPE.get(precision, "fp32"), vendor)
    if matmul_tflops and matmul_tflops > whole * MATMUL_OVER_DATASHEET:
        return None, (f"its measured matmul ({matmul_tflops:.3g} TFLOP/s) is above the {whole:.3g} its cores x clock x "
                      "ISA allow: the fingerprint's clock or flags are wrong")
    name = cpu_name(hw.cpu_model)
    known = catalog_cpu_model(name)
    share = 1.0 / hw.numa_nodes if hw.numa_nodes and hw.numa_nodes > 1 else 1.0
    # The whole machine's populated channels over its cores: a socket's balance where sockets match.
    channels = hw.memory_channels / hw.physical_cores if hw.memory_channels else None
    return CpuHost(f"cpu:{name} (off EC2)", f"cpu:{known or name}", vendor, hw.physical_cores,
                   hw.cpu_clock_ghz, isa, share, channels), ""


def cpu_name(model: str) -> str:
    """/proc/cpuinfo's model name without its marks, clock and core count ("Intel Xeon Platinum 8488C")."""
    name = re.sub(r"\((R|TM|tm|r)\)|@.*$|\bCPU\b|\bProcessor\b|\b\d+-Core\b", " ", model)
    return " ".join(name.split()) or model.strip()


def catalog_cpu_model(name: str) -> str | None:
    """The catalog's name for a processor a fingerprint names, matched on its model number (8488C,
    9R14): the same chip off EC2 is the same device model as on it."""
    numbers = {t.upper() for t in re.findall(r"\w+", name) if sum(c.isdigit() for c in t) >= 3}
    for fam in acc.cpu_families().values():
        if numbers & {t.upper() for t in re.findall(r"\w+", fam.cpu_model)}:
            return fam.cpu_model
    return None


def instance_device(it: InstanceType, precision: str) -> Device | None:
    """The device of an instance type at a precision (a CPU instance: its counted socket)."""
    kind = device_kind(it)
    if kind == "cpu":
        host = instance_cpu_host(it)
        return cpu_device(host, precision) if host is not None else None
    spec = gpu_spec(it)
    if spec is None:
        return None
    return gpu_device(spec, precision, device_share(it))


def reference_points(rows, catalog: Catalog | None, efficiency) -> tuple[list[Point], list[tuple[str, str]]]:
    """Rows of a reference set as Points, and (row id, why) for each row that cannot be one.

    `efficiency(n)` is the scaling efficiency of n devices in one node (published pairs): an
    n-device row counts as n x its per-device figure / efficiency(n) on one device."""
    out: list[Point] = []
    skipped: list[tuple[str, str]] = []
    for m in rows:
        dev, why = _row_device(m, catalog)
        if dev is None:
            skipped.append((m.id, why))
            continue
        if m.sharded:
            # Per-device throughput of a sharded run carries its gathers and reduce-scatters, which
            # efficiency(n) (plain data parallel's published pairs) does not describe.
            skipped.append((m.id, f"{m.strategy} run: sharded or model-parallel, kept for the scale-out model"))
            continue
        if m.nodes > 1:
            skipped.append((m.id, "multi-node run"))
            continue
        if is_mlperf(m):
            skipped.append((m.id, "MLPerf submission: a hand-tuned ceiling, not a stack the probe reaches"))
            continue
        if m.rung and not m.tuned:
            skipped.append((m.id, f"intermediate rung {m.rung!r} of a published ladder (its final rung is fitted)"))
            continue
        if not m.framework.startswith("PyTorch"):
            skipped.append((m.id, f"framework {m.framework.split(' (')[0]}: the probe runs PyTorch"))
            continue
        per_dev = m.samples_per_sec / m.gpus / efficiency(m.gpus)
        if m.image_size and m.image_size != REFERENCE_IMAGE_SIZE and m.model in FACTS:
            per_dev *= (m.image_size / REFERENCE_IMAGE_SIZE) ** 2  # as if at 224 px (FLOPs ~ pixels)
        suite = "|".join((m.source.label().split("@")[0], m.model, m.precision, m.stack, m.data_pipeline,
                          m.framework))
        per_device = m.batch_policy == "per-device"
        out.append(Point(dev, m.model, m.precision, m.stack, per_dev, m.gpus, m.id, "reference", suite,
                         weight=evidence_weight(m), per_device_batch=per_device,
                         batch=m.batch_per_device if per_device else None))
    return out, skipped


def _row_device(m, catalog: Catalog | None) -> tuple[Device | None, str]:
    """The row's device, when the row is one the model is fitted on.

    Only rows at the precision the probe trains in on that device: 16-bit mixed on GPUs (the
    ladder's bf16, or fp16 without bf16), the CPU's native dtype on CPUs. fp32 rows measure other
    units (CUDA cores, not tensor cores: V100 fp32 runs at 2.3x the utilisation of its fp16) and
    would bend the curve the estimates are read from."""
    if m.device == "cpu":
        # The one thing read from the catalog: advisor/estimate/cache.py keys on these instance types.
        it = catalog.instance_types.get(m.instance_type) if (catalog and m.instance_type) else None
        if it is None:
            return None, "CPU row without an instance type in the catalog (its peak needs cores x clock x ISA)"
        want = PRECISION_OF_DTYPE.get(best_dtype(it) or "fp32")
        if m.precision != want:
            return None, f"precision {m.precision}: the probe trains in {want} on {m.instance_type}"
        dev = instance_device(it, m.precision)
        return dev, "" if dev else f"no CPU peak for {m.instance_type}"
    if m.precision not in MIXED:
        return None, f"precision {m.precision}: the probe trains GPUs in 16-bit mixed precision"
    name = " ".join(p for p in (m.device, m.device_variant or "") if p)
    spec = acc.lookup(name, m.device_memory_gib)
    if spec is None:
        return None, f"device {name!r} is not in catalog/data/accelerators.json"
    dev = gpu_device(spec, m.precision)
    return dev, "" if dev else f"no {m.precision} peak or bandwidth for {spec.key}"
