"""benchmarks/probe_seconds.py: each measurement the probe makes, split into set-up, warm-up and
timed steps from its own Timing (the clock here is a fake: no wall times are asserted)."""

from __future__ import annotations

import itertools
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))


def test_each_measurement_is_split_into_setup_warmup_and_timed(monkeypatch):
    import probe_seconds
    from factories import fake_measurement

    from lightning_module.contract.ladder import RungTooSlow
    from lightning_module.contract.result import ProbeConfig
    from lightning_module.run import probe

    def fake(settings, config, **kw):
        if kw.get("label") == "bf16":
            raise RungTooSlow("slow")
        return fake_measurement(100.0, 32, steps=4)  # 4 steps of 0.32 s, 0.5 s of warm-up (1 step)

    monkeypatch.setattr(probe, "measure_anywhere", fake)
    clock = itertools.count(0.0, 5.0)  # each call "takes" 5 s
    cfg = ProbeConfig(accelerator="cpu", batch_size=32)
    with probe_seconds.RungSeconds(clock=lambda: next(clock)) as rs:
        probe.measure_anywhere(None, cfg, label="baseline")
        with pytest.raises(RungTooSlow):
            probe.measure_anywhere(None, cfg, label="bf16")
        probe.measure_anywhere(None, cfg, label="confirm tuned")
        probe.measure_anywhere(None, cfg)  # the memory fit's runs carry no label
    assert probe.measure_anywhere is fake  # put back
    assert [c.label for c in rs.calls] == ["baseline", "bf16", "confirm tuned", "memory"]
    base = rs.calls[0]
    assert (base.wall, base.warmup, base.timed, base.steps) == (5.0, 0.5, pytest.approx(1.28), 4)
    assert base.setup == pytest.approx(5.0 - 0.5 - 1.28)
    assert rs.calls[1].failed == "RungTooSlow" and rs.calls[1].setup == 5.0
    totals = rs.totals()
    assert totals["warm-up"] == pytest.approx(1.5) and totals["timed"] == pytest.approx(3 * 1.28)
    assert sum(totals.values()) == pytest.approx(20.0)
