"""Re-measuring, confirming and judging a probe's numbers, on synthetic step-time series."""

from __future__ import annotations

import json
import math
import random
import re
import time

import pytest
from factories import fake_measurement

from lightning_module.contract.contention import ContentionMeter, Reading
from lightning_module.contract.ladder import RungMeasurement, RungTooSlow
from lightning_module.contract.reliability import (
    confirm,
    measure_until_known,
    reasons,
    speedup,
    summarise,
)
from lightning_module.contract.result import Contention, ProbeConfig, utilisation
from lightning_module.contract.timing import Timing
from lightning_module.run.callbacks import StepAlarm

BATCH = 32
BASE = ProbeConfig(accelerator="cpu", batch_size=BATCH)
TUNED = BASE.model_copy(update={"precision": "bf16-mixed"})


def series(mean_step: float, rel_noise: float, n: int, rng: random.Random) -> RungMeasurement:
    """A rung measured over n steps whose times scatter by rel_noise around mean_step."""
    t = Timing([mean_step * (1 + rng.gauss(0, rel_noise)) for _ in range(n)], 1, 0.1, mean_step, "time-limit")
    return summarise(t, BATCH, target_ci=0.03)


def test_a_noisy_rung_is_re_measured_and_its_steps_pooled():
    rng = random.Random(1)
    calls = []

    def once():
        calls.append(1)
        return series(0.1, 0.08, 12, rng)  # +-8% per step, 12 steps: CI about +-5%, wider than 3%

    m = measure_until_known(once, BATCH, 0.03, rounds=1)
    assert len(calls) == 2 and m.remeasured == 1 and m.steps_timed == 24
    assert m.samples_per_sec == pytest.approx(BATCH / 0.1, rel=0.05)

    calls.clear()
    quiet = measure_until_known(lambda: calls.append(1) or series(0.1, 0.005, 12, rng), BATCH, 0.03, rounds=1)
    assert len(calls) == 1 and quiet.remeasured == 0 and quiet.ci_target_met

    calls.clear()  # bounded: at most `rounds` more, and not at all when the rung cannot change the decision
    assert measure_until_known(once, BATCH, 0.03, rounds=3).remeasured <= 3
    calls.clear()
    measure_until_known(once, BATCH, 0.03, rounds=3, matters=lambda m: False)
    assert len(calls) == 1


def test_contended_steps_are_left_out_when_enough_clean_ones_remain():
    steps = [0.1] * 8 + [0.3] * 4
    t = Timing(steps, 1, 0.1, 0.1, "converged", contended=[False] * 8 + [True] * 4)
    m = summarise(t, BATCH, 0.03)
    assert m.samples_per_sec == pytest.approx(BATCH / 0.1) and m.steps_timed == 12
    t.contended = [True] * 9 + [False] * 3  # too few clean steps to stop on: all of them count
    assert summarise(t, BATCH, 0.03).samples_per_sec < BATCH / 0.1


def test_speedup_ratio_and_its_ci():
    base = [fake_measurement(100.0, BATCH), fake_measurement(104.0, BATCH), fake_measurement(98.0, BATCH)]
    tuned = [fake_measurement(150.0, BATCH), fake_measurement(151.0, BATCH), fake_measurement(149.0, BATCH)]
    s = speedup(base, tuned)
    d = [math.log(150 / 100), math.log(151 / 104), math.log(149 / 98)]
    assert s.ratio == pytest.approx(math.exp(sum(d) / 3))
    assert s.ci_low < s.ratio < s.ci_high and s.held
    # Two legs that agree by chance are still only as certain as their own steps allow.
    noisy = [RungMeasurement(100.0, 80.0, 120.0, 5), RungMeasurement(100.0, 80.0, 120.0, 5)]
    same = [RungMeasurement(110.0, 88.0, 132.0, 5), RungMeasurement(110.0, 88.0, 132.0, 5)]
    s = speedup(noisy, same)
    assert s.ratio == pytest.approx(1.1) and s.ci_low < 1 and not s.held


def test_a_false_win_is_not_kept():
    """The ladder kept bf16 on one lucky draw; measured again in alternation it is no faster."""
    rng = random.Random(7)

    def measure(name, cfg):
        return series(0.1, 0.04, 15, rng)  # the same speed whatever the configuration

    done = confirm(measure, BASE, TUNED, lambda c: BATCH, 0.03, rounds=3)
    assert not done.record.held and done.record.speedup_ci[0] < 1 < done.record.speedup_ci[1]
    assert [n for n, _ in done.legs] == ["baseline", "tuned"] * 3  # A B A B A B

    def real_win(name, cfg):
        return series(0.1 / (1.4 if cfg.precision == "bf16-mixed" else 1), 0.04, 15, rng)

    done = confirm(real_win, BASE, TUNED, lambda c: BATCH, 0.03, rounds=3)
    assert done.record.held and done.record.speedup == pytest.approx(1.4, rel=0.05)
    assert done.tuned.steps_timed == 45  # the result is the pooled tuned legs, not the ladder's lucky draw


def test_run_probe_drops_a_pick_that_does_not_hold():
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import probe

    def measure(rung, cfg):
        lucky = rung == "batch=16"  # the ladder's own draw of batch 16 was lucky; confirmation legs are not
        return fake_measurement(200.0 if lucky else 100.0, cfg.batch_size)

    spec = WorkloadSpec(model="mlp", image_size=8, num_classes=10, batch_size=32)
    opts = probe.ProbeOptions(spec=spec, accelerator="cpu", matmul_seconds=0.05, confirm_rounds=2,
                              skip=frozenset({"precision", "channels_last", "compile", "workers", "run_cpu"}))
    legs = []
    result = probe.run_probe(opts, measure_fn=measure, on_leg=lambda name, m: legs.append(name))
    kept = {r.rung for r in result.ladder if r.kept}
    assert "batch=16" in kept  # the ladder picked it ...
    assert legs == ["baseline", "tuned"] * 2
    assert not result.confirmation.held and result.config.batch_size == 32  # ... and the probe did not keep it
    assert result.samples_per_sec == pytest.approx(100.0)


def test_reasons_for_an_unreliable_result():
    t = Timing([0.1, 0.12, 0.1, 0.11, 0.1], 1, 0.1, 0.1, "time-limit")
    m = summarise(t, BATCH, 0.03)
    assert m.ci_target_met is False
    assert reasons(m, 0.03)[0].startswith("95% CI ±") and "wider than the ±3% target" in reasons(m, 0.03)[0]
    busy = Contention(contended=True, steps=5, contended_steps=5, reasons=["5 of 5 timed steps contended"])
    m2 = summarise(Timing([0.1] * 6, 1, 0.1, 0.1, "converged", contention=busy), BATCH, 0.03)
    assert reasons(m2, 0.03) == ["contended: 5 of 5 timed steps contended"]
    assert reasons(summarise(Timing([0.1] * 6, 1, 0.1, 0.1, "converged"), BATCH, 0.03), 0.03) == []


def test_utilisation_above_a_peak_is_an_error_not_a_result():
    assert utilisation(0.08, 0.16, "measured matmul") == (0.5, None)
    u, why = utilisation(0.163, 0.16, "measured matmul")
    assert u is None and "102% of the measured matmul peak" in why and "measurement error" in why
    assert utilisation(None, 0.16, "datasheet") == (None, None)


def test_an_alarm_on_a_contended_step_is_extended_not_fired():
    alarm, asked = StepAlarm(), []

    def judge(exc):
        asked.append(time.perf_counter())
        return None if len(asked) < 3 else exc  # contended twice, then the step is really too slow

    t0 = time.perf_counter()
    with pytest.raises(RungTooSlow):
        alarm.arm(0.1, RungTooSlow("too slow"), judge=judge)
        while time.perf_counter() - t0 < 5:
            pass
    alarm.disarm()
    # asked three times, each a full 0.1 s after the last: an interval timer never fires early
    # (only the lower bound is asserted: a loaded machine can only lengthen the intervals)
    assert len(asked) == 3 and min(b - a for a, b in zip([t0, *asked], asked)) >= 0.1 * 0.99


def test_measure_does_not_cut_a_slow_step_the_machine_was_contended_for(monkeypatch, user_module):
    """measure() with a reader that says every step waits for a CPU: the 5 s step outlives its
    0.5 s limit and ends as `contended` (no verdict on speed), not as `timeout` (cannot win)."""
    from test_probe_measure import SLOW_MODULE

    from lightning_module.contract.ladder import RungContended, classify
    from lightning_module.contract.options import MeasureSettings
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import measure
    from lightning_module.run.callbacks import Watch

    user_module("sleepy2", SLOW_MODULE)

    def busy_reading():
        now = time.perf_counter()
        return Reading(now, time.process_time(), run=0.0, wait=now)  # queued the whole time

    monkeypatch.setattr(measure, "watch_for", lambda cfg: Watch(1, 2, read=busy_reading))
    measure.quiet_lightning()
    settings = MeasureSettings(WorkloadSpec(model="sleepy2:Sleepy", image_size=4, num_classes=10),
                               warmup_steps=1, max_seconds=30)
    with pytest.raises(RungContended) as err:
        measure.measure(settings, ProbeConfig(accelerator="cpu", batch_size=4), slow_step_s=0.5)
    import sleepy2

    ran = float(str(err.value).split("a step ran ")[1].split(" s ")[0])
    assert ran >= 0.9 and max(sleepy2.SLEPT) < 3  # past twice the limit, and the 5 s step was cut in its sleep
    assert classify(err.value)[0] == "contended"


def test_contention_meter_counts_synthetic_busy_steps():
    m = ContentionMeter(cores_in_use=1, cpus=1)
    a = Reading(0, 0, run=0, wait=0)
    for i in range(1, 6):
        b = Reading(i, i * 0.4, run=i * 0.4, wait=i * 0.6)
        assert m.add(a, b).contended
        a = b
    assert m.record().contended_steps == 5


def test_results_show_and_json_say_why_a_result_is_unreliable(cli, tmp_path):
    import json

    from factories import probe_result

    from advisor.store import ResultStore
    from lightning_module.contract.result import Confirmation, parse_result

    busy = Contention(contended=True, steps=9, contended_steps=7, wait_share=0.42, load_average=5.5, cpus=2,
                      cores_in_use=2, own_load=2, reasons=["7 of 9 timed steps contended"])
    r = probe_result().model_copy(update={
        "reliable": False, "unreliable_reasons": ["contended: 7 of 9 timed steps contended"], "contention": busy,
        "confirmation": Confirmation(rounds=3, baseline_samples_per_sec=[10, 11, 10], tuned_samples_per_sec=[40, 41, 39],
                                     speedup=3.9, speedup_ci=(3.7, 4.1), held=True, contended=True),
    })
    r.ladder[1] = r.ladder[1].model_copy(update={"contention": busy, "ci_target_met": False, "remeasured": 1})
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(r)
    code, out, _ = cli("results", "show", r.result_id[:12], "--store", str(db))
    assert code == 0
    assert "no: contended: 7 of 9 timed steps contended" in out
    assert "7 of 9 steps contended, run-queue wait 42%, load 5.5 on 2 CPU(s)" in out
    assert "3.90x baseline (95% CI 3.70-4.10) over 3 A-B rounds; held" in out
    bf16 = next(x for x in out.splitlines() if x.startswith("bf16"))
    assert " no " in bf16 and "contended (run-queue wait 42%, load 5.5/2 CPUs)" in bf16
    assert "CI above target after 1 re-measurement(s)" in bf16
    code, out, _ = cli("results", "show", r.result_id[:12], "--store", str(db), "--format", "json")
    back = parse_result(out)
    assert back.reliable is False and back.contention == busy and back.confirmation.held
    # A result written before these fields existed still loads, as reliable, with no contention record.
    old = json.loads(probe_result().model_dump_json())
    for k in ("contention", "confirmation", "profile_trace", "reliable", "unreliable_reasons"):
        old.pop(k)
    for rung in old["ladder"]:
        for k in ("contention", "remeasured", "ci_target_met"):
            rung.pop(k)
    for k in ("run_cpu", "allocator", "openmp", "compile_backend", "xla"):
        old["config"].pop(k)
    legacy = parse_result(json.dumps(old))
    assert legacy.reliable and legacy.contention is None and legacy.config.compile_backend == "inductor"


def test_two_steps_that_agree_have_not_reached_the_target():
    m = summarise(Timing([0.1, 0.1001], 1, 0.1, 0.1, "time-limit"), BATCH, 0.03)
    assert (m.ci_high - m.ci_low) / 2 / m.samples_per_sec < 0.03 and m.ci_target_met is False


def test_a_leg_too_short_for_its_own_ci():
    from lightning_module.contract.ladder import CI_UNBOUNDED

    short = RungMeasurement(200.0, 50.0, CI_UNBOUNDED, 2)  # two timed steps far apart: unbounded
    one = speedup([fake_measurement(100.0, BATCH)], [short])
    assert not one.held and one.ci_high >= CI_UNBOUNDED  # one pair and an unbounded leg: nothing is known
    three = speedup([fake_measurement(100.0, BATCH)] * 3, [short, RungMeasurement(205.0, 50.0, CI_UNBOUNDED, 2),
                                                            RungMeasurement(198.0, 50.0, CI_UNBOUNDED, 2)])
    assert three.held and three.ci_low > 1.8  # three pairs that agree: their spread carries the noise


def test_an_unbounded_ci_is_printed_as_such():
    from advisor.render.probe import ci_range
    from lightning_module.contract.ladder import CI_UNBOUNDED

    assert ci_range(2.63, CI_UNBOUNDED) == "2.63-unbounded" and ci_range(1.5, 2.25) == "1.50-2.25"


def _rounds(ratio: float, drift: float, noise: float, steps: tuple[int, int], k: int, rng: random.Random):
    """k A-B rounds: the machine's speed drifts between rounds (both legs of a round alike), each
    step scatters by `noise`; the tuned configuration is truly `ratio` times faster."""
    base, tuned = [], []
    for _ in range(k):
        slow = math.exp(rng.gauss(0, drift))
        for out, n, speed in ((base, steps[0], 1.0), (tuned, steps[1], ratio)):
            t = Timing([0.1 * slow / speed * math.exp(rng.gauss(0, noise)) for _ in range(n)], 1, 0.1, 0.1, "time-limit")
            out.append(summarise(t, BATCH, 0.03))
    return base, tuned


def test_two_rounds_that_both_win_clearly_hold_despite_drift_between_them():
    """The quiet-machine benchmark's case: 2 rounds of 2-3 steps, baseline 2.34 then 2.85 samples/s,
    tuned 4.16 then 3.99. The rounds' spread alone (t with 1 degree of freedom) put the CI at
    0.34-7.3 and the 1.6x pick was thrown away; each round on its own is far above 1."""
    legs = {"b1": (2.34, 2), "t1": (4.16, 3), "b2": (2.85, 2), "t2": (3.99, 3)}
    rng = random.Random(3)
    m = {k: summarise(Timing([BATCH / v * math.exp(rng.gauss(0, 0.04)) for _ in range(n)], 1, 0.1, 1, "time-limit"),
                      BATCH, 0.03) for k, (v, n) in legs.items()}
    s = speedup([m["b1"], m["b2"]], [m["t1"], m["t2"]])
    assert s.held and 1.2 < s.ci_low < s.ratio < s.ci_high < 2.3


def test_a_pick_that_lost_one_round_does_not_hold():
    rng = random.Random(4)
    b1, t1 = _rounds(1.3, 0.0, 0.02, (4, 4), 1, rng)
    b2, t2 = _rounds(0.95, 0.0, 0.02, (4, 4), 1, rng)
    s = speedup(b1 + b2, t1 + t2)
    assert not s.held and s.ci_low < 1 < s.ci_high


@pytest.mark.parametrize("k", [2, 3])
def test_no_real_speed_up_rarely_holds_and_a_real_one_is_covered(k):
    """Over many simulated confirmations with 20% drift between rounds and 5% step noise: a pick
    that is no faster holds in under 5% of them; the CI covers a true 1.3x in at least 95%."""
    rng = random.Random(10 + k)
    false_holds = sum(speedup(*_rounds(1.0, 0.2, 0.05, (3, 3), k, rng)).held for _ in range(400))
    assert false_holds / 400 < 0.05
    covered = 0
    for _ in range(400):
        s = speedup(*_rounds(1.3, 0.2, 0.05, (3, 3), k, rng))
        covered += s.ci_low <= 1.3 <= s.ci_high
    assert covered / 400 >= 0.95


def test_utilisation_against_a_denormal_peak_says_so_without_inf():
    u, why = utilisation(1.0, 5e-324, "measured matmul")
    assert u is None and "inf" not in why and "more than 1000x" in why


def test_a_baseline_that_moved_is_contended_and_states_no_speed_up(cli, tmp_path):
    """The probe's one story: on a busy machine the ladder timed its baseline at 922/s and the same
    configuration then ran at ~14,000/s confirming; what is printed and stored is the confirmation's,
    flagged as contended, and no '15x baseline' appears anywhere."""
    from advisor.render.probe import summary_lines
    from advisor.store import ResultStore
    from lightning_module.contract.reliability import BASELINE_MOVED, speedup_over_baseline
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import probe

    def measure(rung, cfg):
        if rung == "baseline":
            return fake_measurement(922.0, cfg.batch_size)  # the machine was busy while the ladder timed it
        return fake_measurement(14000.0 if rung == "confirm baseline" else 14175.0, cfg.batch_size)

    spec = WorkloadSpec(model="mlp", image_size=8, num_classes=10, batch_size=32)
    opts = probe.ProbeOptions(spec=spec, accelerator="cpu", matmul_seconds=0.05, confirm_rounds=2,
                              skip=frozenset({"precision", "channels_last", "compile", "batch", "run_cpu"}))
    result = probe.run_probe(opts, measure_fn=measure)
    c = result.confirmation
    assert c.baseline_shift == pytest.approx(14000 / 922) and c.baseline_shift > BASELINE_MOVED
    assert c.contended and not result.reliable
    assert any("the baseline moved 15.18x" in w for w in result.unreliable_reasons)
    assert speedup_over_baseline(result) is None  # the ladder's 15x is not a speed-up
    text = "\n".join(summary_lines(result, None, None))
    assert "15.37x" not in text and "15.18x baseline" not in text
    assert "no speed-up stated: the baseline moved (contended)" in text
    assert result.samples_per_sec == pytest.approx(14000.0 if not c.held else 14175.0)  # the confirmed figure
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(result)
    _, out, _ = cli("results", "list", "--store", str(db), "--format", "json")
    (row,) = json.loads(out)["results"]
    assert row["speedup_over_baseline"] is None and row["samples_per_sec"] == pytest.approx(result.samples_per_sec)
    _, out, _ = cli("results", "show", result.result_id[:12], "--store", str(db), "--wide")
    ladder = out[out.index("rung "):]
    assert "15.37" not in ladder and "moved 15.18x by the confirmation" in ladder  # no ladder ratio either
    assert "the baseline moved 15.18x" in out


def test_a_confirmed_speed_up_is_the_one_printed_and_stored(cli, tmp_path):
    from advisor.render.probe import summary_lines
    from advisor.store import ResultStore
    from lightning_module.contract.reliability import speedup_over_baseline
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import probe

    def measure(rung, cfg):  # workers=2 is twice as fast, in the ladder (a lucky 2.5x) and confirming (2x)
        if rung.startswith("confirm"):
            return fake_measurement(200.0 if cfg.num_workers else 100.0, cfg.batch_size)
        return fake_measurement(250.0 if cfg.num_workers else 100.0, cfg.batch_size)

    spec = WorkloadSpec(model="mlp", image_size=8, num_classes=10, batch_size=32)
    opts = probe.ProbeOptions(spec=spec, accelerator="cpu", matmul_seconds=0.05, confirm_rounds=2,
                              skip=frozenset({"precision", "channels_last", "compile", "batch", "run_cpu"}))
    result = probe.run_probe(opts, measure_fn=measure)
    assert result.confirmation.held and result.confirmation.baseline_shift == pytest.approx(1.0)
    assert speedup_over_baseline(result) == pytest.approx(2.0) and result.samples_per_sec == pytest.approx(200.0)
    assert "2.00x baseline (confirmed)" in summary_lines(result, None, None)[0]
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(result)
    _, out, _ = cli("results", "list", "--store", str(db), "--format", "json")
    assert json.loads(out)["results"][0]["speedup_over_baseline"] == pytest.approx(2.0)


def test_the_progress_line_says_rung_step_ci_and_time_left():
    from lightning_module.contract.timing import progress_line

    assert progress_line("bf16", 2, 3, [], 32, 5.0, None) == "rung bf16: warm-up step 2/3"
    line = progress_line("bf16", 13, 3, [0.1, 0.11, 0.09, 0.1] * 3, 32, 5.0, 1.2)
    assert line.startswith("rung bf16: step 10, 320.0 samples/s ±") and line.endswith("so far, 3.8 s left")


def test_a_rung_shows_the_probes_own_progress_line_and_erases_it(capsys, monkeypatch):
    """settings.progress (a terminal): the rung's line, rewritten in place, then erased; never
    Lightning's bar (its whole-epoch ETA)."""
    from lightning_module.contract.options import MeasureSettings
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import callbacks, measure

    monkeypatch.setattr(callbacks.Progress, "EVERY_S", 0.0)  # every step, so a short rung shows it
    measure.quiet_lightning()
    settings = MeasureSettings(WorkloadSpec(model="mlp", image_size=8, num_classes=10), warmup_steps=1,
                               max_seconds=1.0, max_steps=6, progress=True)
    m = measure.measure(settings, ProbeConfig(accelerator="cpu", batch_size=8), label="bf16")
    err = capsys.readouterr().err
    assert m.samples_per_sec > 0
    # The warm-up runs until the steps settle (contract/settle.py), at most 4 x --warmup-steps 1.
    assert "\rrung bf16: warm-up step 1/4" in err and re.search(r"\rrung bf16: step \d+, ", err) and " so far, " in err
    assert err.endswith("\r\x1b[K")  # erased: nothing of it is left after the rung
    assert "it/s" not in err and "Epoch" not in err  # no Lightning bar


def test_an_interrupt_mid_rung_erases_the_progress_line(capsys, monkeypatch):
    """Ctrl-C during a rung (the probe command's handler raises ProbeStopped in the step): the progress
    line is erased before the stop goes on to the CLI's message, so no bar (Lightning's used to print
    one more) follows it."""
    import signal

    from lightning_module.contract.ladder import ProbeStopped
    from lightning_module.contract.options import MeasureSettings
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import callbacks, measure

    monkeypatch.setattr(callbacks.Progress, "EVERY_S", 0.0)
    shown = callbacks.Progress.on_train_batch_end

    def then_interrupt(self, trainer, *args):
        shown(self, trainer, *args)
        if trainer.global_step >= 6:  # past the warm-up: it ends by step 4 at most (4 x --warmup-steps 1)
            raise ProbeStopped(signal.SIGINT)

    monkeypatch.setattr(callbacks.Progress, "on_train_batch_end", then_interrupt)
    measure.quiet_lightning()
    settings = MeasureSettings(WorkloadSpec(model="mlp", image_size=8, num_classes=10), warmup_steps=1,
                               max_seconds=30.0, max_steps=50, progress=True)
    with pytest.raises(ProbeStopped):
        measure.measure(settings, ProbeConfig(accelerator="cpu", batch_size=8), label="bf16")
    err = capsys.readouterr().err
    assert "\rrung bf16: step " in err  # it was showing
    assert err.endswith("\r\x1b[K") and "Epoch" not in err and "it/s" not in err


def test_a_raced_confirmation_stops_once_the_verdict_is_known_and_errs_no_more_than_stated():
    """race=True: after each round, the speed-up's CI at the look's level (race.look_alpha); a clear
    win or loss stops the alternation, an answer inside the noise takes every round."""
    rng = random.Random(31)

    def win(name, cfg):  # bf16 1.4x faster: known after one round
        return series(0.1 / (1.4 if cfg.precision == "bf16-mixed" else 1), 0.04, 15, rng)

    done = confirm(win, BASE, TUNED, lambda c: BATCH, 0.03, rounds=3, race=True)
    assert done.record.rounds == 1 and [n for n, _ in done.legs] == ["baseline", "tuned"] and done.record.held
    assert done.record.speedup == pytest.approx(1.4, rel=0.05)

    def lose(name, cfg):  # the pick 30% slower in truth: known not to hold after one round
        return series(0.1 * (1.3 if cfg.precision == "bf16-mixed" else 1), 0.04, 15, rng)

    done = confirm(lose, BASE, TUNED, lambda c: BATCH, 0.03, rounds=3, race=True)
    assert done.record.rounds == 1 and not done.record.held

    def same(name, cfg):  # no difference: never clear, all three rounds
        return series(0.1, 0.04, 15, rng)

    # Wrongly held when there is no speed-up: at most the stated 5% over every look (simulated).
    wrong = 0
    for _ in range(200):
        done = confirm(same, BASE, TUNED, lambda c: BATCH, 0.03, rounds=3, race=True)
        wrong += done.record.held
    assert wrong / 200 <= 0.05
    assert confirm(same, BASE, TUNED, lambda c: BATCH, 0.03, rounds=3, race=True).record.rounds == 3
