"""The extension rungs: run_cpu, zentorch, xla (and ipex), detected at run time.

Each is `not-installed` / `not-applicable` where it cannot run, and a real rung where it can:
the tests that need a library or package skip cleanly when this machine lacks it (Debian:
apt-get install libjemalloc2 libgoogle-perftools4; pip install intel-openmp / zentorch in an
environment whose torch they match)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from lightning_module.contract.ladder import EXTENSION_RUNGS
from lightning_module.contract.result import HardwareFingerprint, ProbeConfig, WorkloadSpec
from lightning_module.run import hardware, run_cpu

CPUINFO_SMT = "".join(
    f"processor\t: {p}\nvendor_id\t: GenuineIntel\nphysical id\t: 0\ncore id\t\t: {p % 2}\n\n" for p in range(4))
CPUINFO_NO_IDS = "processor\t: 0\n\nprocessor\t: 1\n\n"
SPEC = WorkloadSpec(model="mlp", image_size=8, num_classes=10, batch_size=8)


def libs_dir(tmp_path, *names):
    for n in names:
        (tmp_path / n).write_bytes(b"")
    return [str(tmp_path)]


def test_versioned_debian_libraries_are_found(tmp_path):
    dirs = libs_dir(tmp_path, "libtcmalloc.so.4", "libtcmalloc.so.4.5.10", "libtcmalloc_minimal.so.4")
    assert run_cpu.find_library("tcmalloc", dirs) == str(tmp_path / "libtcmalloc.so.4")
    assert run_cpu.find_library("jemalloc", dirs) is None


def test_physical_cores_take_one_cpu_per_core():
    assert hardware.one_cpu_per_core(CPUINFO_SMT, {0, 1, 2, 3}) == [0, 1]
    assert hardware.one_cpu_per_core(CPUINFO_SMT, {2, 3}) == [2, 3]
    assert hardware.one_cpu_per_core(CPUINFO_NO_IDS, {0, 1}) == [0, 1]  # no core ids: every CPU is a core


def test_the_plan_and_environment_follow_run_cpu(tmp_path):
    dirs = libs_dir(tmp_path, "libjemalloc.so.2")
    p = run_cpu.plan("intel", CPUINFO_SMT, {0, 1, 2, 3}, dirs, iomp="/x/libiomp5.so")
    assert (p.allocator, p.openmp, p.cores, p.missing) == ("jemalloc", "intel", [0, 1], None)
    cfg = ProbeConfig(accelerator="cpu", batch_size=8, run_cpu=True, allocator="jemalloc", openmp="intel")
    env = run_cpu.environment(cfg, p, {"LD_PRELOAD": "/opt/mine.so", "KMP_BLOCKTIME": "0"})
    assert env["LD_PRELOAD"].split(":") == ["/x/libiomp5.so", str(tmp_path / "libjemalloc.so.2"), "/opt/mine.so"]
    assert env["MALLOC_CONF"] == run_cpu.JEMALLOC_CONF and env["OMP_NUM_THREADS"] == "2"
    assert env["KMP_AFFINITY"] == run_cpu.KMP_AFFINITY and env["KMP_BLOCKTIME"] == "0"  # the user's value kept
    amd = run_cpu.plan("amd", CPUINFO_NO_IDS, {0, 1}, dirs, iomp="/x/libiomp5.so")
    assert amd.openmp is None  # Intel OpenMP on Intel CPUs only
    nothing = run_cpu.plan("amd", CPUINFO_NO_IDS, {0, 1}, [str(tmp_path / "empty")], iomp=None)
    assert nothing.missing and "libgoogle-perftools4" in nothing.missing


def fingerprint(vendor):
    return HardwareFingerprint(cpu_manufacturer=vendor, physical_cores=2, logical_cpus=2)


def test_rungs_that_cannot_run_here_say_why(monkeypatch):
    from lightning_module.run import extensions

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(extensions.importlib.util, "find_spec",
                        lambda name: None if name in ("zentorch", "torch_xla") else real_find_spec(name))
    ext = {e.name: e for e in extensions.detect("cpu", fingerprint("amd"), SPEC, 1)}
    assert list(ext) == list(EXTENSION_RUNGS)  # detected in the ladder's order
    assert (ext["zentorch"].status, ext["zentorch"].why) == ("not-installed", "zentorch is not installed")
    assert (ext["xla"].status, ext["xla"].why) == ("not-installed", "torch_xla is not installed")
    intel = {e.name: e for e in extensions.detect("cpu", fingerprint("intel"), SPEC, 1)}
    assert intel["zentorch"].status == "not-applicable" and "AMD CPUs" in intel["zentorch"].why
    gpu = {e.name: e for e in extensions.detect("gpu", fingerprint("amd"), SPEC, 1)}
    assert gpu["run_cpu"].status == gpu["zentorch"].status == gpu["xla"].status == "not-applicable"
    ddp = {e.name: e for e in extensions.detect("cpu", fingerprint("amd"), SPEC, 2)}
    assert ddp["run_cpu"].status == "not-applicable" and ddp["xla"].status == "not-applicable"


def test_a_package_built_for_another_torch_is_not_installed(monkeypatch):
    import torch

    from lightning_module.run import extensions

    monkeypatch.setattr(extensions.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(extensions, "_version", lambda dist: "2.9.0")
    why = extensions.package_missing("torch_xla", "torch-xla")
    assert why == f"torch_xla 2.9.0 does not match torch {extensions._minor(torch.__version__)}"


def test_run_cpu_is_not_installed_without_allocator_or_openmp(monkeypatch):
    from lightning_module.run import extensions

    monkeypatch.setattr(run_cpu, "library_dirs", lambda environ=os.environ: ["/nonexistent"])
    monkeypatch.setattr(run_cpu, "iomp_library", lambda dirs: None)
    monkeypatch.setattr(hardware, "one_cpu_per_core", lambda text, allowed: sorted(allowed))
    ext = {e.name: e for e in extensions.detect("cpu", fingerprint("amd"), SPEC, 1)}
    assert ext["run_cpu"].status == "not-installed" and "tcmalloc or jemalloc" in ext["run_cpu"].why


HERE = run_cpu.plan_here("intel")  # what this machine has (libraries; Intel OpenMP if pip-installed)
needs_allocator = pytest.mark.skipif(HERE.allocator is None, reason="no tcmalloc/jemalloc installed here")

MAPS = "import sys; print(open('/proc/self/maps').read()); print(len(__import__('os').sched_getaffinity(0)))"


@needs_allocator
def test_the_child_environment_preloads_the_allocator_for_real():
    from lightning_module.run.child import child_environment

    cfg = ProbeConfig(accelerator="cpu", batch_size=8, run_cpu=True, allocator=HERE.allocator)
    env, cores = child_environment(cfg, dict(os.environ))
    out = subprocess.run([sys.executable, "-c", MAPS], env=env, capture_output=True, text=True, check=True).stdout
    assert f"lib{HERE.allocator}" in out and cores


@pytest.mark.skipif(HERE.openmp is None, reason="intel-openmp (libiomp5) is not installed here")
def test_intel_openmp_is_preloaded_for_real():
    from lightning_module.run.child import child_environment

    cfg = ProbeConfig(accelerator="cpu", batch_size=8, run_cpu=True, openmp="intel")
    env, _ = child_environment(cfg, dict(os.environ))
    out = subprocess.run([sys.executable, "-c", MAPS], env=env, capture_output=True, text=True, check=True).stdout
    assert "libiomp5" in out and env["KMP_BLOCKTIME"] == "1"


@needs_allocator
def test_the_run_cpu_rung_measures_in_a_child_process():
    from lightning_module.contract.options import MeasureSettings
    from lightning_module.run.child import measure_in_child

    cfg = ProbeConfig(accelerator="cpu", batch_size=8, run_cpu=True, allocator=HERE.allocator)
    m = measure_in_child(MeasureSettings(SPEC, warmup_steps=1, max_seconds=0.3), cfg)
    assert m.samples_per_sec > 0 and m.steps_timed >= 2 and m.extra.step_times and m.contention is not None


def test_a_child_that_fails_reports_the_rungs_status():
    from lightning_module.contract.ladder import RungError
    from lightning_module.contract.options import MeasureSettings
    from lightning_module.run.child import measure_in_child

    bad = WorkloadSpec(model="no_such_module_here:Model", image_size=8, num_classes=10, batch_size=8)
    with pytest.raises(RungError) as err:
        measure_in_child(MeasureSettings(bad, warmup_steps=1, max_seconds=0.3),
                         ProbeConfig(accelerator="cpu", batch_size=8, xla=False, run_cpu=True))
    assert err.value.status == "failed" and "no_such_module_here" in str(err.value)


@pytest.mark.skipif(importlib.util.find_spec("zentorch") is None, reason="zentorch is not installed here")
def test_the_zentorch_rung_trains_for_real():
    from lightning_module.contract.options import MeasureSettings
    from lightning_module.run import measure

    measure.quiet_lightning()
    cfg = ProbeConfig(accelerator="cpu", batch_size=8, compile=True, compile_backend="zentorch")
    m = measure.measure(MeasureSettings(SPEC, warmup_steps=1, max_seconds=0.5), cfg)
    assert m.samples_per_sec > 0 and m.compile_seconds is not None


@pytest.mark.skipif(importlib.util.find_spec("torch_xla") is None, reason="torch_xla is not installed here")
def test_the_xla_rung_trains_for_real():
    from lightning_module.contract.options import MeasureSettings
    from lightning_module.run.child import measure_in_child

    cfg = ProbeConfig(accelerator="cpu", batch_size=8, xla=True)
    m = measure_in_child(MeasureSettings(SPEC, warmup_steps=1, max_seconds=1.0), cfg)
    assert m.samples_per_sec > 0


def test_zentorch_without_avx512_is_measured_and_says_it_is_inductor_alone(monkeypatch):
    from lightning_module.run import extensions

    monkeypatch.setattr(extensions, "package_missing", lambda module, dist: None)
    avx2 = {e.name: e for e in extensions.detect("cpu", fingerprint("amd"), SPEC, 1)}["zentorch"]
    assert avx2.status is None and avx2.update == {"compile": True, "compile_backend": "zentorch"}
    assert "AVX-512" in avx2.note
    zen4 = HardwareFingerprint(cpu_manufacturer="amd", isa_flags=["avx2", "avx512f", "avx512_bf16"])
    assert {e.name: e for e in extensions.detect("cpu", zen4, SPEC, 1)}["zentorch"].note is None
