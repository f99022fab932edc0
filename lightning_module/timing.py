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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .contention import ContentionMeter, GpuState, Reading, load_average, read_now, step_load
from .result import Contention, StepTimeStats

# Two-sided 95% Student t critical values by degrees of freedom; beyond 30 the normal 1.96 is close.
_T95 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
    10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
    18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
    26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042,
}

MIN_TIMED_STEPS = 5
# A step the machine was contended for may run this many times its limit before the rung is given
# up as "contended": never cut as too slow to win on a step someone else slowed down.
CONTENDED_EXTENSION = 2


def t95(df: int) -> float:
    if df < 1:
        return math.inf
    return _T95.get(df, 1.96 + 2.4 / df)  # the tail is within 0.01 of the exact value


@dataclass(frozen=True)
class StepRate:
    """Samples/s measured over a rung's timed steps, with its 95% CI."""

    samples_per_sec: float
    ci_low: float
    ci_high: float
    rel_half_width: float  # CI half-width / samples_per_sec (inf with fewer than 2 steps)


def step_rate(step_times: Sequence[float], samples_per_step: int) -> StepRate:
    """Samples/s over timed steps with a 95% CI from the step-time mean (t distribution)."""
    n = len(step_times)
    if n == 0:
        raise ValueError("no timed steps")
    mean = statistics.fmean(step_times)
    sps = samples_per_step / mean
    if n < 2:
        return StepRate(sps, 0.0, math.inf, math.inf)
    half = t95(n - 1) * statistics.stdev(step_times) / math.sqrt(n)
    lo_t, hi_t = mean - half, mean + half
    ci_high = samples_per_step / lo_t if lo_t > 0 else math.inf
    return StepRate(sps, samples_per_step / hi_t, ci_high, half / mean)


def stop_reason(
    step_times: Sequence[float],
    elapsed_s: float,
    target_ci: float,
    max_seconds: float,
    min_steps: int = MIN_TIMED_STEPS,
    max_steps: int | None = None,
    steps_taken: int | None = None,
) -> str | None:
    """Why timing should stop now, or None to keep going.

    "converged": the 95% CI half-width of samples/s is within target_ci (a fraction) after at
    least min_steps steps; "time-limit": max_seconds of timed steps have passed (at least two
    steps are kept so there is a spread); "max-steps": the step cap was reached. `step_times` are
    the steps that count (the clean ones); `steps_taken` all of them, when more.
    """
    n = len(step_times)
    taken = max(n, steps_taken or 0)
    if max_steps is not None and taken >= max_steps:
        return "max-steps"
    if n >= min_steps and step_rate(step_times, 1).rel_half_width <= target_ci:
        return "converged"
    if elapsed_s >= max_seconds and taken >= 2:
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
    contended: list[bool] = field(default_factory=list)  # per timed step: the machine was contended
    contention: Contention | None = None


def clean_steps(timing: Timing) -> list[float]:
    """The timed steps nothing else slowed down (all of them where contention was not watched)."""
    if len(timing.contended) != len(timing.step_times):
        return list(timing.step_times)
    return [s for s, c in zip(timing.step_times, timing.contended) if not c]


def usable_steps(timing: Timing) -> list[float]:
    """What the throughput is computed from: the clean steps when there are enough of them to
    stop on, else every step (and the rung is reported as contended)."""
    clean = clean_steps(timing)
    return clean if len(clean) >= MIN_TIMED_STEPS else list(timing.step_times)


@dataclass
class Watch:
    """What the step timer watches besides the clock: whether the machine is contended."""

    cores_in_use: int
    cpus: int
    cpu_bound: bool = True  # a CPU rung (its CPU share means something)
    own_load: float | None = None  # runnable threads this probe itself adds to the load average
    read: Callable[[], Reading] = read_now
    gpu: Callable[[], GpuState | None] | None = None


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
    `judge`, when given, is asked when the alarm fires: it returns the exception to raise, or None
    to give the step the same time again (a step slowed down by someone else's work).
    """

    def __init__(self):
        self._active = threading.current_thread() is threading.main_thread()
        self._old = None
        self._exc = None
        self._judge = None
        self._seconds = 0.0

    def arm(self, seconds: float | None, exc: Exception,
            judge: Callable[[Exception], Exception | None] | None = None) -> None:
        if not self._active or not seconds:
            return
        self._exc, self._judge, self._seconds = exc, judge, seconds

        def fire(signum, frame):
            exc = self._judge(self._exc) if self._judge is not None else self._exc
            if exc is None:
                signal.setitimer(signal.ITIMER_REAL, self._seconds)
                return
            raise exc

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
    watch: Watch | None = None,
    contended_exc: Callable[[float], Exception] | None = None,
):
    """A Lightning Callback timing steps; built in a function so importing this module needs no lightning.

    first_step_limit bounds the first step (compilation); step_limit every other step (a rung
    so slow it cannot win is cut short instead of spending minutes per step). With a `watch`,
    each step is also judged for contention: contended steps do not count towards the CI, and a
    limit that runs out while the machine is contended is extended (up to CONTENDED_EXTENSION
    times, then `contended_exc(seconds)` is raised) instead of cutting the rung.
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
            self._reading: Reading | None = None
            self._meter = ContentionMeter(watch.cores_in_use, watch.cpus, watch.cpu_bound) if watch else None
            self._gpu: list[GpuState] = []

        def _look_at_gpu(self):
            if watch is not None and watch.gpu is not None and (g := watch.gpu()) is not None:
                self._gpu.append(g)

        def _judge(self, limit: float):
            step_start = time.perf_counter()

            def judge(exc: Exception) -> Exception | None:
                if watch is None or self._reading is None:
                    return exc
                if not step_load(self._reading, watch.read(), watch.cores_in_use, watch.cpu_bound, watch.cpus).contended:
                    return exc
                ran = time.perf_counter() - step_start
                if ran < CONTENDED_EXTENSION * limit or contended_exc is None:
                    return None  # someone else's work slowed this step: give it more time
                return contended_exc(ran)

            return judge

        def on_train_start(self, trainer, pl_module):
            synchronize(accelerator)
            self._start = time.perf_counter()
            if watch is not None:
                self._reading = watch.read()
                self._look_at_gpu()

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            limit = first_step_limit if self._batches == 0 else step_limit
            if limit is not None:
                self.alarm.arm(*limit, judge=self._judge(limit[0]))

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            synchronize(accelerator)
            self.alarm.disarm()
            now = time.perf_counter()
            reading = watch.read() if watch is not None else None
            self._batches += 1
            t = self.timing
            if self._batches == 1:
                t.first_step_seconds = now - self._start
            if self._batches <= warmup_steps:
                t.warmup_steps = self._batches
                t.warmup_seconds = now - self._start
            else:
                t.step_times.append(now - self._last)
                if self._meter is not None and self._reading is not None:
                    t.contended.append(self._meter.add(self._reading, reading).contended)
                if self._timed_start is None:
                    self._timed_start = self._last
            self._last = now
            self._reading = reading
            reason = None
            if t.step_times and trainer.is_global_zero:
                reason = stop_reason(clean_steps(t), now - self._timed_start, target_ci, max_seconds,
                                     max_steps=max_steps, steps_taken=len(t.step_times))
            # Rank 0 decides; every rank must stop on the same step or DDP hangs.
            stop = trainer.strategy.reduce_boolean_decision(reason is not None, all=False)
            if stop:
                t.reason = reason
                trainer.should_stop = True

        def on_train_end(self, trainer, pl_module):
            self.alarm.disarm()
            if self._meter is not None:
                self._look_at_gpu()
                self.timing.contention = self._meter.record(load_average(), watch.own_load, self._gpu)
            if trainer.world_size > 1:
                self.timing = trainer.strategy.broadcast(self.timing, src=0)

        def on_exception(self, trainer, pl_module, exception):
            self.alarm.disarm()

    return StepTimer()
