"""The spot model (advisor/recommend/spot.py), and the cost shape it states for the probe plan."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.recommend import spot
from catalog.models import INTERRUPTION_BUCKETS


def test_one_interruption_costs_half_a_checkpoint_interval_and_the_restart():
    assert spot.loss_hours(30, 5) == pytest.approx(20 / 60)
    assert spot.loss_hours(60, 0) == pytest.approx(0.5)


def test_bucket_rates_unknown_is_the_worst_bucket_and_on_demand_is_never_interrupted():
    b = np.array([0, 2, spot.UNKNOWN_BUCKET, spot.ON_DEMAND_BUCKET])
    mid, high = spot.bucket_rates(b)
    lo0, hi0 = INTERRUPTION_BUCKETS[0]
    lo2, hi2 = INTERRUPTION_BUCKETS[2]
    worst_lo, worst_hi = INTERRUPTION_BUCKETS[-1]
    assert mid.tolist() == pytest.approx([(lo0 + hi0) / 2, (lo2 + hi2) / 2, (worst_lo + worst_hi) / 2, 0.0])
    assert high.tolist() == pytest.approx([hi0, hi2, worst_hi, 0.0])
    assert spot.bucket_label(spot.UNKNOWN_BUCKET) == "unknown"


def test_k_instances_are_interrupted_k_times_as_often():
    r = spot.job_rate(np.array([0.1, 0.1]), np.array([1.0, 4.0]))
    assert r[1] == pytest.approx(4 * r[0]) and r[0] == pytest.approx(0.1 / spot.HOURS_PER_MONTH)


def test_pure_spot_solves_t_equals_t0_plus_rate_t_loss_and_never_finishes_past_one():
    t0 = np.array([10.0, 10.0])
    rate = np.array([0.01, 2.0])  # per hour; 2/h x 1 h loss >= 1: never finishes
    hours, pess, n = spot.pure_spot(t0, rate, rate * 2, 1.0)
    assert hours[0] == pytest.approx(t0[0] + rate[0] * hours[0] * 1.0)
    assert n[0] == pytest.approx(rate[0] * hours[0])
    assert pess[0] > hours[0]
    assert np.isinf(hours[1]) and np.isinf(pess[1])


def test_the_fallback_pays_spot_until_the_first_interruption_then_on_demand():
    t0, rate, loss = np.array([5.0]), np.array([0.05]), 0.5
    hours, pess, p_int, cost = spot.with_fallback(t0, rate, loss, np.array([2.0]), np.array([1.0]), np.array([3.0]))
    p = 1 - np.exp(-0.05 * 5)
    assert p_int[0] == pytest.approx(p)
    assert hours[0] == pytest.approx(5 + p * loss) and pess[0] == pytest.approx(5 + loss)
    spot_h = p / 0.05
    assert cost[0] == pytest.approx(2 * (1.0 * spot_h + 3.0 * (hours[0] - spot_h)))
    # No interruption risk: all spot, no loss (rank.evaluate divides under np.errstate too).
    with np.errstate(invalid="ignore", divide="ignore"):
        h0, _, _, c0 = spot.with_fallback(t0, np.zeros(1), loss, np.ones(1), np.ones(1), np.full(1, 3.0))
    assert h0[0] == 5.0 and c0[0] == pytest.approx(5.0)


@pytest.mark.parametrize("f", [0.5, 0.8, 1.25, 2.0])
def test_the_stated_cost_shape_pure_spot_scales_with_one_over_throughput(f):
    """The probe plan takes hours = fix + var / f (f = truth / estimate): exact for pure spot."""
    rng = np.random.default_rng(0)
    t0 = rng.uniform(0.5, 200, 50)
    rate = rng.uniform(0, 0.002, 50)
    hours, pess, _ = spot.pure_spot(t0, rate, 2 * rate, 0.4)
    hours_f, pess_f, _ = spot.pure_spot(t0 / f, rate, 2 * rate, 0.4)
    np.testing.assert_allclose(hours_f, hours / f, rtol=1e-12)
    np.testing.assert_allclose(pess_f, pess / f, rtol=1e-12)


@pytest.mark.parametrize("f", [0.5, 0.8, 1.25, 2.0])
def test_the_stated_cost_shape_the_fallback_strays_by_at_most_one_loss(f):
    rng = np.random.default_rng(1)
    t0 = rng.uniform(0.5, 500, 50)
    rate = rng.uniform(0, 0.01, 50)
    loss = 0.4
    hours, _, _, _ = spot.with_fallback(t0, rate, loss, np.ones(50), np.ones(50), np.full(50, 3.0))
    hours_f, _, _, _ = spot.with_fallback(t0 / f, rate, loss, np.ones(50), np.ones(50), np.full(50, 3.0))
    assert np.all(np.abs(hours_f - hours / f) <= loss * max(1.0, 1 / f) + 1e-9)
