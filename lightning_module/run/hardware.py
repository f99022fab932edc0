"""What machine a probe ran on: CPU, GPUs, memory, EC2 instance type and software versions.

Everything here reads files or asks libraries; nothing fails the probe: a value that cannot be
found is left as None.
"""

from __future__ import annotations

import logging
import os
import platform
import re
import urllib.request
from importlib.metadata import version
from pathlib import Path

from ..contract.result import GpuInfo, HardwareFingerprint, SoftwareVersions

log = logging.getLogger(__name__)

# The flags that decide a CPU's training speed (vector width, bf16 dot products, matrix engine).
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile", "asimd", "sve", "bf16")

IMDS = "http://169.254.169.254"


def read_cpuinfo(path: str = "/proc/cpuinfo") -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def cpuinfo_blocks(text: str) -> list[list[tuple[str, str]]]:
    """/proc/cpuinfo's text as its blocks (one per logical CPU), each its (key, value) lines in order:
    the one parser of the file, which the fingerprint and run_cpu's core pinning read."""
    blocks: list[list[tuple[str, str]]] = []
    block: list[tuple[str, str]] = []
    for line in text.splitlines() + [""]:
        if not line.strip():
            if block:
                blocks.append(block)
            block = []
            continue
        key, _, val = (s.strip() for s in line.partition(":"))
        block.append((key, val))
    return blocks


def parse_cpuinfo(text: str) -> dict:
    """CPU model, vendor, physical cores, logical CPUs, ISA flags and clock from /proc/cpuinfo text."""
    model = vendor = None
    flags: set[str] = set()
    cores: set[tuple[str, str]] = set()
    logical = 0
    mhz: float | None = None
    for block in cpuinfo_blocks(text):
        phys = core = None
        for key, val in block:
            if key == "processor":
                logical += 1
            elif key in ("model name", "Model") and model is None:
                model = val
            elif key in ("vendor_id", "CPU implementer") and vendor is None:
                vendor = val
            elif key in ("flags", "Features") and not flags:
                flags = set(val.split())
            elif key == "physical id":
                phys = val
            elif key == "core id":
                core = val
            elif key == "cpu MHz" and mhz is None:
                try:
                    mhz = float(val)
                except ValueError:
                    pass
        if phys is not None or core is not None:
            cores.add((phys or "0", core or str(logical)))
    manufacturer = None
    if vendor:
        v = vendor.lower()
        manufacturer = "intel" if "intel" in v else "amd" if "amd" in v else "arm" if v.startswith("0x") else v
    # Clock from the model name ("@ 2.90GHz") beats the momentary "cpu MHz" reading.
    ghz = None
    if model and (m := re.search(r"@\s*([\d.]+)\s*GHz", model)):
        ghz = float(m.group(1))
    elif mhz:
        ghz = round(mhz / 1000, 3)
    return {
        "cpu_model": model,
        "cpu_manufacturer": manufacturer,
        "physical_cores": len(cores) or None,
        "logical_cpus": logical or None,
        "isa_flags": sorted(f for f in ISA_FLAGS if f in flags),
        "cpu_clock_ghz": ghz,
    }


def one_cpu_per_core(cpuinfo: str, allowed: set[int]) -> list[int]:
    """One logical CPU per physical core, among those this process may use (run_cpu pins to
    physical cores; the SMT siblings would share their core's units)."""
    seen: dict[tuple[str, str], int] = {}
    for block in cpuinfo_blocks(cpuinfo):
        proc = phys = core = None
        for k, v in block:
            if k == "processor":
                try:
                    proc = int(v)
                except ValueError:
                    proc = None
            elif k == "physical id":
                phys = v
            elif k == "core id":
                core = v
        if proc is not None and proc in allowed:
            seen.setdefault((phys or "0", core if core is not None else str(proc)), proc)
    return sorted(seen.values()) or sorted(allowed)


def numa_nodes(root: str = "/sys/devices/system/node") -> int | None:
    try:
        n = sum(1 for p in Path(root).iterdir() if re.fullmatch(r"node\d+", p.name))
    except OSError:
        return None
    return n or None


def memory_channels(root: str = "/sys/devices/system/edac/mc") -> int | None:
    """Populated DDR channels, where the kernel's EDAC driver lists its DIMMs (bare metal): the
    distinct (controller, channel) of each DIMM with a size, from dimm_location ("channel 2 slot 0").
    None where it does not (VMs, no EDAC driver): the machine did not say."""
    seen: set[tuple[str, str]] = set()
    try:
        # dimm*: per-DIMM drivers (skx_edac, i10nm, amd64_edac); rank*: per-rank (csrow) ones.
        for dimm in [*Path(root).glob("mc*/dimm*"), *Path(root).glob("mc*/rank*")]:
            words = (dimm / "dimm_location").read_text().split()
            if int((dimm / "size").read_text().split()[0]) > 0 and "channel" in words[:-1]:
                seen.add((dimm.parent.name, words[words.index("channel") + 1]))
    except (OSError, ValueError, IndexError):
        return None
    return len(seen) or None


def ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 2)
    except (OSError, ValueError, IndexError):
        pass
    return None


def gpus() -> list[GpuInfo]:
    try:
        import torch

        if not torch.cuda.is_available():
            return []
        out = []
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            out.append(GpuInfo(name=p.name, memory_gib=round(p.total_memory / 2**30, 2)))
        return out
    except Exception as e:  # noqa: BLE001 - a broken driver must not stop the fingerprint
        log.debug("no GPU info: %s", e)
        return []


def fingerprint() -> HardwareFingerprint:
    cpu = parse_cpuinfo(read_cpuinfo())
    if cpu["physical_cores"] is None:  # no core ids (some VMs, ARM): count logical CPUs
        cpu["physical_cores"] = cpu["logical_cpus"] or os.cpu_count()
    return HardwareFingerprint(**cpu, numa_nodes=numa_nodes(), memory_channels=memory_channels(), ram_gib=ram_gib(),
                               gpus=gpus())


def ec2_instance_type(timeout: float = 0.5) -> str | None:
    """The instance type from EC2 instance metadata (IMDSv2), or None anywhere else.

    Silent off EC2: the token PUT times out or is refused quickly and that is the answer.
    """
    if os.environ.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
        return None
    # Link-local metadata must never go through an HTTP proxy set in the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        req = urllib.request.Request(
            f"{IMDS}/latest/api/token", method="PUT", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"}
        )
        with opener.open(req, timeout=timeout) as r:
            token = r.read().decode()
        req = urllib.request.Request(
            f"{IMDS}/latest/meta-data/instance-type", headers={"X-aws-ec2-metadata-token": token}
        )
        with opener.open(req, timeout=timeout) as r:
            value = r.read().decode().strip()
        return value or None
    except Exception as e:  # noqa: BLE001 - any failure means "not on EC2 (or metadata off)"
        log.debug("no EC2 instance metadata: %s", e)
        return None


def _version(distribution: str) -> str | None:
    try:
        return version(distribution)
    except Exception:  # noqa: BLE001 - not installed, or broken metadata: unknown, never fatal
        return None


def software_versions() -> SoftwareVersions:
    torch_v = cuda_v = None
    try:
        import torch

        torch_v = torch.__version__
        cuda_v = torch.version.cuda if torch.cuda.is_available() else None
    except ImportError:
        pass
    return SoftwareVersions(
        python=platform.python_version(),
        torch=torch_v,
        lightning=_version("lightning") or _version("pytorch-lightning"),
        torchvision=_version("torchvision"),
        cuda=cuda_v,
        ipex=_version("intel-extension-for-pytorch"),
        torch_xla=_version("torch-xla") or _version("torch_xla"),
        zentorch=_version("zentorch"),
        intel_openmp=_version("intel-openmp"),
    )
