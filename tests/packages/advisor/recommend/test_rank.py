"""The ranking core on hand-made arrays where the right answer is known by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from advisor.estimate import scaling as sc
from advisor.recommend import rank as rk

NAN = math.nan


def types(samples_per_sec, spread=None, inter=None, step=None, names=None) -> rk.TypeTable:
    samples_per_sec = np.array(samples_per_sec, dtype=float)
    spread = np.array(spread if spread is not None else [1.1] * len(samples_per_sec), dtype=float)
    return rk.TypeTable(
        names=names or [f"t{i}" for i in range(len(samples_per_sec))], samples_per_sec=samples_per_sec,
        low=samples_per_sec / spread, high=samples_per_sec * spread,
        source=np.full(len(samples_per_sec), 2),
        step_s=np.array(step if step is not None else 128 / samples_per_sec, dtype=float),
        intra_s=np.zeros(len(samples_per_sec)),
        inter_unit_s=np.array(inter if inter is not None else [NAN] * len(samples_per_sec), dtype=float),
    )


def offers(type_idx, price, market=None, od=None, mid=None, high=None) -> rk.OfferTable:
    n = len(type_idx)
    return rk.OfferTable(
        type_idx=np.array(type_idx), region_idx=np.zeros(n, dtype=int),
        market=np.array(market or [rk.ON_DEMAND] * n), price=np.array(price, dtype=float),
        od_price=np.array(od or [NAN] * n, dtype=float), rate_mid=np.array(mid or [0.0] * n, dtype=float),
        rate_high=np.array(high or [0.0] * n, dtype=float),
    )


def job(samples=3.6e6, budget=100.0, deadline=24.0, loss=0.0, k=1) -> rk.Job:
    return rk.Job(samples=samples, budget_usd=budget, deadline_hours=deadline, loss_hours=loss, max_instances=k)


# A: 100/s at $1/h -> 10 h, $10.  B: 1000/s at $20/h -> 1 h, $20.
# C: 400/s at $3/h -> 2.5 h, $7.50.  D: 50/s at $0.40/h -> 20 h, $8 (C beats it on both).
T4 = types([100, 1000, 400, 50])
O4 = offers([0, 1, 2, 3], [1.0, 20.0, 3.0, 0.4])


def names(c, idx, t=T4):
    return [t.names[int(c.type_idx[i])] for i in idx]


def test_articles_samples_per_dollar():
    assert abs(float(rk.samples_per_dollar(40.73, 0.357)) - 410_723) <= 1
    assert abs(float(rk.samples_per_dollar(40.73, 0.1291)) - 1_135_771) <= 1


def test_time_and_cost_arithmetic():
    c = rk.evaluate(T4, O4, job())
    assert c.hours.tolist() == pytest.approx([10, 1, 2.5, 20])
    assert c.cost.tolist() == pytest.approx([10, 20, 7.5, 8])
    # samples per dollar is the articles' formula when nothing is lost to interruptions
    assert c.samples_per_dollar.tolist() == pytest.approx(rk.samples_per_dollar(T4.samples_per_sec, O4.price).tolist())


def test_cheapest():
    c = rk.evaluate(T4, O4, job())
    assert names(c, rk.rank(c, "cheapest", 10)) == ["t2", "t3", "t0", "t1"]


def test_fastest():
    c = rk.evaluate(T4, O4, job())
    assert names(c, rk.rank(c, "fastest", 10)) == ["t1", "t2", "t0", "t3"]


def test_pareto():
    c = rk.evaluate(T4, O4, job())
    assert names(c, rk.rank(c, "pareto", 10)) == ["t2", "t1"]


def test_constraints_filter():
    c = rk.evaluate(T4, O4, job(deadline=2.0))
    assert names(c, rk.rank(c, "cheapest", 10)) == ["t1"]  # only B finishes in 2 h
    c = rk.evaluate(T4, O4, job(budget=9.0))
    assert names(c, rk.rank(c, "fastest", 10)) == ["t2", "t3"]  # within $9: C, then D
    c = rk.evaluate(T4, O4, job(budget=7.5, deadline=2.5))  # the boundary is inclusive
    assert names(c, rk.rank(c, "cheapest", 10)) == ["t2"]


def test_top_limits_rows():
    c = rk.evaluate(T4, O4, job())
    assert len(rk.rank(c, "cheapest", 2)) == 2


def test_closest_when_nothing_fits():
    j = job(budget=15.0, deadline=2.0)
    c = rk.evaluate(T4, O4, j)
    assert len(rk.rank(c, "cheapest", 10)) == 0
    close = rk.closest(c, j, 2)
    # C needs the deadline stretched 2.5/2 = 1.25x; B needs the budget 20/15 = 1.33x.
    assert names(c, close) == ["t2", "t1"]


def test_ties_prefer_lower_uncertainty_then_fewer_instances():
    t = types([100, 100], spread=[2.0, 1.2], inter=[0.0, 0.0])
    o = offers([0, 1], [1.0, 1.0])
    c = rk.evaluate(t, o, job(k=3))
    order = rk.rank(c, "cheapest", 10)
    # Every candidate costs $10 (perfect scaling): the narrow band first, and 1 < 2 < 3 instances.
    assert [(names(c, [i], t)[0], int(c.k[i])) for i in order] == [
        ("t1", 1), ("t1", 2), ("t1", 3), ("t0", 1), ("t0", 2), ("t0", 3)]


def test_scale_out_improves_time_not_cost():
    # step 1.28 s; the network all-reduce at k=2 takes 2 s x 1/2 = 1 s (the unit is for 2x the
    # gradient bytes, times (k-1)/k); backward hides 2/3 x 1.28 = 0.853 s of it.
    t = types([100], inter=[2.0])
    o = offers([0], [1.0])
    c = rk.evaluate(t, o, job(k=4))
    step = 1.28
    for k in (2, 3, 4):
        comm = 2.0 * (k - 1) / k
        eff = step / (step + max(0.0, comm - 2 / 3 * step))
        assert c.efficiency[k - 1] == pytest.approx(eff)
        assert c.samples_per_sec[k - 1] == pytest.approx(100 * k * eff)
    assert np.all(np.diff(c.hours) < 0)  # more instances: faster
    assert np.all(np.diff(c.cost) > 0)  # and dearer, never cheaper
    assert rk.rank(c, "cheapest", 1)[0] == 0 and rk.rank(c, "fastest", 1)[0] == 3


def test_perfect_overlap_keeps_cost_flat():
    t = types([100], inter=[0.5])  # 0.25-0.375 s per step: hidden behind backward
    c = rk.evaluate(t, offers([0], [1.0]), job(k=4))
    assert c.efficiency.tolist() == pytest.approx([1, 1, 1, 1])
    assert c.cost.tolist() == pytest.approx([10, 10, 10, 10])
    assert c.hours.tolist() == pytest.approx([10, 5, 10 / 3, 2.5])


def test_unknown_network_never_scales_out():
    c = rk.evaluate(types([100]), offers([0], [1.0]), job(k=3))
    assert c.feasible.tolist() == [True, False, False]
    assert rk.rank(c, "fastest", 5).tolist() == [0]


def test_measured_multi_node_overrides_the_model():
    t = types([100], inter=[100.0])  # the model would say: hopeless
    t.multi_node = np.array([[np.nan, 190.0]])
    c = rk.evaluate(t, offers([0], [1.0]), job(k=2))
    assert c.samples_per_sec[1] == pytest.approx(190.0)
    assert c.efficiency[1] == pytest.approx(0.95)


def test_spot_loss_arithmetic():
    # 100 h of work, bucket 10-15% (midpoint 12.5%, upper end 15%), checkpoint 30 min, restart 5.
    loss = (30 / 2 + 5) / 60
    t = types([10.0])
    o = offers([0], [0.5], market=[rk.SPOT], mid=[0.125], high=[0.15])
    c = rk.evaluate(t, o, job(samples=3.6e6, budget=1e6, deadline=1e6, loss=loss))
    lam = 0.125 / 730
    expected = 100 / (1 - lam * loss)
    assert c.hours[0] == pytest.approx(expected)
    assert c.interruptions[0] == pytest.approx(lam * expected)
    assert c.hours[0] - 100 == pytest.approx(c.interruptions[0] * loss)  # each costs `loss` hours
    assert c.cost[0] == pytest.approx(expected * 0.5)
    assert c.hours_pess[0] == pytest.approx(100 / (1 - 0.15 / 730 * loss))
    assert c.hours_pess[0] > c.hours[0]


def test_spot_interruptions_scale_with_instances():
    loss = 1.0
    t = types([10.0], inter=[0.0])
    o = offers([0], [0.5], market=[rk.SPOT], mid=[0.25], high=[0.30])
    c = rk.evaluate(t, o, job(samples=3.6e6 * 2, budget=1e6, deadline=1e6, loss=loss, k=2))
    # 2 instances: 100 h each; either one's interruption stops both.
    lam = 2 * 0.25 / 730
    assert c.hours[1] == pytest.approx(100 / (1 - lam * loss))


def test_deadline_uses_pessimistic_spot_bound():
    loss = 10.0  # a huge loss makes the gap between midpoint and upper end visible
    t = types([10.0])
    o = offers([0], [0.5], market=[rk.SPOT], mid=[0.025], high=[0.05])
    T0 = 100.0
    exp_h, pess_h = T0 / (1 - 0.025 / 730 * loss), T0 / (1 - 0.05 / 730 * loss)
    c = rk.evaluate(t, o, job(samples=3.6e6, budget=1e6, deadline=(exp_h + pess_h) / 2, loss=loss))
    assert not c.feasible[0]  # the expected time fits, the pessimistic one does not
    c = rk.evaluate(t, o, job(samples=3.6e6, budget=1e6, deadline=pess_h + 1e-9, loss=loss))
    assert c.feasible[0]


def test_spot_with_on_demand_fallback():
    loss = 0.5
    t = types([10.0])
    o = offers([0], [0.3], market=[rk.FALLBACK], od=[1.0], mid=[0.25], high=[0.30])
    c = rk.evaluate(t, o, job(samples=3.6e6, budget=1e6, deadline=1e6, loss=loss))
    lam = 0.25 / 730
    p = 1 - math.exp(-lam * 100)
    spot_h = p / lam
    assert c.hours[0] == pytest.approx(100 + p * loss)
    assert c.hours_pess[0] == pytest.approx(100 + loss)  # at most one interruption, then on-demand
    assert c.cost[0] == pytest.approx(0.3 * spot_h + 1.0 * (100 + p * loss - spot_h))
    assert 0.3 * 100 < c.cost[0] < 1.0 * 100


def test_pareto_front_helper():
    cost = np.array([5.0, 4.0, 6.0, 4.0, 3.0])
    hours = np.array([1.0, 2.0, 0.5, 3.0, 9.0])
    front = rk.pareto_front(cost, hours, np.arange(5))
    assert front.tolist() == [4, 1, 0, 2]


def test_efficiency_model_values():
    assert sc.allreduce_seconds(1, 1e8, 1e9) == 0.0
    assert sc.allreduce_seconds(2, 1e8, 1e9) == pytest.approx(0.1)
    assert sc.allreduce_seconds(4, 1e8, 1e9) == pytest.approx(0.15)
    assert sc.overlap_efficiency(1.0, 0.5) == 1.0  # hidden behind backward
    assert sc.overlap_efficiency(1.0, 1.0) == pytest.approx(1 / (1 + 1 / 3))


def test_pareto_front_matches_brute_force():
    rng = np.random.default_rng(3)
    cost = rng.integers(1, 30, 400).astype(float)
    hours = rng.integers(1, 30, 400).astype(float)
    front = set(rk.pareto_front(cost, hours, np.arange(400)).tolist())
    for i in range(400):
        dominated = np.any((cost <= cost[i]) & (hours <= hours[i]) & ((cost < cost[i]) | (hours < hours[i])))
        duplicate_before = np.any((cost[:i] == cost[i]) & (hours[:i] == hours[i]))
        assert (i in front) == (not dominated and not duplicate_before), i


def test_equal_cost_prefers_the_faster_then_equal_time_the_cheaper():
    # Same cost per sample and band, one twice as fast (and twice the price per hour).
    t = types([100, 200])
    o = offers([0, 1], [1.0, 2.0])
    c = rk.evaluate(t, o, job())
    assert names(c, rk.rank(c, "cheapest", 2), t) == ["t1", "t0"]
    t = types([100, 100])
    o = offers([0, 1], [2.0, 1.0])
    c = rk.evaluate(t, o, job())
    assert names(c, rk.rank(c, "fastest", 2), t) == ["t1", "t0"]


def test_setup_time_is_billed_on_every_instance_and_favours_fewer():
    t = types([100], inter=[0.0])
    c = rk.evaluate(t, offers([0], [1.0]), rk.Job(samples=3.6e6, budget_usd=100.0, deadline_hours=24.0, loss_hours=0.0,
                                                  max_instances=2, setup_hours=0.5))
    assert c.hours.tolist() == pytest.approx([10.5, 5.5])
    assert c.cost.tolist() == pytest.approx([10.5, 11.0])
    assert names(c, rk.rank(c, "cheapest", 2), t) == ["t0", "t0"] and c.k[rk.rank(c, "cheapest", 1)[0]] == 1


def test_shortfall_is_the_limit_where_met_and_the_figure_where_not():
    j = job(budget=10.0, deadline=5.0)
    cost = np.array([8.0, 12.0, 8.0, 12.0, NAN, np.inf])
    hours = np.array([4.0, 4.0, 6.0, 6.0, NAN, np.inf])
    need_b, need_d = rk.shortfall(cost, hours, j.budget_usd, j.deadline_hours)
    assert need_b[:4].tolist() == [10.0, 12.0, 10.0, 12.0]
    assert need_d[:4].tolist() == [5.0, 5.0, 6.0, 6.0]
    assert math.isnan(need_b[4]) and math.isnan(need_d[4]) and need_b[5] == np.inf
    # The feasibility rule is "needs no more than it has"; NaN and inf never pass.
    assert rk.feasible_mask(cost, hours, j.budget_usd, j.deadline_hours).tolist() == [True, False, False, False, False, False]
    # Exactly at the limits is feasible.
    assert rk.feasible_mask(np.array([10.0]), np.array([5.0]), j.budget_usd, j.deadline_hours).tolist() == [True]


def test_evaluate_and_closest_use_the_one_rule():
    # Every candidate's feasible flag is feasible_mask of its own figures, and closest orders by
    # the shortfall's relative stretch.
    j = job(budget=9.0, deadline=2.0)
    c = rk.evaluate(T4, O4, j)
    assert c.feasible.tolist() == rk.feasible_mask(c.cost, c.hours_pess, j.budget_usd, j.deadline_hours).tolist()
    need_b, need_d = rk.shortfall(c.cost, c.hours_pess, j.budget_usd, j.deadline_hours)
    stretch = np.maximum(need_b / 9.0, need_d / 2.0)
    assert list(rk.closest(c, j, 4)) == list(np.argsort(stretch, kind="stable"))
