"""Accelerator and CPU peak figures, and robust mapping of device names to them.

The numbers live in data/accelerators.json with a source per number and an `uncertain` list;
this module only reads them. Name mapping matches whole model tokens, most specific first, and
returns None for anything it does not know: a popular peak table mapped "NVIDIA L40S" to the L4
and matched no "H200" at all, and a wrong peak silently skews every estimate built on it.
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from safeio import read_json_file

from .models import InstanceType

DATA_PATH = Path(__file__).parent / "data" / "accelerators.json"

Dtype = Literal["fp32", "tf32", "bf16", "fp16"]
DTYPES: tuple[str, ...] = get_args(Dtype)


class AcceleratorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    name: str
    vendor: str
    kind: Literal["gpu", "neuron", "gaudi"]
    # The vendor's architecture (Ampere, Hopper, ...): devices of one share how well software uses
    # their peaks (estimate/fit.py's family residual). None: not read.
    architecture: str | None = None
    fp32_tflops: float | None = None
    tf32_tflops: float | None = None
    fp16_tflops: float | None = None
    bf16_tflops: float | None = None
    bf16_supported: bool
    fp16_supported: bool
    memory_gib: float
    bandwidth_gbs: float
    sources: dict[str, str]
    uncertain: list[str] = []


class CpuFamily(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu_model: str
    manufacturer: str
    isa: list[str]
    source: str
    uncertain: bool = False
    # DDR channels per socket, as read with its page (None: no source found, the law leaves it out)
    memory_channels: int | None = Field(default=None, gt=0, le=64)
    memory_channels_source: str | None = None

    @model_validator(mode="after")
    def _channels_sourced(self) -> CpuFamily:
        if self.memory_channels is not None and not self.memory_channels_source:
            raise ValueError(f"{self.cpu_model}: memory_channels without memory_channels_source")
        return self


@lru_cache(maxsize=1)
def _data() -> dict:
    return read_json_file(DATA_PATH, "accelerator table", 16 * 2**20)


@lru_cache(maxsize=1)
def specs() -> dict[str, AcceleratorSpec]:
    """All accelerator specs by canonical key."""
    return {a["key"]: AcceleratorSpec.model_validate(a) for a in _data()["accelerators"]}


@lru_cache(maxsize=1)
def cpu_families() -> dict[str, CpuFamily]:
    return {k: CpuFamily.model_validate(v) for k, v in _data()["cpu_families"]["families"].items()}


def get(key: str) -> AcceleratorSpec:
    return specs()[key]


# ---------------------------------------------------------------------------------------------
# Name mapping

# Variants whose figures differ from the SXM parts AWS ships; their numbers are not in the table.
_OTHER_FORM_FACTORS = {"PCIE", "NVL"}

_TOKEN_RE = re.compile(r"[A-Z0-9]+")


def _tokens(name: str) -> list[str]:
    return _TOKEN_RE.findall(name.upper())


def _memory_variant(tokens: list[str], memory_gib: float | None, small: str, large: str,
                    small_gib: float, large_gib: float) -> str | None:
    if f"{int(large_gib)}GB" in tokens:
        return large
    if f"{int(small_gib)}GB" in tokens:
        return small
    if memory_gib is None:
        return None  # "A100" alone could be either: unknown beats a guess
    return large if memory_gib > (small_gib + large_gib) / 2 else small


def _match_key(tokens: list[str], memory_gib: float | None) -> str | None:
    t = set(tokens)
    candidates: list[str | None] = []
    # Most specific first; each rule needs the exact model token, so "L40S" never yields "L4",
    # "GH200" never yields "H200", "A10" never yields "A10G", "Trainium2" never yields "Trainium".
    # PCIe cards have their own entries where their figures are in the table (A100, H100).
    if "B200" in t:
        candidates.append("B200")
    if "H200" in t:  # "H200 NVL" is the PCIe card: lower clocks and power than the SXM part
        candidates.append(None if t & _OTHER_FORM_FACTORS else "H200")
    if "H100" in t:
        candidates.append("H100-PCIE" if "PCIE" in t and "NVL" not in t
                          else None if t & _OTHER_FORM_FACTORS else "H100")
    if "A100" in t:
        if "PCIE" in t:
            candidates.append(_memory_variant(tokens, memory_gib, "A100-PCIE-40GB", "A100-PCIE-80GB", 40, 80))
        else:
            candidates.append(None if t & _OTHER_FORM_FACTORS
                              else _memory_variant(tokens, memory_gib, "A100-40GB", "A100-80GB", 40, 80))
    if "V100" in t:
        candidates.append(None if t & _OTHER_FORM_FACTORS
                          else _memory_variant(tokens, memory_gib, "V100-16GB", "V100-32GB", 16, 32))
    if "L40S" in t:
        candidates.append("L40S")
    if "L4" in t:
        candidates.append("L4")
    if "A10G" in t:
        candidates.append("A10G")
    if "A10" in t:  # the datacenter card; AWS's A10G variant is its own entry
        candidates.append("A10")
    if "MI250X" in t and ("GCD" in t or (memory_gib is not None and memory_gib < 100)):
        candidates.append("MI250X-GCD")  # PyTorch sees each die (64 GB) as a GPU
    if "T4" in t or "T4G" in t:  # T4g: the same T4 silicon in Graviton (g5g) hosts
        candidates.append("T4")
    if "TRAINIUM" in t or "TRAINIUM1" in t:
        candidates.append(None if _followed_by_number(tokens, "TRAINIUM") else "Trainium")
    if "INFERENTIA2" in t or ("INFERENTIA" in t and _next(tokens, "INFERENTIA") == "2"):
        candidates.append("Inferentia2")
    part = _habana_part(tokens)
    if "GAUDI" in t or "GAUDI1" in t or part is not None:
        # HL-205 is Gaudi 1; HL-225 (Gaudi2) and HL-325L (Gaudi3) are later parts not in the table.
        later = _followed_by_number(tokens, "GAUDI") or (part is not None and not part.startswith("205"))
        candidates.append(None if later else "Gaudi")
    candidates += _workstation_card(t)
    found = {c for c in candidates}
    if len(found) != 1:
        return None  # nothing, or two different models named at once
    return found.pop()


# GeForce, Quadro, Titan and RTX workstation cards (in the reference rows, on no AWS instance):
# key -> (tokens the name must hold, modifier tokens it may hold). Any other modifier names
# another product: an RTX 3090 Ti, a 4090 D, a laptop part, the Turing Quadro RTX 6000, an
# RTX PRO 6000 (Blackwell), an "RTX 6000" without "Ada".
_CARDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "RTX2080Ti": (frozenset({"RTX", "2080", "TI"}), frozenset({"TI"})),
    "GTX1080Ti": (frozenset({"GTX", "1080", "TI"}), frozenset({"TI"})),
    "TitanRTX": (frozenset({"TITAN", "RTX"}), frozenset()),
    "QuadroRTX8000": (frozenset({"RTX", "8000"}), frozenset({"QUADRO"})),
    "RTX3080": (frozenset({"RTX", "3080"}), frozenset()),
    "RTX3090": (frozenset({"RTX", "3090"}), frozenset()),
    "RTXA6000": (frozenset({"RTX", "A6000"}), frozenset()),
    "RTX4090": (frozenset({"RTX", "4090"}), frozenset()),
    "RTX6000Ada": (frozenset({"RTX", "6000", "ADA"}), frozenset({"ADA", "GENERATION"})),
}
_CARD_MODIFIERS = frozenset({"TI", "SUPER", "D", "LAPTOP", "MOBILE", "MAX", "Q", "PRO", "SERVER", "WORKSTATION",
                             "ADA", "GENERATION", "BLACKWELL", "QUADRO", "12GB"})


def _workstation_card(t: set[str]) -> list[str]:
    return [key for key, (need, may) in _CARDS.items() if need <= t and not (t & _CARD_MODIFIERS) - may]


def _next(tokens: list[str], tok: str) -> str | None:
    i = tokens.index(tok) if tok in tokens else -1
    return tokens[i + 1] if 0 <= i < len(tokens) - 1 else None


def _followed_by_number(tokens: list[str], tok: str) -> bool:
    """'Gaudi 2' / 'Trainium 2' are later generations, not the part in the table."""
    nxt = _next(tokens, tok)
    return nxt is not None and nxt.isdigit() and len(nxt) <= 2


_HL_RE = re.compile(r"^HL(\d{3}[A-Z]*)$")


def _habana_part(tokens: list[str]) -> str | None:
    """Habana's part number after "HL" ('Gaudi HL-205' -> '205', 'HL-325L' -> '325L'), else None."""
    for x, y in itertools.pairwise(tokens + [""]):
        m = _HL_RE.match(x + y if x == "HL" else x)
        if m:
            return m.group(1)
    return None


def lookup(name: str, memory_gib: float | None = None) -> AcceleratorSpec | None:
    """Map a device name as torch, nvidia-smi, the AWS API or the reference CSV spell it to its
    spec; None for an unknown device. `memory_gib` (per device) picks the A100/V100 variant when
    the name does not say, and rejects a device far smaller or larger than the spec (a MIG slice,
    an NVL part) rather than give it the full part's peaks."""
    if not name:
        return None
    key = _match_key(_tokens(name), memory_gib)
    if key is None:
        return None
    spec = specs()[key]
    if memory_gib is not None and not (0.8 * spec.memory_gib <= memory_gib <= 1.1 * spec.memory_gib):
        return None
    return spec


def peak_tflops(spec: AcceleratorSpec, dtype: str) -> float | None:
    """Dense peak for fp32/tf32/bf16/fp16; None where unsupported or unpublished."""
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
    return getattr(spec, f"{dtype}_tflops")


# ---------------------------------------------------------------------------------------------
# CPUs


def cpu_family(instance: InstanceType) -> CpuFamily | None:
    return cpu_families().get(instance.family)


def cpu_manufacturer(instance: InstanceType) -> str | None:
    """The catalog's figure, else the family table's (catalogs built from other sources)."""
    fam = cpu_family(instance)
    return instance.cpu_manufacturer or (fam.manufacturer if fam else None)


def cpu_model(instance: InstanceType) -> str | None:
    fam = cpu_family(instance)
    return instance.cpu_model or (fam.cpu_model if fam else None)


def cpu_isa(instance: InstanceType) -> frozenset[str]:
    """ISA features of the instance's host CPU (Linux cpuinfo / arm64 hwcap names).

    Families not in the table get the floor every current EC2 host of that architecture has
    (AVX2+FMA on x86: Haswell and later; NEON on arm64), never a guess upwards."""
    fam = cpu_family(instance)
    if fam is not None:
        return frozenset(fam.isa)
    return frozenset({"asimd"} if instance.arch == "arm64" else {"avx2", "fma"})


def memory_channels_per_core(instance: InstanceType) -> float | None:
    """DDR channels per physical core of the instance's socket (the share of the memory system a
    core has when the socket's cores all work); None where the family's channel count or the socket
    size is not known."""
    fam = cpu_family(instance)
    if fam is None or fam.memory_channels is None or not instance.socket_vcpus:
        return None
    socket_cores = instance.socket_vcpus * physical_cores(instance) / instance.vcpus
    return fam.memory_channels / socket_cores


def physical_cores(instance: InstanceType) -> int:
    """AWS's DefaultCores when the catalog has it (c7a/m7a/r7a and Graviton run one thread per
    core); otherwise x86 vCPUs are taken as hyperthreads (two per core), Graviton's as cores."""
    if instance.physical_cores:
        return instance.physical_cores
    if instance.arch == "arm64":
        return instance.vcpus
    return max(1, instance.vcpus // 2)


def _is_arm(isa: set[str] | frozenset[str], manufacturer: str | None) -> bool:
    m = (manufacturer or "").lower()
    return "asimd" in isa or m in ("aws", "arm") or "graviton" in m


def _is_amd(manufacturer: str | None) -> bool:
    m = (manufacturer or "").lower()
    return "amd" in m


@lru_cache(maxsize=1)
def _cpu_rates() -> dict[tuple[str, str, str], float]:
    """(kind, isa, manufacturer) -> figure, kind one of fp32 / bf16 / bf16_factor / fp16_factor."""
    out: dict[tuple[str, str, str], float] = {}
    for e in _data()["cpu_flops_per_cycle"]["entries"]:
        for kind in ("fp32", "bf16", "bf16_factor", "fp16_factor"):
            if kind in e:
                out[(kind, e["isa"], e["manufacturer"])] = float(e[kind])
    return out


def _rate(kind: str, isa: str, manufacturer: str = "any") -> float:
    r = _cpu_rates()
    return r.get((kind, isa, manufacturer), r.get((kind, isa, "any"), 0.0))


def cpu_flops_per_cycle_per_core(isa: set[str] | frozenset[str], dtype: str, manufacturer: str | None) -> float:
    """Peak FLOPs per cycle per core for dtype (figures and sources in accelerators.json).

    fp32: AVX2 32; AVX-512 64 on Intel (two 512-bit FMA units), 32 on AMD Zen 4 (256-bit units);
    an unknown x86 manufacturer with AVX-512 gets the Intel bound (a peak is an upper bound).
    bf16: AMX 1024; AVX512_BF16 (or Arm BF16) doubles the fp32 rate; otherwise bf16 runs at the
    fp32 rate (converted, computed in fp32). fp16: AVX512_FP16 doubles; otherwise the fp32 rate.
    tf32 has no CPU hardware: the fp32 rate."""
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
    isa = set(isa)
    if _is_arm(isa, manufacturer):
        fp32 = _rate("fp32", "sve", "AWS") if ("sve" in isa or "sve2" in isa) else _rate("fp32", "asimd", "AWS")
        if dtype == "bf16" and "bf16" in isa:
            return _rate("bf16_factor", "bf16", "AWS") * fp32
        return fp32
    if "avx512f" in isa:
        fp32 = _rate("fp32", "avx512f", "AMD" if _is_amd(manufacturer) else "Intel")
    elif "avx2" in isa or "fma" in isa:
        fp32 = _rate("fp32", "avx2")
    else:
        fp32 = _rate("fp32", "sse")
    if dtype == "bf16":
        if "amx_bf16" in isa:
            return _rate("bf16", "amx_bf16", "Intel")
        if "avx512_bf16" in isa:
            return _rate("bf16_factor", "avx512_bf16") * fp32
    if dtype == "fp16" and "avx512_fp16" in isa:
        return _rate("fp16_factor", "avx512_fp16", "Intel") * fp32
    return fp32


def cpu_native_bf16(isa: set[str] | frozenset[str] | list[str], manufacturer: str | None = None) -> bool:
    """Whether a CPU with these ISA features (Linux cpuinfo / arm64 hwcap names) computes bf16
    faster than fp32: AMX, AVX512_BF16, Arm's BF16. Without them bf16 is converted and computed in
    fp32, no faster (slower, for the conversions). The catalog's best dtype and the probe's
    --cpu-too CPU rank both ask this."""
    isa = set(isa)
    return cpu_flops_per_cycle_per_core(isa, "bf16", manufacturer) > cpu_flops_per_cycle_per_core(isa, "fp32", manufacturer)


def cpu_peak_tflops(physical_cores: int, clock_ghz: float, isa: set[str] | frozenset[str], dtype: str,
                    manufacturer: str | None) -> float:
    """cores x GHz x FLOPs/cycle, in TFLOP/s."""
    return physical_cores * clock_ghz * cpu_flops_per_cycle_per_core(isa, dtype, manufacturer) / 1000.0


def instance_cpu_peak_tflops(instance: InstanceType, dtype: str) -> float | None:
    """The host CPU's peak for an instance type; None without a clock figure."""
    if not instance.cpu_clock_ghz:
        return None
    return cpu_peak_tflops(physical_cores(instance), instance.cpu_clock_ghz, cpu_isa(instance), dtype,
                           cpu_manufacturer(instance))
