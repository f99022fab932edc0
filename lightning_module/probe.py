"""Run the probe: measure one configuration with Lightning, and climb the ladder.

`measure()` runs one configuration in a Trainer with the StepTimer callback; `run_probe()`
climbs the ladder and hands the winner to `assemble_result()`. What is trained lives in
builders.py, the device in devices.py, FLOPs and peaks in peaks.py, the defaults in options.py.
"""

from __future__ import annotations

import logging
import math
import os
import warnings
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone

import lightning.pytorch as pl
import torch

from . import hardware, workloads
from .assemble import assemble_result
from .builders import build_datamodule, build_module, profiler_callback
from .devices import (
    default_devices,
    free_memory,
    half_precision,
    ipex_missing,
    is_global_zero,
    peak_rss_gib,
    reset_peak_rss,
    resolve_accelerator,
    worker_counts,
)
from .ladder import CompileTimeout, LadderOptions, Measurement, RungTooSlow, run_ladder
from .options import MeasureSettings, ProbeOptions
from .result import ProbeConfig, ProbeResult, RungResult
from .timing import make_callback, throughput
from .workloads import WorkloadError

log = logging.getLogger(__name__)

# A step this many times slower than the best configuration's (per sample) cannot win: cut the rung
# short. Only for steps of more than MIN_SLOW_STEP_S, where waiting costs real time and one
# scheduler hiccup cannot trigger it.
SLOW_FACTOR = 3.0
MIN_SLOW_STEP_S = 2.0


def measure(settings: MeasureSettings, config: ProbeConfig, extra_callbacks=(),
            max_steps: int | None = None, slow_step_s: float | None = None) -> Measurement:
    """Train `config` until the stopping rule says the throughput is known; raise on failure."""
    spec = settings.spec
    free_memory(config.accelerator)
    if config.accelerator == "gpu":
        torch.cuda.reset_peak_memory_stats()
    else:
        reset_peak_rss()
    torch.manual_seed(settings.seed)
    synthetic = not spec.datamodule
    module = build_module(spec, config, synthetic)
    dm = build_datamodule(spec, config, settings.seed)
    warmup = settings.warmup_steps + (1 if config.compile else 0)  # the compile step comes on top
    first_limit = step_limit = None
    # Each rank's alarm fires on its own clock, and a rank that leaves a step while the others wait
    # for it in an all-reduce hangs them all (and mismatches the next rung's collectives): with
    # several ranks, compilation and slow steps are not cut short.
    single_rank = config.devices * config.num_nodes == 1
    if config.compile and single_rank:
        first_limit = (settings.compile_timeout,
                       CompileTimeout(f"torch.compile took longer than --compile-timeout {settings.compile_timeout:g} s"))
    if slow_step_s is not None and single_rank:
        step_limit = (slow_step_s, RungTooSlow(
            f"a step took over {slow_step_s:.1f} s, {SLOW_FACTOR:g}x the best so far: stopped, it cannot win"))
        if first_limit is None:
            # The first step carries the rung's set-up (new loader workers, lazy init, kernels for a
            # new memory format) and is warm-up, not timed: under load it crossed a 2 s limit that
            # the steady steps kept. Bound it, more loosely.
            first_limit = (SLOW_FACTOR * slow_step_s, step_limit[1])
    timer = make_callback(config.accelerator, warmup, settings.target_ci, settings.max_seconds,
                          max_steps=settings.max_steps, first_step_limit=first_limit, step_limit=step_limit)
    cap = max_steps if max_steps is not None else (warmup + settings.max_steps if settings.max_steps else -1)
    trainer = pl.Trainer(
        accelerator=config.accelerator, devices=config.devices, num_nodes=config.num_nodes,
        strategy=config.strategy, precision=config.precision,
        max_epochs=-1, max_steps=cap, limit_val_batches=0, num_sanity_val_steps=0,
        enable_checkpointing=False, logger=False, enable_model_summary=False,
        enable_progress_bar=settings.progress_bar, callbacks=[timer, *extra_callbacks],
    )
    if config.compile:
        module = torch.compile(module)
    try:
        trainer.fit(module, datamodule=dm)
    finally:
        timer.alarm.disarm()
        del trainer, module, dm
    t = timer.timing
    if len(t.step_times) < 1:
        raise RuntimeError("no steps were timed (the data ran out during warm-up?)")
    world = config.devices * config.num_nodes
    tp = throughput(t.step_times, config.batch_size * world)
    if config.accelerator == "gpu":
        peak = torch.cuda.max_memory_allocated() / 2**30
    else:
        peak = peak_rss_gib()
    compile_s = None
    if config.compile and t.first_step_seconds is not None:
        # The first step minus an ordinary step is the compiler's share.
        compile_s = max(0.0, t.first_step_seconds - sum(t.step_times) / len(t.step_times))
    # An unbounded CI (one timed step) is inf, which JSON writes as null and the result then
    # fails to read back: a finite stand-in far above any throughput keeps the record valid.
    return Measurement(
        samples_per_sec=tp.samples_per_sec, ci_low=tp.ci_low, ci_high=min(tp.ci_high, 1e18),
        steps_timed=len(t.step_times), compile_seconds=compile_s, peak_memory_gib=peak, extra=t,
    )


def quiet_lightning(verbose: bool = False) -> None:
    """Lightning's banner lines and our deliberate 0-worker baseline warning are noise here."""
    level = logging.INFO if verbose else logging.WARNING
    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(level)
    # Inductor on a CPU-only host with a CUDA torch build says so once per compile: not news here.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.INFO if verbose else logging.ERROR)
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    # The probe's module normalises on the device in on_after_batch_transfer on purpose.
    warnings.filterwarnings("ignore", message=".*overridden `on_after_batch_transfer`.*")
    warnings.filterwarnings("ignore", message=".*isinstance\\(treespec, LeafSpec\\).*")
    warnings.filterwarnings("ignore", message=".*(tensorboardX|TensorBoard).*")
    warnings.filterwarnings("ignore", message=".*precision.*is not supported by the model summary.*")


def preflight(opts: ProbeOptions) -> str:
    """Everything that can be wrong with the request, checked before any training; the accelerator."""
    workloads.check(opts.spec)
    accelerator = resolve_accelerator(opts.accelerator)
    if accelerator == "cpu" and opts.precision == "16-mixed":
        # Lightning would run bf16-mixed instead, and the result would be filed as fp16.
        raise WorkloadError("--precision 16-mixed is not supported on cpu: use bf16-mixed or 32-true")
    if opts.strategy:
        from lightning.pytorch.strategies import StrategyRegistry

        known = ("auto", *StrategyRegistry.available_strategies())
        if opts.strategy not in known:
            raise WorkloadError(f"unknown --strategy {opts.strategy!r}: use auto, ddp, ddp_spawn, fsdp, deepspeed, ...")
    return accelerator


def run_probe(opts: ProbeOptions, on_rung: Callable[[RungResult, RungResult | None], None] | None = None,
              measure_fn: Callable[[str, ProbeConfig], Measurement] | None = None) -> ProbeResult | None:
    """Climb the ladder and return the finished result (raises on a failed baseline).

    None on the extra ranks of a DDP run: only rank 0 reports."""
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
    if accelerator == "gpu" and devices > torch.cuda.device_count():
        raise WorkloadError(f"--devices {devices}: this machine has {torch.cuda.device_count()} GPU(s)")

    start = ProbeConfig(accelerator=accelerator, devices=devices, num_nodes=opts.num_nodes,
                        strategy=strategy, precision=opts.precision, batch_size=spec.batch_size)
    settings = MeasureSettings.from_options(opts)
    best_sps: list[float] = []

    def slow_limit(cfg: ProbeConfig) -> float | None:
        if not best_sps:
            return None
        expected = cfg.batch_size * cfg.devices * cfg.num_nodes / best_sps[-1]
        return max(SLOW_FACTOR * expected, MIN_SLOW_STEP_S)

    def measure_one(rung: str, cfg: ProbeConfig) -> Measurement:
        if measure_fn is not None:
            return measure_fn(rung, cfg)
        return measure(settings, cfg, slow_step_s=slow_limit(cfg))

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
        vision=workloads.is_vision(spec), worker_counts=worker_counts(), workers_supported=workers_ok,
        pin_memory=accelerator == "gpu",
        ipex_missing=ipex_missing() if accelerator == "cpu" else None,
        ipex_skip=(None if accelerator == "cpu" and workloads.is_builtin(spec)
                   else "ipex.optimize is applied to builtin workloads on CPU only"),
        skip=opts.skip,
    )
    lad = run_ladder(start, measure_one, ladder_opts, track)

    profile_dir = None
    if opts.profile_dir:
        os.makedirs(opts.profile_dir, exist_ok=True)
        try:
            # The trace is written only once the schedule's 8 steps have run, so the stopping rule
            # (a converged CI, --max-seconds) must not end this pass early: the step cap does.
            whole = replace(settings, target_ci=0.0, max_seconds=math.inf, max_steps=None)
            measure(whole, lad.best.config, extra_callbacks=[profiler_callback(opts.profile_dir, accelerator)],
                    max_steps=9)
            profile_dir = os.path.abspath(opts.profile_dir)
        except Exception as e:  # noqa: BLE001
            log.warning("profile failed: %s", e)

    if not is_global_zero():
        return None  # the other DDP ranks trained along; measuring peaks there would slow rank 0's
    return assemble_result(opts, accelerator, hw, lad, started, profile_dir)
