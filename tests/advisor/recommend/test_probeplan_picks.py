"""The probe plan's batched pick evaluation (advisor/recommend/probeplan/picks.py) answers exactly what the
plain one-probe-set-at-a-time evaluation answers: same pick in every world, for every objective,
with ties, candidates with no figure, setup time, measured and fixed types."""

from __future__ import annotations

import numpy as np
import pytest

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
    obj = np.where(e.fits(*e.at(slice(None), ft), wait_h), w.obj_fix + w.obj_var / ft, np.inf)
    j = obj.argmin(axis=1)
    return np.where(np.isfinite(obj[np.arange(len(j)), j]), j, -1)


def problem(seed: int, objective: str, ties: bool, setup: bool):
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
    econ = pv.Economics(types, fix_c, cost, fix_h, hours, fix_h, hours * rng.uniform(1, 1.5),
                        float(np.median(cost) * rng.uniform(0.5, 3)), float(np.median(hours) * rng.uniform(0.5, 3)),
                        objective)
    n_dev = int(rng.integers(1, n_types + 1))
    dev = rng.integers(0, n_dev, n_types)
    dd = rng.uniform(0, 3, (n_dev, n_dev))
    dd = (dd + dd.T) / 2
    np.fill_diagonal(dd, 0)
    spread = rng.uniform(1.05, 2.5, n_types)
    sd_low, sd_high = pv.Beliefs.sds(np.ones(n_types), 1 / spread, spread, 0.85)
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
def test_batched_picks_are_the_one_at_a_time_picks(objective, ties, setup):
    for seed in range(6):
        econ, bel, rng = problem(seed, objective, ties, setup)
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
