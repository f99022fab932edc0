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
        ("NVIDIA GeForce RTX 4090", None),
        ("AMD Radeon Pro V520", None),
        ("", None),
        ("NVIDIA H100 80GB HBM3", 10.0),  # a MIG slice is not the full device
    ],
)
def test_lookup_returns_none_rather_than_a_wrong_match(name, memory_gib):
    assert acc.lookup(name, memory_gib) is None


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
