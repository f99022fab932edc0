"""What a probe produces: the workload it ran and the throughput it measured.

Torch-free on purpose: the advisor reads, stores and ranks these records without importing
torch, lightning or torchvision.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)

from catalog.models import MAX_DEVICE_MEMORY_GIB, MAX_MEMORY_GIB, NAME_PATTERN
from safeio import first_error, one_line, parse_json

# 2: the workload's constructor arguments (WorkloadSpec.init_args, data_init_args) and its shape
# (ProbeResult.shape). 3: the GPU and the CPU training at once (ProbeResult.gpu_and_cpu, `advisor
# probe --cpu-too`) and what measured it (ProbeResult.source: the probe or a training run's
# callback). 4: how a training run's shape was obtained (MemoryFit.derived, WorkloadShape.
# memory_traffic_note), and the optimizer and lr_scheduler of a LightningCLI config
# (WorkloadSpec.optimizer, lr_scheduler). 5: the ops a training step dispatches (WorkloadShape.
# ops_per_step), what bounds a small model's step on a GPU. 6: the traffic of the ops without FLOPs
# (WorkloadShape.other_traffic_bytes_per_sample), the bandwidth-bound share of a step
# (advisor/estimate/split.py), and fused attention and dropout counted one way whatever the kernel
# (run/counting.py); the constructors' defaults (WorkloadSpec.init_arg_defaults,
# data_init_arg_defaults), part of the id. 7: why each rung's timing stopped (RungResult.stop_reason),
# a race's "won"/"lost" among them (`advisor probe --race`, contract/race.py). 8: tokens for sequence
# workloads (WorkloadShape.tokens_per_sample, tokens_counted_by; ProbeResult.tokens_per_sec),
# activation bytes per token per layer with and without activation checkpointing
# (WorkloadShape.activations), the runtime's own memory (ProbeResult.runtime_overhead), a model
# measured as shallower copies of itself (ProbeResult.extrapolation) and each rank's peak memory
# (ProbeResult.rank_peak_memory_gib). 9: the intra-op threads a CPU configuration trains with
# (ProbeConfig.threads, the threads rung: contract/threads.py). 10: what the A-B confirmation kept
# (Confirmation.outcome: an unclear confirmation keeps the pick, its speed-up unconfirmed), the order
# the on/off rungs were climbed in and what it was read from (ProbeResult.rung_order,
# rung_order_basis: contract/order.py), a batch step raced to a "tied" stop (RungResult.stop_reason).
# 11: an extrapolated model's fit (Extrapolation.rounds, intercept_s, slope_s, their standard errors
# and covariance, step_band_s; two to eight points).
# Older records read as they are: none of these fields is required.
RESULT_SCHEMA_VERSION = 11
READABLE_SCHEMA_VERSIONS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)

BUILTIN_MODELS = ("resnet50", "resnet18", "vit_b_16", "mlp")
# A builtin that cuts its input into square patches takes an image side that is a whole number of
# them: torchvision's vit_b_16 (ViT-B/16) has 16-pixel patches.
PATCH_SIZES = {"vit_b_16": 16}


def misfit_patch(model: str, image_size: int) -> int | None:
    """The patch size `image_size` is not a multiple of, for a builtin that has patches; else None."""
    patch = PATCH_SIZES.get(model)
    return patch if patch is not None and image_size % patch else None

# What a workload can be (the CLI's options share these bounds): past them it is a typo.
MAX_IMAGE_SIZE = 65536
MAX_NUM_CLASSES = 10**8
MAX_BATCH_SIZE = 2**24
Precision = Literal["32-true", "bf16-mixed", "16-mixed"]
AcceleratorName = Literal["cpu", "gpu", "mps", "tpu"]  # Lightning's accelerator names the advisor ranks
# What measured a result: the probe's ladder, or a training run's callback (ThroughputCallback).
ResultSource = Literal["probe", "training run"]
Allocator = Literal["tcmalloc", "jemalloc"]  # run_cpu's preloaded allocators, in its order of preference
# Where a memory figure was read: CUDA's max allocated on the device, or the process's peak RSS.
MemorySide = Literal["accelerator", "host"]
CountedBy = Literal["batch", "hook"]  # the batch's own shape, or the module's samples_in_batch()/tokens_in_batch()


class ResultError(ValueError):
    """A probe result file or record that cannot be read; the message is one line for the user."""


# Every model here refuses NaN and inf (allow_inf_nan=False): a non-finite number stored as JSON
# null once made every later read of the store fail. Times, counts and rates are never negative.
# Numbers are strict: a JSON true is not 1.0 and "40" is not 40 (pydantic's lax mode took both).
# defer_build: a model's validator is built when first used, not on import: `advisor recommend`
# with no results store never uses most of them (~10 ms of its start-up).
_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False, defer_build=True)
NonNegative = Annotated[float, Field(strict=True, ge=0)]
Positive = Annotated[float, Field(strict=True, gt=0)]
Count = Annotated[int, Field(strict=True, ge=0, le=10**9)]
# A trillion samples/s is past any training job on any machine (tiny MLPs on 8 GPUs: ~1e8); more is
# a unit error, and would make hours and costs vanish.
MAX_SAMPLES_PER_SEC = 1e12
# One sample in 11.6 days: a probe times whole steps within minutes per rung (options.MAX_SECONDS),
# so a measured rate below this is a unit error. The floor also keeps what the advisor derives from
# a rate (log, exp of a shift, samples / rate) finite: 5e-324 once underflowed to a division by 0.
MIN_SAMPLES_PER_SEC = 1e-6
SamplesPerSec = Annotated[float, Field(strict=True, ge=0, le=MAX_SAMPLES_PER_SEC)]


def _measured_rate(v: float) -> float:
    if v < MIN_SAMPLES_PER_SEC:
        raise ValueError(f"{v:.3g} samples/s is below the floor of {MIN_SAMPLES_PER_SEC:g} (one sample in "
                         f"{1 / MIN_SAMPLES_PER_SEC / 86400:.1f} days, slower than any step a probe or a training run "
                         "times): a unit error or a broken measurement")
    if v > MAX_SAMPLES_PER_SEC:
        raise ValueError(f"{v:.3g} samples/s is above {MAX_SAMPLES_PER_SEC:g}, past any training job on any "
                         "machine: a unit error")
    return v


# a rate that was measured
MeasuredRate = Annotated[float, Field(strict=True, allow_inf_nan=False), AfterValidator(_measured_rate)]
# A step longer than a day: nothing times enough of them for a CI (the launch watchdog's longest
# run is a day, --max-minutes 1440); a longer one is a unit error (ms read as s, or a stopped clock).
MAX_STEP_SECONDS = 86400.0
StepSeconds = Annotated[float, Field(strict=True, ge=0, le=MAX_STEP_SECONDS)]
# A share of a time (CPU, run-queue wait, steal, other processes' use of the CPUs): at most the whole
# of it, with this slack for two clocks read a moment apart.
SHARE_SLACK = 0.05
Share = Annotated[float, Field(strict=True, ge=0, le=1 + SHARE_SLACK)]
# Linux's largest pid_max (2^22): no kernel has more runnable threads for a load average to count.
MAX_LOAD_AVERAGE = float(2**22)
MAX_CPUS = 8192  # Linux's largest NR_CPUS: a cpu_share with no CPU count is bounded by it
# A machine's and a device's memory, bounded as the catalog bounds them (catalog/models.py).
MachineGiB = Annotated[float, Field(strict=True, ge=0, le=MAX_MEMORY_GIB)]
DeviceGiB = Annotated[float, Field(strict=True, ge=0, le=MAX_DEVICE_MEMORY_GIB)]
# Dense TFLOP/s no single device reaches: 4x the fastest in catalog/data/accelerators.json (B200,
# 2,250 bf16; tests/packages/advisor/test_hostile_records.py checks the table stays below).
# samples/s x FLOPs per sample, an achieved or a peak figure above this per device is a unit error.
MAX_DEVICE_TFLOPS = 10_000.0
# Forward + backward of any model is at least one multiply-add per sample; fewer is a unit error
# (and would put a ratio of FLOPs, the estimator's level, out of range).
MIN_FLOPS_PER_SAMPLE = 1.0
# A name, a version, a path, an error line: one line, no control characters (they would reach a
# terminal through `results show --format json`, which leaves DEL and C1 unescaped).
Text = Annotated[str, Field(max_length=4096), AfterValidator(one_line)]
# Result ids: the probe writes uuid4 hex; an imported one may be any short, printable, typeable id.
RESULT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
# A clock a little fast is fine; a result from the far future would always win as "newest".
MAX_CLOCK_SKEW = timedelta(days=1)
EARLIEST = datetime(2015, 1, 1, tzinfo=timezone.utc)  # before PyTorch; older is a wrong clock


def _utc(v: datetime, what: str) -> datetime:
    # A hand-made or foreign file may omit the offset; a naive time cannot be compared with the
    # aware ones the probe writes (ranking by age would raise TypeError). Times are UTC.
    # The record keeps the offset it was written with; only the checks use UTC.
    v = v.replace(tzinfo=timezone.utc) if v.tzinfo is None else v
    try:
        u = v.astimezone(timezone.utc)
    except OverflowError:  # 0001-01-01T00:00+01:00 has no UTC equivalent
        raise ValueError(f"{what} {v.isoformat()} is out of range") from None
    if u < EARLIEST:
        raise ValueError(f"{what} {u:%Y-%m-%d} is before {EARLIEST:%Y}: the clock that wrote it was wrong")
    if u > datetime.now(timezone.utc) + MAX_CLOCK_SKEW:
        raise ValueError(f"{what} {u:%Y-%m-%d %H:%M} UTC is in the future")
    return v


# The loader's knobs the probe itself turns (batch size, workers, pinned memory): how the workload is
# tuned, not what it is, so left out of its id.
TUNED_ARGS = ("batch_size", "num_workers", "pin_memory")
MAX_INIT_ARGS_CHARS = 65536  # the arguments as JSON: a config, not a data set


def canonical_json(v) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


def _init_args_ok(v: dict) -> dict:
    for k in v:
        if not k.isidentifier():
            raise ValueError(f"constructor argument name {k!r} is not a Python identifier")
    if len(canonical_json(v)) > MAX_INIT_ARGS_CHARS:
        raise ValueError(f"constructor arguments longer than {MAX_INIT_ARGS_CHARS} characters as JSON")
    return v


InitArgs = Annotated[dict[str, JsonValue], Field(max_length=1000), AfterValidator(_init_args_ok)]


class ClassSpec(BaseModel):
    """An optimizer or learning-rate scheduler as LightningCLI configures one: its class and its
    keyword arguments (the parameters, or the optimizer, are given when it is built)."""

    model_config = _STRICT

    # package.module.Class
    class_path: str = Field(max_length=300, pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
    init_args: InitArgs = {}


class WorkloadSpec(BaseModel):
    model_config = _STRICT

    model: str = Field(default="resnet50", max_length=300)  # a builtin name or "package.module:LightningModuleClass"
    datamodule: str | None = Field(default=None, max_length=300)  # "package.module:DataModuleClass" for a user's own data
    image_size: int = Field(strict=True, default=224, gt=0, le=MAX_IMAGE_SIZE)
    num_classes: int = Field(strict=True, default=1000, gt=1, le=MAX_NUM_CLASSES)
    batch_size: int = Field(strict=True, default=128, gt=0, le=MAX_BATCH_SIZE)  # the starting (or fixed) batch size
    batch_size_fixed: StrictBool = False
    # Keyword arguments of the user's LightningModule / DataModule constructor (--init-args,
    # --config): what is trained, so part of the id (TUNED_ARGS aside).
    init_args: InitArgs = {}
    data_init_args: InitArgs = {}
    # A LightningCLI config's optimizer: / lr_scheduler: (--optimizer, --lr-scheduler): they replace
    # the module's configure_optimizers(), so they are part of the id too. None: the module's own.
    optimizer: ClassSpec | None = None
    lr_scheduler: ClassSpec | None = None
    # The constructors' defaults for the arguments not given (JSON values only; TUNED_ARGS aside),
    # recorded by the probe and the training-run callback (schema 6): the id names the arguments the
    # module was built with, so a default spelled out is the same workload, and recommend resolves a
    # user's arguments against a stored result's defaults without importing the module.
    init_arg_defaults: InitArgs = {}
    data_init_arg_defaults: InitArgs = {}

    @field_validator("model")
    @classmethod
    def _model_ok(cls, v: str) -> str:
        if v in BUILTIN_MODELS:
            return v
        mod, sep, cls_name = v.partition(":")
        if not sep or not mod or not cls_name.isidentifier() or not all(
            p.isidentifier() for p in mod.split(".")
        ):
            raise ValueError(
                f"unknown workload {v!r}: use one of {', '.join(BUILTIN_MODELS)} "
                "or 'package.module:LightningModuleClass'"
            )
        return v

    @model_validator(mode="after")
    def _args_for_own_code(self) -> WorkloadSpec:
        if self.model in BUILTIN_MODELS and (self.init_args or self.data_init_args or self.init_arg_defaults
                                             or self.data_init_arg_defaults):
            raise ValueError(f"constructor arguments are for your own LightningModule, not the builtin {self.model}")
        if self.data_init_args and not self.datamodule:
            raise ValueError("DataModule constructor arguments given without a DataModule")
        if self.model in BUILTIN_MODELS and (self.optimizer or self.lr_scheduler):
            raise ValueError(f"an optimizer or lr_scheduler is for your own LightningModule, not the builtin {self.model}")
        if self.lr_scheduler and not self.optimizer:
            raise ValueError("an lr_scheduler needs the optimizer it is built on")
        return self

    @property
    def workload_id(self) -> str:
        """Stable across machines: it names what is trained, not how it is tuned."""
        if self.model in BUILTIN_MODELS:
            return f"{self.model}-{self.image_size}px-{self.num_classes}c"
        key = f"{self.model}|{self.datamodule or ''}|{self.image_size}|{self.num_classes}"
        args = [{k: v for k, v in a.items() if k not in TUNED_ARGS} for a in self.resolved_args()]
        if any(args):  # no arguments: the id of schema 1, so older results still match
            key += "|" + canonical_json(args)
        for kind in ("optimizer", "lr_scheduler"):  # none: the id of schema 3 and before
            if (c := getattr(self, kind)) is not None:
                key += f"|{kind}=" + canonical_json(c.model_dump())
        return "custom-" + hashlib.sha256(key.encode()).hexdigest()[:12]

    def resolved_args(self) -> tuple[dict, dict]:
        """The module's and the DataModule's arguments as built: the defaults, then those given."""
        return ({**self.init_arg_defaults, **self.init_args}, {**self.data_init_arg_defaults, **self.data_init_args})

    def resolved_against(self, probed: WorkloadSpec) -> WorkloadSpec:
        """This (a user's) workload with the defaults a probe of the same class recorded: its id is
        the probed one exactly when the arguments resolve to the same values."""
        return self.model_copy(update={"init_arg_defaults": probed.init_arg_defaults,
                                       "data_init_arg_defaults": probed.data_init_arg_defaults})


class ProbeConfig(BaseModel):
    """One point of the optimisation ladder: everything that changes throughput."""

    model_config = _STRICT

    accelerator: AcceleratorName
    devices: int = Field(strict=True, default=1, ge=1, le=4096)
    num_nodes: int = Field(strict=True, default=1, ge=1, le=4096)
    strategy: str = Field(default="auto", max_length=100)
    precision: Precision = "32-true"
    channels_last: StrictBool = False
    compile: StrictBool = False
    batch_size: int = Field(strict=True, gt=0, le=MAX_BATCH_SIZE)
    num_workers: int = Field(strict=True, default=0, ge=0, le=4096)
    pin_memory: StrictBool = False
    ipex: StrictBool = False
    # The run_cpu rung (torch.backends.xeon.run_cpu's set-up): measured in a child process whose
    # OpenMP threads are pinned to the physical cores, with these libraries preloaded.
    run_cpu: StrictBool = False
    allocator: Allocator | None = None
    openmp: Literal["intel"] | None = None  # None: the OpenMP runtime torch ships with
    compile_backend: Literal["inductor", "zentorch"] = "inductor"  # when compile is on
    xla: StrictBool = False  # trained on torch_xla's device (PJRT_DEVICE=CPU on a CPU)
    # Intra-op threads on a CPU (torch.set_num_threads, Article C): the threads rung's pick. None:
    # torch's default (one per physical core), and every record before schema 9.
    threads: int | None = Field(strict=True, default=None, ge=1, le=MAX_CPUS)


class Contention(BaseModel):
    """What else was using the machine while a rung was timed (Linux /proc; NVML on a GPU)."""

    model_config = _STRICT

    contended: StrictBool = False
    steps: Count = 0  # timed steps observed
    contended_steps: Count = 0  # steps that waited for a CPU (run queue) or lost time to steal
    # process CPU time (loader workers included) / (wall time x cores in use), mean over steps: at
    # most every CPU's time, cpus / cores_in_use (checked below)
    cpu_share: NonNegative | None = None
    wait_share: Share | None = None  # the training thread's run-queue wait / wall time
    steal_share: Share | None = None  # hypervisor steal / all CPU time
    others_share: Share | None = None  # the probe's CPUs' time other processes kept busy
    load_average: Annotated[float, Field(strict=True, ge=0, le=MAX_LOAD_AVERAGE)] | None = None  # 1-minute, at the rung's end
    cpus: Count | None = None  # CPUs this process may run on
    cores_in_use: Count | None = None  # threads the training runs (torch intra-op threads)
    own_load: NonNegative | None = None  # runnable threads the probe itself adds to the load average
    gpu_other_processes: Count | None = None  # compute processes on the GPU that are not this probe
    gpu_clock_ratio: Share | None = None  # SM clock / its maximum, lowest seen
    reasons: list[Text] = Field(default=[], max_length=100)

    @model_validator(mode="after")
    def _consistent(self) -> Contention:
        if self.contended_steps > self.steps:
            raise ValueError(f"contended_steps {self.contended_steps} is more than the {self.steps} steps observed")
        if self.cpu_share is not None:
            # CPU time is at most wall time x the CPUs there are; cores_in_use is what the share is of.
            most = (self.cpus or MAX_CPUS) / max(self.cores_in_use or 1, 1) * (1 + SHARE_SLACK)
            if self.cpu_share > most:
                raise ValueError(f"cpu_share {self.cpu_share:.3g} is more CPU time than {self.cpus or MAX_CPUS} CPUs "
                                 f"give {self.cores_in_use or 1} training thread(s) (at most {most:.3g})")
        return self


class Confirmation(BaseModel):
    """The winner and the baseline measured again in alternation (A B A B ...)."""

    model_config = _STRICT

    rounds: int = Field(strict=True, ge=1, le=100)
    baseline_samples_per_sec: list[SamplesPerSec] = Field(max_length=100)  # one per round
    tuned_samples_per_sec: list[SamplesPerSec] = Field(max_length=100)
    speedup: Positive  # tuned / baseline
    speedup_ci: tuple[NonNegative, NonNegative]  # 95%
    # the speed-up's CI lies above 1 (above 1 + THREADS_GAIN for a thread count alone: reliability.
    # confirm_outcome): the ladder's pick is kept, its speed-up confirmed
    held: StrictBool
    contended: StrictBool = False  # a leg was contended, or the baseline moved (baseline_shift)
    # The confirmation's baseline (median of its legs) over the ladder's baseline rung: 1 when the
    # machine stayed the same; None in results written before it was recorded.
    baseline_shift: Positive | None = None
    # What the probe kept (reliability.confirm_outcome): "held" (the pick, confirmed), "unconfirmed"
    # (the pick, its speed-up inside the noise) or "lost" (the baseline: the pick read no faster).
    # None in results before schema 10, whose rule was held or the baseline.
    outcome: Literal["held", "unconfirmed", "lost"] | None = None

    @model_validator(mode="after")
    def _outcome_agrees(self) -> Confirmation:
        if self.outcome is not None and (self.outcome == "held") != self.held:
            raise ValueError(f"confirmation.outcome {self.outcome!r} but held is {self.held}")
        return self

    @property
    def pick_kept(self) -> bool:
        """Whether the probe kept the ladder's pick (else the baseline): the one reading of it."""
        return self.outcome in ("held", "unconfirmed") if self.outcome is not None else self.held


class RungResult(BaseModel):
    model_config = _STRICT

    rung: str = Field(max_length=100)  # e.g. "baseline", "bf16", "channels_last", "compile", "workers=4", "batch=64", "ipex"
    config: ProbeConfig
    status: Literal["ok", "failed", "oom", "timeout", "not-installed", "not-applicable", "skipped", "contended"]
    samples_per_sec: SamplesPerSec | None = None
    ci_low: NonNegative | None = None
    ci_high: NonNegative | None = None
    steps_timed: Count = 0
    compile_seconds: StepSeconds | None = None  # part of the first step: a day at most, as any step
    kept: StrictBool = False
    error: Text | None = None  # why it failed or was skipped
    note: Text | None = None  # what to know about a rung that ran (e.g. an extension that had nothing to do here)
    peak_memory_gib: MachineGiB | None = None  # CUDA max allocated during the rung; elsewhere the process's peak RSS
    contention: Contention | None = None
    remeasured: Count = 0  # extra measurements pooled in because the CI stayed wider than the target
    ci_target_met: StrictBool | None = None  # None: not known (older results)
    # Why its timing stopped: "converged" | "time-limit" | "max-steps", or a race's "won" | "lost"
    # | "tied" (its answer against the best so far known: contract/race.py). None: older results.
    stop_reason: Text | None = None

    @model_validator(mode="after")
    def _consistent(self) -> RungResult:
        if self.ci_low is not None and self.ci_high is not None and self.ci_low > self.ci_high:
            raise ValueError(f"rung {self.rung}: ci_low {self.ci_low:g} is above ci_high {self.ci_high:g}")
        if self.status == "ok":  # (a rung that failed keeps whatever it had measured before)
            if not (self.samples_per_sec or 0) >= MIN_SAMPLES_PER_SEC:
                raise ValueError(f"rung {self.rung}: status ok but no samples/s measured (at least {MIN_SAMPLES_PER_SEC:g})")
            _ci_contains(self.ci_low, self.ci_high, self.samples_per_sec, f"rung {self.rung}: ci_low/ci_high")
        return self


class StepTimeStats(BaseModel):
    model_config = _STRICT

    n_steps: Annotated[int, Field(strict=True, ge=1, le=10**9)]  # the mean is of at least one step
    mean_s: Annotated[float, Field(strict=True, gt=0, le=MAX_STEP_SECONDS)]
    median_s: StepSeconds
    stdev_s: StepSeconds
    p10_s: StepSeconds
    p90_s: StepSeconds
    warmup_steps: Count
    # Warm-up and compilation, reported apart from the timed steps: each warm-up step (the first
    # one holds the compilation) is a step, a day at most (checked below).
    warmup_seconds: NonNegative

    @model_validator(mode="after")
    def _consistent(self) -> StepTimeStats:
        tol = 1e-9 * self.p90_s
        if not self.p10_s <= self.median_s + tol or not self.median_s <= self.p90_s + tol:
            raise ValueError(f"step times out of order: p10 {self.p10_s:g} s, median {self.median_s:g} s, "
                             f"p90 {self.p90_s:g} s (p10 <= median <= p90)")
        most = max(self.warmup_steps, 1) * MAX_STEP_SECONDS
        if self.warmup_seconds > most:
            raise ValueError(f"warmup_seconds {self.warmup_seconds:.3g} is more than {max(self.warmup_steps, 1)} "
                             f"warm-up step(s) of a day each (the longest step a measurement times)")
        return self


class GpuInfo(BaseModel):
    model_config = _STRICT

    name: Text
    memory_gib: DeviceGiB


class HardwareFingerprint(BaseModel):
    # What the machine said about itself: only refused when impossible (negative, non-finite), so a
    # VM reporting "cpu MHz: 0" still gets its measurement stored.
    model_config = _STRICT

    cpu_model: Text | None = None
    physical_cores: Count | None = None
    logical_cpus: Count | None = None
    isa_flags: list[Text] = []  # the ones that matter: avx2, avx512f, avx512_bf16, amx_bf16, ...
    numa_nodes: Count | None = None
    # populated DDR channels of the whole machine where the OS tells them (Linux EDAC); None elsewhere (VMs)
    memory_channels: Count | None = None
    ram_gib: MachineGiB | None = None
    gpus: list[GpuInfo] = []
    cpu_manufacturer: Text | None = None  # "intel" | "amd" | "arm" | ... (vendor id from /proc/cpuinfo)
    # nominal or current clock, for the CPU's ISA peak: past 100 GHz (no CPU runs at 10) it is MHz read as GHz
    cpu_clock_ghz: Annotated[float, Field(strict=True, ge=0, le=100)] | None = None


class SoftwareVersions(BaseModel):
    model_config = _STRICT

    python: Text
    torch: Text | None = None
    lightning: Text | None = None
    torchvision: Text | None = None
    cuda: Text | None = None
    ipex: Text | None = None
    torch_xla: Text | None = None
    zentorch: Text | None = None
    intel_openmp: Text | None = None


MAX_PARAMETERS = 10**13  # ten trillion: past any model trained on one machine's probe
Bytes = Annotated[float, Field(strict=True, ge=0, le=1e16)]  # ten petabytes: past any device's memory
# Memory of one machine (catalog.models' bound): a fit or a peak past it is a unit error.
MemoryGiB = Annotated[float, Field(strict=True, ge=0, le=MAX_MEMORY_GIB)]
# The least memory a sample can take: one byte. A per-sample figure between 0 and this is rounding
# noise (or a hostile file): its largest batch that fits would be past any count.
ONE_BYTE_GIB = 2.0**-30


class MemoryPoint(BaseModel):
    model_config = _STRICT

    batch_size: int = Field(strict=True, gt=0, le=MAX_BATCH_SIZE)  # per device
    peak_gib: MemoryGiB


class MemoryFit(BaseModel):
    """Peak memory of the winning configuration at each batch size measured, fitted as
    fixed + per_sample x batch (least squares; neither part below 0)."""

    model_config = _STRICT

    where: MemorySide
    points: list[MemoryPoint] = Field(min_length=1, max_length=100)
    fixed_gib: MemoryGiB | None = None  # None: one batch size only
    per_sample_gib: MemoryGiB | None = None
    note: Text | None = None  # why there is no fit, or what to know about it
    # True: not fitted across batch sizes but derived from one (a training run's: fixed = what
    # stays in memory between steps, per sample = the rest of the peak / the batch; the note says how)
    derived: StrictBool = False

    @model_validator(mode="after")
    def _both_or_neither(self) -> MemoryFit:
        if (self.fixed_gib is None) != (self.per_sample_gib is None):
            raise ValueError("a memory fit has both fixed_gib and per_sample_gib, or neither")
        if self.per_sample_gib is not None and 0 < self.per_sample_gib < ONE_BYTE_GIB:
            raise ValueError(f"per_sample_gib {self.per_sample_gib:g} is less than one byte a sample: give 0 "
                             "(nothing grows with the batch) or a figure of at least one byte")
        if self.derived and (self.fixed_gib is None or len(self.points) != 1):
            raise ValueError("a derived memory fit has fixed_gib and per_sample_gib from exactly one point")
        return self

    @classmethod
    def derived_from(cls, where: str, batch: int, peak_gib: float, fixed_gib: float, how: str) -> MemoryFit:
        """A fit from one batch size: `fixed_gib` measured apart (what the step does not grow with),
        the rest of the peak charged to the batch's samples; `how` says what fixed_gib holds."""
        fixed = min(fixed_gib, peak_gib)
        note = f"derived from one batch size: fixed = {how}; per sample = (peak - fixed) / {batch}"
        if fixed_gib > peak_gib:
            note += f" (fixed read {fixed_gib:.3g} GiB, above the peak: read as the peak, nothing per sample)"
        per_sample = (peak_gib - fixed) / batch
        return cls(where=where, points=[MemoryPoint(batch_size=batch, peak_gib=peak_gib)], fixed_gib=fixed,
                   per_sample_gib=per_sample if per_sample >= ONE_BYTE_GIB else 0.0, note=note, derived=True)

    @classmethod
    def fitted(cls, where: str, points: list[tuple[int, float]]) -> MemoryFit:
        """Least squares through the peaks (the largest peak per batch size): a negative intercept
        is refitted through 0, a negative slope (host noise) read as flat, each said in the note."""
        by_batch: dict[int, float] = {}
        for b, g in points:
            by_batch[b] = max(g, by_batch.get(b, 0.0))
        pts = [MemoryPoint(batch_size=b, peak_gib=g) for b, g in sorted(by_batch.items())]
        if len(pts) < 2:
            return cls(where=where, points=pts, note="one batch size measured: no fit")
        xs, ys = [p.batch_size for p in pts], [p.peak_gib for p in pts]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        fixed, note = my - slope * mx, None
        if slope < 0:
            slope, fixed, note = 0.0, max(ys), "peak did not grow with the batch: read as fixed (the largest peak)"
        elif fixed < 0:
            slope, fixed = sum(x * y for x, y in zip(xs, ys)) / sum(x * x for x in xs), 0.0
            note = "fitted through 0 (the intercept came out negative)"
        if 0 < slope < ONE_BYTE_GIB:  # less than a byte a sample: flat, not a figure to divide by
            slope = 0.0
        return cls(where=where, points=pts, fixed_gib=fixed, per_sample_gib=slope, note=note)

    def source_words(self) -> str:
        """Where the fit came from, for recommend's notes and exclusions."""
        return ("your training run's memory fit, derived from one batch size" if self.derived
                else "your probe's memory fit")

    def gib_at(self, batch_size: int) -> float | None:
        if self.fixed_gib is None:
            return None
        return self.fixed_gib + self.per_sample_gib * batch_size

    def largest_batch(self, memory_gib: float) -> int | None:
        """The largest batch the fit says fits in `memory_gib` (0: not even one sample; None: no fit)."""
        if self.fixed_gib is None:
            return None
        if self.fixed_gib >= memory_gib:
            return 0
        if self.per_sample_gib <= 0:
            return MAX_BATCH_SIZE
        # Bounded before int(): a tiny per-sample figure makes the quotient inf, which int() refuses.
        fits = (memory_gib - self.fixed_gib) / self.per_sample_gib
        return MAX_BATCH_SIZE if not math.isfinite(fits) or fits >= MAX_BATCH_SIZE else int(fits)


MAX_TOKENS_PER_SAMPLE = 10**8  # a hundred million tokens in one sample: past any context window


class ActivationPoint(BaseModel):
    """One forward pass counted: the bytes its layers saved for backward at one batch and length."""

    model_config = _STRICT

    batch_size: int = Field(strict=True, gt=0, le=MAX_BATCH_SIZE)
    sequence_length: int = Field(strict=True, gt=0, le=MAX_TOKENS_PER_SAMPLE)
    saved_bytes_per_layer: Bytes  # tensors one layer saved for backward, mean over the layers
    input_bytes_per_layer: Bytes  # one layer's inputs: what activation checkpointing keeps of it
    saved_bytes_outside_layers: Bytes  # embeddings, head, loss


class Activations(BaseModel):
    """Activation memory of a sequence model, per token and per layer, counted (not timed) on the
    CPU: the tensors autograd saves for backward in one training step's forward (parameters aside,
    each storage once), attributed to the repeated layer that saved them, at two or more batch sizes
    and sequence lengths (run/activations.py). Per layer: fixed + per_token x tokens + per_token_per_
    position x batch x sequence^2 (attention scores that grow with the length; 0 for a fused
    attention). With activation checkpointing each layer keeps only its inputs
    (checkpointed_bytes_per_token_per_layer) and one layer's whole activations live again while it
    is recomputed in backward."""

    model_config = _STRICT

    layer_class: Text  # the repeated block whose instances are the layers (e.g. "Block")
    layers: int = Field(strict=True, ge=1, le=100_000)  # how many the counted model had
    precision: Precision  # the autocast the step ran under
    points: list[ActivationPoint] = Field(min_length=2, max_length=100)
    bytes_per_token_per_layer: Bytes
    bytes_per_token_per_position_per_layer: Bytes = 0.0
    fixed_bytes_per_layer: Bytes = 0.0  # weights cast for autocast and the like: no token's
    checkpointed_bytes_per_token_per_layer: Bytes
    bytes_per_token_outside_layers: Bytes = 0.0
    note: Text | None = None


class WorkloadShape(BaseModel):
    """What the probe learnt about the workload itself, whatever machine ran it."""

    model_config = _STRICT

    # None: not read (the measuring side did not report them)
    parameters: int | None = Field(default=None, strict=True, ge=0, le=MAX_PARAMETERS)
    trainable_parameters: int | None = Field(default=None, strict=True, ge=0, le=MAX_PARAMETERS)
    parameter_bytes: Bytes | None = None  # as stored while training (fp32 master weights under mixed precision)
    optimizer_state_bytes: Bytes | None = None  # the optimizer's tensors after the first steps; None: not read
    # --datamodule, the module's train_dataloader(), or synthetic images
    data_source: Literal["datamodule", "module", "synthetic"]
    samples_counted_by: CountedBy = "batch"  # the first tensor's leading dimension, or samples_in_batch()
    batch_tunable: StrictBool = True
    batch_note: Text | None = None  # why the batch size cannot be changed
    memory: MemoryFit | None = None
    # Bytes every op reads and writes per sample, unfused (run/peaks.py TrafficCounter): with
    # flops_per_sample, the workload's arithmetic intensity. None: not counted.
    memory_traffic_bytes_per_sample: Annotated[float, Field(strict=True, gt=0, le=1e16)] | None = None
    # The part of it moved by the ops without FLOPs (normalisation, softmax, elementwise: bound by
    # memory bandwidth; run/counting.py StepCounter.other_bytes). None: not counted (before schema 6).
    other_traffic_bytes_per_sample: Annotated[float, Field(strict=True, gt=0, le=1e16)] | None = None
    # How it was counted when not as the probe counts it (the difference between 2 and 4 samples on
    # the CPU in fp32): a training run counts its first step at its own batch and precision.
    memory_traffic_note: Text | None = None
    # The non-view aten ops one training step dispatches (TrafficCounter's rule): its training_step
    # and backward, the optimizer's step not run (a probe) or not reached (a training run in automatic
    # optimization). Eager execution dispatches them one by one from the host: with the step's batch,
    # the host floor a GPU estimate meets (advisor/estimate/host_floor.py). None: not counted.
    ops_per_step: Annotated[int, Field(strict=True, gt=0, le=10**9)] | None = None
    # Sequence workloads (run/batches.py): tokens per sample of the first batch, counted from its
    # [batch, sequence] ids or by tokens_in_batch(). None: the batches hold no tokens (schema <= 5).
    tokens_per_sample: Annotated[float, Field(strict=True, gt=0, le=MAX_TOKENS_PER_SAMPLE)] | None = None
    tokens_counted_by: CountedBy | None = None
    activations: Activations | None = None  # None: not counted (not a sequence model, or schema <= 5)

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadShape:
        if (self.trainable_parameters or 0) > (self.parameters or 0):
            raise ValueError(f"trainable_parameters {self.trainable_parameters} is above parameters {self.parameters}")
        if (self.tokens_per_sample is None) != (self.tokens_counted_by is None):
            raise ValueError("tokens_per_sample and tokens_counted_by come together, or neither")
        return self


class RuntimeOverhead(BaseModel):
    """Memory the runtime holds beside the tensors, measured on the probing device: the CUDA context
    (device memory in use before the model was built, less what torch's allocator had reserved) and
    the allocator's slack at the peak (reserved - allocated); on the host, the process's resident
    memory before the model was built (interpreter, torch, Lightning)."""

    model_config = _STRICT

    where: MemorySide
    context_gib: MemoryGiB
    allocator_gib: MemoryGiB | None = None  # None on the host: no caching allocator to read
    note: Text | None = None


class DepthPoint(BaseModel):
    """A shallower copy of the model measured whole: the figures the extrapolation is drawn from."""

    model_config = _STRICT

    depth: int = Field(strict=True, ge=1, le=100_000)
    step_s: Annotated[float, Field(strict=True, gt=0, le=MAX_STEP_SECONDS)]  # mean step time
    parameters: int | None = Field(default=None, strict=True, ge=0, le=MAX_PARAMETERS)
    flops_per_sample: Annotated[float, Field(strict=True, ge=0)] | None = None
    memory_traffic_bytes_per_sample: Annotated[float, Field(strict=True, ge=0, le=1e16)] | None = None
    other_traffic_bytes_per_sample: Annotated[float, Field(strict=True, ge=0, le=1e16)] | None = None
    ops_per_step: Annotated[int, Field(strict=True, ge=0, le=10**9)] | None = None
    peak_memory_gib: MemoryGiB | None = None


class Extrapolation(BaseModel):
    """The model was too big to measure whole: its parameters were counted on the meta device
    (nothing allocated) and shallower copies of the same width were measured; each per-step count
    (FLOPs, ops, memory, traffic) is read as linear in the depth, and the step time is the line
    step(L) = intercept + slope x L fitted on rounds of the copies timed back to back
    (contract/extrapolate.py), its band (step_band_s) the rounds' spread carried to the full depth.
    The samples/s CI is that band, widened by the largest error the benchmark saw against whole
    runs timed in the same rounds (relative_error, benchmarks/depth_extrapolation.py). Schema 8-10
    records hold two points and no fit: their CI was the deeper copy's widened by relative_error."""

    model_config = _STRICT

    depth_arg: str = Field(max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")  # the constructor argument
    full_depth: int = Field(strict=True, ge=1, le=100_000)
    points: list[DepthPoint] = Field(min_length=2, max_length=8)  # step_s: the mean over the rounds (schema 11)
    parameters_counted_on: Literal["meta"] = "meta"
    # The fit (schema 11; None before): rounds timed, the line's intercept and slope (seconds, per
    # layer), their standard errors and covariance over the rounds, the 95% band of the full
    # depth's step time.
    rounds: int | None = Field(default=None, strict=True, ge=2, le=1000)
    intercept_s: float | None = None
    slope_s: float | None = None
    intercept_se_s: Annotated[float, Field(strict=True, ge=0)] | None = None
    slope_se_s: Annotated[float, Field(strict=True, ge=0)] | None = None
    covariance_s2: float | None = None
    step_band_s: tuple[Positive, Positive] | None = None
    relative_error: Annotated[float, Field(strict=True, ge=0, le=10)]  # the CI is widened by this share each side
    error_source: Text  # where relative_error was measured

    @model_validator(mode="after")
    def _consistent(self) -> Extrapolation:
        depths = [p.depth for p in self.points]
        if any(x >= y for x, y in pairwise(depths)):
            raise ValueError(f"extrapolation depths {depths}: different depths, shallowest first")
        if self.full_depth < depths[-1]:
            raise ValueError(f"extrapolation full_depth {self.full_depth} is below the depth {depths[-1]} it was measured at")
        if self.step_band_s is not None and self.step_band_s[0] > self.step_band_s[1]:
            raise ValueError(f"extrapolation step_band_s {self.step_band_s}: low end above the high end")
        return self


def utilisation(achieved: float | None, peak: float | None, what: str) -> tuple[float | None, str | None]:
    """achieved / peak, or None and the reason when it is above 100%: a measurement error (the
    peak was measured low, or the throughput high), never a result. One rule for the probe that
    writes a result and for the model that reads any result (ProbeResult._utilisation_at_most_one)."""
    if not achieved or not peak:
        return None, None
    u = achieved / peak
    if u <= 1.0:
        return u, None
    share = f"{u:.0%}" if u < 1000 else "more than 1000x"  # a denormal peak makes it inf
    return None, (f"achieved {achieved:.3g} TFLOP/s is {share} of the {what} peak {peak:.3g} TFLOP/s (above "
                  "100%): a measurement error, not a utilisation")


class RankShare(BaseModel):
    """One rank of a GPU + CPU run: its device, its share of each step and how fast it was."""

    model_config = _STRICT

    device: Literal["gpu", "cpu"]
    batch_size: int = Field(strict=True, gt=0, le=MAX_BATCH_SIZE)  # its share of each step, balanced
    threads: int | None = Field(strict=True, default=None, ge=1, le=4096)  # torch intra-op threads
    precision: Precision | None = None  # this rank's own (None: a result from before ranks had their own)
    samples_per_sec_alone: MeasuredRate  # this device training alone (the rate its share was sized from)
    busy_seconds: Annotated[float, Field(strict=True, gt=0, le=86_400)]  # per step together, median, outside the exchange


class GpuAndCpu(BaseModel):
    """The GPU and the host's CPU training the same model at once, each with its own batch, the
    gradients averaged weighted by samples (`advisor probe --cpu-too`): each alone, both together."""

    model_config = _STRICT

    ranks: list[RankShare] = Field(min_length=2, max_length=64)
    samples_per_sec: MeasuredRate  # together, after re-balancing
    samples_per_sec_ci: tuple[NonNegative, NonNegative]  # 95%
    efficiency: Annotated[float, Field(strict=True, gt=0, le=10)]  # together / sum of the ranks alone
    rounds: int = Field(strict=True, ge=1, le=20)  # balancing rounds run
    precision: Precision = "32-true"  # the first (GPU) rank's; each rank's own in ranks[].precision
    # Together beats the GPU alone beyond the noise (its CI's low end above the GPU alone): the
    # advisor's "GPU + CPU" variant reads samples_per_sec only then.
    kept: StrictBool
    note: Text | None = None

    @model_validator(mode="after")
    def _consistent(self) -> GpuAndCpu:
        lo, hi = self.samples_per_sec_ci
        if lo > hi:
            raise ValueError(f"gpu_and_cpu.samples_per_sec_ci [{lo:g}, {hi:g}] is not an interval")
        _ci_contains(lo, hi, self.samples_per_sec, "gpu_and_cpu.samples_per_sec_ci")
        alone = sum(r.samples_per_sec_alone for r in self.ranks)
        if abs(self.efficiency - self.samples_per_sec / alone) > 0.01 * self.efficiency:
            raise ValueError(f"gpu_and_cpu.efficiency {self.efficiency:.4g} is not samples_per_sec over the sum "
                             f"of the ranks alone ({self.samples_per_sec / alone:.4g})")
        if self.kept and not lo > self.ranks[0].samples_per_sec_alone:
            raise ValueError("gpu_and_cpu.kept, but its CI does not clear the first rank alone")
        return self

    @property
    def gain(self) -> float:
        """Together over the first rank (the GPU) alone, minus one."""
        return self.samples_per_sec / self.ranks[0].samples_per_sec_alone - 1.0


class ProbeResult(BaseModel):
    model_config = _STRICT

    schema_version: Annotated[int, Field(strict=True)] = RESULT_SCHEMA_VERSION
    result_id: str = Field(default_factory=lambda: uuid.uuid4().hex, pattern=RESULT_ID_PATTERN)
    workload: WorkloadSpec
    workload_id: str = Field(max_length=300)  # must be workload.workload_id (checked below)
    instance_type: str | None = Field(default=None, pattern=NAME_PATTERN)
    instance_type_source: Literal["imds", "given"] | None = None
    hardware: HardwareFingerprint
    software: SoftwareVersions
    config: ProbeConfig  # the winning configuration
    samples_per_sec: MeasuredRate  # all ranks together
    samples_per_sec_ci: tuple[NonNegative, NonNegative]  # 95% confidence interval
    step_time: StepTimeStats
    flops_per_sample: Annotated[float, Field(strict=True, ge=MIN_FLOPS_PER_SAMPLE)] | None = None  # forward + backward
    achieved_tflops: NonNegative | None = None
    peak_tflops_datasheet: Positive | None = None
    utilisation_datasheet: NonNegative | None = None
    peak_tflops_matmul: Positive | None = None  # a short measured matmul on the device, same dtype
    utilisation_matmul: NonNegative | None = None
    peak_memory_gib: MachineGiB | None = None
    ladder: list[RungResult] = Field(default=[], max_length=1000)  # empty for a training run: nothing was tried
    # What measured it: the probe's ladder, or a training run's callback (ThroughputCallback) timing
    # the user's own Trainer. Both are measurements; older records were all probes.
    source: ResultSource = "probe"
    stop_reason: Text | None = None  # why the winning rung stopped timing: "converged" | "time-limit" | "max-steps"
    # how many devices the peak figures cover (all ranks together)
    devices_in_peak: int = Field(strict=True, default=1, ge=1, le=10**6)
    profile_dir: Text | None = None  # where --profile wrote the TensorBoard trace
    profile_trace: Text | None = None  # the same trace as one Chrome/Perfetto JSON file
    contention: Contention | None = None  # the winner's final measurement
    confirmation: Confirmation | None = None  # the winner against the baseline, in alternation
    # The on/off rungs' kinds in the order the ladder climbed them (contract/order.py) and what the
    # order was read from, in words; None: not recorded (before schema 10, or no ladder).
    rung_order: list[Annotated[str, Field(max_length=40)]] | None = Field(default=None, max_length=20)
    rung_order_basis: Text | None = None
    # False when the probe could not trust its own number (CI target not reached, machine
    # contended, ...); unreliable_reasons says why, one short phrase each. Old results: True.
    reliable: StrictBool = True
    unreliable_reasons: list[Text] = Field(default=[], max_length=100)
    # Samples/s one DataLoader worker process delivers of this workload's data, timed without the
    # model (None: not measured). recommend caps GPU estimates at this x the instance's vCPUs.
    pipeline_samples_per_sec_per_worker: MeasuredRate | None = None
    shape: WorkloadShape | None = None  # None: a schema 1 result
    gpu_and_cpu: GpuAndCpu | None = None  # --cpu-too; None: not measured (and schema 1, 2 results)
    # Sequence workloads: samples_per_sec x shape.tokens_per_sample (checked below). None: no tokens.
    tokens_per_sec: Annotated[float, Field(strict=True, gt=0, le=MAX_SAMPLES_PER_SEC * 1e4)] | None = None
    runtime_overhead: RuntimeOverhead | None = None
    extrapolation: Extrapolation | None = None  # None: measured whole
    # Each rank's peak memory (GiB; CUDA max allocated, or the process's peak RSS), rank 0 first: a
    # sharded run's ranks hold different shares. Empty: one rank, or not gathered (schema <= 5).
    rank_peak_memory_gib: list[MachineGiB] = Field(default=[], max_length=4096)
    started_at: datetime
    finished_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))

    @field_validator("started_at", "finished_at", mode="before")
    @classmethod
    def _iso_text(cls, v, info):
        # Lax pydantic reads a number as seconds since 1970: a time here is ISO 8601 text.
        if isinstance(v, (bool, int, float)):
            # pydantic reports ValueErrors, hence not a TypeError
            raise ValueError(f"{info.field_name} must be an ISO 8601 time, not the number {v!r}")  # noqa: TRY004
        return v

    @field_validator("started_at", "finished_at")
    @classmethod
    def _aware(cls, v: datetime, info) -> datetime:
        return _utc(v, info.field_name)

    @model_validator(mode="after")
    def _consistent(self) -> ProbeResult:
        # The id names what was trained; it is derived from the workload, so a record whose two
        # disagree (an MLP labelled resnet50-224px-1000c) was edited or mislabelled: which half is
        # right cannot be known, so the record is refused rather than silently relabelled.
        if self.workload_id != self.workload.workload_id:
            raise ValueError(
                f"workload_id {self.workload_id!r} does not match the workload it describes "
                f"({self.workload.workload_id})"
            )
        lo, hi = self.samples_per_sec_ci
        if lo > hi:
            raise ValueError(f"samples_per_sec_ci [{lo:g}, {hi:g}] is not an interval")
        _ci_contains(lo, hi, self.samples_per_sec, "samples_per_sec_ci")
        if self.started_at > self.finished_at:
            raise ValueError("started_at is after finished_at")
        self._samples_per_step()
        self._tokens_agree()
        self._physical()
        self._derived_agree()
        for what in ("matmul", "datasheet"):
            self._utilisation_at_most_one(what)
        return self

    def _samples_per_step(self) -> None:
        """samples/s x the mean step time is the samples one step trained, all ranks together: at
        least one (half, for rounding a short last batch), at most the largest batch on every rank."""
        per_step = self.samples_per_sec * self.step_time.mean_s
        ranks = self.config.devices * self.config.num_nodes
        most = MAX_BATCH_SIZE * ranks
        if not 0.5 <= per_step <= most:
            raise ValueError(f"samples_per_sec x step_time.mean_s is {per_step:.3g} samples per step; a step trains "
                             f"at least one sample and at most {most:g} ({ranks} rank(s) of the largest batch): "
                             "the rate or the step time is in the wrong unit")

    def _tokens_agree(self) -> None:
        per_sample = self.shape.tokens_per_sample if self.shape is not None else None
        if self.tokens_per_sec is None:
            return
        if per_sample is None:
            raise ValueError("tokens_per_sec without shape.tokens_per_sample: the tokens it counts are not said")
        derived = self.samples_per_sec * per_sample
        if abs(self.tokens_per_sec - derived) > 0.01 * derived:
            raise ValueError(f"tokens_per_sec {self.tokens_per_sec:.4g} is not samples_per_sec x "
                             f"shape.tokens_per_sample ({derived:.4g})")

    def _physical(self) -> None:
        """No device computes faster than MAX_DEVICE_TFLOPS: the FLOP figures, per device, stay below."""
        devices = max(self.config.devices * self.config.num_nodes, self.devices_in_peak)
        bound = MAX_DEVICE_TFLOPS * devices
        flops = self.samples_per_sec * self.flops_per_sample / 1e12 if self.flops_per_sample else None
        for name, v in (("samples_per_sec x flops_per_sample", flops), ("achieved_tflops", self.achieved_tflops),
                        ("peak_tflops_matmul", self.peak_tflops_matmul),
                        ("peak_tflops_datasheet", self.peak_tflops_datasheet)):
            if v is not None and not v <= bound:  # inf from an overflowed product too
                raise ValueError(f"{name} is {v:.3g} TFLOP/s, more than {devices} device(s) can compute "
                                 f"({MAX_DEVICE_TFLOPS:g} TFLOP/s each): a unit error")

    def _derived_agree(self) -> None:
        """The figures the probe derives from others (achieved = samples/s x FLOPs per sample;
        utilisation = achieved / peak) agree with them, to 1% for a hand's rounding."""
        def close(a: float, b: float) -> bool:
            return abs(a - b) <= 0.01 * max(abs(a), abs(b))

        if self.achieved_tflops is not None and self.flops_per_sample:
            derived = self.samples_per_sec * self.flops_per_sample / 1e12
            if not close(self.achieved_tflops, derived):
                raise ValueError(f"achieved_tflops {self.achieved_tflops:.4g} is not samples_per_sec x "
                                 f"flops_per_sample ({derived:.4g} TFLOP/s)")
        for what in ("matmul", "datasheet"):
            util, peak = getattr(self, f"utilisation_{what}"), getattr(self, f"peak_tflops_{what}")
            ratio = self.achieved_tflops / peak if peak and self.achieved_tflops is not None else None
            # above 100% either way: a measurement error, emptied below rather than refused
            if util is not None and ratio is not None and util <= 1.0 and ratio <= 1.0 and not close(util, ratio):
                raise ValueError(f"utilisation_{what} {util:.4g} is not achieved_tflops / peak_tflops_{what} "
                                 f"({ratio:.4g})")

    def _utilisation_at_most_one(self, what: str) -> None:
        # Above 100% of a peak is a measurement error (the peak measured low, or the rate high),
        # never a utilisation: the field is emptied and the result says why, as the probe does.
        util, peak = getattr(self, f"utilisation_{what}"), getattr(self, f"peak_tflops_{what}")
        if util is None:
            return
        _, why = utilisation(self.achieved_tflops, peak, what.replace("matmul", "measured matmul"))
        if why is None and util > 1.0 + 1e-9:  # no achieved figure to say it with: the field itself
            why = f"utilisation of the {what} peak read {util:.3g}x (above 100%): a measurement error, not a utilisation"
        if why is None:
            return
        setattr(self, f"utilisation_{what}", None)
        self.reliable = False
        why += "; emptied"
        self.unreliable_reasons = [*self.unreliable_reasons, why][-100:]

    @field_validator("schema_version")
    @classmethod
    def _version_ok(cls, v: int) -> int:
        if v not in READABLE_SCHEMA_VERSIONS:
            raise ValueError(
                f"probe result schema_version {v} is not supported (this advisor reads "
                f"{', '.join(map(str, READABLE_SCHEMA_VERSIONS))})"
            )
        return v


def _ci_contains(lo: float | None, hi: float | None, estimate: float, what: str) -> None:
    """A confidence interval holds its own estimate (a relative 1e-9 for rounding)."""
    tol = 1e-9 * estimate
    if lo is not None and lo > estimate + tol or hi is not None and hi < estimate - tol:
        raise ValueError(f"{what} [{lo if lo is not None else '-'}, {hi if hi is not None else '-'}] does not "
                         f"contain its estimate {estimate:g}")


def _loads(text: str | bytes, where: str):
    return parse_json(text, where, ResultError)  # the one safe JSON reader (deep nesting, huge integers)


def parse_result(text: str | bytes, where: str = "result") -> ProbeResult:
    """Validate one ProbeResult from JSON text (or from the advisor's `result` document that carries
    one); any problem becomes a one-line ResultError."""
    return _validate(_unwrapped(_loads(text, where)), where)


def _unwrapped(data):
    """The result(s) inside the advisor's documents (`results show` / `probe --format json`:
    {"schema": "result", "result": ...}; `results export`: {"schema": "results-export", "results":
    [...]}); anything else as it is."""
    if isinstance(data, dict) and data.get("schema") == "result" and "result" in data:
        return data["result"]
    if isinstance(data, dict) and data.get("schema") == "results-export" and "results" in data:
        return data["results"]
    return data


def parse_results(text: str | bytes, where: str = "results", errors: list[ResultError] | None = None) -> list[ProbeResult]:
    """One ProbeResult, or a JSON list of them, or the advisor's documents that carry them
    (_unwrapped). With `errors`, a bad entry of a list is appended there and the others are still
    returned."""
    data = _unwrapped(_loads(text, where))
    if not isinstance(data, list):
        return [_validate(data, where)]
    out = []
    for i, d in enumerate(data):
        try:
            out.append(_validate(d, f"{where}[{i}]"))
        except ResultError as e:
            if errors is None:
                raise
            errors.append(e)
    return out


def _validate(data, where: str) -> ProbeResult:
    if not isinstance(data, dict) or "workload_id" not in data or "samples_per_sec" not in data:
        raise ResultError(f"{where}: not a probe result (no workload_id / samples_per_sec)")
    try:
        return ProbeResult.model_validate(data)
    except ValidationError as e:
        first = first_error(e)
        raise ResultError(f"{where}: invalid probe result at {first.at}: {first.msg}") from None
    except RecursionError:  # pydantic walking a value nested deeper than the stack
        raise ResultError(f"{where}: nested too deeply to be a probe result") from None
