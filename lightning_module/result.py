"""What a probe produces: the workload it ran and the throughput it measured.

Torch-free on purpose: the advisor reads, stores and ranks these records without importing
torch, lightning or torchvision.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

RESULT_SCHEMA_VERSION = 1

BUILTIN_MODELS = ("resnet50", "resnet18", "vit_b_16", "mlp")
Precision = Literal["32-true", "bf16-mixed", "16-mixed"]


class ResultError(ValueError):
    """A probe result file or record that cannot be read; the message is one line for the user."""


class WorkloadSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = "resnet50"  # a builtin name or "package.module:LightningModuleClass"
    datamodule: str | None = None  # "package.module:DataModuleClass" for a user's own data
    image_size: int = Field(default=224, gt=0)
    num_classes: int = Field(default=1000, gt=1)
    batch_size: int = Field(default=128, gt=0)  # the starting (or fixed) batch size
    batch_size_fixed: bool = False

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

    @property
    def workload_id(self) -> str:
        """Stable across machines: it names what is trained, not how it is tuned."""
        if self.model in BUILTIN_MODELS:
            return f"{self.model}-{self.image_size}px-{self.num_classes}c"
        key = f"{self.model}|{self.datamodule or ''}|{self.image_size}|{self.num_classes}"
        return "custom-" + hashlib.sha256(key.encode()).hexdigest()[:12]


class ProbeConfig(BaseModel):
    """One point of the optimisation ladder: everything that changes throughput."""

    model_config = ConfigDict(extra="forbid")

    accelerator: Literal["cpu", "gpu", "mps", "tpu"]
    devices: int = 1
    num_nodes: int = 1
    strategy: str = "auto"
    precision: Precision = "32-true"
    channels_last: bool = False
    compile: bool = False
    batch_size: int = Field(gt=0)
    num_workers: int = Field(default=0, ge=0)
    pin_memory: bool = False
    ipex: bool = False


class RungResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rung: str  # e.g. "baseline", "bf16", "channels_last", "compile", "workers=4", "batch=64", "ipex"
    config: ProbeConfig
    status: Literal["ok", "failed", "oom", "timeout", "not-installed", "skipped"]
    samples_per_sec: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    steps_timed: int = 0
    compile_seconds: float | None = None
    kept: bool = False
    error: str | None = None  # why it failed or was skipped
    peak_memory_gib: float | None = None  # CUDA max allocated during the rung; elsewhere the process's peak RSS


class StepTimeStats(BaseModel):
    model_config = ConfigDict(extra="forbid")

    n_steps: int
    mean_s: float
    median_s: float
    stdev_s: float
    p10_s: float
    p90_s: float
    warmup_steps: int
    warmup_seconds: float  # warm-up and compilation, reported apart from the timed steps


class GpuInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    memory_gib: float


class HardwareFingerprint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cpu_model: str | None = None
    physical_cores: int | None = None
    logical_cpus: int | None = None
    isa_flags: list[str] = []  # the ones that matter: avx2, avx512f, avx512_bf16, amx_bf16, ...
    numa_nodes: int | None = None
    ram_gib: float | None = None
    gpus: list[GpuInfo] = []
    cpu_manufacturer: str | None = None  # "intel" | "amd" | "arm" | ... (vendor id from /proc/cpuinfo)
    cpu_clock_ghz: float | None = None  # nominal or current clock, for the CPU's ISA peak


class SoftwareVersions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    python: str
    torch: str | None = None
    lightning: str | None = None
    torchvision: str | None = None
    cuda: str | None = None
    ipex: str | None = None
    torch_xla: str | None = None


class ProbeResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = RESULT_SCHEMA_VERSION
    result_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    workload: WorkloadSpec
    workload_id: str
    instance_type: str | None = None
    instance_type_source: Literal["imds", "given"] | None = None
    hardware: HardwareFingerprint
    software: SoftwareVersions
    config: ProbeConfig  # the winning configuration
    samples_per_sec: float = Field(gt=0)  # all ranks together
    samples_per_sec_ci: tuple[float, float]  # 95% confidence interval
    step_time: StepTimeStats
    flops_per_sample: float | None = None  # forward + backward
    achieved_tflops: float | None = None
    peak_tflops_datasheet: float | None = None
    utilisation_datasheet: float | None = None
    peak_tflops_matmul: float | None = None  # a short measured matmul on the device, same dtype
    utilisation_matmul: float | None = None
    peak_memory_gib: float | None = None
    ladder: list[RungResult] = []
    stop_reason: str | None = None  # why the winning rung stopped timing: "converged" | "time-limit" | "max-steps"
    devices_in_peak: int = 1  # how many devices the peak figures cover (all ranks together)
    profile_dir: str | None = None  # where --profile wrote the TensorBoard trace
    # False when the probe could not trust its own number (CI target not reached, machine
    # contended, ...); unreliable_reasons says why, one short phrase each. Old results: True.
    reliable: bool = True
    unreliable_reasons: list[str] = []
    # Samples/s one DataLoader worker process delivers of this workload's data, timed without the
    # model (None: not measured). recommend caps GPU estimates at this x the instance's vCPUs.
    pipeline_samples_per_sec_per_worker: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    started_at: datetime
    finished_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))

    @field_validator("started_at", "finished_at")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        # A hand-made or foreign file may omit the offset; a naive time cannot be compared with
        # the aware ones the probe writes (ranking by age would raise TypeError). Times are UTC.
        return v.replace(tzinfo=timezone.utc) if v.tzinfo is None else v

    @field_validator("schema_version")
    @classmethod
    def _version_ok(cls, v: int) -> int:
        if v != RESULT_SCHEMA_VERSION:
            raise ValueError(
                f"probe result schema_version {v} is not supported (expected {RESULT_SCHEMA_VERSION})"
            )
        return v


def _loads(text: str | bytes, where: str):
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ResultError(f"{where}: not valid JSON ({e.msg if hasattr(e, 'msg') else e})") from None


def parse_result(text: str | bytes, where: str = "result") -> ProbeResult:
    """Validate one ProbeResult from JSON text; any problem becomes a one-line ResultError."""
    return _validate(_loads(text, where), where)


def parse_results(text: str | bytes, where: str = "results") -> list[ProbeResult]:
    """One ProbeResult, or a JSON list of them as `advisor results export` writes."""
    data = _loads(text, where)
    if isinstance(data, list):
        return [_validate(d, f"{where}[{i}]") for i, d in enumerate(data)]
    return [_validate(data, where)]


def _validate(data, where: str) -> ProbeResult:
    if not isinstance(data, dict) or "workload_id" not in data or "samples_per_sec" not in data:
        raise ResultError(f"{where}: not a probe result (no workload_id / samples_per_sec)")
    try:
        return ProbeResult.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top)"
        raise ResultError(f"{where}: invalid probe result at {loc}: {err['msg']}") from None
