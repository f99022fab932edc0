"""Is something else using the machine while a rung is timed?

Pure maths on readings, the way timing.py does the stopping rule: `step_load` judges one step from
two readings, `ContentionMeter` turns a rung's steps into a `Contention` record. The readers at the
bottom take the readings from Linux's /proc and, on a GPU, from NVML; tests feed synthetic ones.

The signals, strongest first:
- run-queue wait (/proc/thread-self/schedstat): the share of a step's wall time the training
  thread was ready to run but waited for a CPU. Alone on its cores it is ~0; beside a CPU-bound
  neighbour on the same core it is about half.
- steal (/proc/stat): time the hypervisor gave this VM's CPUs to someone else.
- the process's CPU share of wall time per step, against the cores it trains on: a fallback where
  schedstat is missing (it is also low for honest serial work, so it is read loosely).
- what other processes kept the probe's CPUs busy with (their busy time in /proc/stat less this
  process tree's CPU time): waiting behind the probe's own loader workers is not contention.
- the 1-minute load average against the CPUs the probe leaves idle (it lags: corroboration).
- on a GPU: other compute processes on it, and SM clocks held below their maximum.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from .result import Contention

log = logging.getLogger(__name__)

WAIT_LIMIT = 0.10  # a step whose training thread spent more of its wall time queued for a CPU was contended
STEAL_LIMIT = 0.05  # ... or that lost this share of all CPU time to the hypervisor
CPU_SHARE_LIMIT = 0.5  # fallback without schedstat: CPU time below half the wall time x cores in use
# ... and only while other processes kept this share of our CPUs busy: a thread that waits behind
# this probe's own loader workers is not contended by anyone else.
OTHERS_LIMIT = 0.10
CONTENDED_STEP_SHARE = 0.2  # a rung with this share of contended steps ran contended
LOAD_MARGIN = 1.0  # load beyond the CPUs the probe leaves idle, in whole CPUs
GPU_CLOCK_LIMIT = 0.85  # SM clock below this share of its maximum while training: throttled


@dataclass(frozen=True)
class Reading:
    """One look at the clocks, taken at a step boundary."""

    wall: float  # seconds, monotonic
    cpu: float  # CPU seconds of this process (all threads) and its children (loader workers)
    run: float | None = None  # the training thread's on-CPU seconds (schedstat)
    wait: float | None = None  # the training thread's run-queue seconds (schedstat)
    steal: int | None = None  # steal ticks of the CPUs this process may use (/proc/stat)
    total: int | None = None  # ticks of every kind on those CPUs
    busy: float | None = None  # seconds those CPUs were busy, whoever with (/proc/stat)


@dataclass(frozen=True)
class StepLoad:
    cpu_share: float | None
    wait_share: float | None
    steal_share: float | None
    contended: bool
    others_share: float | None = None


def step_load(a: Reading, b: Reading, cores_in_use: int, cpu_bound: bool = True, cpus: int | None = None) -> StepLoad:
    """How contended the interval between two readings was (`cpus`: those this process may use)."""
    wall = b.wall - a.wall
    cpu_share = (b.cpu - a.cpu) / (wall * max(cores_in_use, 1)) if wall > 0 else None
    others = None
    if a.busy is not None and b.busy is not None and cpus and wall > 0:
        others = max(0.0, (b.busy - a.busy) - (b.cpu - a.cpu)) / (wall * cpus)
    # Against wall time, not against the thread's own runnable time: a step that mostly sleeps
    # (a GPU kernel, I/O) waits little in absolute terms however busy the machine is.
    wait_share = None
    if a.wait is not None and b.wait is not None and wall > 0:
        wait_share = (b.wait - a.wait) / wall
    steal_share = None
    if a.steal is not None and b.steal is not None and a.total is not None and b.total is not None:
        ticks = b.total - a.total
        if ticks > 0:
            steal_share = (b.steal - a.steal) / ticks
    someone_else = others is None or others > OTHERS_LIMIT
    contended = (steal_share is not None and steal_share > STEAL_LIMIT) or (
        someone_else and wait_share is not None and wait_share > WAIT_LIMIT)
    if wait_share is None and cpu_bound and cpu_share is not None:
        contended = contended or (someone_else and cpu_share < CPU_SHARE_LIMIT)
    return StepLoad(cpu_share, wait_share, steal_share, contended, others)


@dataclass(frozen=True)
class GpuState:
    other_processes: int  # compute processes on the device that are not this probe's
    clock_ratio: float | None  # SM clock / max SM clock


def _mean(values: Iterable[float | None]) -> float | None:
    vs = [v for v in values if v is not None and math.isfinite(v)]
    return sum(vs) / len(vs) if vs else None


@dataclass
class ContentionMeter:
    """The steps of one rung, judged one by one, and the record they add up to."""

    cores_in_use: int
    cpus: int
    cpu_bound: bool = True  # a CPU rung: the CPU share fallback applies
    steps: list[StepLoad] = field(default_factory=list)

    def add(self, a: Reading, b: Reading) -> StepLoad:
        s = step_load(a, b, self.cores_in_use, self.cpu_bound, self.cpus)
        self.steps.append(s)
        return s

    def record(self, load_average: float | None = None, own_load: float | None = None,
               gpu: Iterable[GpuState] = ()) -> Contention:
        states = list(gpu)
        c = Contention(
            steps=len(self.steps), contended_steps=sum(s.contended for s in self.steps),
            cpu_share=_mean(s.cpu_share for s in self.steps), wait_share=_mean(s.wait_share for s in self.steps),
            steal_share=_mean(s.steal_share for s in self.steps), others_share=_mean(s.others_share for s in self.steps),
            load_average=load_average, cpus=self.cpus,
            cores_in_use=self.cores_in_use, own_load=own_load if own_load is not None else self.cores_in_use,
            gpu_other_processes=max((g.other_processes for g in states), default=None),
            gpu_clock_ratio=min((g.clock_ratio for g in states if g.clock_ratio is not None), default=None),
        )
        return judged(c)


def judged(c: Contention) -> Contention:
    """The record with its verdict and reasons, from its figures."""
    reasons = []
    if c.steps and c.contended_steps / c.steps >= CONTENDED_STEP_SHARE:
        why = []
        if c.wait_share is not None:
            why.append(f"the training thread waited for a CPU {c.wait_share:.0%} of the time")
        if c.steal_share is not None and c.steal_share > STEAL_LIMIT / 2:
            why.append(f"{c.steal_share:.0%} steal time")
        if c.wait_share is None and c.cpu_share is not None:
            why.append(f"CPU share {c.cpu_share:.0%} of {c.cores_in_use} core(s)")
        if c.others_share is not None:
            why.append(f"other processes kept {c.others_share:.0%} of its CPUs busy")
        reasons.append(f"{c.contended_steps} of {c.steps} timed steps contended" + (f" ({', '.join(why)})" if why else ""))
    own = c.own_load or 0.0
    if c.load_average is not None and c.cpus and c.load_average - own > max(c.cpus - own, 0) + LOAD_MARGIN:
        reasons.append(f"load average {c.load_average:.1f} on {c.cpus} CPU(s), {own:g} of it this probe's")
    if c.gpu_other_processes:
        reasons.append(f"{c.gpu_other_processes} other process(es) computing on the GPU")
    if c.gpu_clock_ratio is not None and c.gpu_clock_ratio < GPU_CLOCK_LIMIT:
        reasons.append(f"GPU clock at {c.gpu_clock_ratio:.0%} of its maximum")
    return c.model_copy(update={"contended": bool(reasons), "reasons": reasons})


def brief(c: Contention) -> str:
    """One short phrase for a table cell: what the contention looked like."""
    parts = []
    if c.wait_share is not None:
        parts.append(f"run-queue wait {c.wait_share:.0%}")
    if c.steal_share is not None and c.steal_share > STEAL_LIMIT / 2:
        parts.append(f"steal {c.steal_share:.0%}")
    if c.others_share is not None:
        parts.append(f"others {c.others_share:.0%} of CPUs")
    if c.load_average is not None and c.cpus:
        parts.append(f"load {c.load_average:.1f}/{c.cpus} CPUs")
    if c.gpu_other_processes:
        parts.append(f"{c.gpu_other_processes} other GPU process(es)")
    if c.gpu_clock_ratio is not None and c.gpu_clock_ratio < GPU_CLOCK_LIMIT:
        parts.append(f"GPU clock {c.gpu_clock_ratio:.0%}")
    return "contended (" + ", ".join(parts) + ")" if parts else "contended"


def merge(records: Iterable[Contention | None]) -> Contention | None:
    """Several measurements of one configuration (a re-measured rung) as one record."""
    rs = [r for r in records if r is not None]
    if not rs:
        return None
    if len(rs) == 1:
        return rs[0]

    def weighted(name: str) -> float | None:
        pairs = [(getattr(r, name), r.steps) for r in rs if getattr(r, name) is not None and r.steps]
        w = sum(k for _, k in pairs)
        return sum(v * k for v, k in pairs) / w if w else None

    loads = [r for r in rs if r.load_average is not None]
    busiest = max(loads, key=lambda r: r.load_average) if loads else rs[-1]
    return judged(Contention(
        steps=sum(r.steps for r in rs), contended_steps=sum(r.contended_steps for r in rs),
        cpu_share=weighted("cpu_share"), wait_share=weighted("wait_share"), steal_share=weighted("steal_share"),
        others_share=weighted("others_share"), load_average=busiest.load_average, own_load=busiest.own_load, cpus=rs[-1].cpus,
        cores_in_use=rs[-1].cores_in_use,
        gpu_other_processes=max((r.gpu_other_processes for r in rs if r.gpu_other_processes is not None), default=None),
        gpu_clock_ratio=min((r.gpu_clock_ratio for r in rs if r.gpu_clock_ratio is not None), default=None),
    ))


# ---------------------------------------------------------------------------------------------
# Readers (Linux /proc; elsewhere the fields they cannot fill stay None)


def _schedstat(path: str = "/proc/thread-self/schedstat") -> tuple[float, float] | None:
    try:
        with open(path) as f:
            run_ns, wait_ns, *_ = f.read().split()
        return int(run_ns) / 1e9, int(wait_ns) / 1e9
    except (OSError, ValueError):
        return None


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def parse_stat(text: str, cpus: set[int] | None) -> tuple[int, int, int] | None:
    """(steal, total, busy) ticks over the given CPUs' lines of /proc/stat (all CPUs: None)."""
    steal = total = busy = 0
    seen = False
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        name, *vals = line.split()
        if cpus is None and name != "cpu":
            continue
        if cpus is not None and (name == "cpu" or int(name[3:]) not in cpus):
            continue
        # user nice system idle iowait irq softirq steal (guest is inside user)
        t = [int(x) for x in vals[:8]]
        steal, total, busy = steal + t[7], total + sum(t), busy + t[0] + t[1] + t[2] + t[5] + t[6]
        seen = True
    return (steal, total, busy) if seen else None


def _stat(cpus: set[int] | None) -> tuple[int, int, int] | None:
    try:
        with open("/proc/stat") as f:
            return parse_stat(f.read(), cpus)
    except (OSError, ValueError, IndexError):
        return None


def _children_cpu() -> float:
    """CPU seconds of this process's live children (loader workers), from /proc."""
    pid, total = os.getpid(), 0.0
    try:
        with open(f"/proc/self/task/{pid}/children") as f:
            kids = f.read().split()
    except OSError:
        return 0.0
    for k in kids:
        try:
            with open(f"/proc/{k}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
        except (OSError, ValueError, IndexError):
            continue
    return total


def _allowed() -> set[int] | None:
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:
        return None


def read_now() -> Reading:
    """The clocks now, from the calling thread (the one that trains)."""
    sched = _schedstat()
    stat = _stat(_allowed())
    return Reading(
        wall=time.perf_counter(), cpu=time.process_time() + _children_cpu(),
        run=sched[0] if sched else None, wait=sched[1] if sched else None,
        steal=stat[0] if stat else None, total=stat[1] if stat else None,
        busy=stat[2] / _TICK if stat else None,
    )


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def gpu_state(device_index: int = 0, own_pids: set[int] | None = None, nvml=None) -> GpuState | None:
    """Other compute processes on the GPU and its SM clock against the maximum, where NVML answers.

    `nvml` is the pynvml module (nvidia-ml-py) or a stand-in; None imports it, and a machine
    without it (or without a GPU) gives None. NVML numbers devices by PCI order, CUDA by
    CUDA_VISIBLE_DEVICES: the PCI bus id of torch's device picks the NVML handle.
    """
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML here: nothing to say
        return None
    own = own_pids if own_pids is not None else {os.getpid()}
    try:
        handle = None
        bus_id = _pci_bus_id(device_index)
        if bus_id:
            try:
                handle = nvml.nvmlDeviceGetHandleByPciBusId(bus_id)
            except Exception:  # noqa: BLE001
                handle = None
        if handle is None:
            handle = nvml.nvmlDeviceGetHandleByIndex(device_index)
        procs = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        others = sum(1 for p in procs if p.pid not in own)
        ratio = None
        try:
            now = nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)
            top = nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)
            ratio = now / top if top else None
        except Exception as e:  # noqa: BLE001 - clocks are not reported on every board
            log.debug("no GPU clocks: %s", e)
        return GpuState(others, ratio)
    except Exception:  # noqa: BLE001 - a driver that answers oddly must not stop a probe
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception as e:  # noqa: BLE001
            log.debug("nvmlShutdown: %s", e)


def _pci_bus_id(device_index: int) -> str | None:
    try:
        import torch

        p = torch.cuda.get_device_properties(device_index)
        return f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
    except Exception:  # noqa: BLE001
        return None


def own_process_tree() -> set[int]:
    """This process and its children (DDP ranks, loader workers), from /proc."""
    pids = {os.getpid()}
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                pids.update(int(p) for p in f.read().split())
    except OSError:
        pass
    return pids

