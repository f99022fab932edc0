"""Where the raced ladder spends no more than its answer needs (issue 32), on simulated step times:
the one-step check of a rung known to lose is cut at the best's step time, with the same answer
as the whole step gives; a rung that kept the warm model does not warm up as a cold one.
Seconds here are simulated step times, never the clock's."""

from __future__ import annotations

import math
import random
import statistics
import textwrap

import pytest
from test_probe_measure import SLOW_MODULE
from test_settle import feed  # a stopwatch fed simulated step times

from lightning_module.contract.race import known_slower_after
from lightning_module.contract.timing import Stopwatch
from lightning_module.contract.warm import settle_from

BATCH = 32
BEST = 100.0  # samples/s of every configuration but bf16 (the best so far when bf16 is tried)


def run_with_simulated_steps(monkeypatch, bf16_speed: float, cut: bool) -> tuple[object, list[float]]:
    """A raced probe on an AVX2 CPU (bf16 known to lose) where every measurement is simulated:
    bf16's one step takes BATCH / bf16_speed s, cut at its first_step_s (when `cut`). Returns the
    result and the simulated seconds the one-step check spent."""
    from factories import fake_measurement

    from lightning_module.contract.ladder import RungTooSlow
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import probe

    real = probe.hardware.fingerprint()
    monkeypatch.setattr(probe.hardware, "fingerprint",
                        lambda: real.model_copy(update={"isa_flags": ["avx2", "fma"], "cpu_manufacturer": "amd"}))
    one_step: list[float] = []

    def anywhere(settings, cfg, **kw):
        speed = bf16_speed if cfg.precision == "bf16-mixed" else BEST
        step = cfg.batch_size / speed
        if settings.max_steps == probe.ONE_STEP and settings.warmup_steps == 0:
            limit = kw.get("first_step_s") if cut else None
            one_step.append(min(step, limit) if limit else step)
            if limit and step > limit:
                raise RungTooSlow(f"its first step ran past {limit:.2f} s")
            return fake_measurement(speed, cfg.batch_size, steps=1)
        return fake_measurement(speed, cfg.batch_size)

    monkeypatch.setattr(probe, "measure_anywhere", anywhere)
    spec = WorkloadSpec(model="mlp", image_size=8, num_classes=10, batch_size=BATCH)
    opts = probe.ProbeOptions(spec=spec, accelerator="cpu", matmul_seconds=0.05, confirm_rounds=0, race=True,
                              skip=frozenset({"threads", "channels_last", "compile", "workers", "batch", "run_cpu"}))
    return probe.run_probe(opts), one_step


@pytest.mark.parametrize("bf16_speed", [5.0, 40.0, 99.0, 101.0, 300.0])
def test_the_one_step_check_is_cut_where_its_answer_is_known_and_answers_the_same(monkeypatch, bf16_speed):
    cut_result, cut_s = run_with_simulated_steps(monkeypatch, bf16_speed, cut=True)
    whole_result, whole_s = run_with_simulated_steps(monkeypatch, bf16_speed, cut=False)
    cut_bf16, whole_bf16 = (next(r for r in res.ladder if r.rung == "bf16") for res in (cut_result, whole_result))
    # The same answer either way: skipped where the step is slower than the best, else timed (and kept).
    assert cut_bf16.status == whole_bf16.status == ("skipped" if bf16_speed <= BEST else "ok")
    assert cut_bf16.kept == whole_bf16.kept == (bf16_speed > BEST)
    assert len(cut_s) == len(whole_s) == 1
    best_step = BATCH / BEST
    assert cut_s[0] <= best_step  # never longer than the best's own step ...
    if bf16_speed < BEST:  # ... where a whole slow step ran BEST / bf16_speed times that
        assert cut_s[0] / whole_s[0] == pytest.approx(bf16_speed / BEST)
        assert "emulated" in cut_bf16.error


def test_known_slower_after_is_the_threshold_as_a_step_time():
    assert known_slower_after(32, 100.0) == pytest.approx(0.32)
    # A step that ends past it reads slower than the threshold, one that ends before it faster.
    assert 32 / 0.33 < 100.0 < 32 / 0.31


# test_probe_measure's sleepy module (one home for it), every step a 5 s sleep: a step far slower
# than the one it is checked against
SLOW_FIRST = SLOW_MODULE.replace("time.sleep(0.02 if batch_idx < 3 else 5.0)", "time.sleep(5.0)")
assert SLOW_FIRST != SLOW_MODULE


def test_measure_cuts_the_first_step_at_first_step_s(user_module):
    """The wiring: measure()'s first_step_s bounds the first step, which a slow limit alone
    would let run SLOW_FACTOR x longer."""
    from lightning_module.contract.ladder import RungTooSlow
    from lightning_module.contract.options import MeasureSettings
    from lightning_module.contract.result import ProbeConfig, WorkloadSpec
    from lightning_module.run import measure

    user_module("slowfirst", textwrap.dedent(SLOW_FIRST))
    measure.quiet_lightning()
    settings = MeasureSettings(WorkloadSpec(model="slowfirst:Sleepy", image_size=4, num_classes=10),
                               warmup_steps=0, max_seconds=30, max_steps=1, target_ci=0.0)
    import slowfirst

    with pytest.raises(RungTooSlow, match="slower than the best so far"):
        measure.measure(settings, ProbeConfig(accelerator="cpu", batch_size=4), slow_step_s=10.0, first_step_s=0.5)
    assert slowfirst.SLEPT == []  # the 5 s step was interrupted inside its sleep


# ---------------------------------------------------------------------------------------------
# A rung that kept the warm model: its first step is no set-up step


def steady(rng, first: float, n: int = 30, cv: float = 0.05) -> list[float]:
    """Step times around 1 s (lognormal noise `cv`), the first `first` times the others."""
    out = [math.exp(rng.gauss(0, cv)) for _ in range(n)]
    out[0] *= first
    return out


def warmups(first: float, warm: bool, runs: int = 1000) -> tuple[list[int], list[float]]:
    """Warm-up steps and the relative bias of the first 4 timed steps, over simulated rungs."""
    rng = random.Random(3)
    steps, bias = [], []
    for _ in range(runs):
        t = feed(Stopwatch(2, 0.0, math.inf, settle_from=settle_from(warm, False)), steady(rng, first))
        steps.append(t.warmup_steps)
        bias.append(statistics.fmean(t.step_times[:4]) - 1)
    return steps, bias


def test_the_settling_starts_at_the_first_step_of_a_warm_rung():
    assert (settle_from(False, False), settle_from(True, False), settle_from(False, True)) == (1, 0, 2)


def test_a_warm_rung_times_its_first_step_unless_the_change_point_sets_it_apart():
    cold, _ = warmups(1.0, warm=False)
    warm, bias = warmups(1.0, warm=True)
    # A steady warm rung: about one warm-up step fewer (1.47 -> 0.39 steps on this seed), unbiased.
    assert statistics.fmean(cold) - statistics.fmean(warm) >= 0.9
    assert abs(statistics.median(bias)) < 0.005
    # A first step 1.3x the others is still set apart as warm-up nearly always (96.7% on this seed),
    # one 2x or more always ...
    for first, share in ((1.3, 0.95), (2.0, 1.0), (5.0, 1.0)):
        steps, bias = warmups(first, warm=True)
        assert sum(s >= 1 for s in steps) / len(steps) >= share
        assert abs(statistics.median(bias)) < 0.005
    # ... and one 1.1x, which passes for steady half the time, biases the first 4 timed steps by
    # about 1% (median; 0.4% at 1.2x): a third of the ladder's 3% batch margin.
    _, bias = warmups(1.1, warm=True)
    assert statistics.median(bias) < 0.015


def test_an_unraced_stopwatch_given_look_s_ends_its_warm_up_at_the_first_long_step():
    """MeasureSettings.look_s (a raced probe's A-B legs): the settling rule of a raced rung without
    a race; without it the change-point waits for SETTLE_STEPS steps after the first."""
    import math

    from lightning_module.contract.timing import Stopwatch

    def feed(sw):
        now = 0.0
        sw.start(now)
        for d in (12.0, 10.0, 10.2):
            now += d
            sw.step(now)
        return sw.timing

    quick = feed(Stopwatch(3, 0.03, math.inf, settle_from=1, look_s=3.0))
    assert quick.warmup_steps == 1 and len(quick.step_times) == 2
    slow = feed(Stopwatch(3, 0.03, math.inf, settle_from=1))
    assert slow.step_times == []  # still settling: 3 steps after the change-point wanted
