"""benchmarks/probe_replay.py: the full and the raced ladder replayed on a fake clock, the probe's
own decision code fed simulated step times (the seconds are simulated, never the clock's)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))


def test_the_quiet_table_reads_and_derives_every_configuration_the_ladders_try():
    import probe_replay as p

    assert p.true_speed(True, False, 0, 2, 32, False) == (3.67 + 3.79) / 2  # read: the mean of both ladders'
    assert p.true_speed(False, False, 0, 1, 32, False) == (1.58 + 1.54) / 2
    # derived: compile at 16 from its factor at 8; a batch past 64 keeps falling; bf16 its 33 s step
    assert p.true_speed(True, True, 0, 2, 16, False) < p.true_speed(True, False, 0, 2, 16, False)
    assert p.true_speed(True, False, 0, 2, 128, False) < p.true_speed(True, False, 0, 2, 64, False)
    assert p.true_speed(False, False, 0, 2, 32, True) == 32 / p.BF16_STEP_S
    assert 0.03 < p.step_cv() < 0.10  # the quiet run's steps scattered by 3-10%


def test_the_raced_replay_spends_less_than_the_full_one_and_picks_channels_last():
    import probe_replay as p

    full, full_s, _ = p.replay(False, 0, p.step_cv())
    raced, raced_s, seconds = p.replay(True, 0, p.step_cv())
    assert full.config.channels_last and raced.config.channels_last
    assert raced_s / full_s < 0.75  # simulated seconds (0.57 on this seed)
    labels = [c.label for c in seconds.calls]
    assert "threads=1" in labels and "confirm tuned" in labels  # the whole probe ran on the fake clock
    assert sum(c.wall for c in seconds.calls) <= raced_s
