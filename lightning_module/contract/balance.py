"""Splitting one large batch across ranks of unequal speed (a GPU and the CPU, or two CPU ranks),
so that they finish a step together: the rules, torch-free (run/hetero.py applies them).

Each rank's share is proportional to its rate (samples/s): first the rates each device measured
alone, then the rates the ranks showed together (their batch over their busy time per step: the
time from leaving one gradient exchange to entering the next). Balanced means the slowest rank's
busy time is within BALANCED of the fastest's.
"""

from __future__ import annotations

BALANCED = 0.10  # step times within 10% of each other
MAX_ROUNDS = 4  # re-balancing rounds at most: with rates that hold, one round lands within the band
# A rank whose share is under this fraction of the batch adds at most that much to a step, less
# than its fixed per-step cost (launch, the gradient exchange): on the H100 (docs/benchmarks.md) the
# CPU's shares of 5-21 samples (0.5-1% of the batch) stayed 63-112% apart from the GPU's step time
# through every round and together lost 59-79% against the GPU alone. Such a rank is dropped after
# the first round instead of re-balanced.
MIN_SHARE = 0.05


def split(total: int, rates: list[float]) -> list[int]:
    """`total` samples in shares proportional to `rates`, each rank at least one (largest
    remainders get the leftovers, so the shares always add up to `total`)."""
    if total < len(rates):
        raise ValueError(f"a batch of {total} cannot feed {len(rates)} ranks")
    if not rates or any(not (r > 0) for r in rates):
        raise ValueError(f"every rank needs a positive rate, got {rates}")
    spare = total - len(rates)  # one sample each first
    exact = [spare * r / sum(rates) for r in rates]
    shares = [1 + int(x) for x in exact]
    by_remainder = sorted(range(len(rates)), key=lambda i: exact[i] - int(exact[i]), reverse=True)
    for i in by_remainder[: total - sum(shares)]:
        shares[i] += 1
    return shares


def too_small(shares: list[int]) -> list[int]:
    """The ranks whose share is under MIN_SHARE of the batch (their fixed cost dominates)."""
    total = sum(shares)
    return [i for i, b in enumerate(shares) if b < MIN_SHARE * total]


def rates_seen(shares: list[int], busy_s: list[float]) -> list[float]:
    """Each rank's samples/s together with the others: its share over its busy time per step."""
    return [b / t for b, t in zip(shares, busy_s)]


def imbalance(busy_s: list[float]) -> float:
    """How much longer the slowest rank is busy than the fastest (0.1: 10%)."""
    return max(busy_s) / min(busy_s) - 1.0


def rebalance(shares: list[int], busy_s: list[float]) -> list[int]:
    """The next split of the same total, from the rates the ranks showed at `shares`."""
    return split(sum(shares), rates_seen(shares, busy_s))


def efficiency(together: float, alone: list[float]) -> float:
    """Samples/s together over the sum of each rank's samples/s alone (1.0: nothing lost)."""
    return together / sum(alone)
