"""Memory channels against a CPU anchor: a CPU whose count is unknown, on either side, is taken at
the published rows' balance (it raised on round(None) when only the anchor had a count)."""

import pytest

from advisor.estimate.fit import CPU_CHANNELS_EXPONENT as E
from advisor.estimate.points import Device
from advisor.estimate.predict import Estimate, _channels_band


def cpu(channels):
    return Device("cpu:x", "cpu:x", "cpu", "intel", 1.0, None, 2.0, channels)


@pytest.mark.parametrize("target, anchor, factor", [
    (None, 0.5, 0.75 ** E),  # only the anchor's count known: the target at the rows' 0.375
    (0.5, None, (0.5 / 0.375) ** E),  # only the target's known: the anchor at the rows'
    (None, None, None),  # neither known: nothing moves
])
def test_an_unknown_channel_count_is_taken_at_the_published_rows_balance(target, anchor, factor):
    est = Estimate(100.0, 90.0, 110.0, "fp32")
    _channels_band(est, cpu(target), cpu(anchor), 0.375, "your probe's")
    if factor is None:
        assert est.notes == [] and "memory_channels" not in est.basis
        return
    assert est.basis["memory_channels"]["factor"] == pytest.approx(factor, abs=2e-3)
    assert "count unknown: taken at the published rows'" in est.notes[0]
    assert est.low <= 100.0 / max(factor, 1 / factor) + 1e-9 and est.high >= 100.0 * max(factor, 1 / factor) - 1e-9
