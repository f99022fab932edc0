"""What ThroughputCallback costs a training step (issue 17: never more than a measured 1%).

Two figures:

1. The hook's own time per step: on_train_batch_end (the clock, the sample count, a look at the
   machine every k steps, k adapting so the looks stay under READ_BUDGET of the step time) driven
   by a stand-in loop whose "steps" are a busy wait of a set length, so the hook's time is measured
   alone, without a model's noise. Overhead = the hook's mean CPU time (its thread's clock, so a
   moment another process had the CPU is not charged to it) / step time; the wall-time mean, which
   holds such moments, is printed beside it. Each stand-in step ends in one small torch op, as a
   real step ends in the optimizer's update: without it the busy wait leaves torch's code cold for
   the hook's sample count, which a real step does not (on a loaded VM that read ~60% higher).
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


def hook_cost(step_s: float, steps: int) -> tuple[float, float, float, int]:
    """Seconds of on_train_batch_end per step with steps of `step_s`: the median and the mean of
    its wall time (the mean holds the looks at the machine, and any moment another process had the
    CPU), the mean of its own CPU time (the thread's clock: the hook's work, looks included, without
    the moments it was preempted), and the final look interval."""
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
    weight, grad = torch.zeros(64), torch.ones(64)
    cpu_clock = time.thread_time
    empty = statistics.median(-cpu_clock() + cpu_clock() for _ in range(1000))  # the clock's own cost
    costs, cpu = [], []
    for i in range(steps):
        end = time.perf_counter() + step_s
        while time.perf_counter() < end:  # the step: a busy wait, as a compute-bound step
            pass
        weight.add_(grad, alpha=-0.01)  # ... ending, as a real step does, in torch (the optimizer's update)
        c0 = cpu_clock()
        t0 = time.perf_counter()
        cb.on_train_batch_end(trainer, None, None, batch, i)
        costs.append(time.perf_counter() - t0)
        cpu.append(cpu_clock() - c0 - empty)
    costs, cpu = costs[10:], cpu[10:]
    return statistics.median(costs), statistics.fmean(costs), statistics.fmean(cpu), cb._every


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
        if r:
            m, s = r.shape.memory, r.shape
            fit = (f"{m.where} fit{' (derived)' if m.derived else ''} {m.fixed_gib:.3g} GiB + "
                   f"{m.per_sample_gib * 2**20:.3g} KiB/sample" if m and m.fixed_gib is not None else "no memory fit")
            _Sink.last = (f"record: {r.samples_per_sec:.4g} samples/s ({r.config.accelerator}, {r.config.precision}), "
                          f"{r.flops_per_sample or 0:.3g} FLOPs/sample, {s.memory_traffic_bytes_per_sample or 0:.3g} "
                          f"bytes/sample of traffic, {s.parameters} parameters, peak {r.peak_memory_gib:.3g} GiB, {fit}, "
                          f"pipeline {r.pipeline_samples_per_sec_per_worker or 0:.4g} samples/s per worker, "
                          f"reliable: {r.reliable}")
        else:
            _Sink.last = f"no record: {measured.error}"
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
    print(f"   (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs: other work on the machine shows in the "
          "wall times; the CPU time is the hook's own)")
    print(f"{'step':>10}  {'wall median us':>14}  {'wall mean us':>12}  {'CPU mean us':>11}  {'overhead (CPU)':>14}  "
          f"{'(wall)':>7}  {'looks every':>11}")
    for step_s in (0.001, 0.01, 0.1):
        median, mean, cpu, every = hook_cost(step_s, steps=max(60, int(3.0 / step_s)))
        print(f"{step_s * 1000:>8.0f}ms  {median * 1e6:>14.1f}  {mean * 1e6:>12.1f}  {cpu * 1e6:>11.1f}  "
              f"{cpu / step_s:>14.3%}  {mean / step_s:>7.3%}  {every:>6} steps")

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
