"""A gain the hardware cannot give is believed only when it holds on a quiet machine.

Pure logic, no torch. A CPU without AMX, AVX512_BF16 or Arm BF16 converts bf16 to fp32 and back
around every op: bf16 cannot be faster there (at one thread it ran 0.26x fp32 on a 2-core AVX2
EPYC). Beside a busy process it still "won" 1.76x and the A-B confirmation held it (issue 33): the
fp32 baseline had been measured while the neighbour took more of the machine. So a rung the ISA
emulates that beats the best so far is measured again, and is judged on that re-measurement only
if it ran quiet; when every re-measurement runs contended the rung is rejected, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable

from .ladder import RungContended, RungMeasurement

QUIET_TRIES = 2  # re-measurements an emulated rung gets to find the machine quiet


def contended(m: RungMeasurement) -> bool:
    """The measurement saw other work on the machine (None: no record, nothing to go on)."""
    return m.contention is not None and m.contention.contended


def held_quietly(first: RungMeasurement, again: Callable[[], RungMeasurement], best_sps: float | None, why: str,
                 tries: int = QUIET_TRIES) -> RungMeasurement:
    """The measurement the ladder should judge an emulated rung by: `first` where it does not beat
    `best_sps` (it loses anyway), else the first quiet one of up to `tries` re-measurements
    (`again()`); raises RungContended ("rejected: ...") when none ran quiet."""
    if best_sps is None or first.samples_per_sec <= best_sps:
        return first
    for _ in range(max(1, tries)):
        m = again()
        if not contended(m):
            return m  # the first draw is not pooled with it: it is the one in doubt
    raise RungContended(
        f"rejected: {why}; it beat the best so far ({first.samples_per_sec:,.1f} against {best_sps:,.1f} samples/s) "
        f"but {max(1, tries)} re-measurement(s) ran contended: a gain the ISA cannot give is kept only when it "
        "holds on a quiet machine")
