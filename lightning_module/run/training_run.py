"""ThroughputCallback: the probe's timing rule in your own training run, written as a measurement.

Add it to the Trainer of a real training run (your data, your model, hours of steps) and it records
one result with `source: training run` when training ends or is interrupted: samples/s with its 95%
CI over the steady-state steps (warm-up skipped, the device synchronised before the clock is read,
validation passes left out), which steps other work on the machine slowed down, the machine (instance
type from EC2's metadata, IMDSv2, or as given; CPU and GPU fingerprint) and the shape of the
workload as a probe records it, each part said how it was obtained (parameters, optimizer state;
FLOPs and memory traffic per sample counted on the first step; a memory fit derived from the peak at
the batch used; the data pipeline's rate, its loader timed alone for half a second after training).
The record is validated by the same
strict model as a probe's (contract/result.py) before it is written to a file or to a results
store; `advisor results import FILE` reads the file, `advisor recommend` ranks with it.

A thin adapter, as Lightning's ThroughputMonitor is over its Throughput: contract/timing.py's
Stopwatch does the maths; this reads the clocks. Cheap by construction: a step costs one clock read
(and a synchronisation on a GPU, the probe's rule), and the machine is looked at (/proc) only every
few steps, so that the looking costs under READ_BUDGET (0.1%) of the step time
(benchmarks/callback_overhead.py measures it). It never stops or fails the training: a problem is
one warning line and no record.
"""

from __future__ import annotations

import math
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import get_args

import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities.rank_zero import rank_zero_info, rank_zero_warn
from pydantic import ValidationError

from catalog.models import NAME_PATTERN
from safeio import check_writable, first_error, save_atomic

from ..contract.contention import ContentionMeter, GpuState
from ..contract.options import TARGET_CI, WARMUP_STEPS
from ..contract.reliability import reasons, summarise
from ..contract.result import (
    BUILTIN_MODELS,
    MAX_BATCH_SIZE,
    HardwareFingerprint,
    MemoryFit,
    Precision,
    ProbeConfig,
    ProbeResult,
    ResultError,
    WorkloadShape,
    WorkloadSpec,
    parse_result,
    utilisation,
)
from ..contract.timing import Stopwatch, step_stats, usable_steps
from . import hardware
from .batches import read_batch_size, samples_counter, tokens_per_sample
from .callbacks import synchronize
from .counting import StepCounter
from .devices import rss_gib
from .measure import model_facts
from .peaks import datasheet_peak_tflops
from .preview import pipeline_rate
from .ranks import gather_peaks, peak_gib
from .readers import gpu_state, load_average, own_process_tree, read_now, usable_cpus
from .run_workload import TrainingRunError, chosen_args, class_path, cli_optimizers
from .workloads import constructor_defaults

# The machine is looked at every k steps, k chosen so that the looks cost at most this share of
# the steps' time (a look reads /proc: ~50-90 us on a busy 2-CPU VM, more with many CPUs).
READ_BUDGET = 0.001
MAX_READ_EVERY = 1000
# Timed steps kept (8 bytes each, and their verdicts): a long run is measured over its first this
# many steps after warm-up, then the callback stops looking (and costs nothing).
MAX_TIMED_STEPS = 100_000
_PRECISIONS = get_args(Precision)  # trainer.precision is Lightning's unified name
_ACCELERATORS = {"CPUAccelerator": "cpu", "CUDAAccelerator": "gpu", "MPSAccelerator": "mps", "XLAAccelerator": "tpu"}


def _check_label(instance_type: str) -> None:
    """A given instance type must be one this machine can be (the probe's --instance-type rule,
    contract/instance_label.py), against the shipped catalog's facts; a type it does not list is
    taken as given."""
    from catalog.io import SNAPSHOT_PATH, load

    from ..contract.instance_label import contradictions

    it = load(SNAPSHOT_PATH).instance_types.get(instance_type)
    wrong = contradictions(it, hardware.fingerprint()) if it is not None else []
    if wrong:
        raise TrainingRunError(f"instance_type={instance_type} is not this machine: {'; '.join(wrong)} "
                               "(off EC2, leave instance_type out)")


def _strategy(strategy) -> str:
    """Lightning's strategy as the probe's config names it ("auto" for one device, "ddp", ...)."""
    from lightning.pytorch.strategies import FSDPStrategy, ModelParallelStrategy

    if isinstance(strategy, FSDPStrategy):
        return "fsdp"
    if isinstance(strategy, ModelParallelStrategy):  # FSDP2 when its mesh is data parallel only
        return "fsdp" if getattr(strategy, "_tensor_parallel_size", None) == 1 else "model_parallel"
    name = type(strategy).__name__.removesuffix("Strategy").lower()
    return "auto" if name in ("singledevice", "") else name[:100]


class ThroughputCallback(Callback):
    """Times your training run's steps as the probe does and writes one `training run` result.

    output: the JSON file to write (default: advisor-training-run-<id>.json in the Trainer's
    default_root_dir); store: a results store to add it to (`advisor.ResultStore()`), instead of or
    beside the file. workload: what was trained, as `advisor recommend --workload` names it (default:
    the LightningModule's class, "package.module:Class"); init_args / data_init_args: its constructor
    arguments (default: the saved hyper-parameters that differ from the constructor's defaults), and
    the optimizer and scheduler when LightningCLI's optimizer: / lr_scheduler: replaced the module's
    configure_optimizers() (run/run_workload.py), so the id is the probe's of the same config.
    instance_type: default from EC2's instance metadata, else none (the fingerprint then makes it a
    measured device of the model). warmup_steps, target_ci: the probe's defaults. count_flops=False:
    the first step is not counted (no FLOPs nor memory traffic per sample); time_pipeline=False: the
    loader is not timed alone after training (no pipeline rate; it costs about half a second, more
    while worker processes start).
    """

    def __init__(self, output: str | Path | None = None, store=None, workload: str | WorkloadSpec | None = None,
                 init_args: dict | None = None, data_init_args: dict | None = None,
                 instance_type: str | None = None, warmup_steps: int = WARMUP_STEPS, target_ci: float = TARGET_CI,
                 max_timed_steps: int = MAX_TIMED_STEPS, count_flops: bool = True, time_pipeline: bool = True):
        if store is not None and not callable(getattr(store, "add", None)):
            raise TrainingRunError(f"store={store!r} has no add(result): give advisor.ResultStore(PATH)")
        if workload is not None and not isinstance(workload, (str, WorkloadSpec)):
            raise TrainingRunError("workload= is a name ('package.module:Class', or a builtin) or a WorkloadSpec")
        if instance_type is not None and not (isinstance(instance_type, str) and
                                              re.fullmatch(NAME_PATTERN, instance_type)):
            raise TrainingRunError(f"instance_type={instance_type!r} is not an instance type name (like g5.xlarge)")
        for name, v in (("warmup_steps", warmup_steps), ("max_timed_steps", max_timed_steps)):
            if not isinstance(v, int) or isinstance(v, bool) or v < (0 if name == "warmup_steps" else 2):
                raise TrainingRunError(f"{name}={v!r} must be a whole number ({'0' if name == 'warmup_steps' else '2'} or more)")
        if not isinstance(target_ci, (int, float)) or isinstance(target_ci, bool) or not 0 < target_ci < 1:
            raise TrainingRunError(f"target_ci={target_ci!r} must be a fraction between 0 and 1 (0.03 is ±3%)")
        for name, v in (("count_flops", count_flops), ("time_pipeline", time_pipeline)):
            if not isinstance(v, bool):
                raise TrainingRunError(f"{name}={v!r} must be True or False")
        if instance_type is not None:
            _check_label(instance_type)
        self.output = Path(output) if output is not None else None
        if self.output is not None:
            try:
                check_writable(self.output, "cannot write")
            except Exception as e:  # noqa: BLE001 - the catalog's FileError: said here, before training
                raise TrainingRunError(f"output={output}: {e}") from None
        self.store, self.workload, self.instance_type = store, workload, instance_type
        self.init_args, self.data_init_args = init_args, data_init_args
        self.warmup_steps, self.target_ci, self.max_timed_steps = warmup_steps, target_ci, max_timed_steps
        self.count_flops, self.time_pipeline = count_flops, time_pipeline
        self.result: ProbeResult | None = None  # what was written
        self.written: Path | None = None
        self.error: str | None = None  # why nothing was written
        self._reset()

    def _reset(self) -> None:
        self.clock: Stopwatch | None = None
        self._spec = self._config = None
        self._count, self._counted_by = None, "batch"
        self._rank_peaks: list[float] | None = None  # each rank's peak memory at the end (ranks.gather_peaks)
        self._tokens: tuple[float | None, str | None] | None = None  # per sample, counted by; the first batch's
        self._samples = 0  # samples of the timed steps, this rank
        self._flops = self._counter = self._traffic = self._other_traffic = self._ops = None
        self._base_gib: float | None = None  # memory in use when training started
        self._sync = None  # waits for the device before a clock read; None on the CPU (nothing queued)
        self._every, self._read_cost, self._reads = 1, 0.0, 0
        # Steps ended since the last look: their end times and samples, handed to the Stopwatch at
        # the next look, so that a step itself only appends two numbers (cold caches make every
        # object a step touches cost microseconds on a busy machine).
        self._ends: list[float] = []
        self._sizes: list[int | None] = []
        self._gpu: list[GpuState] = []
        self._started = datetime.now(timezone.utc)
        self._done = False

    # ------------------------------------------------------------------ hooks

    def on_train_start(self, trainer, pl_module):
        self._reset()
        self.error = None
        try:
            self._spec, self._config = self._workload(trainer, pl_module), self._configuration(trainer, pl_module)
        except TrainingRunError as e:
            self._give_up(str(e))
            return
        self._count, self._counted_by = samples_counter(pl_module, trainer.datamodule)
        if self._counted_by == "hook":  # the user's samples_in_batch: a whole number, whatever it returns
            hook = self._count
            self._count = lambda b: int(hook(b) or 0)
        accelerator = self._config.accelerator
        cpu = accelerator == "cpu"
        self._sync = None if cpu else lambda: synchronize(accelerator)
        on_gpu = accelerator == "gpu" and torch.cuda.is_available()
        self._base_gib = torch.cuda.memory_allocated() / 2**30 if on_gpu else rss_gib() if cpu else None
        threads = torch.get_num_threads() if cpu else 1
        self._meter = ContentionMeter(threads, usable_cpus(), cpu)
        # Every rank on this host is this run's load (the load average counts them all).
        self._own_load = (threads + self._config.num_workers) * max(1, trainer.num_devices)
        warmup = self.warmup_steps + (1 if self._config.compile else 0)  # the compile step comes on top
        self.clock = Stopwatch(warmup, self.target_ci, math.inf, meter=self._meter)
        self._look_at_gpu()
        synchronize(self._config.accelerator)
        self.clock.start(time.perf_counter(), self._read())

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self._tokens is None and self.clock is not None:
            self._count_tokens(batch, pl_module, trainer.datamodule)
        if self.clock is None or self.clock.steps or not self.count_flops or self._config.compile:
            return
        if self._config.accelerator == "tpu":
            return
        # The first step is warm-up: counting it costs nothing that is timed. The probe's counters
        # (counting.py), over training_step and backward (the optimizer's step is no sample's).
        self._counter = StepCounter().__enter__()
        self._flop_batch = self._count(batch)

    def _count_tokens(self, batch, pl_module, datamodule) -> None:
        """The first batch's tokens per sample (batches.tokens_per_sample); a hook that fails is
        said once and the record has no tokens: the training goes on."""
        try:
            n = self._count(batch)
            self._tokens = tokens_per_sample(batch, n, pl_module, datamodule) if n else (None, None)
        except Exception as e:  # noqa: BLE001 - the user's hook must never fail the training
            rank_zero_warn(f"advisor: tokens not counted: {e}")
            self._tokens = (None, None)

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        # Manual optimization may step several optimizers in one training_step: counted to its end.
        if self._counter is not None and pl_module.automatic_optimization:
            self._end_counts()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        # The hot path: every line here is paid by every step (benchmarks/callback_overhead.py).
        clock = self.clock
        if clock is None or self._done:
            return
        if self._counter is not None:  # no optimizer step in this batch (gradient accumulation)
            self._end_counts()
        if self._sync is not None:
            self._sync()
        ends = self._ends
        ends.append(time.perf_counter())
        self._sizes.append(self._count(batch))
        if len(ends) >= self._every:
            self._look(self._read())

    def _look(self, reading) -> None:
        """The steps ended since the last look, to the Stopwatch, judged with this reading; the
        next look put off so that looking costs READ_BUDGET of the steps' time."""
        clock = self.clock
        timed = clock.timing.step_times
        for end, n in zip(self._ends, self._sizes):
            clock.step(end)
            if clock.steps > clock.warmup_steps:
                self._samples += n or 0
                if len(timed) >= self.max_timed_steps:  # a long run: measured over its first steps
                    self._done = True
                    break
        self._ends.clear()
        self._sizes.clear()
        clock.pause(reading)
        if timed and timed[-1] > 0:
            self._every = max(1, min(MAX_READ_EVERY, math.ceil(self._read_cost / (READ_BUDGET * timed[-1]))))

    def _stop_looking(self) -> None:
        if self.clock is not None and not self._done:
            self._look(self._read())
            self._done = True

    def on_validation_start(self, trainer, pl_module):
        if self.clock is not None and not self._done and not trainer.sanity_checking:
            self._look(self._read())

    def on_validation_end(self, trainer, pl_module):
        if self.clock is not None and not self._done and not trainer.sanity_checking:
            synchronize(self._config.accelerator)
            self.clock.resume(time.perf_counter(), self._read())

    def on_train_end(self, trainer, pl_module):
        self._stop_looking()
        ranks = self._gather(trainer, pl_module) if trainer.world_size > 1 else None
        # A collective too, on every rank: a sharded run's ranks hold different shares.
        self._rank_peaks = gather_peaks(trainer, pl_module.device, "gpu" if pl_module.device.type == "cuda" else "cpu")
        self._finish(trainer, pl_module, "training ended", ranks)

    def on_exception(self, trainer, pl_module, exception):
        if self._counter is not None:
            self._counter.__exit__(None, None, None)
            self._counter = None
        self._stop_looking()
        # No collective here: another rank may be gone. Rank 0's figures stand for every rank's.
        self._finish(trainer, pl_module, f"interrupted ({type(exception).__name__})")

    def _gather(self, trainer, pl_module) -> list[tuple[int, int]] | None:
        """Every rank's (samples, timed steps). A collective: every rank calls it, measuring or not
        (one that gave up sends zeros), so that no rank waits for another at the end of training."""
        steps = len(self.clock.timing.step_times) if self.clock is not None else 0
        mine = torch.tensor([self._samples, steps], dtype=torch.long, device=pl_module.device)
        try:
            got = trainer.strategy.all_gather(mine)
        except Exception as e:  # noqa: BLE001 - the record is never worth failing the training
            rank_zero_warn(f"advisor: the ranks' sample counts could not be gathered ({type(e).__name__}: {e}); "
                           "rank 0's figures stand for every rank's")
            return None
        return [(int(a), int(b)) for a, b in got.reshape(-1, 2).tolist()]

    # ------------------------------------------------------------------ reading

    def _read(self):
        t0 = time.perf_counter()
        r = read_now()
        # The looks' mean cost so far: one look slowed down by a busy moment does not swing k.
        self._reads += 1
        self._read_cost += (time.perf_counter() - t0 - self._read_cost) / self._reads
        return r

    def _look_at_gpu(self) -> None:
        on_gpu = self._config is not None and self._config.accelerator == "gpu" and torch.cuda.is_available()
        if on_gpu and (g := gpu_state(torch.cuda.current_device(), own_process_tree())) is not None:
            self._gpu.append(g)

    def _end_counts(self) -> None:
        c, self._counter = self._counter, None
        c.__exit__(None, None, None)
        n = self._flop_batch
        self._flops = c.flops / n if n and c.flops else None
        self._traffic = c.bytes / n if n and c.bytes else None
        self._other_traffic = c.other_bytes / n if n and c.other_bytes else None
        self._ops = c.ops or None

    def _pipeline_rate(self, trainer) -> float | None:
        """The training loader timed alone, as the probe times it (preview.pipeline_rate): samples/s
        per worker after its first batch, for PIPELINE_SECONDS at most. After training, so no step
        waits for it; None when it cannot be (several loaders, an empty one, an error)."""
        loader = trainer.train_dataloader
        if not isinstance(loader, torch.utils.data.DataLoader):
            return None
        try:
            it = iter(loader)
            next(it)
            return pipeline_rate(it, self._count, loader.num_workers)
        except Exception as e:  # noqa: BLE001 - the user's loader: its rate is optional, the record is not
            rank_zero_warn(f"advisor: the data pipeline's rate not measured: {type(e).__name__}: {e}"[:300])
            return None

    def _give_up(self, why: str) -> None:
        self.error, self.clock = why, None
        rank_zero_warn(f"advisor: training-run throughput not recorded: {why}")

    # ------------------------------------------------------------------ what was trained, how

    def _workload(self, trainer, pl_module) -> WorkloadSpec:
        if isinstance(self.workload, WorkloadSpec):
            return self.workload
        dm = trainer.datamodule
        model = self.workload or class_path(type(pl_module))
        own = model not in BUILTIN_MODELS
        spec = {"model": model, "datamodule": class_path(type(dm)) if dm is not None and own else None,
                "init_args": self.init_args if self.init_args is not None else chosen_args(pl_module) if own else {},
                "data_init_args": (self.data_init_args if self.data_init_args is not None
                                   else chosen_args(dm) if dm is not None and own else {})}
        # LightningCLI's optimizer: / lr_scheduler: replace the module's own, so they name the workload
        # as they do the probe's (the module's own configure_optimizers(): nothing, as in the probe)
        spec["optimizer"], spec["lr_scheduler"] = cli_optimizers(pl_module, trainer)
        if own:  # the defaults the id resolves arguments against, as the probe records them
            spec["init_arg_defaults"] = constructor_defaults(type(pl_module))
            spec["data_init_arg_defaults"] = constructor_defaults(type(dm)) if spec["datamodule"] else {}
        if model.startswith("__main__:"):
            rank_zero_warn(f"advisor: the workload is named {model}: a class in a script has no importable name; "
                           "pass workload='package.module:Class' for a probe and recommend to find it")
        batch = read_batch_size(pl_module, dm) or getattr(trainer.train_dataloader, "batch_size", None)
        if isinstance(batch, int) and 0 < batch <= MAX_BATCH_SIZE:
            spec["batch_size"] = batch  # where the author's runs start, as the probe records it
        try:
            return WorkloadSpec.model_validate(spec)
        except ValidationError as e:
            raise TrainingRunError(f"cannot name the workload ({model}): {first_error(e).msg}; pass workload=") from None

    def _configuration(self, trainer, pl_module) -> ProbeConfig:
        accelerator = _ACCELERATORS.get(type(trainer.accelerator).__name__)
        if accelerator is None:
            raise TrainingRunError(f"accelerator {type(trainer.accelerator).__name__} "
                                   "is not one the advisor ranks (cpu, cuda, mps, xla)")
        precision = str(trainer.precision)
        if precision not in _PRECISIONS:
            raise TrainingRunError(f"precision {trainer.precision} is not one the advisor ranks by "
                                   f"({', '.join(_PRECISIONS)})")
        loader = trainer.train_dataloader
        batch = read_batch_size(pl_module, trainer.datamodule) or getattr(loader, "batch_size", None) or 1
        return ProbeConfig(
            accelerator=accelerator, devices=trainer.num_devices, num_nodes=trainer.num_nodes,
            strategy=_strategy(trainer.strategy),
            precision=precision, compile=getattr(pl_module, "_compiler_ctx", None) is not None,
            batch_size=min(int(batch), MAX_BATCH_SIZE),
            num_workers=int(getattr(loader, "num_workers", 0) or 0), pin_memory=bool(getattr(loader, "pin_memory", False)),
            # the intra-op threads it trained with, as a probe's threads rung records its pick
            threads=torch.get_num_threads() if accelerator == "cpu" and trainer.num_devices * trainer.num_nodes == 1 else None)

    # ------------------------------------------------------------------ the record

    def _finish(self, trainer, pl_module, how: str, ranks: list[tuple[int, int]] | None = None) -> None:
        clock, self.clock = self.clock, None  # once: on_exception after on_train_end writes nothing more
        if clock is None or not trainer.is_global_zero:
            return
        try:
            result = self._record(clock, trainer, pl_module, how, ranks)
            result = parse_result(result.model_dump_json(), where="training-run result")  # as `results import` reads it
            self._write(result, trainer)
        except (TrainingRunError, ResultError) as e:
            self._give_up(str(e))
        except ValidationError as e:  # a part of the record (its shape, memory point) out of its bounds
            first = first_error(e)
            self._give_up(f"training-run result: invalid {e.title} at {first.at}: {first.msg}")
        except Exception as e:  # noqa: BLE001 - the record must never fail the user's training
            self._give_up(" ".join(f"{type(e).__name__}: {e}".split())[:500])

    def _record(self, clock: Stopwatch, trainer, pl_module, how: str, ranks: list[tuple[int, int]] | None) -> ProbeResult:
        t = clock.timing
        if len(t.step_times) < 2:
            raise TrainingRunError(f"{len(t.step_times)} step(s) timed after {t.warmup_steps} warm-up step(s): "
                                   "too short a run to measure")
        self._look_at_gpu()
        clock.finish(load_average(), self._own_load, self._gpu)
        cfg = self._config
        world = cfg.devices * cfg.num_nodes
        own = self._samples / len(t.step_times)  # rank 0's samples per step
        why_ranks = []
        if ranks is not None and all(n for _, n in ranks):
            world, per_step = len(ranks), sum(s / n for s, n in ranks)  # every rank's own count
        else:  # one rank, or interrupted: the others are taken to train as many as rank 0
            per_step = own * world
            if world > 1:
                why_ranks = [f"the other {world - 1} rank(s)' samples were not gathered ({how}): taken as rank 0's"]
        batch = min(max(1, round(per_step / world)), MAX_BATCH_SIZE)  # past it, the record's own check says why
        cfg = cfg.model_copy(update={"batch_size": batch})
        gpu = cfg.accelerator == "gpu"
        # Rank 0's peak as gathered with the others': read again here it could have grown a page since.
        peak = self._rank_peaks[0] if self._rank_peaks else peak_gib(cfg.accelerator)
        facts = model_facts(pl_module, trainer)
        m = summarise(t, per_step, self.target_ci, peak_memory_gib=peak, model_facts=facts)
        hw: HardwareFingerprint = hardware.fingerprint()
        achieved = m.samples_per_sec * self._flops / 1e12 if self._flops else None
        devices_in_peak = world if cfg.accelerator != "cpu" else 1
        per_device = datasheet_peak_tflops(hw, cfg.accelerator, cfg.precision)
        peak_ds = per_device * devices_in_peak if per_device else None
        util_ds, why_ds = utilisation(achieved, peak_ds, "datasheet")
        why = reasons(m, self.target_ci) + ([why_ds] if why_ds else []) + why_ranks
        instance_type, source = self.instance_type, "given" if self.instance_type else None
        if instance_type is None and (found := hardware.ec2_instance_type()):
            instance_type, source = found, "imds"
        tokens = self._tokens or (None, None)
        shape = WorkloadShape(
            **facts, data_source="datamodule" if trainer.datamodule is not None else "module",
            samples_counted_by=self._counted_by,
            batch_tunable=(tunable := read_batch_size(pl_module, trainer.datamodule) is not None),
            batch_note=None if tunable
            else "no batch_size attribute or hparam on the module or DataModule (Lightning's convention)",
            memory=self._memory_fit(pl_module, gpu, min(max(1, round(own)), MAX_BATCH_SIZE), peak, facts),
            memory_traffic_bytes_per_sample=self._traffic, other_traffic_bytes_per_sample=self._other_traffic,
            memory_traffic_note=(f"counted over the first step's training_step and backward at its batch of "
                                 f"{self._flop_batch} ({cfg.precision}): the weights' traffic shared by its samples, "
                                 "an upper bound" if self._traffic else None),
            ops_per_step=self._ops, tokens_per_sample=tokens[0], tokens_counted_by=tokens[1])
        pipeline = self._pipeline_rate(trainer) if self.time_pipeline and how == "training ended" else None
        return ProbeResult(
            workload=self._spec, workload_id=self._spec.workload_id, instance_type=instance_type,
            instance_type_source=source, hardware=hw, software=hardware.software_versions(), config=cfg,
            samples_per_sec=m.samples_per_sec, samples_per_sec_ci=(m.ci_low, m.ci_high),
            step_time=step_stats(usable_steps(t), t.warmup_steps, t.warmup_seconds),
            flops_per_sample=self._flops, achieved_tflops=achieved, peak_tflops_datasheet=peak_ds,
            utilisation_datasheet=util_ds, peak_memory_gib=peak, stop_reason=how, devices_in_peak=devices_in_peak,
            contention=m.contention, reliable=not why, unreliable_reasons=why, shape=shape,
            pipeline_samples_per_sec_per_worker=pipeline, source="training run", started_at=self._started,
            tokens_per_sec=m.samples_per_sec * tokens[0] if tokens[0] else None,
            rank_peak_memory_gib=self._rank_peaks or [],
        )

    def _memory_fit(self, pl_module, gpu: bool, batch: int, peak: float | None, facts: dict) -> MemoryFit | None:
        """Rank 0's memory against its batch, derived from the one batch size trained: fixed = the
        memory in use when training started (weights, buffers; on the host the whole process) plus
        the gradients and the optimizer's state measured at the end; the rest of the peak per sample."""
        where = "accelerator" if gpu else "host"
        if not peak:
            return None
        if self._base_gib is None:
            return MemoryFit.fitted(where, [(batch, peak)])  # one point, no fit
        grads = sum(p.numel() * p.element_size() for p in pl_module.parameters() if p.requires_grad)
        state = (grads + (facts.get("optimizer_state_bytes") or 0.0)) / 2**30
        at_start = "allocated on the device" if gpu else "the process's resident memory"
        return MemoryFit.derived_from(where, batch, peak, self._base_gib + state,
                                      f"{at_start} when training started + gradients + optimizer state")

    def _write(self, result: ProbeResult, trainer) -> None:
        path = self.output
        if path is None and self.store is None:
            path = Path(trainer.default_root_dir) / f"advisor-training-run-{result.result_id[:12]}.json"
        if path is not None:
            try:
                save_atomic(result, path, indent=2)
            except Exception as e:  # noqa: BLE001 - the catalog's FileError (disk full, read-only)
                raise TrainingRunError(f"cannot write {path}: {e}") from None
            self.written = path
        if self.store is not None:
            self.store.add(result)
        self.result = result
        where = " and ".join(w for w in (str(path) if path else "", "the results store" if self.store is not None else "") if w)
        ci = f"{result.samples_per_sec_ci[0]:.4g}-{result.samples_per_sec_ci[1]:.4g}"
        rank_zero_info(f"advisor: training run measured {result.samples_per_sec:.4g} samples/s (95% CI {ci}) of "
                       f"{result.workload_id}; written to {where}"
                       + (f"; 'advisor results import {path}' adds it to the store" if path and self.store is None else ""))
