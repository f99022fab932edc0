"""Which CPUs each rank of a heterogeneous run gets (run/hetero.py), torch-free.

Ranks are given whole physical cores, never one hyper-thread of a core whose sibling belongs to
another rank: two ranks' compute threads on one core's two hyper-threads slow each other in a way
neither showed alone. A rank trains with one compute thread per physical core (torch's own default),
and keeps the cores' sibling hyper-threads for the threads that are not compute: the gradient
exchange's (gloo) and the main thread's. A compute thread per logical CPU leaves the exchange
nowhere to run but between compute threads, and an OpenMP region waits for its slowest thread.
Where a core has no sibling (one thread per core), the same rule gives every CPU a compute thread.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class RankCores:
    cpus: list[int]  # the rank's affinity (os.sched_setaffinity), every hyper-thread of its cores
    threads: int  # compute threads (torch.set_num_threads): one per physical core


def by_core(cpus: list[int], core_of: dict[int, tuple[int, int]]) -> list[list[int]]:
    """Logical CPUs grouped into physical cores ((package, core) from /sys topology), in order; a
    CPU whose topology is unknown is its own core."""
    groups: dict[tuple, list[int]] = {}
    for c in sorted(cpus):
        groups.setdefault(core_of.get(c, (None, c)), []).append(c)
    return sorted(groups.values(), key=lambda g: g[0])


def cores_holding(cores: list[list[int]], n_cpus: int) -> int:
    """The fewest whole cores (from the front) that hold `n_cpus` logical CPUs."""
    held = 0
    for i, core in enumerate(cores):
        held += len(core)
        if held >= n_cpus:
            return i + 1
    return len(cores)


def assign(cores: list[list[int]], wants: list[int]) -> list[RankCores]:
    """Each rank its `wants[r]` whole cores, in order; the last rank takes every core left. A rank
    left with none shares the last core (the machine is too small to give each rank its own)."""
    if not cores:
        raise ValueError("no CPUs to assign")
    out, at = [], 0
    for r, want in enumerate(wants):
        take = cores[at:] if r == len(wants) - 1 else cores[at:at + max(1, want)]
        at += len(take)
        take = take or cores[-1:]
        out.append(RankCores(cpus=sorted(c for core in take for c in core), threads=len(take)))
    return out


def split_by_speed(cores: list[list[int]], fractions: list[float]) -> list[RankCores]:
    """Two or more CPU ranks of unequal speed: the cores in proportion to `fractions` (each rank at
    least one core), whole cores only."""
    n = len(cores)
    wants = [max(1, round(f * n / sum(fractions))) for f in fractions]
    return assign(cores, wants)


def gpu_and_cpu(cores: list[list[int]], host_cpus: int) -> list[RankCores]:
    """A GPU rank and the CPU rank: the GPU rank keeps whole cores for its `host_cpus` (its main
    thread and data-loader workers, one CPU each), the CPU rank trains on every core left."""
    gpu, cpu = assign(cores, [cores_holding(cores, host_cpus), 0])
    return [replace(gpu, threads=1), cpu]  # the GPU rank computes on its device: one host thread
