"""Run the probe: climb the ladder, confirm the winner, assemble the result.

`run_probe()` climbs the ladder (re-measuring a rung whose CI stays too wide), measures the winner
against the baseline in alternation, and hands the outcome to `assemble_result()`. One
configuration is measured in measure.py (here, or in a child process: child.py); what is trained
lives in builders.py, the device in devices.py, FLOPs and peaks in peaks.py, the extension rungs
in extensions.py; the rules it applies and the defaults in contract/.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone

import torch

from ..contract.ladder import LadderOptions, Measurement, run_ladder, worker_counts
from ..contract.options import MeasureSettings, ProbeOptions
from ..contract.reliability import confirm, measure_until_known
from ..contract.result import ProbeConfig, ProbeResult, RungResult
from . import extensions, hardware, workloads
from .assemble import assemble_result
from .callbacks import CHROME_TRACE, profiler_callback
from .child import measure_in_child
from .devices import default_devices, half_precision, is_global_zero, resolve_accelerator
from .measure import MIN_SLOW_STEP_S, SLOW_FACTOR, measure, samples_per_step
from .readers import usable_cpus
from .workloads import WorkloadError

log = logging.getLogger(__name__)


def measure_anywhere(settings: MeasureSettings, config: ProbeConfig, **kw) -> Measurement:
    """In this process, or in a child for what acts at process start (run_cpu, xla)."""
    if config.run_cpu or config.xla:
        return measure_in_child(settings, config, slow_step_s=kw.get("slow_step_s"),
                                profile_dir=kw.get("profile_dir"), max_steps=kw.get("max_steps"))
    extra = [profiler_callback(kw["profile_dir"], config.accelerator)] if kw.get("profile_dir") else []
    return measure(settings, config, extra_callbacks=extra, max_steps=kw.get("max_steps"),
                   slow_step_s=kw.get("slow_step_s"))


def preflight(opts: ProbeOptions) -> str:
    """Everything that can be wrong with the request, checked before any training; the accelerator."""
    workloads.check(opts.spec)
    accelerator = resolve_accelerator(opts.accelerator)
    if accelerator == "cpu" and opts.precision == "16-mixed":
        # Lightning would run bf16-mixed instead, and the result would be filed as fp16.
        raise WorkloadError("--precision 16-mixed is not supported on cpu: use bf16-mixed or 32-true")
    if opts.devices is not None:
        if accelerator == "cpu" and opts.devices > usable_cpus():
            # Each CPU rank is a training process: more of them than cores only fight for the cores.
            raise WorkloadError(f"--devices {opts.devices}: this process may run on {usable_cpus()} CPU core(s); "
                                "use at most that many CPU ranks")
        if accelerator == "gpu" and opts.devices > torch.cuda.device_count():
            raise WorkloadError(f"--devices {opts.devices}: this machine has {torch.cuda.device_count()} GPU(s)")
    if opts.strategy:
        from lightning.pytorch.strategies import StrategyRegistry

        known = ("auto", *StrategyRegistry.available_strategies())
        if opts.strategy not in known:
            raise WorkloadError(f"unknown --strategy {opts.strategy!r}: use auto, ddp, ddp_spawn, fsdp, deepspeed, ...")
    return accelerator


def run_probe(opts: ProbeOptions, on_rung: Callable[[RungResult, RungResult | None], None] | None = None,
              measure_fn: Callable[[str, ProbeConfig], Measurement] | None = None,
              on_leg: Callable[[str, Measurement], None] | None = None) -> ProbeResult | None:
    """Climb the ladder, confirm the winner and return the finished result (raises on a failed
    baseline). `measure_fn(rung, config)` replaces the real measuring (tests); `on_leg` hears each
    confirmation leg. None on the extra ranks of a DDP run: only rank 0 reports."""
    started = datetime.now(timezone.utc)
    spec = opts.spec
    accelerator = preflight(opts)
    hw = hardware.fingerprint()
    devices, strategy = default_devices(accelerator, hw)
    if opts.devices is not None:
        devices = opts.devices
    if opts.strategy:
        strategy = opts.strategy
    if devices < 1:
        raise WorkloadError(f"no {accelerator} devices to train on")

    start = ProbeConfig(accelerator=accelerator, devices=devices, num_nodes=opts.num_nodes,
                        strategy=strategy, precision=opts.precision, batch_size=spec.batch_size)
    settings = MeasureSettings.from_options(opts)
    best_sps: list[float] = []

    def slow_limit(cfg: ProbeConfig) -> float | None:
        if not best_sps:
            return None
        expected = samples_per_step(cfg) / best_sps[-1]
        return max(SLOW_FACTOR * expected, MIN_SLOW_STEP_S)

    def measure_one(rung: str, cfg: ProbeConfig) -> Measurement:
        if measure_fn is not None:
            once = lambda: measure_fn(rung, cfg)
        else:
            once = lambda: measure_anywhere(settings, cfg, slow_step_s=slow_limit(cfg))
        # Re-measured only while the rung could still change the decision: its CI reaches the best.
        return measure_until_known(once, samples_per_step(cfg), opts.target_ci, opts.remeasure_rounds,
                                   matters=lambda m: not best_sps or m.ci_high >= best_sps[-1])

    def track(rung: RungResult, base: RungResult | None) -> None:
        if rung.kept:
            best_sps.append(rung.samples_per_sec)
        if on_rung is not None:
            on_rung(rung, base)

    workers_ok = True
    if spec.datamodule:
        _, dm_cls = workloads.user_classes(spec)
        workers_ok = workloads.accepts(dm_cls, "num_workers")
    ladder_opts = LadderOptions(
        tune=opts.tune, batch_fixed=spec.batch_size_fixed, half_precision=half_precision(accelerator),
        vision=workloads.is_vision(spec), worker_counts=worker_counts(usable_cpus()), workers_supported=workers_ok,
        pin_memory=accelerator == "gpu", skip=opts.skip,
        extensions=extensions.detect(accelerator, hw, spec, devices * opts.num_nodes),
    )
    lad = run_ladder(start, measure_one, ladder_opts, track)

    # Confirm the pick against the baseline, in alternation: the ladder's winner is the best of
    # several noisy draws, and the machine may have changed since the baseline was measured.
    final_cfg, final_m, confirmation, notes = lad.best.config, lad.best_measurement, None, []
    if opts.tune and opts.confirm_rounds > 0 and lad.best is not lad.rungs[0]:
        legs = replace(settings, max_seconds=settings.max_seconds / opts.confirm_rounds)

        def leg(name: str, cfg: ProbeConfig) -> Measurement:
            m = measure_fn(f"confirm {name}", cfg) if measure_fn is not None else measure_anywhere(legs, cfg)
            if on_leg is not None:
                on_leg(name, m)
            return m

        try:
            done = confirm(leg, lad.rungs[0].config, lad.best.config, samples_per_step, opts.target_ci,
                           opts.confirm_rounds)
        except Exception as e:  # noqa: BLE001 - a leg that fails leaves the ladder's pick, said to be unconfirmed
            notes.append(f"the A-B confirmation could not run ({type(e).__name__}: {str(e)[:200]})")
        else:
            confirmation = done.record
            if done.record.held:
                final_m = done.tuned  # fresh draws: the ladder's own number is the luckiest of several
            else:
                final_cfg, final_m = lad.rungs[0].config, done.base

    profile_dir = profile_trace = None
    if opts.profile_dir:
        os.makedirs(opts.profile_dir, exist_ok=True)
        try:
            # The trace is written only once the schedule's 8 steps have run, so the stopping rule
            # (a converged CI, --max-seconds) must not end this pass early: the step cap does.
            whole = replace(settings, target_ci=0.0, max_seconds=math.inf, max_steps=None)
            measure_anywhere(whole, final_cfg, profile_dir=opts.profile_dir, max_steps=9)
            profile_dir = os.path.abspath(opts.profile_dir)
            trace = os.path.join(profile_dir, CHROME_TRACE)
            profile_trace = trace if os.path.isfile(trace) else None
        except Exception as e:  # noqa: BLE001
            log.warning("profile failed: %s", e)

    if not is_global_zero():
        return None  # the other DDP ranks trained along; measuring peaks there would slow rank 0's
    return assemble_result(opts, accelerator, hw, lad, started, final_cfg, final_m, confirmation,
                           notes, profile_dir, profile_trace)
