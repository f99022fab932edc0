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
(tests/advisor/recommend/test_spot.py checks both).
"""

from __future__ import annotations

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
