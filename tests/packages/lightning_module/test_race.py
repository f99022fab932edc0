"""The race (contract/race.py) on simulated step times with known means: its stated false-stop rate
holds, it stops early where the answer is clear, and the Stopwatch and the re-measuring obey it."""

from __future__ import annotations

import math
import random

import pytest

from lightning_module.contract.race import RACE_ALPHA, RACED, Race, look_alpha, t_critical
from lightning_module.contract.reliability import measure_until_known, summarise
from lightning_module.contract.timing import Stopwatch, Timing

BATCH = 32


def simulate(race: Race, mean_s: float, cv: float, rng: random.Random, max_steps: int = 100,
             lognormal: bool = False) -> tuple[str | None, int]:
    """Feed one rung's simulated step times to the race, a look after every step, as the Stopwatch
    does: its verdict (None: never stopped within max_steps) and the steps it took."""
    times: list[float] = []
    for _ in range(max_steps):
        if lognormal:
            t = mean_s * rng.lognormvariate(0.0, cv)
        else:
            t = max(rng.gauss(mean_s, cv * mean_s), 1e-6)
        times.append(t)
        v = race.verdict(times)
        if v is not None:
            return v, len(times)
    return None, len(times)


def test_look_alphas_sum_to_the_stated_rate():
    assert sum(look_alpha(k) for k in range(1, 100_000)) == pytest.approx(RACE_ALPHA, rel=1e-4)
    assert sum(look_alpha(k) for k in range(1, 100_000)) < RACE_ALPHA


@pytest.mark.parametrize("df,alpha,expected", [(2, 0.05, 4.303), (9, 0.05, 2.262), (30, 0.05, 2.042),
                                               (4, 0.01, 4.604), (10, 0.001, 4.587), (200, 0.05, 1.972)])
def test_t_critical_matches_the_tables(df, alpha, expected):
    assert t_critical(df, alpha) == pytest.approx(expected, abs=2e-3)


@pytest.mark.parametrize("lognormal", [False, True])
def test_false_stop_rate_at_the_threshold_is_within_the_stated_rate(lognormal):
    """The worst case: the rung's true rate is the threshold itself, so every stop is a wrong one
    (either verdict claims a difference that is not there)."""
    rng = random.Random(7)
    mean_s, runs = 0.5, 2000
    true_mean = mean_s * math.exp(0.1**2 / 2) if lognormal else mean_s  # of mean_s * LogNormal(0, 0.1)
    race = Race(threshold=BATCH / true_mean, samples_per_step=BATCH)
    stops = sum(simulate(race, mean_s, 0.1, rng, lognormal=lognormal)[0] is not None for _ in range(runs))
    assert stops / runs <= RACE_ALPHA


def test_no_wrong_verdict_when_the_truth_is_on_one_side():
    rng = random.Random(11)
    base_s = 0.5
    best = BATCH / base_s
    wrong = 0
    for _ in range(1000):
        v, _ = simulate(Race(best, BATCH), base_s / 1.02, 0.15, rng)  # truly 2% faster: "lost" is wrong
        wrong += v == "lost"
        v, _ = simulate(Race(best, BATCH), base_s * 1.02, 0.15, rng)  # truly 2% slower: "won" is wrong
        wrong += v == "won"
    assert wrong / 2000 <= RACE_ALPHA


def test_a_clear_loser_and_a_clear_winner_stop_within_a_few_steps():
    rng = random.Random(3)
    best = BATCH / 0.5
    losers = [simulate(Race(best, BATCH), 0.5 * 1.3, 0.05, rng) for _ in range(200)]
    winners = [simulate(Race(best, BATCH), 0.5 / 1.3, 0.05, rng) for _ in range(200)]
    assert all(v == "lost" for v, _ in losers) and all(v == "won" for v, _ in winners)
    # The unraced rule times such a rung to +-3% (about 13 steps at a 5% spread) or --max-seconds.
    steps = [n for _, n in losers + winners]
    assert sum(steps) / len(steps) <= 6 and max(steps) <= 10


def test_a_rung_inside_the_noise_is_not_stopped_by_the_race():
    rng = random.Random(5)
    best = BATCH / 0.5
    verdicts = [simulate(Race(best, BATCH), 0.5, 0.2, rng, max_steps=30)[0] for _ in range(300)]
    assert sum(v is not None for v in verdicts) / len(verdicts) <= RACE_ALPHA


def test_the_stopwatch_stops_on_the_race_and_says_why():
    race = Race(threshold=BATCH / 0.5, samples_per_step=BATCH)
    sw = Stopwatch(warmup_steps=1, target_ci=0.001, max_seconds=1e9, race=race)
    now = 0.0
    sw.start(now)
    times = [0.9, 0.80, 0.82, 0.79, 0.81, 0.80, 0.80, 0.81]  # the first is warm-up; then 60% slower
    reasons = []
    for t in times:
        now += t
        sw.step(now)
        reasons.append(sw.stop_reason(now))
    assert reasons[:3] == [None, None, None] and "lost" in reasons
    unraced = Stopwatch(warmup_steps=1, target_ci=0.001, max_seconds=1e9)
    unraced.start(0.0)
    now = 0.0
    for t in times:
        now += t
        unraced.step(now)
        assert unraced.stop_reason(now) is None  # --no-race: only the CI target or the time limit


def test_a_raced_measurement_is_not_measured_again():
    calls = []

    def once():
        calls.append(1)
        t = Timing(step_times=[0.8, 0.82, 0.79], warmup_steps=1, warmup_seconds=1.0, reason="lost")
        return summarise(t, BATCH, 0.03)

    m = measure_until_known(once, BATCH, 0.03, rounds=3)
    assert m.stop_reason in RACED and m.ci_target_met is False and len(calls) == 1

    def unraced():
        calls.append(1)
        return summarise(Timing(step_times=[0.8, 0.9, 0.7], reason="time-limit"), BATCH, 0.03)

    calls.clear()
    measure_until_known(unraced, BATCH, 0.03, rounds=3)
    assert len(calls) == 4  # re-measured while its CI stays wide


# ---------------------------------------------------------------------------------------------
# A rung known to lose on this hardware: one step, then skipped with the reason


def test_bf16_is_a_known_loser_only_where_the_cpu_emulates_it():
    from lightning_module.run.probe import known_losers

    assert "emulated" in known_losers("cpu", ["avx2", "fma"], "amd")["bf16"]
    assert known_losers("cpu", ["avx2", "avx512f", "avx512_bf16"], "intel") == {}
    assert known_losers("cpu", ["avx2", "amx_bf16", "amx_tile"], "intel") == {}
    assert known_losers("cpu", [], None) == {}  # flags not read: nothing presumed
    assert known_losers("gpu", ["avx2"], "amd") == {}


@pytest.mark.parametrize("race,bf16_speed,status", [(True, 40.0, "skipped"), (False, 40.0, "ok"), (True, 300.0, "ok")])
def test_a_known_loser_is_measured_for_one_step_and_skipped_with_the_reason(monkeypatch, race, bf16_speed, status):
    from factories import fake_measurement

    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import probe

    real = probe.hardware.fingerprint()
    monkeypatch.setattr(probe.hardware, "fingerprint",
                        lambda: real.model_copy(update={"isa_flags": ["avx2", "fma"], "cpu_manufacturer": "amd"}))
    calls = []

    def measure(rung, cfg):
        calls.append(rung)
        return fake_measurement(bf16_speed if cfg.precision == "bf16-mixed" else 100.0, cfg.batch_size)

    spec = WorkloadSpec(model="mlp", image_size=8, num_classes=10, batch_size=32)
    opts = probe.ProbeOptions(spec=spec, accelerator="cpu", matmul_seconds=0.05, confirm_rounds=0, race=race,
                              skip=frozenset({"channels_last", "compile", "workers", "batch", "run_cpu"}))
    result = probe.run_probe(opts, measure_fn=measure)
    bf16 = next(r for r in result.ladder if r.rung == "bf16")
    assert bf16.status == status
    if status == "skipped":
        assert calls.count("bf16") == 1 and "emulated" in bf16.error and "first step ran at 40.0" in bf16.error
    elif race:  # the one step did not bear the rule out: the rung was timed as any other, and its win
        # measured again (contract/quiet.py: an emulated precision wins only on a quiet re-measurement)
        assert calls.count("bf16") == 3 and bf16.kept
    else:
        assert calls.count("bf16") == 1 and not bf16.kept


def test_the_ladder_records_why_each_rung_stopped_and_races_a_batch_step_against_its_gain():
    from factories import fake_measurement

    from lightning_module.contract.ladder import (
        BATCH_GAIN,
        LadderOptions,
        required_gain,
        run_ladder,
    )
    from lightning_module.contract.result import ProbeConfig

    opts = LadderOptions(vision=False, workers_supported=False, half_precision=None)
    assert required_gain("batch=64", opts) == BATCH_GAIN and required_gain("compile", opts) == 0.0

    def measure(name, cfg):
        m = fake_measurement(100.0 if name == "baseline" else 60.0, cfg.batch_size)
        m.stop_reason = "converged" if name == "baseline" else "lost"
        return m

    lad = run_ladder(ProbeConfig(accelerator="cpu", batch_size=32), measure, opts)
    reasons = {r.rung: r.stop_reason for r in lad.rungs if r.status == "ok"}
    assert reasons["baseline"] == "converged" and reasons["compile"] == "lost" and reasons["batch=64"] == "lost"
