"""What ThroughputCallback costs a training step (issue 17: never more than a measured 1%).

Two figures:

1. The hook's own time per step: on_train_batch_end (the clock, the sample count, a look at the
   machine every k steps, k adapting so the looks stay under READ_BUDGET of the step time) driven
   by a stand-in loop whose "steps" are a busy wait of a set length, so the hook's time is measured
   alone, without a model's noise. Overhead = hook time / step time.
2. End to end: a small Lightning training run (examples.tinylm) with and without the callback, in
   alternation, its steps timed by a clock callback after ours (fit's set-up and the record written
   at the end left out); the ratio with its 95% CI. On a busy shared machine this is noisy: (1) is
   the figure.

    python benchmarks/callback_overhead.py            # ~1 minute on a 2-core CPU
    python benchmarks/callback_overhead.py --gpu      # on a CUDA machine: (2) on the GPU, where the
                                                      # per-step synchronisation is the main cost

On a GPU the callback synchronises the device before each clock read (the probe's rule, as
Lightning's ThroughputMonitor does): that cost shows only in (2) run on a GPU.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from types import SimpleNamespace

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)


def hook_cost(step_s: float, steps: int) -> tuple[float, float, int]:
    """Median and mean seconds of on_train_batch_end per step with steps of `step_s` (the mean holds
    the looks at the machine and any moment the hook was preempted), and the final look interval."""
    import torch

    from lightning_module.contract.contention import ContentionMeter
    from lightning_module.contract.result import ProbeConfig
    from lightning_module.contract.timing import Stopwatch
    from lightning_module.run.batches import leading_dim
    from lightning_module.run.training_run import ThroughputCallback

    cb = ThroughputCallback(warmup_steps=3)
    cb._config = ProbeConfig(accelerator="cpu", batch_size=32)
    cb._count = leading_dim
    cb._meter = ContentionMeter(torch.get_num_threads(), os.cpu_count() or 1, True)
    cb.clock = Stopwatch(3, 0.03, math.inf, meter=cb._meter)
    cb.clock.start(time.perf_counter(), cb._read())
    trainer = SimpleNamespace(is_global_zero=True)
    batch = (torch.zeros(32, 8), torch.zeros(32, dtype=torch.long))
    costs = []
    for i in range(steps):
        end = time.perf_counter() + step_s
        while time.perf_counter() < end:  # the step: a busy wait, as a compute-bound step
            pass
        t0 = time.perf_counter()
        cb.on_train_batch_end(trainer, None, None, batch, i)
        costs.append(time.perf_counter() - t0)
    costs = costs[10:]
    return statistics.median(costs), statistics.fmean(costs), cb._every


def step_seconds(with_callback: bool, steps: int, accelerator: str, warm: int = 10) -> float:
    """Mean seconds per training step after `warm` steps, by a clock callback placed after ours
    (so its hook is inside the interval); fit's set-up and the record's writing at the end are not."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import Callback

    from examples.tinylm import TinyLM
    from lightning_module.run.callbacks import synchronize
    from lightning_module.run.training_run import ThroughputCallback

    class Clock(Callback):
        def __init__(self):
            self.times: list[float] = []

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            synchronize(accelerator)
            self.times.append(time.perf_counter())

    clock = Clock()
    measured = ThroughputCallback(store=_Sink())
    callbacks = [measured, clock] if with_callback else [clock]
    trainer = pl.Trainer(max_steps=steps, accelerator=accelerator, devices=1, callbacks=callbacks, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(TinyLM(d_model=32, layers=1, seq_len=32, batch_size=16))
    t = clock.times
    if with_callback and _Sink.last is None:  # the record it would have written: checked like any result
        r = measured.result
        _Sink.last = (f"record: {r.samples_per_sec:.4g} samples/s ({r.config.accelerator}, {r.config.precision}), "
                      f"{r.flops_per_sample or 0:.3g} FLOPs/sample, {r.shape.parameters} parameters, "
                      f"peak {r.peak_memory_gib:.3g} GiB, reliable: {r.reliable}") if r else f"no record: {measured.error}"
        print("   " + _Sink.last)
    return (t[-1] - t[warm]) / (len(t) - 1 - warm)


class _Sink:
    """A store that keeps nothing: the benchmark writes no result."""

    last: str | None = None  # the first record's summary, printed once

    def add(self, result) -> bool:
        return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4, help="A/B pairs of the end-to-end run")
    ap.add_argument("--steps", type=int, default=100, help="steps per end-to-end run")
    ap.add_argument("--gpu", action="store_true", help="run the end-to-end pairs on CUDA")
    args = ap.parse_args()
    import logging
    import warnings

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    from lightning_module.run.hardware import fingerprint

    hw = fingerprint()
    print(f"machine: {hw.cpu_model}, {hw.logical_cpus} CPUs, ISA {', '.join(hw.isa_flags) or '-'}"
          + (f", GPU {hw.gpus[0].name}" if hw.gpus and args.gpu else ""))
    print("\n1. the hook's own time per step (on_train_batch_end), against a step of:")
    print(f"{'step':>10}  {'median us':>9}  {'mean us':>8}  {'overhead (mean)':>15}  {'looks every':>11}")
    for step_s in (0.001, 0.01, 0.1):
        median, mean, every = hook_cost(step_s, steps=max(60, int(3.0 / step_s)))
        print(f"{step_s * 1000:>8.0f}ms  {median * 1e6:>9.1f}  {mean * 1e6:>8.1f}  {mean / step_s:>15.3%}  {every:>6} steps")

    print(f"\n2. end to end: examples.tinylm (d_model 32, 1 layer, batch 16), {args.steps} steps, "
          f"{args.rounds} A/B pairs on {'cuda' if args.gpu else 'cpu'}")
    accelerator = "gpu" if args.gpu else "cpu"
    step_seconds(False, 15, accelerator)  # imports and first-use costs out of the pairs
    ratios = []
    for _ in range(args.rounds):
        without = step_seconds(False, args.steps, accelerator)
        with_cb = step_seconds(True, args.steps, accelerator)
        ratios.append(with_cb / without)
        print(f"   without {without * 1000:7.2f} ms/step   with {with_cb * 1000:7.2f} ms/step   ratio {with_cb / without:.4f}")
    mean = statistics.fmean(ratios)
    half = 1.96 * statistics.stdev(ratios) / math.sqrt(len(ratios)) if len(ratios) > 1 else math.inf
    ci = f"95% CI {mean - half:.4f}-{mean + half:.4f}" if math.isfinite(half) else "a CI needs 2 rounds"
    print(f"   with / without: {mean:.4f} ({ci}), per step after 10 warm-up steps")


if __name__ == "__main__":
    main()
