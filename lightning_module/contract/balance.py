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


def imbalance(busy_s: list[float]) -> float:
    """How much longer the slowest rank is busy than the fastest (0.1: 10%)."""
    return max(busy_s) / min(busy_s) - 1.0


FIT_ROUNDS = 3  # the rounds a rank's step-time line is fitted to (the latest: rates drift)
# A line through shares closer than this (relative) would fit the step times' noise (a few % per
# round's median): such a rank's rate is its latest round's instead (fixed cost taken as 0).
LINE_SPREAD = 0.15


def _line(points: list[tuple[int, float]]) -> tuple[float, float]:
    """A rank's busy time as fixed + per_sample x share, least squares over its rounds; through
    the origin (fixed 0, the latest round) where its shares were too close for a slope, or where
    noise makes a line that is not physical."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if max(xs) - min(xs) >= LINE_SPREAD * mx:  # closer shares: noise, not a slope
        per = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
        fixed = my - per * mx
        if per > 0 and fixed >= 0:
            return fixed, per
    return 0.0, ys[-1] / xs[-1]


def rebalance(history: list[tuple[list[int], list[float]]]) -> list[int]:
    """The next split of the same total from the rounds so far, each (shares, busy seconds per step).

    Each rank's busy time is fitted as a line in its share (a fixed per-step cost plus a cost per
    sample: the fixed part is why shares in proportion to the rates alone, the rule of one round,
    keep missing), and the split solves for equal times on those lines. Where the slowest rank
    swapped between the last two rounds, the balance lies between them, and each share is held
    between its two values (false position): a noisy line, or ranks that slow each other down
    (shared memory bandwidth), cannot make the split swing back and forth."""
    total = sum(history[-1][0])
    n = len(history[-1][0])
    lines = [_line([(sh[i], b[i]) for sh, b in history[-FIT_ROUNDS:]]) for i in range(n)]
    # Equal busy time T on every line: sum((T - fixed) / per) = total.
    t = (total + sum(f / p for f, p in lines)) / sum(1 / p for _, p in lines)
    want = [max(1.0, (t - f) / p) for f, p in lines]
    if len(history) >= 2:
        (a, busy_a), (b, busy_b) = history[-2], history[-1]
        slow_a, slow_b = max(range(n), key=busy_a.__getitem__), max(range(n), key=busy_b.__getitem__)
        if slow_a != slow_b:
            want = [min(max(w, min(a[i], b[i])), max(a[i], b[i])) for i, w in enumerate(want)]
    return split(total, want) if total >= n else list(history[-1][0])


def efficiency(together: float, alone: list[float]) -> float:
    """Samples/s together over the sum of each rank's samples/s alone (1.0: nothing lost)."""
    return together / sum(alone)
