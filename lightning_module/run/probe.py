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
from dataclasses import dataclass, replace
from datetime import datetime, timezone

import torch

from ..contract.ladder import (
    LadderOptions,
    RankLost,
    RungMeasurement,
    RungSkipped,
    RungTooSlow,
    race_lines,
    run_ladder,
    worker_counts,
)
from ..contract.options import MeasureSettings, ProbeOptions
from ..contract.order import order_for
from ..contract.quiet import held_quietly
from ..contract.race import RACE_LOOK_S, known_slower_after, pooled_log_variance
from ..contract.reliability import confirm, decided, measure_until_known
from ..contract.result import MemoryFit, ProbeConfig, ProbeResult, RungResult
from ..contract.threads import confirm_margin, confirmed_note, free_cores, free_cpus, thread_counts
from ..contract.timing import MIN_TIMED_STEPS, Timing, usable_steps
from . import cpu_too, extensions, hardware, workloads
from .assemble import assemble_result
from .callbacks import CHROME_TRACE, profiler_callback
from .child import measure_in_child
from .devices import default_devices, half_precision, is_global_zero, resolve_accelerator
from .measure import MIN_SLOW_STEP_S, SLOW_FACTOR, drop_warm, measure, samples_per_step
from .preview import Preview, preview
from .readers import usable_cpus
from .workloads import WorkloadError

log = logging.getLogger(__name__)


def measure_anywhere(settings: MeasureSettings, config: ProbeConfig, **kw) -> RungMeasurement:
    """In this process, or in a child for what acts at process start (run_cpu, xla)."""
    if config.run_cpu or config.xla:
        drop_warm()  # not kept by a child process: not held here while it runs either
        return measure_in_child(settings, config, slow_step_s=kw.get("slow_step_s"),
                                profile_dir=kw.get("profile_dir"), max_steps=kw.get("max_steps"))
    extra = [profiler_callback(kw["profile_dir"], config.accelerator)] if kw.get("profile_dir") else []
    return measure(settings, config, extra_callbacks=extra, max_steps=kw.get("max_steps"),
                   slow_step_s=kw.get("slow_step_s"), label=kw.get("label", ""), first_step_s=kw.get("first_step_s"))


def known_losers(accelerator: str, isa_flags: list[str], manufacturer: str | None) -> dict[str, str]:
    """Rungs known to lose on this hardware, each with why: bf16 on a CPU that converts it to fp32
    (no AMX, AVX512_BF16 or Arm BF16 in /proc/cpuinfo: catalog.accelerators.cpu_native_bf16). Such
    a rung is measured for one step, to see the rule hold here, and skipped with the reason
    instead of timed (an emulated bf16 ResNet-50 step ran 32 s on a 2-core AVX2 EPYC, issue 32).
    A CPU whose flags were not read (none at all) is not presumed either way."""
    from catalog.accelerators import cpu_native_bf16

    if accelerator != "cpu" or not isa_flags or cpu_native_bf16(isa_flags, manufacturer):
        return {}
    return {"bf16": "bf16 is emulated on this CPU (no amx_bf16, avx512_bf16 or Arm bf16 flag): known to lose"}


def cpu_thread_counts(hw) -> Callable[[RungResult], tuple[int, ...]]:
    """The threads rung's counts, from the baseline: the physical cores this process may use, less
    those its contention record saw other processes keep busy (contract/threads.py)."""
    logical = usable_cpus()
    physical = min(hw.physical_cores or logical, logical)
    return lambda base: thread_counts(free_cores(physical, logical, base.contention))


ONE_STEP = 1  # steps a rung known to lose is measured for before it is skipped


@dataclass
class Checked:
    accelerator: str
    preview: Preview


def preflight(opts: ProbeOptions) -> Checked:
    """Everything that can be wrong with the request, checked before any training: the accelerator
    and a look at the workload's data (preview.py). With --depths, of the deeper copy (shallow.py):
    the full model may not fit on this machine."""
    if opts.depths:
        from . import shallow

        shallow.full_depth(opts)
        opts = shallow.deeper_options(opts)
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
    if opts.cpu_too:
        if accelerator != "gpu" and not os.environ.get(cpu_too.MAIN_DEVICE_ENV):
            raise WorkloadError(f"--cpu-too trains the CPU beside a GPU; this probe runs on {accelerator}: "
                                "use it on a machine with a GPU (--accelerator gpu)")
        if (opts.devices or 1) > 1 or opts.num_nodes > 1:
            raise WorkloadError("--cpu-too trains one GPU beside the CPU: leave --devices out or set it to 1")
    if opts.strategy:
        from lightning.pytorch.strategies import StrategyRegistry

        known = ("auto", *StrategyRegistry.available_strategies())
        if opts.strategy not in known:
            raise WorkloadError(f"unknown --strategy {opts.strategy!r}: use auto, ddp, ddp_spawn, fsdp, deepspeed, ...")
    pv = preview(opts.spec, own_batch=opts.own_batch_size)
    spec = opts.spec
    if spec.batch_size_fixed and not pv.batch_tunable and pv.batch_size != spec.batch_size:
        raise WorkloadError(f"--batch-size {spec.batch_size}: the batch size of {spec.model} cannot be changed ({pv.batch_note})")
    return Checked(accelerator, pv)


MEMORY_STEPS = 2  # timed steps of each extra batch size the memory fit measures


def memory_points(lad, final_cfg: ProbeConfig, final_m: RungMeasurement) -> list[tuple[int, float]]:
    """(batch, peak GiB) of every ladder rung that ran the final configuration but for its batch."""
    same = final_cfg.model_dump(exclude={"batch_size"})
    pts = [(r.config.batch_size, r.peak_memory_gib) for r in lad.rungs
           if r.status == "ok" and r.peak_memory_gib is not None and r.config.model_dump(exclude={"batch_size"}) == same]
    if final_m.peak_memory_gib is not None:
        pts.append((final_cfg.batch_size, final_m.peak_memory_gib))
    return pts


def fit_memory(lad, final_cfg: ProbeConfig, final_m: RungMeasurement, pv: Preview, settings: MeasureSettings,
               measure_fn) -> MemoryFit | None:
    """Peak memory at the batch sizes tried, fitted as fixed + per sample; when the ladder tried
    only one, the final configuration is run for a few steps at half and double its batch."""
    pts = memory_points(lad, final_cfg, final_m)
    note = None
    if len({b for b, _ in pts}) < 2 and pv.batch_tunable:
        short = replace(settings, target_ci=0.0, max_steps=MEMORY_STEPS)
        for bs in (final_cfg.batch_size // 2, final_cfg.batch_size * 2):
            if bs < 1:
                continue
            cfg = final_cfg.model_copy(update={"batch_size": bs})
            try:
                m = measure_fn("memory", cfg) if measure_fn is not None else measure_anywhere(short, cfg)
            except (KeyboardInterrupt, SystemExit, RankLost):
                raise
            except Exception as e:  # noqa: BLE001 - an out-of-memory here is an answer: said, not fatal
                from ..contract.ladder import classify

                status, why = classify(e)
                note = f"batch {bs}: {status} ({why})"
                continue
            if m.peak_memory_gib is not None:
                pts.append((bs, m.peak_memory_gib))
    if not pts:
        return None
    fit = MemoryFit.fitted("accelerator" if final_cfg.accelerator != "cpu" else "host", pts)
    if note:
        fit = fit.model_copy(update={"note": "; ".join(x for x in (fit.note, note) if x)})
    return fit


def remeasure_baseline(lad, settings: MeasureSettings, opts: ProbeOptions, measure_fn) -> None:
    """The baseline, kept as the pick of a raced ladder that did not re-measure it, re-measured as
    measure_until_known would have in the ladder (pooled, while its CI misses the target)."""
    base, cfg = lad.rungs[0], lad.rungs[0].config
    m = measure_until_known(lambda: measure_fn("baseline", cfg) if measure_fn is not None
                            else measure_anywhere(settings, cfg, label="baseline"),
                            samples_per_step(cfg), opts.target_ci, opts.remeasure_rounds, first=lad.best_measurement)
    lad.best_measurement = m
    lad.best = lad.rungs[0] = base.model_copy(update={
        "samples_per_sec": m.samples_per_sec, "ci_low": m.ci_low, "ci_high": m.ci_high, "steps_timed": m.steps_timed,
        "remeasured": m.remeasured, "ci_target_met": m.ci_target_met, "stop_reason": m.stop_reason})


def run_probe(opts: ProbeOptions, on_rung: Callable[[RungResult, RungResult | None], None] | None = None,
              measure_fn: Callable[[str, ProbeConfig], RungMeasurement] | None = None,
              on_leg: Callable[[str, RungMeasurement], None] | None = None,
              checked: Checked | None = None) -> ProbeResult | None:
    """Climb the ladder, confirm the winner and return the finished result (raises on a failed
    baseline). `measure_fn(rung, config)` replaces the real measuring (tests); `on_leg` hears each
    confirmation leg. None on the extra ranks of a DDP run: only rank 0 reports. With --depths,
    the ladder climbs on the deeper copy and the result is extrapolated (shallow.py)."""
    if opts.depths:
        from . import shallow

        return shallow.run_shallow(opts, run_probe, measure_anywhere, on_rung=on_rung, measure_fn=measure_fn,
                                   on_leg=on_leg, checked=checked)
    started = datetime.now(timezone.utc)
    checked = checked or preflight(opts)
    accelerator, pv = checked.accelerator, checked.preview
    # The batch the workload starts at is the one its loader yields (its author's, or the one set).
    opts = replace(opts, spec=opts.spec.model_copy(update={"batch_size": pv.batch_size}))
    spec = opts.spec
    hw = hardware.fingerprint()
    devices, strategy = default_devices(accelerator, hw)
    if opts.devices is not None:
        devices = opts.devices
    if opts.strategy:
        strategy = opts.strategy
    if opts.cpu_too:  # the ladder tunes the one GPU the CPU trains beside
        devices, strategy = 1, "auto"
    if devices < 1:
        raise WorkloadError(f"no {accelerator} devices to train on")

    # One CPU rank trains with torch's threads, recorded so that the threads rung has a count to
    # beat (several ranks: Lightning divides the cores among them).
    one_cpu_rank = accelerator == "cpu" and devices * opts.num_nodes == 1
    start = ProbeConfig(accelerator=accelerator, devices=devices, num_nodes=opts.num_nodes,
                        strategy=strategy, precision=opts.precision, batch_size=spec.batch_size,
                        threads=torch.get_num_threads() if one_cpu_rank else None)
    settings = MeasureSettings.from_options(opts)
    best_sps: list[float] = []
    noise: list[list[float]] = []  # each measured rung's timed steps: the step noise a race takes as its prior

    def slow_limit(cfg: ProbeConfig) -> float | None:
        if not best_sps:
            return None
        expected = samples_per_step(cfg) / best_sps[-1]
        return max(SLOW_FACTOR * expected, MIN_SLOW_STEP_S)

    def race_threshold(rung: str) -> float | None:
        """What the rung races against (contract/race.py): the best so far by the rung's gain."""
        if not opts.race or not best_sps:
            return None
        return race_lines(rung, best_sps[-1], ladder_opts)[0]

    emulated = known_losers(accelerator, hw.isa_flags, hw.cpu_manufacturer)
    losers = emulated if opts.race else {}  # measured one step and skipped where the step bears it out

    def one_step(rung: str, cfg: ProbeConfig, why: str) -> None:
        """Measure one step of a rung known to lose; skip it (RungSkipped) when the step confirms it."""
        short = replace(settings, warmup_steps=0, max_steps=ONE_STEP, target_ci=0.0)
        threshold = race_threshold(rung)
        # Cut where the answer is known: a step past the best's time for as many samples is slower.
        cut = known_slower_after(samples_per_step(cfg), threshold) if threshold else None
        try:
            m = (measure_fn(rung, cfg) if measure_fn is not None
                 else measure_anywhere(short, cfg, slow_step_s=slow_limit(cfg), label=rung, first_step_s=cut))
        except RungTooSlow as e:  # the step itself ran past the slow limit: the rule held
            raise RungSkipped(f"{why}: {e}") from e
        if threshold is not None and m.samples_per_sec <= threshold:
            raise RungSkipped(f"{why}: its first step ran at {m.samples_per_sec:,.1f} samples/s against the best "
                              f"so far's {best_sps[-1]:,.1f}")

    def measure_one(rung: str, cfg: ProbeConfig) -> RungMeasurement:
        if (why := losers.get(rung.split("@")[0])) is not None:
            one_step(rung, cfg, why)  # the rule did not hold here: the rung is timed as any other
        if measure_fn is not None:
            once = lambda: measure_fn(rung, cfg)
        else:
            floor = race_lines(rung, best_sps[-1], ladder_opts)[1] if opts.race and best_sps else None
            # the step noise of the rungs before: a rung of long steps is judged after one step (race.py)
            raced = replace(settings, race_threshold=race_threshold(rung), race_floor=floor,
                            race_prior=pooled_log_variance(noise) if opts.race else None)
            once = lambda: measure_anywhere(raced, cfg, slow_step_s=slow_limit(cfg), label=rung)
        # Re-measured only while the rung could still change the decision: its CI reaches the best
        # (raced: and its CI has not decided it against its lines, reliability.decided). The
        # baseline, raced with a confirmation to come, is not re-measured here (baseline_later).
        def matters(m: RungMeasurement) -> bool:
            if not best_sps or m.ci_high < best_sps[-1]:
                return not best_sps and not baseline_later
            return not (opts.race and decided(m, *race_lines(rung, best_sps[-1], ladder_opts)))

        def known() -> RungMeasurement:
            return measure_until_known(once, samples_per_step(cfg), opts.target_ci, opts.remeasure_rounds,
                                       matters=matters)

        m = known()
        if (why := emulated.get(rung.split("@")[0])) is not None:  # a win the ISA cannot give: quietly, or not at all
            m = held_quietly(m, known, best_sps[-1] if best_sps else None, why)
        if isinstance(m.extra, Timing):
            noise.append(usable_steps(m.extra))
        return m

    def track(rung: RungResult, base: RungResult | None) -> None:
        if rung.kept:
            best_sps.append(rung.samples_per_sec)
        if on_rung is not None:
            on_rung(rung, base)

    order = order_for(opts.past, hw, accelerator, spec.workload_id)
    log.info("rung order %s, from %s", ", ".join(order.kinds), order.basis)
    ladder_opts = LadderOptions(
        tune=opts.tune, batch_fixed=spec.batch_size_fixed, half_precision=half_precision(accelerator),
        vision=pv.convolutional, worker_counts=worker_counts(usable_cpus()),
        workers_supported=pv.workers_note is None, workers_note=pv.workers_note,
        batch_note=None if pv.batch_tunable else pv.batch_note,
        pin_memory=accelerator == "gpu", skip=opts.skip,
        extensions=extensions.detect(accelerator, hw, spec, devices * opts.num_nodes), order=order.kinds,
        thread_counts=cpu_thread_counts(hw) if one_cpu_rank else None,
        free_cpus=lambda base: free_cpus(usable_cpus(), base.contention),
        # a rung times at least MIN_TIMED_STEPS steps in its seconds: no batch whose step is longer
        step_budget_s=settings.max_seconds / MIN_TIMED_STEPS,
        raced=opts.race,
    )
    # Raced, the baseline is measured once, its CI however wide: what it decides in the ladder is
    # the threshold the rungs race against, and a rung that beats it is measured against the
    # baseline again in the A-B confirmation, whose legs re-read the baseline beside the pick (a
    # re-measurement in the ladder cost ~130 s of a ~650 s raced probe in issue 32's replay). Only
    # when the baseline stays the pick (no confirmation) is it re-measured, after the ladder.
    baseline_later = opts.race and opts.tune and opts.confirm_rounds > 0 and opts.remeasure_rounds > 0
    lad = run_ladder(start, measure_one, ladder_opts, track)
    if baseline_later and lad.best is lad.rungs[0]:
        remeasure_baseline(lad, settings, opts, measure_fn)

    # Confirm the pick against the baseline, in alternation: the ladder's winner is the best of
    # several noisy draws, and the machine may have changed since the baseline was measured.
    final_cfg, final_m, confirmation, notes = lad.best.config, lad.best_measurement, None, []
    if opts.tune and opts.confirm_rounds > 0 and lad.best is not lad.rungs[0]:
        # Raced, a leg settles as a raced rung does (settle.settled_at's long_s): both configurations
        # were measured in the ladder (compiled graphs cached, kernels chosen), so a step of seconds
        # carries what is left to settle within its noise after the first; waiting for the
        # change-point's SETTLE_STEPS cost a step or more a leg (issue 32's replay: up to 94 s).
        legs = replace(settings, max_seconds=settings.max_seconds / opts.confirm_rounds,
                       look_s=RACE_LOOK_S if opts.race else None)

        def leg(name: str, cfg: ProbeConfig) -> RungMeasurement:
            m = (measure_fn(f"confirm {name}", cfg) if measure_fn is not None
                 else measure_anywhere(legs, cfg, label=f"confirm {name}"))
            if on_leg is not None:
                on_leg(name, m)
            return m

        margin = confirm_margin(lad.rungs[0].config, lad.best.config)
        try:
            done = confirm(leg, lad.rungs[0].config, lad.best.config, samples_per_step, opts.target_ci,
                           opts.confirm_rounds, ladder_baseline=lad.rungs[0].samples_per_sec, race=opts.race,
                           margin=margin)
        except RankLost:
            raise
        except Exception as e:  # noqa: BLE001 - a leg that fails leaves the ladder's pick, said to be unconfirmed
            notes.append(f"the A-B confirmation could not run ({type(e).__name__}: {str(e)[:200]})")
        else:
            confirmation = done.record
            if done.record.pick_kept:  # held, or unconfirmed: the pick with its own band (confirm_outcome)
                final_m = done.tuned  # fresh draws: the ladder's own number is the luckiest of several
            else:
                final_cfg, final_m = lad.rungs[0].config, done.base
                if margin and done.record.speedup > 1.0:  # faster, but not by the margin: the rung says so
                    i = lad.rungs.index(lad.best)
                    note = "; ".join(x for x in (lad.best.note, confirmed_note(done.record.speedup)) if x)
                    lad.rungs[i] = lad.best.model_copy(update={"note": note})

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
        except RankLost:
            raise
        except Exception as e:  # noqa: BLE001
            log.warning("profile failed: %s", e)

    memory = fit_memory(lad, final_cfg, final_m, pv, settings, measure_fn)
    drop_warm()  # the last rung's model and loader (measure.py): nothing more keeps them
    if not is_global_zero():
        return None  # the other DDP ranks trained along; measuring peaks there would slow rank 0's
    both = cpu_too.measure_gpu_and_cpu(settings, final_cfg) if opts.cpu_too else None
    result = assemble_result(opts, accelerator, hw, lad, started, final_cfg, final_m, confirmation,
                             notes, profile_dir, profile_trace, pv, memory, both)
    # The order is part of what the probe did (and what the next probe's order reads, with the ladder).
    return result.model_copy(update={"rung_order": list(order.kinds) if opts.tune else None,
                                     "rung_order_basis": order.basis if opts.tune else None})
