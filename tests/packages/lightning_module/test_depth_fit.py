"""The depth extrapolation's line and band (contract/extrapolate.py): simulated rounds of step
times with a known intercept and slope, the machine's drift among them. Torch-free and quick."""

from __future__ import annotations

import random

import pytest

from lightning_module.contract.extrapolate import DepthError, fit_depths

A, B = 0.012, 0.003  # seconds a step outside the layers, and per layer
DEPTHS = (1, 2, 3)
FULL = 32


def _rounds(rng: random.Random, n: int, noise: float, drift: float, depths=DEPTHS, extra=()):
    """n rounds: each round's machine runs `drift` slower or faster (one factor for the round, as
    other work slows a whole stretch of time), each copy's mean step off by `noise` on its own."""
    out = []
    for _ in range(n):
        scale = 1 + rng.uniform(-drift, drift)
        out.append({d: (A + B * d) * scale * (1 + rng.gauss(0, noise)) for d in (*depths, *extra)})
    return out


def test_exact_rounds_give_the_line_and_no_spread():
    fit = fit_depths([{d: A + B * d for d in DEPTHS}] * 3)
    assert (fit.intercept_s, fit.slope_s) == pytest.approx((A, B))
    assert fit.intercept_se == pytest.approx(0, abs=1e-15) and fit.slope_se == pytest.approx(0, abs=1e-15)
    assert fit.step_s(FULL) == pytest.approx(A + B * FULL)
    assert fit.band(FULL) == pytest.approx((A + B * FULL, A + B * FULL))


def test_noisy_rounds_recover_intercept_and_slope_within_their_errors():
    rng = random.Random(1)
    misses_a = misses_b = 0
    for _ in range(300):
        fit = fit_depths(_rounds(rng, 6, noise=0.05, drift=0.2))
        assert fit.intercept_se > 0 and fit.slope_se > 0
        misses_a += abs(fit.intercept_s - A) > 2.57 * fit.intercept_se  # t(5) at 95%
        misses_b += abs(fit.slope_s - B) > 2.57 * fit.slope_se
    # Each a 5% event when the errors are honest; 300 trials: about 15, well under 40.
    assert misses_a < 40 and misses_b < 40


@pytest.mark.parametrize("rounds", [3, 4, 8])
def test_the_band_at_the_full_depth_covers_the_truth_at_its_level(rounds):
    """What the extrapolation promises: the 95% band of the full depth's mean step holds the true
    line's value (the drift's mean, 1, on average) about 95 times in 100, however far it reaches."""
    rng = random.Random(rounds)
    covered, trials = 0, 400
    for _ in range(trials):
        lo, hi = fit_depths(_rounds(rng, rounds, noise=0.04, drift=0.15)).band(FULL)
        covered += lo <= A + B * FULL <= hi
    assert covered >= 0.90 * trials  # 95% nominal; binomial spread over 400 trials is about 1%


def test_the_band_widens_with_the_distance_it_extrapolates():
    fit = fit_depths(_rounds(random.Random(7), 5, noise=0.05, drift=0.1))
    widths = [fit.band(L)[1] - fit.band(L)[0] for L in (4, 16, 64)]
    assert widths[0] < widths[1] < widths[2]


def test_a_drift_common_to_a_round_does_not_bias_the_extrapolation():
    """The defect this replaces: the two depths were timed minutes apart (the deeper copy's probe,
    then the shallower copy), so a machine 40% busier for one of them put the drift into the
    slope, multiplied by (full - b) / (b - a); the 4-model benchmark read 59% off. In rounds the
    full model timed alongside moves with its copies, and the extrapolation tracks it."""
    rng = random.Random(3)
    for _ in range(50):
        rounds = _rounds(rng, 4, noise=0.0, drift=0.4, extra=(FULL,))
        fit = fit_depths([{d: r[d] for d in DEPTHS} for r in rounds])
        whole = sum(r[FULL] for r in rounds) / len(rounds)
        assert fit.step_s(FULL) == pytest.approx(whole, rel=1e-9)
    # The old reading of the same machine: depth 2 timed quiet, depth 1 timed 40% busier.
    old = (A + 2 * B) + ((A + 2 * B) - 1.4 * (A + B)) * (FULL - 2)
    assert old < A + 2 * B  # a negative slope: clamped, the full model read as fast as two layers


def test_too_few_rounds_or_unlike_rounds_are_one_line():
    with pytest.raises(DepthError, match="two or more give the band"):
        fit_depths([{1: 0.1, 2: 0.2}])
    with pytest.raises(DepthError, match="the same two or more depths"):
        fit_depths([{1: 0.1, 2: 0.2}, {1: 0.1, 3: 0.3}])
    with pytest.raises(DepthError, match="the same two or more depths"):
        fit_depths([{1: 0.1}, {1: 0.1}])
