"""Contention detection: the maths on synthetic readings, a real busy neighbour, the GPU seam."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest
from checkout import ROOT

from lightning_module.contract.contention import (
    ContentionMeter,
    GpuState,
    Reading,
    merge,
    step_load,
)
from lightning_module.run.readers import gpu_state, read_now


def steps(meter, wall, cpu, wait, n=10, steal=0, total=100):
    """n synthetic steps of `wall` seconds each, with `cpu` CPU seconds and `wait` run-queue seconds."""
    r = Reading(0.0, 0.0, run=0.0, wait=0.0, steal=0, total=0)
    for i in range(1, n + 1):
        b = Reading(i * wall, i * cpu, run=i * cpu / 2, wait=i * wait, steal=i * steal, total=i * total)
        meter.add(r, b)
        r = b


def test_an_idle_machine_is_not_contended():
    m = ContentionMeter(cores_in_use=2, cpus=2)
    steps(m, wall=0.5, cpu=0.95, wait=0.002)
    c = m.record(load_average=2.1, own_load=2)
    assert not c.contended and c.reasons == [] and c.contended_steps == 0
    assert c.cpu_share == pytest.approx(0.95) and c.wait_share == pytest.approx(0.004)


def test_run_queue_wait_steal_and_load_each_make_a_rung_contended():
    m = ContentionMeter(cores_in_use=2, cpus=2)
    steps(m, wall=0.5, cpu=0.5, wait=0.2)  # the training thread queued 40% of the time
    c = m.record(load_average=2.0, own_load=2)
    assert c.contended and c.contended_steps == 10 and "waited for a CPU 40%" in c.reasons[0]

    m = ContentionMeter(cores_in_use=2, cpus=2)
    steps(m, wall=0.5, cpu=0.9, wait=0.0, steal=10, total=100)  # 10% stolen by the hypervisor
    assert m.record().contended

    m = ContentionMeter(cores_in_use=1, cpus=2)
    steps(m, wall=0.5, cpu=0.45, wait=0.0)
    c = m.record(load_average=4.5, own_load=1)  # 3.5 others on the one core left idle
    assert c.contended and c.contended_steps == 0 and c.reasons == ["load average 4.5 on 2 CPU(s), 1 of it this probe's"]
    assert not m.record(load_average=1.8, own_load=1).contended  # one neighbour on the idle core is fine


def test_a_few_contended_steps_do_not_make_the_rung_contended():
    m = ContentionMeter(cores_in_use=2, cpus=2)
    steps(m, wall=0.5, cpu=0.95, wait=0.0, n=9)
    m.add(Reading(0, 0, run=0, wait=0), Reading(0.5, 0.5, run=0.2, wait=0.3))
    c = m.record()
    assert c.contended_steps == 1 and not c.contended


def test_waiting_behind_the_probes_own_workers_is_not_contention():
    """The training thread queued 40% of the step, but the CPUs were busy only with this process
    tree (its loader workers): nobody else to blame."""
    a = Reading(0.0, 0.0, run=0.0, wait=0.0, busy=0.0)
    own = Reading(1.0, 1.95, run=0.6, wait=0.4, busy=1.98)
    s = step_load(a, own, cores_in_use=2, cpus=2)
    assert s.wait_share == pytest.approx(0.4) and s.others_share < 0.05 and not s.contended
    others = Reading(1.0, 1.2, run=0.6, wait=0.4, busy=1.98)  # 0.78 CPU-seconds were someone else's
    assert step_load(a, others, cores_in_use=2, cpus=2).contended


def test_proc_stat_is_read_for_the_cpus_this_process_may_use():
    from lightning_module.run.readers import parse_stat

    text = ("cpu  30 0 10 100 0 0 0 6 0 0\ncpu0 10 0 5 50 0 0 0 1 0 0\ncpu1 20 0 5 50 0 0 0 5 0 0\n"
            "intr 123\n")
    assert parse_stat(text, None) == (6, 146, 40)
    assert parse_stat(text, {1}) == (5, 80, 25)
    assert parse_stat(text, {7}) is None


def test_without_schedstat_the_cpu_share_decides_on_cpu_only():
    a, b = Reading(0.0, 0.0), Reading(1.0, 0.6)  # 0.6 CPU-seconds in 1 s over 2 cores: 30%
    assert step_load(a, b, cores_in_use=2, cpu_bound=True).contended
    assert not step_load(a, b, cores_in_use=2, cpu_bound=False).contended  # a GPU step waits on the device


def test_merged_records_keep_one_reason_of_each_kind():
    m1, m2 = ContentionMeter(2, 2), ContentionMeter(2, 2)
    steps(m1, 0.5, 0.5, 0.2)
    steps(m2, 0.5, 0.5, 0.25, n=5)
    c = merge([m1.record(load_average=5.0, own_load=2), m2.record(load_average=6.0, own_load=2)])
    assert c.steps == 15 and c.contended_steps == 15 and c.load_average == 6.0
    assert len(c.reasons) == 2 and c.reasons[1].startswith("load average 6.0")
    assert merge([None, None]) is None


BUSY = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {root!r})
    os.sched_setaffinity(0, {{{cpu}}})
    from lightning_module.contract.contention import step_load
    from lightning_module.run.readers import read_now
    a = read_now()
    t = time.perf_counter()
    while time.perf_counter() - t < 1.5:
        pass
    s = step_load(a, read_now(), cores_in_use=1, cpus=1)
    print(s.wait_share, s.cpu_share, s.contended, s.others_share)
""")

BURNER = "import os, time\nos.sched_setaffinity(0, {%d})\nt = time.time()\nwhile time.time() - t < 30: pass\n"


@pytest.mark.skipif(not os.path.exists("/proc/thread-self/schedstat"), reason="needs Linux schedstat")
def test_a_busy_neighbour_on_the_same_core_is_detected():
    """A synthetic busy process: two CPU burners pinned to the core the measured loop runs on take
    about two thirds of it, and the loop's own reading says so."""
    cpu = min(os.sched_getaffinity(0))
    root = str(ROOT)
    burners = [subprocess.Popen([sys.executable, "-c", BURNER % cpu]) for _ in range(2)]
    try:
        time.sleep(0.3)
        out = subprocess.run([sys.executable, "-c", BUSY.format(root=root, cpu=cpu)], capture_output=True,
                             text=True, timeout=60, check=True).stdout.split()
    finally:
        for b in burners:
            b.kill()
            b.wait()
    wait_share, cpu_share, contended, others = float(out[0]), float(out[1]), out[2] == "True", float(out[3])
    assert contended and wait_share > 0.3 and cpu_share < 0.7 and others > 0.3, out


def test_read_now_reads_this_machine():
    r = read_now()
    assert r.wall > 0 and r.cpu > 0
    if os.path.exists("/proc/thread-self/schedstat"):
        assert r.run is not None and r.wait is not None and r.total and r.total > 0


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="Linux /proc")
def test_a_child_s_cpu_time_stays_the_process_s_after_it_ends():
    """A loader's workers that are not persistent end at every epoch: their CPU time, read from
    /proc while they run, must not vanish from the count once they are waited for, or it would
    show as other processes' work (the others' share that makes a result a busy one)."""
    burn = ("import sys, time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
            "print('done', flush=True)\nsys.stdin.read()")
    child = subprocess.Popen([sys.executable, "-c", burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "done"
    alive = read_now()
    child.stdin.close()
    child.wait()
    ended = read_now()
    assert ended.cpu - alive.cpu > -0.05  # without the reaped children's time it fell by the child's 0.3 s


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="Linux /proc")
def test_a_grandchild_s_cpu_time_is_the_process_s():
    """Another DDP rank's loader workers are this probe's grandchildren: their work is not others'."""
    from lightning_module.run.readers import _children_cpu

    burn = ("import sys, time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
            "print('done', flush=True)\nsys.stdin.read()")
    rank = ("import subprocess, sys\n"
            f"w = subprocess.Popen([sys.executable, '-c', {burn!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)\n"
            "print(w.stdout.readline().strip(), flush=True)\nsys.stdin.read()\nw.stdin.close()\nw.wait()")
    child = subprocess.Popen([sys.executable, "-c", rank], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "done"
        assert _children_cpu() >= 0.3  # the worker's 0.3 s, and the rank's own start-up
    finally:
        child.stdin.close()
        child.wait()


class FakeNvml:
    NVML_CLOCK_SM = 1

    def __init__(self, pids, clock=(1980, 1980), fail=False):
        self.pids, self.clock, self.fail = pids, clock, fail

    def nvmlInit(self):
        if self.fail:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        raise RuntimeError("not found")

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [type("P", (), {"pid": p})() for p in self.pids]

    def nvmlDeviceGetClockInfo(self, h, kind):
        return self.clock[0]

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return self.clock[1]


def test_gpu_state_counts_other_processes_and_low_clocks():
    me = os.getpid()
    g = gpu_state(0, {me}, nvml=FakeNvml([me, 4242, 4343], clock=(1200, 1980)))
    assert g == GpuState(2, pytest.approx(1200 / 1980))
    m = ContentionMeter(cores_in_use=1, cpus=8, cpu_bound=False)
    steps(m, 0.1, 0.1, 0.0)
    c = m.record(gpu=[g])
    assert c.contended and c.gpu_other_processes == 2
    assert any("GPU clock at 61%" in r for r in c.reasons)
    assert not ContentionMeter(1, 8, False).record(gpu=[gpu_state(0, {me}, nvml=FakeNvml([me]))]).contended
    assert gpu_state(0, {me}, nvml=FakeNvml([], fail=True)) is None  # no NVML: nothing to say


def test_readings_of_different_grain_never_give_a_share_past_its_bound():
    # A 20 ms step read against /proc/stat's 10 ms ticks: the other processes' busy time and the
    # thread's wait can come out above the wall time, the process's CPU time above the CPUs' (seen
    # under load: the record's strict bounds then failed the baseline).
    a = Reading(0.0, 0.0, run=0.0, wait=0.0, steal=0, total=0, busy=0.0)
    b = Reading(0.02, 0.09, run=0.0, wait=0.03, steal=3, total=2, busy=0.2)
    s = step_load(a, b, cores_in_use=1, cpus=2)
    assert s.wait_share == 1.0 and s.others_share == 1.0 and s.steal_share == 1.0 and s.cpu_share == 2.0
    meter = ContentionMeter(1, 2)
    meter.add(a, b)
    meter.record()  # the strict model takes it


def test_ticks_coarser_than_a_step_do_not_read_as_others_work():
    # 5 ms steps on 2 CPUs, all of them this process's; /proc/stat's busy count moves in 10 ms ticks,
    # so a step reads 0 or 10 ms busy (20 in all every 2 steps): no one else's work, on the whole.
    m, busy_ticks = ContentionMeter(cores_in_use=2, cpus=2), 0.0
    a = Reading(0.0, 0.0, busy=0.0)
    for i in range(1, 201):
        busy_ticks = 0.02 * (i // 2)  # the ticks counted up to now
        b = Reading(i * 0.005, i * 0.01, busy=busy_ticks)
        m.add(a, b)
        a = b
    c = m.record()
    assert c.others_share == pytest.approx(0.0, abs=0.01) and not c.contended, c
    # the same steps beside a process that keeps one of the two CPUs busy read as 50%
    m, a = ContentionMeter(cores_in_use=1, cpus=2), Reading(0.0, 0.0, busy=0.0)
    for i in range(1, 201):
        b = Reading(i * 0.005, i * 0.005, busy=0.02 * (i // 2))
        m.add(a, b)
        a = b
    assert m.record().others_share == pytest.approx(0.5, abs=0.02)
