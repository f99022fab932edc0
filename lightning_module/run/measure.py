"""Measure one configuration: train it in a Lightning Trainer with the StepTimer callback (which
also watches for contention) until the stopping rule says its throughput is known.

Both the probe (in its own process) and a child process (child.py, for what acts at process start)
measure through here, so neither imports the other.
"""

from __future__ import annotations

import logging
import sys
import warnings

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback

from ..contract.ladder import CompileTimeout, RungContended, RungError, RungMeasurement, RungTooSlow
from ..contract.options import MeasureSettings
from ..contract.race import Race
from ..contract.reliability import summarise
from ..contract.result import ProbeConfig
from ..contract.warm import MODEL_ONLY, keeps, settle_from
from . import workloads
from .batches import leading_dim, samples_counter
from .builders import build_workload, compiled, xla_trainer_kwargs
from .callbacks import BatchCap, Progress, StepTimer, UnmonitoredSchedulers, Watch
from .data import SyntheticDataModule
from .devices import free_memory, peak_rss_gib, reset_peak_rss
from .ranks import gather_peaks, lost_rank, watched_ddp, watched_fsdp
from .readers import gpu_state, own_process_tree, usable_cpus

log = logging.getLogger(__name__)

# A step this many times slower than the best configuration's (per sample) cannot win: cut the rung
# short. Only for steps of more than MIN_SLOW_STEP_S, where waiting costs real time and one
# scheduler hiccup cannot trigger it.
SLOW_FACTOR = 3.0
MIN_SLOW_STEP_S = 2.0


def samples_per_step(config: ProbeConfig) -> int:
    return config.batch_size * config.devices * config.num_nodes


class RankPeaks(Callback):
    """Each rank's peak memory at the end of training (ranks.gather_peaks): sharded ranks differ."""

    def __init__(self, accelerator: str):
        self.accelerator, self.peaks = accelerator, None

    def on_train_end(self, trainer, pl_module):
        self.peaks = gather_peaks(trainer, pl_module.device, self.accelerator)


class BatchCheck(Callback):
    """A rung that set a batch size the loader does not follow is stopped at its first batch: its
    configuration would misname what was measured."""

    def __init__(self, batch_size: int):
        self.batch_size = batch_size

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        lead = leading_dim(batch)
        if batch_idx == 0 and lead is not None and lead != self.batch_size:
            raise RungError("not-applicable", f"batch_size is set to {self.batch_size}, but the loader yields "
                                              f"batches of {lead}: the batch size is not tunable")


def trainer_strategy(config: ProbeConfig, settings: MeasureSettings):
    """Lightning's strategy by name, but DDP (named, or what auto means for several devices) with
    the ranks watched and a bounded wait at collectives (ranks.py)."""
    ranks = config.devices * config.num_nodes
    if ranks > 1 and config.strategy in ("ddp", "auto") and config.accelerator in ("cpu", "gpu"):
        return watched_ddp(config.accelerator, settings.rank_timeout)
    if config.strategy == "fsdp" and config.accelerator in ("cpu", "gpu"):
        # torch's FSDP2 (fully_shard): Lightning's "fsdp" (FSDP1) refuses CPU ranks
        return watched_fsdp(config.accelerator, ranks, settings.rank_timeout)
    return config.strategy


def watch_for(config: ProbeConfig) -> Watch:
    """What the step timer watches on this configuration's device."""
    cpu = config.accelerator == "cpu"
    threads = torch.get_num_threads() if cpu else 1
    gpu = None
    if config.accelerator == "gpu":
        index = torch.cuda.current_device()
        gpu = lambda: gpu_state(index, own_process_tree())
    return Watch(cores_in_use=threads, cpus=usable_cpus(), cpu_bound=cpu, own_load=threads + config.num_workers, gpu=gpu)


def measure(settings: MeasureSettings, config: ProbeConfig, extra_callbacks=(),
            max_steps: int | None = None, slow_step_s: float | None = None, label: str = "",
            first_step_s: float | None = None) -> RungMeasurement:
    """Train `config` until the stopping rule says the throughput is known; raise on failure.
    `label`: the rung's name on the progress line (settings.progress). A CPU configuration with
    `threads` trains with that many intra-op threads (the threads rung), torch's own count put back after.
    `first_step_s`: the first step's own limit (RungTooSlow past it), in place of the slow limit's
    SLOW_FACTOR x: a one-step check whose answer is known once the step runs past it (probe.one_step)."""
    threads_before = torch.get_num_threads()
    if config.accelerator == "cpu" and config.threads:
        torch.set_num_threads(config.threads)  # the threads rung (contract/threads.py); put back below
    try:
        return _measure(settings, config, extra_callbacks, max_steps, slow_step_s, label, first_step_s)
    finally:
        torch.set_num_threads(threads_before)


def _measure(settings: MeasureSettings, config: ProbeConfig, extra_callbacks,
             max_steps: int | None, slow_step_s: float | None, label: str,
             first_step_s: float | None = None) -> RungMeasurement:
    spec = settings.spec
    warm = _take_warm(settings, config)  # the rung before's model (and loader) where this rung may keep them
    free_memory(config.accelerator)
    if config.accelerator == "gpu":
        torch.cuda.reset_peak_memory_stats()
    else:
        reset_peak_rss()
    if warm is None:
        before = runtime_before(config.accelerator)
        torch.manual_seed(settings.seed)
        module, dm = build_workload(spec, config, settings.seed)
    else:
        module, dm, before = warm
    count, _ = samples_counter(module, dm)
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
    if first_step_s is not None and single_rank and not config.compile:
        first_limit = (first_step_s, RungTooSlow(f"its first step ran past {first_step_s:.2f} s, the best so far's "
                                                 "time for as many samples: slower than the best so far"))
    timer = StepTimer(
        config.accelerator if not config.xla else "tpu", warmup, settings.target_ci, settings.max_seconds,
        max_steps=settings.max_steps, first_step_limit=first_limit, step_limit=step_limit, watch=watch_for(config),
        contended_exc=lambda ran: RungContended(
            f"a step ran {ran:.1f} s while the machine was busy with other work: stopped without a verdict on speed"),
        count=count,
        race=(Race(settings.race_threshold, samples_per_step(config), floor=settings.race_floor,
                   prior=tuple(settings.race_prior) if settings.race_prior else None)
              if settings.race_threshold else None),
        # The warm-up ends where the step times settle (contract/settle.py), after the first step
        # (set-up) of a cold rung and the compile step at least (warm.settle_from).
        settle_from=settle_from(warm is not None, config.compile), look_s=settings.look_s,
    )
    warmup = timer.clock.warmup_steps  # at most (settling's cap)
    cap = max_steps if max_steps is not None else (warmup + settings.max_steps if settings.max_steps else -1)
    peaks = RankPeaks(config.accelerator)
    device = (xla_trainer_kwargs() if config.xla else
              {"accelerator": config.accelerator, "devices": config.devices, "num_nodes": config.num_nodes,
               "strategy": trainer_strategy(config, settings)})
    trainer = pl.Trainer(
        **device, precision=config.precision,
        max_epochs=-1, max_steps=-1, limit_val_batches=0, num_sanity_val_steps=0,
        enable_checkpointing=False, logger=False, enable_model_summary=False,
        enable_progress_bar=False,  # the probe's own line instead (Progress): Lightning's ETA is a whole epoch's
        callbacks=[timer, BatchCheck(config.batch_size), UnmonitoredSchedulers(), peaks,
                   *([BatchCap(cap)] if cap > 0 else []), *extra_callbacks,
                   *([Progress(label, timer, samples_per_step(config), sys.stderr)] if settings.progress else [])],
    )
    if config.compile:
        module = compiled(module, config.compile_backend)
    try:
        trainer.fit(module, datamodule=dm)
        if trainer.num_training_batches == 0:  # Lightning trains nothing on an empty loader
            raise RungError("not-applicable", f"the loader yields no batch at batch size {config.batch_size}: its data "
                                              "holds fewer samples (or drop_last drops them all)")
        facts = model_facts(module, trainer)
    except Exception as e:
        lost = lost_rank(e, settings.rank_timeout) if not single_rank else None
        if lost is not None:
            raise lost from e
        raise
    else:
        if keeps(config, config, workloads.is_builtin(spec)) is not None:
            _WARM.update(key=(spec, settings.seed, config), module=module, dm=dm, before=before)
    finally:
        timer.alarm.disarm()
        del trainer, module, dm
    t = timer.timing
    if len(t.step_times) < 1:
        raise RuntimeError("no steps were timed (the data ran out during warm-up?)")
    ranks = config.devices * config.num_nodes
    # Samples counted from the batches themselves (the last batch of an epoch may be short).
    per_step = sum(timer.samples) / len(timer.samples) * ranks if timer.samples else samples_per_step(config)
    peak = torch.cuda.max_memory_allocated() / 2**30 if config.accelerator == "gpu" else peak_rss_gib()
    compile_s = None
    if config.compile and t.first_step_seconds is not None:
        # The first step minus an ordinary step is the compiler's share.
        compile_s = max(0.0, t.first_step_seconds - sum(t.step_times) / len(t.step_times))
    return summarise(t, per_step, settings.target_ci, compile_seconds=compile_s, peak_memory_gib=peak,
                     model_facts=facts, runtime_overhead=runtime_after(config.accelerator, before),
                     rank_peaks=peaks.peaks)


# The last rung's model and loader, held until the next rung takes them or builds its own
# (contract/warm.py says when a rung may keep them); the probe drops them when it is done.
_WARM: dict = {}


def drop_warm() -> None:
    _WARM.clear()


def _take_warm(settings: MeasureSettings, config: ProbeConfig):
    """(module, datamodule, runtime_before) kept from the rung before, with the loader rebuilt
    where only the model is kept; None: build cold (and nothing is held any more)."""
    held = dict(_WARM)
    _WARM.clear()
    if not held:
        return None
    spec, seed, prev = held["key"]
    kept = keeps(prev, config, workloads.is_builtin(spec)) if (spec, seed) == (settings.spec, settings.seed) else None
    if kept is None:
        return None
    dm = held["dm"]
    if kept == MODEL_ONLY:  # a built-in workload: its loader is the synthetic one, built for this rung
        dm = SyntheticDataModule(spec.image_size, spec.num_classes, config.batch_size,
                                 num_workers=config.num_workers, pin_memory=config.pin_memory, seed=seed)
    log.debug("rung keeps the %s of the rung before", kept)
    return held["module"], dm, held["before"]


def runtime_before(accelerator: str) -> float | None:
    """GiB the runtime holds before the workload is built: on a GPU, device memory in use that
    torch's allocator did not reserve (the CUDA context, and any other process's); on the host, the
    process's resident memory (interpreter, torch, Lightning). None where neither can be read."""
    if accelerator == "gpu" and torch.cuda.is_available():
        free, total = torch.cuda.mem_get_info()
        return max(0.0, (total - free - torch.cuda.memory_reserved()) / 2**30)
    if accelerator == "cpu":
        from .devices import rss_gib

        return rss_gib()
    return None


def runtime_after(accelerator: str, before: float | None) -> dict | None:
    """result.RuntimeOverhead's fields: the context read before, the allocator's slack at the peak."""
    if before is None:
        return None
    if accelerator == "gpu":
        slack = max(0.0, (torch.cuda.max_memory_reserved() - torch.cuda.max_memory_allocated()) / 2**30)
        return {"where": "accelerator", "context_gib": before, "allocator_gib": slack,
                "note": "context: device memory in use before the model was built, less torch's reserve "
                        "(another process's memory on the device would count here too)"}
    return {"where": "host", "context_gib": before,
            "note": "the process's resident memory before the model was built"}


def model_facts(module, trainer) -> dict:
    """The trained model's size: parameters (count and bytes as stored) and the optimizer's state."""
    params = list(module.parameters())
    opt_bytes = 0
    for opt in trainer.optimizers:
        for state in opt.state.values():
            for v in state.values() if isinstance(state, dict) else ():
                if isinstance(v, torch.Tensor):
                    opt_bytes += v.numel() * v.element_size()
    return {
        "parameters": sum(p.numel() for p in params),
        "trainable_parameters": sum(p.numel() for p in params if p.requires_grad),
        "parameter_bytes": float(sum(p.numel() * p.element_size() for p in params)),
        "optimizer_state_bytes": float(opt_bytes) if trainer.optimizers else None,
    }



def quiet_lightning(verbose: bool = False) -> None:
    """Lightning's banner lines and our deliberate 0-worker baseline warning are noise here."""
    level = logging.INFO if verbose else logging.WARNING
    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(level)
    # Inductor on a CPU-only host with a CUDA torch build says so once per compile: not news here.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.INFO if verbose else logging.ERROR)
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    # A CPU rung on a machine with a GPU trains on the CPU on purpose.
    warnings.filterwarnings("ignore", message=".*GPU available but not used.*")
    # The probe's module normalises on the device in on_after_batch_transfer on purpose.
    warnings.filterwarnings("ignore", message=".*overridden `on_after_batch_transfer`.*")
    warnings.filterwarnings("ignore", message=".*isinstance\\(treespec, LeafSpec\\).*")
    warnings.filterwarnings("ignore", message=".*(tensorboardX|TensorBoard).*")
    warnings.filterwarnings("ignore", message=".*precision.*is not supported by the model summary.*")
    # A batch rung past the data's size: the rung says so (measure's not-applicable).
    warnings.filterwarnings("ignore", message=".*Total length of .* across ranks is zero.*")
    # A scheduler's monitored metric the probe never computes (callbacks.UnmonitoredSchedulers).
    warnings.filterwarnings("ignore", message=".*conditioned on metric.*which is not available.*")
