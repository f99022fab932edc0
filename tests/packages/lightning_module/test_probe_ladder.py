"""The optimisation ladder's decisions, with a fake `measure` (no training, no torch)."""

from __future__ import annotations

import pytest

from lightning_module.contract.ladder import (
    CompileTimeout,
    Extension,
    LadderFailed,
    LadderOptions,
    RungMeasurement,
    classify,
    run_ladder,
)
from lightning_module.contract.result import ProbeConfig

START = ProbeConfig(accelerator="cpu", batch_size=32)
IPEX_MISSING = (Extension("ipex", status="not-installed", why="intel_extension_for_pytorch is not installed"),)


def fake(speed, failures=None, log=None):
    """measure(): samples/s from speed(config); failures(config) may return an exception to raise."""

    def measure(rung, cfg):
        if log is not None:
            log.append((rung, cfg))
        exc = failures(cfg) if failures else None
        if exc is not None:
            raise exc
        v = speed(cfg)
        return RungMeasurement(v, v * 0.98, v * 1.02, steps_timed=10)

    return measure


def article_a(cfg):
    """Shaped like article A on a CPU: bf16 and channels_last help, workers hurt, batch 16 best."""
    v = 10.0
    v *= 2.0 if cfg.precision == "bf16-mixed" else 1
    v *= 1.5 if cfg.channels_last else 1
    v *= 1.1 if cfg.compile and not cfg.channels_last else 0.9 if cfg.compile else 1
    v *= 0.8 if cfg.num_workers else 1
    v *= {8: 0.9, 16: 1.1, 32: 1.0, 64: 0.8}.get(cfg.batch_size, 0.5)
    return v


def rungs_by_name(lad):
    return {r.rung: r for r in lad.rungs}


def test_article_a_shaped_ladder_keeps_only_faster_rungs():
    lad = run_ladder(START, fake(article_a), LadderOptions(worker_counts=(2, 4), extensions=IPEX_MISSING))
    r = rungs_by_name(lad)
    assert [x.rung for x in lad.rungs] == [
        "baseline", "bf16", "channels_last", "compile", "workers=2", "batch=64", "batch=16", "batch=8",
        "compile@batch=16", "workers=2@batch=16", "ipex"]  # lost at 32: measured again at 16, and lost again
    assert r["bf16"].kept and r["channels_last"].kept
    assert not r["compile"].kept and r["compile"].status == "ok"  # slower with channels_last: dropped
    assert not r["workers=2"].kept and "workers=4" not in r  # stop adding workers once it hurts
    assert not r["batch=64"].kept and r["batch=16"].kept and not r["batch=8"].kept
    assert r["ipex"].status == "not-installed"
    assert lad.best.config == START.model_copy(update={"precision": "bf16-mixed", "channels_last": True, "batch_size": 16})
    assert lad.best.samples_per_sec == pytest.approx(10 * 2 * 1.5 * 1.1)


def test_a_slower_rung_is_not_kept_and_the_next_builds_on_the_best():
    log = []
    lad = run_ladder(START, fake(lambda c: 5.0 if c.precision == "bf16-mixed" else 10.0, log=log),
                     LadderOptions(skip=frozenset({"workers", "batch", "ipex", "compile"})))
    r = rungs_by_name(lad)
    assert r["bf16"].status == "ok" and not r["bf16"].kept
    assert dict(log)["channels_last"].precision == "32-true"  # built on the kept config, not the slower one


def test_oom_is_recorded_and_the_batch_sweep_continues():
    def oom(cfg):
        return RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB") if cfg.batch_size >= 64 else None

    lad = run_ladder(START, fake(lambda c: float(c.batch_size), oom),
                     LadderOptions(skip=frozenset({"precision", "channels_last", "compile", "workers", "ipex"})))
    r = rungs_by_name(lad)
    assert r["batch=64"].status == "oom" and "out of memory" in r["batch=64"].error
    assert r["batch=16"].status == "ok" and not r["batch=16"].kept  # slower: the sweep went on after the OOM
    assert lad.best.config.batch_size == 32


def test_torch_out_of_memory_error_is_an_oom():
    torch = pytest.importorskip("torch")
    assert classify(torch.OutOfMemoryError("CUDA out of memory"))[0] == "oom"
    try:  # the CPU allocator's own error, not a made-up message
        torch.empty(2**60, dtype=torch.uint8)
    except RuntimeError as e:
        assert classify(e)[0] == "oom", e
    else:
        pytest.fail("an exabyte was allocated")


def test_larger_batches_keep_doubling_past_a_flat_step_while_they_do_not_lose():
    speeds = {16: 80, 32: 100, 64: 120, 128: 130, 256: 132, 512: 140}
    lad = run_ladder(START, fake(lambda c: float(speeds[c.batch_size])),
                     LadderOptions(skip=frozenset({"precision", "channels_last", "compile", "workers", "ipex"}),
                                   extensions=IPEX_MISSING))
    assert [x.rung for x in lad.rungs if x.status == "ok"][1:] == [
        "batch=64", "batch=16", "batch=128", "batch=256", "batch=512"]
    assert {x.rung for x in lad.rungs if x.status == "skipped"} == {"bf16", "channels_last", "compile", "workers", "ipex"}
    r = rungs_by_name(lad)
    # 256 gains 1.5%, inside the margin: flat, 128 stays (the flat-curve rule), and the search walks
    # on to 512 (+7.7% over 128).
    assert not r["batch=256"].kept and "the batch before it stays" in r["batch=256"].note
    assert r["batch=1024"].status == "failed"  # no speed for it here: the walk ends at a failure
    assert lad.best.config.batch_size == 512


def test_a_flat_stretch_of_the_batch_curve_ends_the_search_after_two_steps():
    speeds = {16: 80, 32: 100, 64: 120, 128: 121, 256: 119, 512: 200}
    lad = run_ladder(START, fake(lambda c: float(speeds[c.batch_size])),
                     LadderOptions(skip=frozenset({"precision", "channels_last", "compile", "workers", "ipex"})))
    assert [x.rung for x in lad.rungs if x.rung.startswith("batch")] == ["batch=64", "batch=16", "batch=128", "batch=256"]
    assert lad.best.config.batch_size == 64  # the flat stretch's start: 128's 1% is inside the margin


def test_compile_failure_and_timeout_are_recorded():
    def broken(cfg):
        return RuntimeError("inductor: C++ compile error\nlong traceback") if cfg.compile else None

    lad = run_ladder(START, fake(lambda c: 10.0, broken),
                     LadderOptions(skip=frozenset({"batch", "workers"}), extensions=IPEX_MISSING))
    r = rungs_by_name(lad)
    assert r["compile"].status == "failed" and r["compile"].error == "RuntimeError: inductor: C++ compile error"
    assert r["ipex"].status == "not-installed"  # the ladder went on after the failure

    lad = run_ladder(START, fake(lambda c: 10.0, lambda c: CompileTimeout("over 5 s") if c.compile else None),
                     LadderOptions(skip=frozenset({"batch", "workers"})))
    assert rungs_by_name(lad)["compile"].status == "timeout"


def test_a_timeout_wrapped_by_the_compiler_is_still_a_timeout():
    class InductorError(RuntimeError):
        def __init__(self, inner):
            super().__init__(f"{type(inner).__name__}: {inner}")
            self.inner_exception = inner

    assert classify(InductorError(CompileTimeout("over 5 s"))) == ("timeout", "over 5 s")
    try:
        try:
            raise MemoryError("out of memory")
        except MemoryError as e:
            raise RuntimeError("BackendCompilerFailed") from e
    except RuntimeError as wrapped:
        assert classify(wrapped)[0] == "oom"
    assert classify(ValueError("plain"))[0] == "failed"


def test_baseline_failure_raises_and_no_tune_measures_only_the_baseline():
    with pytest.raises(LadderFailed, match="oom"):
        run_ladder(START, fake(lambda c: 1.0, lambda c: MemoryError()), LadderOptions())
    lad = run_ladder(START, fake(lambda c: 1.0), LadderOptions(tune=False))
    assert [x.rung for x in lad.rungs] == ["baseline"]


def test_fixed_batch_fp16_device_and_non_vision_model():
    lad = run_ladder(START, fake(lambda c: 2.0 if c.precision == "16-mixed" else 1.0),
                     LadderOptions(batch_fixed=True, half_precision="16-mixed", vision=False,
                                   extensions=(Extension("ipex", status="skipped", why="CPU only"),),
                                   skip=frozenset({"workers", "compile"})))
    r = rungs_by_name(lad)
    assert r["fp16"].kept and r["fp16"].config.precision == "16-mixed"
    assert r["channels_last"].status == "skipped"
    assert r["ipex"].status == "skipped"
    assert not any(x.rung.startswith("batch=") for x in lad.rungs)


def test_progress_callback_sees_every_rung():
    seen = []
    run_ladder(START, fake(article_a), LadderOptions(extensions=IPEX_MISSING),
               on_rung=lambda r, base: seen.append((r.rung, base.rung)))
    assert seen[0] == ("baseline", "baseline") and len(seen) == 11


def test_a_gain_within_the_noise_is_not_kept():
    """compile 1% faster but measured to +-5%: not kept; bf16 2x faster with the same noise: kept."""

    def measure(rung, cfg):
        v = 10.0 * (2 if cfg.precision == "bf16-mixed" else 1) * (1.01 if cfg.compile else 1)
        return RungMeasurement(v, v * 0.95, v * 1.05, steps_timed=10)

    lad = run_ladder(START, measure, LadderOptions(skip=frozenset({"workers", "batch", "ipex"})))
    r = rungs_by_name(lad)
    assert r["bf16"].kept
    assert r["compile"].status == "ok" and not r["compile"].kept
    assert not lad.best.config.compile
    # With no spread to judge by (one timed step, ci_low 0) the point estimates decide.
    lad = run_ladder(START, lambda rung, cfg: RungMeasurement(11.0 if cfg.compile else 10.0, 0.0, float("inf"), 1),
                     LadderOptions(skip=frozenset({"precision", "workers", "batch", "ipex"})))
    assert rungs_by_name(lad)["compile"].kept


def launch_bound(cfg):
    """Shaped like a transformer on a big GPU: small batches are bound by kernel launches, so bf16
    costs more than it saves there and wins 3x once the batch fills the device."""
    v = min(cfg.batch_size, 128) * 10.0
    if cfg.precision == "bf16-mixed":
        v *= 0.8 if cfg.batch_size < 64 else 3.0
    return v


def test_a_rung_lost_at_a_small_batch_is_measured_again_at_the_batch_the_search_settled_on():
    start = START.model_copy(update={"accelerator": "gpu", "batch_size": 16})
    lad = run_ladder(start, fake(launch_bound), LadderOptions(vision=False, skip=frozenset({"compile", "workers"})))
    r = rungs_by_name(lad)
    assert not r["bf16"].kept  # lost at batch 16
    again = r["bf16@batch=128"]
    assert again.kept and again.config.precision == "bf16-mixed" and again.config.batch_size == 128
    assert "lost at batch 16" in again.note
    assert lad.best.config == start.model_copy(update={"precision": "bf16-mixed", "batch_size": 128})
    assert lad.best.samples_per_sec == pytest.approx(128 * 10 * 3.0)


def test_a_rung_is_measured_again_at_a_2x_batch_move_and_none_when_the_batch_stayed():
    start = START.model_copy(update={"batch_size": 16})
    lad = run_ladder(start, fake(lambda c: min(c.batch_size, 32) * (0.5 if c.precision == "bf16-mixed" else 1.0)),
                     LadderOptions(vision=False, skip=frozenset({"compile", "workers"})))
    assert lad.best.config.batch_size == 32
    again = rungs_by_name(lad)["bf16@batch=32"]  # 2x is enough to measure it again (issue 32) ...
    assert again.status == "ok" and not again.kept  # ... and here it loses again
    assert lad.best.config.precision == "32-true"
    lad = run_ladder(start, fake(lambda c: 16.0 * (0.5 if c.precision == "bf16-mixed" else 1.0)),
                     LadderOptions(vision=False, skip=frozenset({"compile", "workers"})))
    assert lad.best.config.batch_size == 16  # the batch stayed: decisions made at 16 stand
    assert not [x for x in lad.rungs if "@" in x.rung]


def test_a_rung_that_won_or_failed_is_not_measured_again():
    start = START.model_copy(update={"accelerator": "gpu", "batch_size": 16})
    lad = run_ladder(start, fake(lambda c: min(c.batch_size, 128) * (2.0 if c.precision == "bf16-mixed" else 1.0),
                                 lambda c: RuntimeError("compile broke") if c.compile else None),
                     LadderOptions(vision=False, skip=frozenset({"workers"})))
    r = rungs_by_name(lad)
    assert r["bf16"].kept and r["compile"].status == "failed"
    assert lad.best.config.batch_size == 128
    assert not [x for x in lad.rungs if "@" in x.rung]
