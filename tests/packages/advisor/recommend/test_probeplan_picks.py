"""The probe plan's batched pick evaluation (advisor/recommend/probeplan/picks.py) answers exactly what the
plain one-probe-set-at-a-time evaluation answers: same pick in every world, for every objective,
with ties, candidates with no figure, setup time, measured and fixed types."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.estimate.band import split_normal_sds
from advisor.recommend.probeplan import picks as pk
from advisor.recommend.probeplan import value as pv


def one_at_a_time(w: pv._Worlds, probed: list[int], wait_h: float) -> np.ndarray:
    """The model as value.py's docstring states it, over every type and candidate."""
    e = w.econ
    weight = w.bel.weight[probed]
    den = weight.sum(axis=0) + w.held
    with np.errstate(invalid="ignore", divide="ignore"):
        shift = np.where((den > 0) & w.bel.moves, (w.log_obs[:, probed] @ weight) / den, 0.0)
    fhat = np.exp(shift)
    fhat[:, probed] = w.f_obs[:, probed]
    ft = fhat[:, e.type_idx]
    # recommend's figures in each candidate's band state: measured, a sibling (an estimate) probed, as is
    t = e.type_idx
    state = np.where(np.isin(t, probed), pv.MEASURED,
                     np.where(np.isin(w.bel.group[t], w.bel.group[probed]) & w.bel.moves[t], pv.SIBLING, pv.AS_IS))
    state = np.minimum(state, len(e.decide["cost"]) - 1)
    col = np.arange(len(t))
    d = {k: v[state, col] for k, v in e.decide.items()}
    cost, pess = e.cost_fix + d["cost"] / ft, e.pess_fix + d["pess"] / ft
    obj_fix = e.hours_fix if e.objective == "fastest" else e.cost_fix
    obj = obj_fix + (d["hours"] if e.objective == "fastest" else d["cost"]) / ft
    obj = np.where(e.fits(cost, pess, wait_h), obj, np.inf)
    j = obj.argmin(axis=1)
    return np.where(np.isfinite(obj[np.arange(len(j)), j]), j, -1)


def problem(seed: int, objective: str, ties: bool, setup: bool, confidence: bool = False):
    rng = np.random.default_rng(seed)
    n_types, n_cand = int(rng.integers(3, 25)), int(rng.integers(2, 70))
    types = rng.integers(0, n_types, n_cand)
    cost, hours = rng.lognormal(4, 1, n_cand), rng.lognormal(2.5, 1, n_cand)
    if ties:  # the same offer twice, rounded figures, candidates with no figure
        a, b = rng.integers(0, n_cand, n_cand // 3), rng.integers(0, n_cand, n_cand // 3)
        cost[a], hours[a] = cost[b], hours[b]
        cost, hours = np.round(cost), np.round(hours, 1)
        bad = rng.random(n_cand) < 0.05
        cost[bad] = hours[bad] = np.inf
    fix_c = rng.uniform(0, 5, n_cand) if setup else np.zeros(n_cand)
    fix_h = rng.uniform(0, 1, n_cand) if setup else np.zeros(n_cand)
    pess = hours * rng.uniform(1, 1.5)
    decide = None
    if confidence:  # recommend's figures: above the truth's, less so measured or re-anchored
        up = lambda a: np.stack([a * rng.uniform(1.2, 2.0, n_cand), a * rng.uniform(1.0, 1.05, n_cand),
                                 a * rng.uniform(1.05, 1.5, n_cand)])
        decide = {"cost": up(cost), "pess": up(pess)}
        decide["hours"] = decide["pess"]
    econ = pv.Economics(types, fix_c, cost, fix_h, hours, fix_h, pess,
                        float(np.median(cost) * rng.uniform(0.5, 3)), float(np.median(hours) * rng.uniform(0.5, 3)),
                        objective, decide)
    n_dev = int(rng.integers(1, n_types + 1))
    dev = rng.integers(0, n_dev, n_types)
    dd = rng.uniform(0, 3, (n_dev, n_dev))
    dd = (dd + dd.T) / 2
    np.fill_diagonal(dd, 0)
    spread = rng.uniform(1.05, 2.5, n_types)
    sd_low, sd_high = split_normal_sds(np.ones(n_types), 1 / spread, spread, 0.85)
    measured = rng.random(n_types) < 0.15
    usd = np.where(rng.random(n_types) < 0.1, np.inf, rng.uniform(0.05, 3, n_types))
    bel = pv.Beliefs(sd_low=sd_low, sd_high=sd_high, common_share=rng.uniform(0, 0.5, n_types), device=dev,
                     device_share=rng.uniform(0, 0.5, n_types), weight=1.0 / (1.0 + dd[dev][:, dev]) ** 2,
                     measured=measured, moves=~measured & (rng.random(n_types) < 0.9),
                     group=rng.integers(0, max(1, n_types // 2), n_types), probe_usd=usd,
                     probe_hours=np.where(np.isfinite(usd), rng.uniform(0.1, 1.0, n_types), np.inf), noise_sd=0.015)
    return econ, bel, rng


@pytest.mark.parametrize("objective", pv.OBJECTIVES)
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("setup", [False, True])
@pytest.mark.parametrize("confidence", [False, True])
def test_batched_picks_are_the_one_at_a_time_picks(objective, ties, setup, confidence):
    for seed in range(6):
        econ, bel, rng = problem(seed, objective, ties, setup, confidence)
        w = pv._Worlds(econ, bel, 128, seed)
        n_types = len(bel.group)
        for _ in range(4):
            chosen = [int(t) for t in rng.choice(n_types, int(rng.integers(0, min(4, n_types))), replace=False)]
            options = [t for t in range(n_types) if t not in chosen]
            waits = rng.uniform(0, 3, len(options))
            got = w.picks.after(chosen, options, waits)
            for t, wait_h, row in zip(options, waits, got):
                np.testing.assert_array_equal(row, one_at_a_time(w, chosen + [t], float(wait_h)))
            assert (w.pick_after(chosen + options[:1], float(waits[0])) == got[0]).all()


def test_small_chunks_and_no_pruning_give_the_same_picks(monkeypatch):
    econ, bel, rng = problem(3, "cheapest", True, False)
    w = pv._Worlds(econ, bel, 64, 0)
    options = list(range(len(bel.group)))
    waits = rng.uniform(0, 1, len(options))
    want = w.picks.after([], options, waits)
    monkeypatch.setattr(pk, "CHUNK", 1)  # one probe per chunk
    monkeypatch.setattr(pk, "MAX_PAIRWISE", 0)  # every candidate evaluated
    np.testing.assert_array_equal(pv._Worlds(econ, bel, 64, 0).picks.after([], options, waits), want)


def test_a_dearer_copy_of_an_offer_is_not_evaluated():
    # Types 0 and 1 are one device (equal weights), 1 the faster; candidate 2 is type 0's offer
    # again at a higher price and 3 is type 1's twin of candidate 1: neither can be argmin's answer
    # while no probe touches its type.
    hours = np.array([10.0, 8.0, 10.0, 8.0])
    econ = pv.Economics(np.array([0, 1, 0, 1]), np.zeros(4), np.array([100.0, 120.0, 101.0, 120.0]), np.zeros(4),
                        hours, np.zeros(4), hours, 1000.0, 100.0)
    bel = pv.Beliefs.siblings(np.ones(4)[:2], np.full(2, 0.7), np.full(2, 1.4), 0.8, group=np.array([0, 0]),
                              probe_usd=np.full(2, 0.5), probe_hours=np.full(2, 0.25), noise_sd=0.015)
    w = pv._Worlds(econ, bel, 64, 0)
    src = w.picks.base_src.copy()
    assert list(w.picks._undominated(src, [])) == [0, 1]
    assert list(w.picks._undominated(src, [1])) == [0, 1, 3]  # type 1's own probe moves 1 and 3 apart from 0
