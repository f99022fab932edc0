"""The spot model, in one place: what interruptions cost in time and money.

- Rate. The catalog's interruption bucket (AWS Spot Instance Advisor: the share of capacity
  reclaimed per month) gives an instance's interruptions per hour of runtime, r / HOURS_PER_MONTH;
  its midpoint is the expected rate, its upper end the pessimistic one. An offer whose bucket is
  unknown is taken at the worst bucket (WORST_BUCKET). k synchronous instances stop when any one
  is hit, so the job's rate is k times an instance's.
- Loss. Each interruption costs `loss_hours`: half a checkpoint interval of lost work plus the
  restart.
- Pure spot. Expected runtime T solves T = T0 + rate T loss, i.e. T = T0 / (1 - rate loss); a
  rate x loss of 1 or more never finishes. The expected value (bucket midpoint) gives time and
  cost; the deadline is checked with the bucket's upper end.
- Spot with on-demand fallback. Run on spot until the first interruption, then finish on on-demand
  (same type, region, count). With the time to the first interruption exponential at the job's
  rate, expected spot hours = (1 - e^(-rate T0)) / rate, one loss happens with probability
  1 - e^(-rate T0), and the worst case is exactly one loss, T0 + loss, which is what the deadline
  check uses. It assumes on-demand capacity is there when needed.

Cost shape (what the probe plan, advisor/recommend/probeplan/, relies on): a candidate's cost and
hours are a fixed part (billed setup) plus a part proportional to 1 / throughput. On-demand and
pure spot are exactly that (T0 scales with 1 / throughput and T = T0 / (1 - rate loss)). The
fallback's T0 + (1 - e^(-rate T0)) loss is not: the probe plan scales all of it with 1 / throughput,
which misstates the one-loss term by at most loss x max(1, 1 / f) per run, f = truth / estimate
(tests/packages/advisor/recommend/test_spot.py checks both).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from catalog.models import INTERRUPTION_BUCKETS, INTERRUPTION_LABELS

HOURS_PER_MONTH = 730.0  # AWS's billing month (8,760 h / 12)
WORST_BUCKET = len(INTERRUPTION_BUCKETS) - 1
UNKNOWN_BUCKET, ON_DEMAND_BUCKET = -1, -2  # an offer's bucket when the catalog has none / not spot
_MIDS = np.array([(lo + hi) / 2 for lo, hi in INTERRUPTION_BUCKETS])
_HIGHS = np.array([hi for _, hi in INTERRUPTION_BUCKETS])


def loss_hours(checkpoint_minutes: float, restart_minutes: float) -> float:
    """Hours one interruption costs: half a checkpoint interval of lost work plus the restart."""
    return (checkpoint_minutes / 2 + restart_minutes) / 60


def bucket_rates(bucket: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(expected, pessimistic) interruptions per instance-month of each offer's bucket; 0 for
    on-demand (ON_DEMAND_BUCKET), the worst bucket's for an unknown one (UNKNOWN_BUCKET)."""
    is_spot = bucket != ON_DEMAND_BUCKET
    b = np.where(bucket == UNKNOWN_BUCKET, WORST_BUCKET, np.maximum(bucket, 0))
    return np.where(is_spot, _MIDS[b], 0.0), np.where(is_spot, _HIGHS[b], 0.0)


def bucket_label(b: int) -> str:
    return "unknown" if b < 0 else INTERRUPTION_LABELS[b]


def job_rate(rate_per_month: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Interruptions per hour of k synchronous instances (any one hit stops them all)."""
    return rate_per_month / HOURS_PER_MONTH * k


def pure_spot(t0: np.ndarray, rate_mid: np.ndarray, rate_high: np.ndarray,
              loss: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(expected hours, pessimistic hours, expected interruptions) of runs of t0 hours at the job's
    expected and pessimistic rates; inf where the run never finishes."""
    d_mid, d_high = 1.0 - rate_mid * loss, 1.0 - rate_high * loss
    hours = np.where(d_mid > 0, t0 / d_mid, np.inf)
    hours_pess = np.where(d_high > 0, t0 / d_high, np.inf)
    return hours, hours_pess, rate_mid * hours


def with_fallback(t0: np.ndarray, rate: np.ndarray, loss: float, k: np.ndarray, spot_usd_per_hour: np.ndarray,
                  od_usd_per_hour: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(expected hours, pessimistic hours, expected interruptions, expected cost) of runs of t0
    hours on k instances that start on spot and finish on on-demand after the first interruption."""
    p_int = -np.expm1(-rate * t0)
    spot_h = np.where(rate > 0, p_int / rate, t0)
    hours = t0 + p_int * loss
    cost = k * (spot_usd_per_hour * spot_h + od_usd_per_hour * (hours - spot_h))
    return hours, t0 + loss, p_int, cost


# ---------------------------------------------------------------------------------------------
# Risk at a confidence: the hours (and the fallback's dollars) not exceeded with probability P.
#
# Two risks, independent: the throughput (the band as a distribution, advisor.estimate.band) and
# the interruptions. Their count over a run is Poisson with mean rate x runtime, the rate taken at
# the bucket's upper end (where in its bucket an offer's rate lies is unknown). The miss probability
# a = 1 - P is split between them, a share s to the interruptions (RISK_SPLITS) and the rest to the
# throughput; by the union bound the run fits the pair of figures with probability >= P, so the
# stated confidence is a lower bound. Each candidate takes the split that leaves it the most room
# under the budget and the deadline (quantiles()'s `room`).
RISK_SPLITS = (0.25, 0.5, 0.75)
_POISSON_DIRECT = 30.0  # above this mean the count's quantile uses the normal approximation


def poisson_quantile(mean: np.ndarray, q: float) -> np.ndarray:
    """Smallest n with P(N <= n) >= q for N Poisson(mean), elementwise; inf where mean is inf."""
    mean = np.asarray(mean, dtype=float)
    out = np.zeros(mean.shape)
    big = mean > _POISSON_DIRECT
    if big.any():
        from statistics import NormalDist

        z = NormalDist().inv_cdf(q)
        m = mean[big]
        out[big] = np.ceil(m + z * np.sqrt(m) + 0.5)  # continuity-corrected; inf stays inf
    # P(N = 0) = e^-mean reaches q where mean <= -log q: 0, the common case (rare interruptions).
    act = np.flatnonzero(~big & (mean > -np.log(q)))
    p = np.exp(-mean[act])
    cdf = p.copy()
    n = 0
    while len(act):
        short = cdf < q
        act, p, cdf = act[short], p[short], cdf[short]
        out[act] += 1
        n += 1
        p = p * mean[act] / n
        cdf = cdf + p
    return out


def pure_spot_quantile(t0_at: Callable[[float], np.ndarray], rate_high: np.ndarray, loss: float, miss: float) -> list[np.ndarray]:
    """Per split s of RISK_SPLITS, the hours a pure-spot run stays within with probability >= 1 - miss:
    the throughput's (1 - (1 - s) miss) quantile t0_at(level), plus `loss` per interruption at the
    count's (1 - s miss) quantile (its mean at that runtime and the pessimistic rate)."""
    out = []
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for s in RISK_SPLITS:
            t0 = t0_at(1.0 - (1.0 - s) * miss)
            d = 1.0 - rate_high * loss
            mean = np.where(d > 0, rate_high * t0 / d, np.inf)
            out.append(t0 + loss * poisson_quantile(mean, 1.0 - s * miss))
    return out


def fallback_quantile(t0_at: Callable[[float], np.ndarray], rate_high: np.ndarray, loss: float, k: np.ndarray, spot_usd_per_hour,
                      od_usd_per_hour, miss: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per split s, (hours, dollars) a spot-with-fallback run stays within together with probability
    >= 1 - miss: the throughput at its (1 - (1 - s) miss) quantile, and no interruption before tau,
    the time to the first one's (s miss) quantile (exponential at the pessimistic rate). Interrupted
    before the end, the run costs at most spot until tau and on-demand for the rest and the loss."""
    out = []
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for s in RISK_SPLITS:
            t0 = t0_at(1.0 - (1.0 - s) * miss)
            tau = np.where(rate_high > 0, -np.log1p(-s * miss) / rate_high, np.inf)
            hit = tau < t0
            hours = np.where(hit, t0 + loss, t0)
            spot_h = np.minimum(tau, t0)
            cost = k * (spot_usd_per_hour * spot_h + od_usd_per_hour * np.where(hit, t0 - spot_h + loss, 0.0))
            out.append((hours, cost))
    return out
