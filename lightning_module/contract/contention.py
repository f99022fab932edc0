"""Is something else using the machine while a rung is timed?

Pure maths on readings, the way timing.py does the stopping rule: `step_load` judges one step from
two readings, `ContentionMeter` turns a rung's steps into a `Contention` record. run/readers.py takes
the readings from Linux's /proc and, on a GPU, from NVML; tests feed synthetic ones.

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

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from .result import Contention

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
    # The readings come from clocks of different grain (/proc/stat's 10 ms ticks, schedstat's ns,
    # the wall clock), read a moment apart: over a short step a share can come out above what is
    # physically possible. It is held at its bound here, where it is measured, so the record's
    # strict bounds (result.Contention) hold for every real reading.
    others, wait_share, steal_share = (None if v is None else min(max(v, 0.0), 1.0)
                                       for v in (others, wait_share, steal_share))
    if cpu_share is not None:
        cpu_share = min(max(cpu_share, 0.0), (cpus or os.cpu_count() or 1) / max(cores_in_use, 1))
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
    # (others' busy CPU seconds, wall seconds) summed over the intervals that read both: the rung's
    # share is their ratio, not a mean of each step's share. /proc/stat counts in 10 ms ticks, so a
    # 5 ms step reads 0 or 10 ms busy; each step's share is clamped at 0, and the mean of clamped
    # noise read a quiet machine as 24-28% busy with others (benchmarks/busy_probe.py, TinyGAN).
    _others: list[float] = field(default_factory=lambda: [0.0, 0.0])

    def add(self, a: Reading, b: Reading, steps: int = 1) -> StepLoad:
        """The interval between two readings, holding `steps` steps (each judged as the interval)."""
        s = step_load(a, b, self.cores_in_use, self.cpu_bound, self.cpus)
        self.steps.extend([s] * steps)
        if a.busy is not None and b.busy is not None and self.cpus and b.wall > a.wall:
            self._others[0] += (b.busy - a.busy) - (b.cpu - a.cpu)
            self._others[1] += b.wall - a.wall
        return s

    def others_share(self) -> float | None:
        """The share of this process's CPUs other processes kept busy over every interval read."""
        busy, wall = self._others
        return min(max(busy / (wall * self.cpus), 0.0), 1.0) if wall > 0 else None

    def record(self, load_average: float | None = None, own_load: float | None = None,
               gpu: Iterable[GpuState] = ()) -> Contention:
        states = list(gpu)
        c = Contention(
            steps=len(self.steps), contended_steps=sum(s.contended for s in self.steps),
            cpu_share=_mean(s.cpu_share for s in self.steps), wait_share=_mean(s.wait_share for s in self.steps),
            steal_share=_mean(s.steal_share for s in self.steps), others_share=self.others_share(),
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
    elif c.others_share is not None and c.others_share > OTHERS_LIMIT:
        # Steps that never waited for a CPU still ran beside the others' work: on the CPUs the
        # probe leaves idle, a busy neighbour takes shared caches, memory bandwidth and, where two
        # CPUs are one core's hyper-threads (which a VM need not show), half the core. No reading
        # here measures that share (issue 33: one thread beside a busy process on a 2-vCPU VM stored
        # 27-31% below the same thread on the machine alone), so such a figure is not a quiet one.
        reasons.append(f"other processes kept {c.others_share:.0%} of its CPUs busy while it ran (their effect through "
                       "shared caches, memory bandwidth or a shared core is not measured)")
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


# A share of time lost this close to all of it is not a figure to scale by: the slowdown is held here.
MAX_LOST_SHARE = 0.95


def slowdown(c: Contention | None) -> float:
    """How much faster the measured configuration would have run alone, as the record measured it:
    1 / (1 - the share of its time lost), that share being the training thread's run-queue wait or
    the hypervisor's steal, whichever is larger (without either, the share of its CPUs others kept
    busy). 1 for a record that is not contended. A lower bound where several threads meet at
    barriers (each op waits for its slowest thread: issue 33's GAN ran 33x slower at two threads
    beside one busy process), which is why the threads rung trains on the free cores only."""
    if c is None or not c.contended:
        return 1.0
    lost = [s for s in (c.wait_share, c.steal_share) if s is not None]
    if not lost and c.others_share is not None:
        lost = [c.others_share]
    share = min(max(lost, default=0.0), MAX_LOST_SHARE)
    return 1.0 / (1.0 - share)
