"""The threads rung: how many intra-op threads a CPU configuration trains with (torch.set_num_threads).

Pure logic, no torch. torch's default is one thread per physical core, and every op ends at an
OpenMP barrier that waits for its slowest thread: beside one busy process on a 2-core machine a
thread is descheduled in every op, and a tiny GAN trained at 403 samples/s with two threads and
13,486 with one (issue 33). Article C (../shared/SEEDS.md) sets one thread for small models even on
a quiet machine. So the count is a ladder decision, measured like any rung: the counts tried are
the physical cores the machine leaves free (all of them when nothing else runs; those the baseline
saw other processes leave idle when it ran contended), then halvings down to one.
"""

from __future__ import annotations

from collections.abc import Callable

from .result import Contention, ProbeConfig, RungResult

RUNG = "threads"
# A thread count must beat the best so far by this share to replace it (ladder.required_gain);
# inside it the count the best ran at, torch's default at first, is kept and the rung says so
# (margin_note). On a quiet 2-vCPU EPYC, TinyGAN's one and two threads raced within the noise:
# A-B ratios of 0.95, 1.04 and 1.10 in three quiet runs of benchmarks/busy_probe.py (derived: one
# thread's A-B leg over two threads', 12,528/13,178, 11,033/10,565 and 17,593/15,944 samples/s;
# docs/benchmarks.md, "busy probe"), and the pick flipped between runs with whichever read faster.
# Beside a busy process one thread won 1.9-2.7x in the same runs: far outside it.
THREADS_GAIN = 0.10


def busy_elsewhere(contention: Contention | None) -> float:
    """CPUs other processes kept busy while the baseline was timed: the larger of what /proc/stat
    showed (others_share of the probe's CPUs) and the 1-minute load beyond the probe's own. 0 when
    the baseline was not contended (a quiet machine leaves every core to the probe)."""
    if contention is None or not contention.contended:
        return 0.0
    seen = []
    if contention.others_share is not None and contention.cpus:
        seen.append(contention.others_share * contention.cpus)
    if contention.load_average is not None:
        seen.append(contention.load_average - (contention.own_load or 0.0))
    return max(0.0, *seen) if seen else 0.0


def free_cores(physical: int, logical: int, contention: Contention | None) -> int:
    """Physical cores left to the probe: the cores less the CPUs others kept busy (as whole cores,
    rounded; hyper-threads shared with a busy sibling are not free), at least one."""
    physical, logical = max(1, physical), max(1, logical)
    per_core = logical / physical  # 2 with hyper-threads, 1 without
    busy_cores = busy_elsewhere(contention) / per_core
    return max(1, min(physical, round(physical - busy_cores)))


def free_cpus(logical: int, contention: Contention | None) -> int:
    """Logical CPUs left to the probe (for its loader workers, one process each): the CPUs less
    those others kept busy, rounded, at least one."""
    logical = max(1, logical)
    return max(1, min(logical, round(logical - busy_elsewhere(contention))))


def thread_counts(free: int) -> tuple[int, ...]:
    """The counts the rung tries, most first: the free cores, then powers of two below them, down
    to one (8 -> 8, 4, 2, 1; 6 -> 6, 4, 2, 1)."""
    out, n = [max(1, free)], 1
    while n < free:
        out.append(n)
        n *= 2
    return tuple(sorted(set(out), reverse=True))


def climb_threads(best: Callable[[], RungResult], attempt: Callable[[str, ProbeConfig], RungResult],
                  counts: tuple[int, ...], baseline_threads: int) -> list[RungResult]:
    """Measure the counts on each side of the baseline's, nearest first, while a step keeps winning:
    the first count that does not beat the best ends that side (a step's time falls with threads
    until the cores run out or the barriers dominate, then rises). Fewer threads are tried first:
    on a busy machine that is where the gain is. More are tried only where the baseline ran at
    fewer than the free cores (OMP_NUM_THREADS set low by the user's shell). `best()` is the ladder's
    best so far; `attempt(name, config)` measures and keeps as every rung is kept (ladder.run_ladder)."""
    fewer = [n for n in counts if n < baseline_threads]  # most first
    more = sorted(n for n in counts if n > baseline_threads)  # fewest first
    done = []
    for side in (fewer, more):
        if side is more and any(r.kept for r in done):
            break  # fewer threads won: more cannot
        for n in side:
            r = attempt(f"{RUNG}={n}", best().config.model_copy(update={"threads": n}))
            done.append(r)
            if r.status == "ok" and not r.kept:
                break
    return done


def is_threads_rung(name: str) -> bool:
    return name.startswith(f"{RUNG}=")


def margin_note(best: RungResult) -> str:
    """Why a thread count inside the margin was not kept, for the rung's note in the result."""
    n = best.config.threads
    return (f"inside the {THREADS_GAIN:.0%} margin of the best so far ({n} thread{'s' if n != 1 else ''}, "
            f"{best.samples_per_sec:,.1f} samples/s): its count is kept. A thread count must train "
            f"{THREADS_GAIN:.0%} faster to replace it, so that counts racing within the noise (a small model "
            "on a quiet machine) keep torch's default rather than whichever read faster this time")


def confirm_margin(baseline: ProbeConfig, pick: ProbeConfig) -> float:
    """The gain the A-B confirmation asks of a pick over the baseline (reliability.confirm_outcome):
    THREADS_GAIN where the pick differs in its thread count alone (the ladder asked it of that
    count), else none. Without it a count the ladder saw beyond the margin in one draw was kept on
    an A-B reading inside it, and the pick still flipped between runs."""
    if baseline.threads == pick.threads:
        return 0.0
    return THREADS_GAIN if baseline.model_copy(update={"threads": pick.threads}) == pick else 0.0


def confirmed_note(ratio: float) -> str:
    """The note on a thread count the ladder kept and the A-B confirmation read inside the margin."""
    return (f"the A-B confirmation read it {ratio:.2f}x the baseline, inside the {THREADS_GAIN:.0%} margin a thread "
            "count must clear: the baseline's count is kept")


def thread_words(config: ProbeConfig) -> str | None:
    """The thread count a training run should set, in words (None: not a CPU pick, or not known)."""
    if config.accelerator != "cpu" or config.threads is None:
        return None
    return f"{config.threads} thread{'s' if config.threads != 1 else ''} (torch.set_num_threads({config.threads}))"
