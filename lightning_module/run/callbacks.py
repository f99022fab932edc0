"""The probe's Lightning callbacks: StepTimer, which reads the clocks at every step boundary for
contract/timing.py's Stopwatch (the maths) and bounds a step's wall time; BatchCap and
UnmonitoredSchedulers, which every Trainer the probe builds carries (measure.py, hetero.py); and
the profiler trace of the winner.

The device is synchronised before the clock is read, or an asynchronous GPU would look infinitely
fast.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from lightning.pytorch.callbacks import Callback
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

from ..contract.contention import ContentionMeter, GpuState, Reading, step_load
from ..contract.race import Race
from ..contract.timing import CONTENDED_EXTENSION, Stopwatch, Timing, progress_line, usable_steps
from .readers import load_average, read_now


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
    if accelerator == "gpu" and torch.cuda.is_available():
        torch.cuda.synchronize()
    elif accelerator == "mps" and hasattr(torch, "mps"):
        torch.mps.synchronize()
    elif accelerator == "tpu":
        import torch_xla.core.xla_model as xm

        xm.wait_device_ops()


class UnmonitoredSchedulers(Callback):
    """A scheduler that watches a metric (ReduceLROnPlateau's monitor) skips its step when the metric
    is not there, with a warning, instead of failing the run (Lightning's strict=False): the probe
    runs no validation, so a val_loss it watches never comes, and one scheduler step is no part of
    the throughput."""

    def on_train_start(self, trainer, pl_module):
        for config in trainer.lr_scheduler_configs:
            if config.monitor is not None:
                config.strict = False


class BatchCap(Callback):
    """Stops after this many batches. The Trainer's own max_steps counts optimizer steps (its
    global_step): a module stepping two optimizers by hand (dense Adam + SparseAdam) would stop at
    half the batches."""

    def __init__(self, batches: int):
        self.batches, self.seen = batches, 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.seen += 1
        if self.seen >= self.batches:
            trainer.should_stop = True


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


class StepTimer(Callback):
    """Times a rung's steps for a Stopwatch, stopping the Trainer when the stopping rule says so.

    first_step_limit bounds the first step (compilation); step_limit every other step (a rung
    so slow it cannot win is cut short instead of spending minutes per step). With a `watch`,
    each step is also judged for contention: contended steps do not count towards the CI, and a
    limit that runs out while the machine is contended is extended (up to CONTENDED_EXTENSION
    times, then `contended_exc(seconds)` is raised) instead of cutting the rung.
    """

    def __init__(
        self,
        accelerator: str,
        warmup_steps: int,
        target_ci: float,
        max_seconds: float,
        max_steps: int | None = None,
        first_step_limit: tuple[float, Exception] | None = None,
        step_limit: tuple[float, Exception] | None = None,
        watch: Watch | None = None,
        contended_exc: Callable[[float], Exception] | None = None,
        count: Callable[[object], int | None] | None = None,
        race: Race | None = None,
        settle_from: int | None = None,
        look_s: float | None = None,
    ):
        self.accelerator = accelerator
        self.count = count  # a batch's samples (batches.samples_counter); None: not counted
        self.samples: list[int] = []  # per timed step, on this rank
        self.first_step_limit = first_step_limit
        self.step_limit = step_limit
        self.watch = watch
        self.contended_exc = contended_exc
        meter = ContentionMeter(watch.cores_in_use, watch.cpus, watch.cpu_bound) if watch else None
        self.clock = Stopwatch(warmup_steps, target_ci, max_seconds, max_steps, meter, race, settle_from, look_s)
        self.alarm = StepAlarm()
        self._gpu: list[GpuState] = []

    @property
    def timing(self) -> Timing:
        return self.clock.timing

    def _read(self) -> Reading | None:
        return self.watch.read() if self.watch is not None else None

    def _look_at_gpu(self):
        if self.watch is not None and self.watch.gpu is not None and (g := self.watch.gpu()) is not None:
            self._gpu.append(g)

    def _judge(self, limit: float):
        step_start = time.perf_counter()
        watch = self.watch

        def judge(exc: Exception) -> Exception | None:
            if watch is None or self.clock.reading is None:
                return exc
            if not step_load(self.clock.reading, watch.read(), watch.cores_in_use, watch.cpu_bound, watch.cpus).contended:
                return exc
            ran = time.perf_counter() - step_start
            if ran < CONTENDED_EXTENSION * limit or self.contended_exc is None:
                return None  # someone else's work slowed this step: give it more time
            return self.contended_exc(ran)

        return judge

    def on_train_start(self, trainer, pl_module):
        synchronize(self.accelerator)
        self.clock.start(time.perf_counter(), self._read())
        self._look_at_gpu()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        limit = self.first_step_limit if self.clock.steps == 0 else self.step_limit
        if limit is not None:
            self.alarm.arm(*limit, judge=self._judge(limit[0]))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        synchronize(self.accelerator)
        self.alarm.disarm()
        now = time.perf_counter()
        timed = len(self.clock.timing.step_times)
        self.clock.step(now, self._read())
        if self.count is not None and len(self.clock.timing.step_times) > timed and (n := self.count(batch)):
            self.samples.append(int(n))
        reason = self.clock.stop_reason(now) if trainer.is_global_zero else None
        # Rank 0 decides; every rank must stop on the same step or DDP hangs.
        stop = trainer.strategy.reduce_boolean_decision(reason is not None, all=False)
        if stop:
            self.clock.timing.reason = reason
            trainer.should_stop = True

    def on_train_end(self, trainer, pl_module):
        self.alarm.disarm()
        if self.watch is not None:
            self._look_at_gpu()
            self.clock.finish(load_average(), self.watch.own_load, self._gpu)
        if trainer.world_size > 1:
            self.clock.timing = trainer.strategy.broadcast(self.clock.timing, src=0)

    def on_exception(self, trainer, pl_module, exception):
        self.alarm.disarm()


class Progress(Callback):
    """The probe's own progress on a terminal, in place of Lightning's bar (whose ETA is a whole
    epoch's, not the rung's): one line, rewritten in place, with the rung, its step, samples/s and
    the 95% CI so far and the time left in the rung; erased when the rung ends or is interrupted,
    so nothing of it is left after the probe's own lines."""

    EVERY_S = 0.25  # between rewrites: a terminal keeps up, and the line stays readable

    def __init__(self, label: str, timer: StepTimer, samples_per_step: int, stream):
        self.label, self.timer, self.samples_per_step, self.stream = label, timer, samples_per_step, stream
        self._shown = 0.0
        self._started: float | None = None

    def on_train_start(self, trainer, pl_module):
        self._started = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        now = time.perf_counter()
        if not trainer.is_global_zero or now - self._shown < self.EVERY_S:
            return
        self._shown = now
        clock = self.timer.clock
        line = progress_line(self.label, clock.steps, clock.warmup_steps, usable_steps(clock.timing),
                             self.samples_per_step, clock.max_seconds, clock.timed_seconds(now))
        self._write("\r" + line[: shutil.get_terminal_size().columns - 1] + "\x1b[K")

    def on_train_end(self, trainer, pl_module):
        self._erase()

    def on_exception(self, trainer, pl_module, exception):
        self._erase()

    def _erase(self) -> None:
        if self._shown:
            self._write("\r\x1b[K")
            self._shown = 0.0

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken terminal: the probe goes on without it
            pass


CHROME_TRACE = "trace.json"  # the profile as one Chrome/Perfetto trace file in the --profile directory


def profiler_callback(out_dir: str, accelerator: str):
    """torch.profiler over steps 2-8 of a pass (wait 1, warm-up 4, active 3), written both for
    TensorBoard's profiler plugin and as CHROME_TRACE for Perfetto / chrome://tracing."""
    tensorboard = tensorboard_trace_handler(out_dir)

    def write(prof) -> None:
        # TensorBoard's file is a Chrome trace already, and a profile can be exported only once:
        # the same file under a name a person can find.
        before = set(glob.glob(os.path.join(out_dir, "*.pt.trace.json")))
        tensorboard(prof)
        new = sorted(set(glob.glob(os.path.join(out_dir, "*.pt.trace.json"))) - before, key=os.path.getmtime)
        if new:
            shutil.copyfile(new[-1], os.path.join(out_dir, CHROME_TRACE))

    class TraceCallback(Callback):
        def on_train_start(self, trainer, pl_module):
            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if accelerator == "gpu" else [])
            self.prof = profile(
                activities=acts, schedule=schedule(wait=1, warmup=4, active=3, repeat=1),
                on_trace_ready=write, record_shapes=True, profile_memory=True,
            )
            self.prof.__enter__()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self.prof.step()

        def on_train_end(self, trainer, pl_module):
            self.prof.__exit__(None, None, None)

    return TraceCallback()
