"""A CPU probe off EC2 (your own machine, no instance type) is a measured device of the
cross-device model: its fingerprint (cores x clock x ISA) places it, it re-anchors the workload's
estimates on CPU and GPU types, and the output says so; a fingerprint too thin to place is said
to be unused, with why. Recorded fingerprints of three CPUs, end to end through `advisor recommend`."""

from __future__ import annotations

import json

import pytest
from factories import probe_result

from advisor.estimate.points import cpu_device, fingerprint_cpu_host, instance_device
from advisor.paths import load_catalog
from advisor.store import ResultStore
from lightning_module.contract.result import HardwareFingerprint

# As run/hardware.py records them (/proc/cpuinfo, /sys/devices/system/node).
FINGERPRINTS = {
    # This development VM: 2 vCPUs of a Zen 4 EPYC, no clock in its model name ("cpu MHz" read).
    "epyc": HardwareFingerprint(cpu_model="AMD EPYC", cpu_manufacturer="amd", physical_cores=2, logical_cpus=2,
                                cpu_clock_ghz=2.596, numa_nodes=1, ram_gib=7.7,
                                isa_flags=["avx2", "avx512_bf16", "avx512_vnni", "avx512f", "fma"]),
    # A two-socket Sapphire Rapids workstation with AMX.
    "xeon-amx": HardwareFingerprint(cpu_model="Intel(R) Xeon(R) Platinum 8480+", cpu_manufacturer="intel",
                                    physical_cores=112, logical_cpus=224, cpu_clock_ghz=2.0, numa_nodes=2,
                                    ram_gib=1007.0, isa_flags=["amx_bf16", "amx_tile", "avx2", "avx512_bf16",
                                                               "avx512_vnni", "avx512f", "fma"]),
    # An AVX2-only Broadwell.
    "avx2": HardwareFingerprint(cpu_model="Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz", cpu_manufacturer="intel",
                                physical_cores=4, logical_cpus=8, cpu_clock_ghz=2.3, numa_nodes=1, ram_gib=30.0,
                                isa_flags=["avx2", "fma"]),
}
MACHINES = {"epyc": "2-core AMD EPYC", "xeon-amx": "112-core Intel Xeon Platinum 8480+",
            "avx2": "4-core Intel Xeon E5-2686 v4"}
MODEL = "mypkg.tiny:TinyCNN"
ARGS = ("recommend", "--budget", "1000", "--deadline", "7d", "--samples", "1e6", "--region", "us-east-1",
        "--family", "c7i,c7a,g5", "--top", "500", "--max-instances", "1", "--format", "json")


def off_ec2(which: str, sps: float, model: str = MODEL, precision: str = "bf16-mixed", n: int = 0, **kw):
    r = probe_result(None, sps, model=model, precision=precision, n=n, **kw)
    return r.model_copy(update={"hardware": FINGERPRINTS[which]})


def recommend(cli, tmp_path, *results, args=ARGS, model=MODEL):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        for r in results:
            s.add(r)
    code, out, err = cli(*args, "--workload", model, "--store", str(db))
    assert code == 0, err
    rows = {}
    for row in json.loads(out)["recommendations"]:
        rows.setdefault(row["instance_type"], row)
    return rows, err


@pytest.mark.parametrize("which", sorted(FINGERPRINTS))
def test_a_cpu_probe_off_ec2_re_anchors_cpu_and_gpu_types(cli, tmp_path, which):
    measured = 6724.0
    precision = "32-true" if which == "avx2" else "bf16-mixed"
    rows, err = recommend(cli, tmp_path, off_ec2(which, measured, precision=precision, flops_per_sample=1.77e6))
    assert f"1 probe result(s) off EC2 used as measurements of their CPU ({MACHINES[which]};" in err
    cat = load_catalog()
    probe = cpu_device(fingerprint_cpu_host(FINGERPRINTS[which], precision)[0], precision)
    for name in ("c7i.2xlarge", "c7a.large"):
        row = rows[name]
        assert row["throughput_source"] == "estimated"
        (used,) = row["basis"]["probes"]
        assert used["instance_type"] is None and used["machine"] == MACHINES[which]
        assert any(f"your {MACHINES[which]} (off EC2) probe" in n for n in row["notes"])
        # Between no gain and linear in the counted peak from the probe's machine (the CPU law's
        # bracket), whatever the ISA: never the 83x of a builtin's figure scaled by FLOPs.
        ratio = instance_device(cat.instance_types[name], row["basis"]["precision"]).peak / probe.peak
        # Memory channels move it by their factor (the probe's own count unknown: the rows' balance).
        f = row["basis"].get("memory_channels", {}).get("factor", 1.0)
        mid = row["samples_per_sec"] / f
        if ratio >= 1:
            assert measured * 0.999 <= mid <= measured * ratio * 1.001
            assert row["throughput_low"] <= measured * max(1.0, f) * 1.001
            assert row["throughput_high"] >= measured * ratio * min(1.0, f) * 0.999
        else:  # fewer cores than the probe's: linear (each with more memory bandwidth), as below the law's anchor
            assert mid == pytest.approx(measured * ratio, rel=0.02)
    # On a GPU the transfer from a CPU is not calibrated, and says so.
    gpu = rows["g5.xlarge"]
    assert gpu["throughput_source"] == "estimated" and gpu["basis"]["band"]["calibrated"] == "uncalibrated"
    assert any(n.startswith("uncalibrated: known only from CPU probes") for n in gpu["notes"])


def test_no_estimate_of_a_custom_workload_moves_with_its_flops(cli, tmp_path):
    # A FLOPs ratio to a builtin workload's published figure would move with the FLOPs per sample.
    a, _ = recommend(cli, tmp_path / "a", off_ec2("epyc", 6724.0, flops_per_sample=1.77e6))
    b, _ = recommend(cli, tmp_path / "b", off_ec2("epyc", 6724.0, flops_per_sample=1.77e9))
    for name in ("c7i.2xlarge", "c7a.large", "g5.xlarge"):
        assert a[name]["samples_per_sec"] == pytest.approx(b[name]["samples_per_sec"], rel=1e-9)
        assert a[name]["basis"]["reference_weight"] == 0.0


def test_a_builtin_workload_is_re_anchored_by_a_cpu_probe_off_ec2(cli, tmp_path):
    args = tuple({"c7i,c7a,g5": "c7i,c7a", "1e6": "1e5"}.get(a, a) for a in ARGS)
    base, _ = recommend(cli, tmp_path / "a", args=args, model="resnet50")
    rows, _ = recommend(cli, tmp_path / "b", off_ec2("xeon-amx", 400.0, model="resnet50"), args=args,
                          model="resnet50")
    row = rows["c7a.2xlarge"]
    (used,) = row["basis"]["probes"]
    assert used["machine"] == MACHINES["xeon-amx"] and 0 < row["basis"]["reference_weight"] < 1
    assert row["samples_per_sec"] != pytest.approx(base["c7a.2xlarge"]["samples_per_sec"], rel=0.01)


@pytest.mark.parametrize(("change", "why"), [
    ({"isa_flags": []}, "its fingerprint has no ISA flags"),
    ({"cpu_clock_ghz": None, "physical_cores": None}, "its fingerprint has no core count or clock"),
    ({"cpu_model": None}, "its fingerprint names no CPU"),
])
def test_a_fingerprint_too_thin_to_place_is_unused_with_why(cli, tmp_path, change, why):
    r = off_ec2("epyc", 6724.0)
    r = r.model_copy(update={"hardware": FINGERPRINTS["epyc"].model_copy(update=change)})
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(r)
    code, _, err = cli(*ARGS, "--workload", MODEL, "--store", str(db))
    assert code == 0, err
    assert f"1 CPU probe result(s) of this workload off EC2 not used: {why}" in err
    assert "off EC2 used" not in err


def test_a_matmul_above_what_the_fingerprint_allows_refuses_the_fingerprint():
    hw = FINGERPRINTS["epyc"]  # 2 cores x 2.596 GHz x 64 bf16 FLOPs/cycle = 0.33 TFLOP/s
    host, why = fingerprint_cpu_host(hw, "bf16-mixed", matmul_tflops=0.30)
    assert host is not None and why == ""
    host, why = fingerprint_cpu_host(hw, "bf16-mixed", matmul_tflops=1.0)
    assert host is None and "its measured matmul (1 TFLOP/s) is above the 0.332" in why


def test_the_same_chip_off_ec2_is_the_catalog_device_model_and_one_numa_node_is_counted():
    cat = load_catalog()
    spr = FINGERPRINTS["xeon-amx"].model_copy(update={"cpu_model": "Intel(R) Xeon(R) Platinum 8488C"})
    host, _ = fingerprint_cpu_host(spr, "bf16-mixed")
    assert cpu_device(host, "bf16-mixed").group == instance_device(cat.instance_types["c7i.2xlarge"], "bf16-mixed").group
    # Two NUMA nodes: one is counted, as one socket of an instance type is.
    assert host.share == 0.5
    one, _ = fingerprint_cpu_host(FINGERPRINTS["epyc"], "bf16-mixed")
    assert cpu_device(one, "bf16-mixed").group == "cpu:AMD EPYC" and one.share == 1.0


def test_references_none_counts_a_cpu_probe_off_ec2_as_a_device_model(cli, tmp_path):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(off_ec2("epyc", 6724.0))
    code, _, err = cli("recommend", "--budget", "1000", "--deadline", "7d", "--samples", "1e8", "--references",
                       "none", "--workload", MODEL, "--store", str(db))
    assert code == 2 and "(you have 1: cpu:AMD EPYC)" in err


def test_memory_channels_the_os_reported_place_the_machine_in_the_channel_law(cli, tmp_path):
    # 16 populated channels (EDAC) for 112 cores: 0.143 a core against c7i's 8 for 48 (0.167).
    from advisor.estimate.fit import CPU_CHANNELS_EXPONENT

    told = off_ec2("xeon-amx", 400.0).model_copy(
        update={"hardware": FINGERPRINTS["xeon-amx"].model_copy(update={"memory_channels": 16})})
    rows, _ = recommend(cli, tmp_path / "a", told)
    ch = rows["c7i.2xlarge"]["basis"]["memory_channels"]
    assert ch["anchor_channels_per_core"] == pytest.approx(16 / 112, abs=1e-4)
    assert ch["factor"] == pytest.approx(((8 / 48) / (16 / 112)) ** CPU_CHANNELS_EXPONENT, abs=1e-3)
    rows, _ = recommend(cli, tmp_path / "b", off_ec2("xeon-amx", 400.0))  # a VM: the OS did not say
    assert "memory_channels" not in rows["c7i.2xlarge"]["basis"]  # taken at the rows' balance: c7i's own
    assert any("the anchor's count unknown" in n for n in rows["c7a.2xlarge"]["notes"])
