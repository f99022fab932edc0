"""The probe plan's value model on hand-made bands where the right probe is known by hand."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.recommend.probeplan import value as pv


def econ(costs, hours=None, budget=1000.0, deadline=100.0, objective="cheapest", types=None):
    """One candidate per type unless `types` says otherwise; costs/hours scale with 1/throughput."""
    costs = np.array(costs, dtype=float)
    hours = np.array(hours if hours is not None else [10.0] * len(costs), dtype=float)
    n = len(costs)
    return pv.Economics(
        type_idx=np.array(types if types is not None else range(n)), cost_fix=np.zeros(n), cost_var=costs,
        hours_fix=np.zeros(n), hours_var=hours, pess_fix=np.zeros(n), pess_var=hours.copy(), budget_usd=budget,
        deadline_hours=deadline, objective=objective)


def beliefs(factors, groups=None, probe_usd=None, hours=0.25):
    """factors: each type's band half-width (estimate / f .. estimate x f, an 80% interval); types
    of one group are one device's sizes (correlated 0.95, re-anchored by each other's probes)."""
    f = np.array(factors, dtype=float)
    n = len(f)
    return pv.Beliefs.siblings(
        np.ones(n), 1 / f, f, 0.8, group=np.array(groups if groups is not None else range(n)),
        probe_usd=np.array(probe_usd if probe_usd is not None else [0.5] * n, dtype=float),
        probe_hours=np.full(n, hours), noise_sd=0.015)


def names(plan):
    return [p.type_idx for p in plan.probes]


def test_the_probe_that_can_change_the_pick_comes_first():
    # A is the pick ($100, measured: a narrow band). B ($110) overlaps it widely; C ($300) could only
    # beat A at 3x its estimate, far outside its band; D ($105) overlaps as much as B but its probe
    # costs more than the job could save. B is the probe to take first.
    e = econ([100, 110, 300, 105])
    b = beliefs([1.02, 1.6, 1.6, 1.6], probe_usd=[0.5, 0.5, 0.5, 80.0])
    plan = pv.plan(e, b, pick=0)
    assert names(plan)[0] == 1
    assert 2 not in names(plan) and 3 not in names(plan) and 0 not in names(plan)
    first = plan.probes[0]
    assert 0 < first.p_change < 1 and first.saving_if_changed > 0
    assert first.gain_usd == pytest.approx(first.p_change * first.saving_if_changed, rel=1e-9)
    assert plan.after.p_within > plan.now.p_within


def test_a_bigger_possible_saving_beats_a_cheaper_probe():
    # B and C have the same band and estimate, C's job share is bigger: B's candidate is a small
    # saving (its cost is close to the pick's at best), C's could halve the cost.
    e = econ([100, 101, 120])
    b = beliefs([1.02, 1.05, 2.5], probe_usd=[0.1, 0.1, 0.4])
    plan = pv.plan(e, b, pick=0)
    assert names(plan)[0] == 2


def test_one_probe_covers_its_siblings():
    # Types 1 and 2 are one device in two sizes (same group), identical bands; 1's probe is cheaper.
    # The plan probes 1 only and says it covers 2.
    e = econ([100, 104, 106])
    b = beliefs([1.02, 1.5, 1.5], groups=[0, 1, 1], probe_usd=[0.5, 0.5, 0.9])
    plan = pv.plan(e, b, pick=0)
    assert names(plan) == [1]
    assert plan.probes[0].covers == [2]


def test_siblings_move_together_after_one_probe():
    e = econ([100, 104, 106])
    b = beliefs([1.02, 1.5, 1.5], groups=[0, 1, 1])
    w = pv._Worlds(e, b, 256, 0)
    picks = w.pick_after([1], 0.25)
    # Where the probe of type 1 shows the device fast, its sibling moves too: type 2 can be the pick
    # without being probed, and both are never out of order by more than their own cost ratio.
    assert (picks == 2).sum() == 0  # 2 is always dearer than 1 once both move by the same ratio
    assert set(np.unique(picks)) <= {0, 1}
    far = w.f_obs[:, 1] > 1.1
    assert (picks[far] == 1).all()


def test_probe_budget_is_respected():
    e = econ([100, 104, 108, 112])
    b = beliefs([1.02, 1.6, 1.6, 1.6], probe_usd=[1.0, 1.0, 1.0, 1.0])
    free = pv.plan(e, b, pick=0)
    assert len(free.probes) >= 2
    capped = pv.plan(e, b, pick=0, budget_usd=1.5)
    assert len(capped.probes) == 1 and capped.usd <= 1.5
    assert capped.limited_by_budget  # what was worth it but did not fit is said
    none = pv.plan(e, b, pick=0, budget_usd=0.5)
    assert none.probes == [] and "probe budget" in none.why_empty


def test_the_plan_empties_when_the_best_no_longer_overlaps_anything():
    # The pick is measured (2% band); every other option is at least 1.5x dearer and its band stops
    # short of the pick's: only the bands' far tails could change the pick, worth less than a probe.
    e = econ([100, 160, 200])
    b = beliefs([1.02, 1.3, 1.3])
    plan = pv.plan(e, b, pick=0)
    assert plan.probes == []
    assert "no probe is worth its cost" in plan.why_empty
    assert plan.now.p_within > 0.99


def test_a_pick_that_may_miss_the_deadline_is_probed():
    # The pick's hours sit at the deadline's edge with a wide band; B is safe but dearer.
    e = econ([100, 130], hours=[95, 20], deadline=100)
    b = beliefs([1.5, 1.02], probe_usd=[0.5, 0.5])
    plan = pv.plan(e, b, pick=0)
    assert names(plan) == [0]
    assert plan.probes[0].reason == "the pick rests on this estimate"
    assert plan.now.p_miss > 0.2 and plan.after.p_miss < 0.05


def test_nothing_fits_by_the_estimates_but_a_probe_may_show_something_does():
    e = econ([100, 100], hours=[120, 130], deadline=100)
    b = beliefs([1.5, 1.5])
    plan = pv.plan(e, b, pick=None)
    assert names(plan) and plan.probes[0].reason == "might fit, where nothing does by the estimates"


def test_fastest_values_hours():
    # Objective fastest: B may be much faster than A; a cheap probe of it is worth taking.
    e = econ([100, 120], hours=[10, 11], objective="fastest")
    b = beliefs([1.02, 1.8])
    plan = pv.plan(e, b, pick=0)
    assert names(plan) == [1]


def test_the_same_inputs_give_the_same_plan():
    e = econ([100, 110, 115, 130])
    b = beliefs([1.3, 1.6, 1.6, 2.0])
    a, c = pv.plan(e, b, pick=0), pv.plan(e, b, pick=0)
    assert [(p.type_idx, p.gain_usd) for p in a.probes] == [(p.type_idx, p.gain_usd) for p in c.probes]


def test_unknown_objective_is_refused():
    with pytest.raises(ValueError):
        pv.plan(econ([1.0], objective="slowest"), beliefs([1.1]), pick=0)


def test_a_probes_duration_follows_the_probe_and_launch_defaults():
    # The duration model reads what `advisor probe` and `advisor launch` do by default: if a default
    # moves there, this fails rather than the plan pricing probes on stale numbers.
    from advisor.cli import build_parser
    from advisor.recommend.probeplan import inputs as pi
    from lightning_module.contract import ladder

    parser = build_parser()
    probe = parser.parse_args(["probe"])
    launch = parser.parse_args(["launch", "--instance-types", "g5.xlarge", "--s3", "s3://b/p"])
    from advisor.commands.probe import _spec

    spec, _ = _spec(probe)  # a builtin workload without --start-batch-size starts here
    assert (probe.max_seconds, probe.compile_timeout, probe.warmup_steps, spec.batch_size) == (
        pi.MAX_SECONDS, pi.COMPILE_SECONDS, pi.WARMUP_STEPS, pi.START_BATCH)
    assert probe.target_ci == pi.PROBE_TARGET_CI
    assert (launch.max_minutes, launch.max_instances) == (pi.WATCHDOG_MINUTES, pi.MAX_PROBES)
    # 4 vCPUs: baseline, precision, channels_last, compile, workers 2 and 4, batch x2 and /2.
    assert ladder.measured_rungs(4) == 8
    assert ladder.measured_rungs(4, cpu=True) == 10  # a CPU type's ladder also tries 2 and 1 threads
    fast = pi.probe_seconds(1000.0, 4)
    assert fast == pytest.approx(pi.STARTUP_SECONDS + 8 * (3 * 0.128 + 60) + 300)
    # A device too slow to time its steps within the rung limit: two steps per rung, past the watchdog,
    # so the plan never offers it (its probe would be stopped before it writes a result).
    assert pi.probe_seconds(0.5, 4) > pi.WATCHDOG_MINUTES * 60


def test_past_the_probe_budget_names_what_the_plan_would_add_not_every_probe_with_value(cli):
    """With a budget that buys one probe, 'worth probing but past the budget' is what the
    unconstrained plan takes next, in its order: never more than the unconstrained plan holds."""
    import json

    # a one-day deadline: several GPU types' bands straddle it
    job = ("recommend", "--budget", "500", "--deadline", "1d", "--samples", "1e8", "--format", "json")
    code, out, _ = cli(*job)
    free = [p["instance_type"] for p in json.loads(out)["probe_next"]]
    assert code == 0 and len(free) >= 2
    budget = json.loads(out)["probe_next"][0]["probe_cost_usd"] + 0.001
    code, out, _ = cli(*job, "--probe-budget", f"{budget}")
    doc = json.loads(out)
    taken = [p["instance_type"] for p in doc["probe_next"]]
    past = doc["probe_plan"]["not_affordable"]
    assert code == 0 and past and not set(past) & set(taken)
    assert set(taken) | set(past) <= set(free)


def test_at_a_confidence_a_probe_that_narrows_a_band_can_make_a_cheaper_candidate_the_pick():
    # A ($100 by its estimate, 10 h) has a wide band: at 90% it needs 18 h, past the 15 h deadline, so
    # recommend picks B ($150, sure). Measured, A's figures at 90% are its own (+3%): in most worlds
    # it then fits and is the pick, saving $150 - $100 / f. At confidence 0 (decide None) A is already the
    # pick and the probe is valued only for the worlds where A misses in truth.
    hours = np.array([10.0, 10.0])
    decide = {"cost": np.array([[180.0, 150.0], [103.0, 150.0], [180.0, 150.0]]),
              "pess": np.array([[18.0, 10.0], [10.3, 10.0], [18.0, 10.0]])}
    decide["hours"] = decide["pess"]
    e = pv.Economics(type_idx=np.array([0, 1]), cost_fix=np.zeros(2), cost_var=np.array([100.0, 150.0]),
                     hours_fix=np.zeros(2), hours_var=hours, pess_fix=np.zeros(2), pess_var=hours.copy(),
                     budget_usd=1000.0, deadline_hours=15.0, decide=decide)
    b = beliefs([1.5, 1.01], probe_usd=[0.5, 0.5])
    plan = pv.plan(e, b, pick=1)
    assert names(plan) == [0]
    first = plan.probes[0]
    assert first.reason == "could beat the pick" and first.p_change > 0.5
    assert 40 < first.saving_if_changed < 80  # $150 - $100 / f over the worlds where A fits
    # Without the confidence (decide None) A is the pick and no probe of it changes that enough.
    plain = pv.plan(pv.Economics(type_idx=np.array([0, 1]), cost_fix=np.zeros(2), cost_var=np.array([100.0, 150.0]),
                                 hours_fix=np.zeros(2), hours_var=hours, pess_fix=np.zeros(2), pess_var=hours.copy(),
                                 budget_usd=1000.0, deadline_hours=15.0), b, pick=0)
    assert all(p.reason != "could beat the pick" for p in plain.probes)
