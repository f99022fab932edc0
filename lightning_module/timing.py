"""Step timing: the stopping rule (pure python) and the Lightning callback that applies it.

A step is measured from one on_train_batch_end to the next, so data loading, the host-to-device
copy and the optimizer step all count: that is what a training run pays for. The device is
synchronised before the clock is read, or an asynchronous GPU would look infinitely fast.
"""

from __future__ import annotations

import math
import signal
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from .result import StepTimeStats

# Two-sided 95% Student t critical values by degrees of freedom; beyond 30 the normal 1.96 is close.
_T95 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
    10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
    18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
    26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042,
}

MIN_TIMED_STEPS = 5


def t95(df: int) -> float:
    if df < 1:
        return math.inf
    return _T95.get(df, 1.96 + 2.4 / df)  # the tail is within 0.01 of the exact value


@dataclass(frozen=True)
class Throughput:
    samples_per_sec: float
    ci_low: float
    ci_high: float
    rel_half_width: float  # CI half-width / samples_per_sec (inf with fewer than 2 steps)


def throughput(step_times: Sequence[float], samples_per_step: int) -> Throughput:
    """Samples/s over timed steps with a 95% CI from the step-time mean (t distribution)."""
    n = len(step_times)
    if n == 0:
        raise ValueError("no timed steps")
    mean = statistics.fmean(step_times)
    sps = samples_per_step / mean
    if n < 2:
        return Throughput(sps, 0.0, math.inf, math.inf)
    half = t95(n - 1) * statistics.stdev(step_times) / math.sqrt(n)
    lo_t, hi_t = mean - half, mean + half
    ci_high = samples_per_step / lo_t if lo_t > 0 else math.inf
    return Throughput(sps, samples_per_step / hi_t, ci_high, half / mean)


def stop_reason(
    step_times: Sequence[float],
    elapsed_s: float,
    target_ci: float,
    max_seconds: float,
    min_steps: int = MIN_TIMED_STEPS,
    max_steps: int | None = None,
) -> str | None:
    """Why timing should stop now, or None to keep going.

    "converged": the 95% CI half-width of samples/s is within target_ci (a fraction) after at
    least min_steps steps; "time-limit": max_seconds of timed steps have passed (at least two
    steps are kept so there is a spread); "max-steps": the step cap was reached.
    """
    n = len(step_times)
    if max_steps is not None and n >= max_steps:
        return "max-steps"
    if n >= min_steps and throughput(step_times, 1).rel_half_width <= target_ci:
        return "converged"
    if elapsed_s >= max_seconds and n >= 2:
        return "time-limit"
    return None


def step_stats(step_times: Sequence[float], warmup_steps: int, warmup_seconds: float) -> StepTimeStats:
    s = sorted(step_times)
    q = statistics.quantiles(s, n=10, method="inclusive") if len(s) >= 2 else [s[0]] * 9
    return StepTimeStats(
        n_steps=len(s),
        mean_s=statistics.fmean(s),
        median_s=statistics.median(s),
        stdev_s=statistics.stdev(s) if len(s) >= 2 else 0.0,
        p10_s=q[0],
        p90_s=q[-1],
        warmup_steps=warmup_steps,
        warmup_seconds=warmup_seconds,
    )


@dataclass
class Timing:
    """What one rung measured, the same on every rank (rank 0's clock is broadcast)."""

    step_times: list[float] = field(default_factory=list)
    warmup_steps: int = 0
    warmup_seconds: float = 0.0
    first_step_seconds: float | None = None  # includes compilation when the model is compiled
    reason: str | None = None


def synchronize(accelerator: str) -> None:
    """Wait for queued device work so the clock measures finished steps."""
    import torch

    if accelerator == "gpu" and torch.cuda.is_available():
        torch.cuda.synchronize()
    elif accelerator == "mps" and hasattr(torch, "mps"):
        torch.mps.synchronize()
    elif accelerator == "tpu":
        import torch_xla.core.xla_model as xm

        xm.wait_device_ops()


class StepAlarm:
    """Bounds one step's wall time: SIGALRM raises the given exception in the main thread.

    Python runs the handler between operations, so a long step built of many kernels is cut off
    within one kernel of the limit. Off the main thread (where signals cannot be used) it does nothing.
    """

    def __init__(self):
        self._active = threading.current_thread() is threading.main_thread()
        self._old = None
        self._exc = None

    def arm(self, seconds: float | None, exc: Exception) -> None:
        if not self._active or not seconds:
            return
        self._exc = exc

        def fire(signum, frame):
            raise self._exc

        if self._old is None:
            self._old = signal.signal(signal.SIGALRM, fire)
        signal.setitimer(signal.ITIMER_REAL, seconds)

    def disarm(self) -> None:
        if not self._active or self._old is None:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._old)
        self._old = None


def make_callback(
    accelerator: str,
    warmup_steps: int,
    target_ci: float,
    max_seconds: float,
    max_steps: int | None = None,
    first_step_limit: tuple[float, Exception] | None = None,
    step_limit: tuple[float, Exception] | None = None,
):
    """A Lightning Callback timing steps; built in a function so importing this module needs no lightning.

    first_step_limit bounds the first step (compilation); step_limit every other step (a rung
    so slow it cannot win is cut short instead of spending minutes per step).
    """
    from lightning.pytorch.callbacks import Callback

    class StepTimer(Callback):
        def __init__(self):
            self.timing = Timing()
            self.alarm = StepAlarm()
            self._last: float | None = None
            self._start: float | None = None
            self._timed_start: float | None = None
            self._batches = 0

        def on_train_start(self, trainer, pl_module):
            synchronize(accelerator)
            self._start = time.perf_counter()

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            limit = first_step_limit if self._batches == 0 else step_limit
            if limit is not None:
                self.alarm.arm(*limit)

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            synchronize(accelerator)
            self.alarm.disarm()
            now = time.perf_counter()
            self._batches += 1
            t = self.timing
            if self._batches == 1:
                t.first_step_seconds = now - self._start
            if self._batches <= warmup_steps:
                t.warmup_steps = self._batches
                t.warmup_seconds = now - self._start
            else:
                t.step_times.append(now - self._last)
                if self._timed_start is None:
                    self._timed_start = self._last
            self._last = now
            reason = None
            if t.step_times and trainer.is_global_zero:
                reason = stop_reason(t.step_times, now - self._timed_start, target_ci, max_seconds, max_steps=max_steps)
            # Rank 0 decides; every rank must stop on the same step or DDP hangs.
            stop = trainer.strategy.reduce_boolean_decision(reason is not None, all=False)
            if stop:
                t.reason = reason
                trainer.should_stop = True

        def on_train_end(self, trainer, pl_module):
            self.alarm.disarm()
            if trainer.world_size > 1:
                self.timing = trainer.strategy.broadcast(self.timing, src=0)

        def on_exception(self, trainer, pl_module, exception):
            self.alarm.disarm()

    return StepTimer()
