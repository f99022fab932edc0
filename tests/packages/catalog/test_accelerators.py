"""Accelerator specs: every number sourced, device names mapped without false matches, CPU peaks."""

from __future__ import annotations

import math

import pytest

from catalog import accelerators as acc
from catalog.models import InstanceType

NUMERIC = ("fp32_tflops", "tf32_tflops", "fp16_tflops", "bf16_tflops", "memory_gib", "bandwidth_gbs")


def test_every_number_has_a_source_and_uncertain_names_real_fields():
    specs = acc.specs()
    assert {"T4", "V100-16GB", "V100-32GB", "A10G", "L4", "L40S", "A100-40GB", "A100-80GB", "H100",
            "H200", "B200", "Trainium", "Inferentia2", "Gaudi"} <= specs.keys()
    for key, s in specs.items():
        for f in NUMERIC:
            v = getattr(s, f)
            if v is not None:
                assert v > 0 and math.isfinite(v), (key, f)
                assert s.sources.get(f), f"{key}.{f} has no source"
        assert set(s.uncertain) <= set(type(s).model_fields), (key, s.uncertain)
    assert "bf16_tflops" in specs["B200"].uncertain
    assert {"fp32_tflops", "bf16_tflops"} <= set(specs["A10G"].uncertain)
    assert specs["L40S"].uncertain == []


@pytest.mark.parametrize(
    "name, memory_gib, key",
    [
        ("NVIDIA L40S", None, "L40S"),  # contains "L4": a popular table got this wrong
        ("NVIDIA L4", 22.0, "L4"),
        ("L4", None, "L4"),
        ("NVIDIA H200", None, "H200"),  # matched nothing in that table
        ("NVIDIA H100 80GB HBM3", 79.1, "H100"),
        ("Tesla V100-SXM2-16GB", None, "V100-16GB"),
        ("Tesla V100-SXM2-32GB", None, "V100-32GB"),
        ("V100", 32.0, "V100-32GB"),  # AWS API: name plus memory
        ("V100", 16.0, "V100-16GB"),
        ("V100-32GB", None, "V100-32GB"),  # reference CSV spelling
        ("NVIDIA A100-SXM4-80GB", None, "A100-80GB"),
        ("NVIDIA A100-SXM4-40GB", 39.4, "A100-40GB"),
        ("A100", 40.0, "A100-40GB"),
        ("A100-80GB", None, "A100-80GB"),
        ("NVIDIA A10G", None, "A10G"),
        ("A10G", 24.0, "A10G"),
        ("Tesla T4", 15.1, "T4"),
        ("T4g", None, "T4"),
        ("Trainium", 32.0, "Trainium"),
        ("Inferentia2", None, "Inferentia2"),
        ("Gaudi HL-205", None, "Gaudi"),
        ("HL-205", None, "Gaudi"),
        ("B200", 179.06, "B200"),
        ("NVIDIA A10", None, "A10"),  # the datacenter card, never the A10G (nor the A10G the A10)
        ("NVIDIA H100 PCIe", None, "H100-PCIE"),  # PCIe peaks differ from the SXM5 part
        ("NVIDIA A100 80GB PCIe", None, "A100-PCIE-80GB"),
        ("A100 PCIe", 40.0, "A100-PCIE-40GB"),
        ("MI250X GCD", 64.0, "MI250X-GCD"),
        # Workstation and GeForce cards of the reference rows (spelled as the rows and torch do)
        ("RTX 3090", 24.0, "RTX3090"),
        ("NVIDIA GeForce RTX 3090", None, "RTX3090"),
        ("RTX 3080", 10.0, "RTX3080"),
        ("NVIDIA GeForce RTX 4090", None, "RTX4090"),
        ("RTX 2080 Ti", 11.0, "RTX2080Ti"),
        ("GTX 1080 Ti", 11.0, "GTX1080Ti"),
        ("RTX A6000", 48.0, "RTXA6000"),
        ("NVIDIA RTX A6000", None, "RTXA6000"),
        ("RTX 6000 Ada", 48.0, "RTX6000Ada"),
        ("NVIDIA RTX 6000 Ada Generation", None, "RTX6000Ada"),
        ("Quadro RTX 8000", 48.0, "QuadroRTX8000"),
        ("Titan RTX", 24.0, "TitanRTX"),
        ("NVIDIA TITAN RTX", None, "TitanRTX"),
    ],
)
def test_lookup_maps_real_device_names(name, memory_gib, key):
    spec = acc.lookup(name, memory_gib)
    assert spec is not None and spec.key == key


@pytest.mark.parametrize(
    "name, memory_gib",
    [
        ("NVIDIA L40", None),
        ("NVIDIA GH200 480GB", None),
        ("NVIDIA H100 NVL", None),
        ("A100", None),  # 40 or 80 GB: unknown beats a guess
        ("Trainium2", None),
        ("Inferentia", None),  # inf1, not inf2
        ("Intel Gaudi 2", None),
        ("Gaudi HL-225", None),  # Gaudi2's part number: not the Gaudi 1 in the table
        ("Gaudi2 HL-225H", None),
        ("Intel Gaudi 3 HL-325L", None),
        ("HL-325L", None),
        ("NVIDIA H200 NVL", None),  # the PCIe card, not the SXM part
        ("NVIDIA H200 NVL", 141.0),
        ("Qualcomm AI100", None),
        ("AMD Radeon Pro V520", None),
        # Other products that share a model number or a word with a card in the table
        ("Quadro RTX 6000", None),  # Turing, 24 GB: not the RTX 6000 Ada
        ("NVIDIA RTX 6000", None),  # says neither Ada nor Quadro
        ("RTX PRO Server 6000", None),  # Blackwell (AWS's name), not the RTX 6000 Ada
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", None),
        ("RTX PRO 4500", None),
        ("RTX 5000 Ada", None),
        ("RTX A6000 Ada", None),  # no such card: two models named at once
        ("RTX 3090 Ti", None),
        ("RTX 3080 Ti", None),
        ("RTX 3080 12GB", None),  # 70 SMs and 912 GB/s: not the 10 GB card
        ("RTX 3080", 12.0),
        ("RTX 4090 D", None),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", None),
        ("RTX 2080", None),
        ("RTX 2080 SUPER", None),
        ("GTX 1080", None),
        ("Titan V", None),
        ("NVIDIA B300", None),
        ("", None),
        ("NVIDIA H100 80GB HBM3", 10.0),  # a MIG slice is not the full device
    ],
)
def test_lookup_returns_none_rather_than_a_wrong_match(name, memory_gib):
    assert acc.lookup(name, memory_gib) is None


def test_amp_peaks_are_fp32_accumulate_rates():
    """AMP accumulates in FP32: GeForce cards run that at half their FP16-accumulate tensor rate
    (RTX 2080 Ti 53.8 of 107.6, RTX 3090 71 of 142, RTX 4090 165.2 of 330.3), the professional and
    Titan cards do not (Quadro RTX 8000 and Titan RTX 130.5 like the Quadro RTX 6000, RTX A6000
    154.8, RTX 6000 Ada 364). Dense figures, never the sparse ones."""
    fp16 = {k: acc.get(k).fp16_tflops for k in ("RTX2080Ti", "RTX3090", "RTX4090", "QuadroRTX8000", "TitanRTX",
                                                 "RTXA6000", "RTX6000Ada", "RTX3080")}
    assert fp16 == {"RTX2080Ti": 53.8, "RTX3090": 71.0, "RTX4090": 165.2, "QuadroRTX8000": 130.5, "TitanRTX": 130.5,
                    "RTXA6000": 154.8, "RTX6000Ada": 364.0, "RTX3080": 59.5}
    assert acc.get("RTX3080").uncertain == ["fp16_tflops"]  # derived from the FP16-accumulate figure
    # Same die, different product: the GeForce card's AMP peak is half the workstation card's per SM-clock.
    assert acc.get("RTX4090").fp16_tflops / acc.get("RTX6000Ada").fp16_tflops < 0.5
    bw = {k: acc.get(k).bandwidth_gbs for k in fp16}
    assert bw == {"RTX2080Ti": 616.0, "RTX3090": 936.0, "RTX4090": 1008.0, "QuadroRTX8000": 672.0, "TitanRTX": 672.0,
                  "RTXA6000": 768.0, "RTX6000Ada": 960.0, "RTX3080": 760.0}
    # Pascal has no tensor cores: no 16-bit peak, so its AMP rows are not fitted.
    p = acc.get("GTX1080Ti")
    assert p.fp16_tflops is None and not p.fp16_supported and p.fp32_tflops == 11.3


def test_every_aws_gpu_name_maps_as_before():
    """The names moto's DescribeInstanceTypes data (AWS's own) gives, with memory: the cards added
    for the reference rows change none of them (AWS's RTX PRO parts stay unknown)."""
    import gzip
    import json
    from pathlib import Path

    import moto

    with gzip.open(Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz") as f:
        described = json.load(f)
    seen = {}
    for d in described.values():
        for g in (d.get("GpuInfo") or {}).get("Gpus") or []:
            mib = (g.get("MemoryInfo") or {}).get("SizeInMiB")
            share = g.get("GpuPartitionSize") or 1
            spec = acc.lookup(g["Name"], mib / 1024 / share if mib else None)
            seen[g["Name"]] = seen.get(g["Name"], set()) | {spec.key if spec else None}
    expected = {"A100": {"A100-40GB", "A100-80GB"}, "A10G": {"A10G"}, "B200": {"B200"}, "B300": {None},
                "H100": {"H100"}, "H200": {"H200"}, "L4": {"L4"}, "L40S": {"L40S"}, "T4": {"T4"}, "T4g": {"T4"},
                "V100": {"V100-32GB"}, "RTX PRO 4500": {None}, "RTX PRO Server 6000": {None}}
    assert seen == expected


def test_peak_tflops_per_dtype():
    l40s = acc.get("L40S")
    assert acc.peak_tflops(l40s, "bf16") == 362.0
    assert acc.peak_tflops(l40s, "fp32") == 91.6
    t4 = acc.get("T4")
    assert acc.peak_tflops(t4, "bf16") is None and not t4.bf16_supported
    assert acc.peak_tflops(t4, "fp16") == 65.0
    with pytest.raises(ValueError):
        acc.peak_tflops(t4, "int8")


def _it(name: str, vcpus: int, arch: str = "x86_64", manufacturer: str | None = None, clock: float | None = None):
    return InstanceType(name=name, family=name.split(".")[0], vcpus=vcpus, memory_gib=16, arch=arch,
                        cpu_manufacturer=manufacturer, cpu_clock_ghz=clock)


def test_cpu_isa_by_family():
    assert {"avx512f", "avx512_bf16", "amx_bf16"} <= acc.cpu_isa(_it("c7i.2xlarge", 8))
    assert "amx_bf16" not in acc.cpu_isa(_it("c6i.2xlarge", 8))
    assert "avx512f" in acc.cpu_isa(_it("c6i.2xlarge", 8))
    assert {"avx512f", "avx512_bf16"} <= acc.cpu_isa(_it("c7a.2xlarge", 8))
    assert "avx512f" not in acc.cpu_isa(_it("g5.2xlarge", 8))
    assert {"sve", "bf16"} <= acc.cpu_isa(_it("c7g.2xlarge", 8, "arm64"))
    assert "sve" not in acc.cpu_isa(_it("g5g.2xlarge", 8, "arm64"))
    # an unknown family gets only the architecture's floor
    assert acc.cpu_isa(_it("zz9.large", 2)) == frozenset({"avx2", "fma"})


def test_cpu_flops_per_cycle():
    f = acc.cpu_flops_per_cycle_per_core
    spr = acc.cpu_isa(_it("c7i.2xlarge", 8))
    zen4 = acc.cpu_isa(_it("c7a.2xlarge", 8))
    assert f({"avx2", "fma"}, "fp32", "AMD") == 32
    assert f(spr, "fp32", "Intel") == 64
    assert f(spr, "bf16", "Intel") == 1024  # AMX
    assert f(zen4, "fp32", "AMD") == 32  # 512-bit ops on 256-bit units
    assert f(zen4, "bf16", "AMD") == 64  # AVX512_BF16 doubles
    assert f(acc.cpu_isa(_it("c6i.large", 2)), "bf16", "Intel") == 64  # no bf16 hardware
    assert f(zen4, "tf32", "AMD") == 32



def test_native_bf16_is_a_bf16_rate_above_the_fp32_rate():
    # One rule for the catalog's best dtype and the probe's --cpu-too CPU rank (run/cpu_too.py).
    native = acc.cpu_native_bf16
    assert native(acc.cpu_isa(_it("c7i.2xlarge", 8)), "Intel")  # AMX
    assert native(acc.cpu_isa(_it("c7a.2xlarge", 8)), "AMD")  # AVX512_BF16
    assert native(["asimd", "bf16"], "arm")  # Graviton3's BF16, cpuinfo's names
    assert not native(acc.cpu_isa(_it("c6i.large", 2)), "Intel")  # AVX-512 without bf16 dot products
    assert not native(["asimd", "sve"], None) and not native(["avx2", "fma"])
    assert not native(["avx2", "fma", "bf16"], "intel")  # "bf16" is Arm's name: no x86 CPU says it


def test_cpu_peak_tflops_counts_physical_cores():
    c7i = _it("c7i.2xlarge", 8, manufacturer="Intel", clock=3.2)
    assert acc.physical_cores(c7i) == 4
    # 4 cores x 3.2 GHz x 1024 AMX bf16 ops
    assert acc.instance_cpu_peak_tflops(c7i, "bf16") == pytest.approx(4 * 3.2 * 1024 / 1000)
    c7g = _it("c7g.2xlarge", 8, "arm64", "AWS", 2.6)
    assert acc.physical_cores(c7g) == 8  # Graviton vCPUs are cores
    assert acc.cpu_peak_tflops(1, 2.0, {"avx2"}, "fp32", "Intel") == pytest.approx(0.064)
    # Development machine (2-core Zen 4 at ~3.7 GHz): measured 192 GFLOP/s fp32 matmul in
    # accelerators.md must not exceed the computed bound.
    assert acc.cpu_peak_tflops(2, 3.7, {"avx2", "avx512f", "avx512_bf16"}, "fp32", "AMD") * 1000 > 192
