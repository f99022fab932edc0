"""Published training throughputs: the reference dataset the estimates are built on and judged by.

`advisor/data/reference_measurements.json` holds one row per figure read in a public source (a
benchmark table, a vendor README, an article), with the hardware, the workload, the software
stack and where the figure was read. This module is its schema and loader: a file that is
missing, not JSON, nested past reason or off-schema is one `ReferenceFileError` line, never a
traceback. Cheap to import (pydantic only): `advisor recommend` reads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from catalog.models import MAX_DEVICE_MEMORY_GIB
from lightning_module.contract.result import (
    BUILTIN_MODELS,
    MAX_BATCH_SIZE,
    MAX_IMAGE_SIZE,
    MAX_NUM_CLASSES,
    MeasuredRate,
)
from safeio import first_error, parse_json, read_bytes

from ..errors import AdvisorError

# 3 added the fields of language models and multi-GPU strategies (V3_FIELDS) and pure bf16;
# a version-2 file (a team's own table) still reads, and may not use them.
SCHEMA_VERSION = 3
READABLE_VERSIONS = (2, 3)
REFERENCE_PATH = Path(__file__).resolve().parents[1] / "data" / "reference_measurements.json"
MAX_BYTES = 16 * 2**20  # the shipped table is ~1.1 MiB; a file far larger is not one

# Half-width of the band a figure gets when its row does not state one: a figure read in a table
# is a single published run; a derived one (worked out from other published numbers) is looser.
READ_UNCERTAINTY = 0.05
DERIVED_UNCERTAINTY = 0.15

# bf16-true: weights, activations and optimizer state all bf16, no fp32 master copy (llm-foundry's
# "PURE" mixed-precision mode), not the probe's autocast bf16-mixed.
Precision = Literal["32-true", "tf32", "16-mixed", "bf16-mixed", "bf16-true", "fp8"]
# What a workload is, for counting the dataset's spread of workloads (one name per kind of network).
Family = Literal["image-classification", "encoder-transformer", "decoder-lm", "detection", "seq2seq",
                 "speech", "recommender", "vision-language", "mlp"]
# What samples_per_sec counts when a source publishes another unit than whole samples: tokens
# (a language model's or translation model's tokens/s), mel-spectrogram frames (Tacotron 2),
# audio samples (WaveGlow). Device ratios of one workload do not depend on it; its level does.
RateUnit = Literal["samples", "tokens", "mel_frames", "audio_samples"]
BatchPolicy = Literal["per-device", "fixed"]
# How a multi-device run splits its work: plain data parallel (every device holds the whole model),
# sharded data parallel (FSDP / ZeRO: parameters, gradients and optimizer state split across the
# devices and gathered per layer), or model parallel. Sharded and model-parallel runs pay
# communication the cross-device model does not yet describe (issue 29's scale-out model reads them).
Strategy = Literal["single", "ddp", "fsdp-full-shard", "fsdp-shard-grad-op", "fsdp-hybrid-shard",
                   "zero-1", "zero-2", "zero-3", "tensor-parallel", "pipeline-parallel"]
SHARDED = ("fsdp-full-shard", "fsdp-shard-grad-op", "fsdp-hybrid-shard", "zero-1", "zero-2", "zero-3",
           "tensor-parallel", "pipeline-parallel")
# Figures a source prints rounded (tokens/s to the token, samples/s to the sample): tokens_per_sec
# against samples_per_sec x tokens_per_sample agrees within this share.
TOKENS_TOLERANCE = 0.01
_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_DATE = re.compile(r"^(\d{4})-(\d{2})(?:-(\d{2}))?$")
_TORCH = re.compile(r"PyTorch (\d+\.\d+)")


class ReferenceFileError(AdvisorError):
    """A reference file that cannot be used; the message is one line for the user."""


class _Strict(BaseModel):
    # protected_namespaces=(): the rows have fields called model and model_variant.
    # strict: a JSON true is not 1 and "40" is not 40, as in a probe result.
    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=(), strict=True)


class Source(_Strict):
    """Where a figure was read: a URL, a repository file (at a commit when the reader knew it), or
    one of the project's source articles (digested, with their figures, in the developers' SEEDS.md)."""

    url: str | None = None
    repo: str | None = None  # owner/name on GitHub
    path: str | None = None
    commit: str | None = None  # 40 hex digits
    revision: str | None = None  # which version of the file, in words, when its commit is not known
    document: str | None = None  # a source article with no public address
    where: str = Field(min_length=1)  # the table, row or quote the figure came from

    @model_validator(mode="after")
    def _locatable(self) -> Source:
        if self.repo is None and self.url is None and self.document is None:
            raise ValueError("a source needs a url, a repo with a path, or a document")
        if self.repo is not None:
            if not self.path:
                raise ValueError(f"source repo {self.repo!r} needs a path")
            if self.commit is None and not self.revision:
                raise ValueError(f"source {self.repo}/{self.path} needs a commit or a revision")
            if self.commit is not None and not _COMMIT.match(self.commit):
                raise ValueError(f"source commit {self.commit!r} is not 40 hex digits")
        return self

    def label(self) -> str:
        if self.repo is not None:
            at = f"@{self.commit[:12]}" if self.commit else " (an older version; see revision)"
            return f"{self.repo}/{self.path}{at}"
        if self.url is not None:
            return self.url
        return re.split(r"[,:]", str(self.document))[0]  # "Article A"


class Measurement(_Strict):
    """One published training throughput."""

    id: str
    # hardware
    device: str = Field(min_length=1)  # "A100", "H100", "A10G", ... or "cpu"
    device_variant: str | None = None  # "SXM4", "PCIe", "NVL", ...
    device_memory_gib: float | None = Field(default=None, gt=0, le=MAX_DEVICE_MEMORY_GIB, allow_inf_nan=False)
    gpus: int = Field(gt=0, le=4096)  # devices used per node (1 for a CPU host); the probe's bound
    nodes: int = Field(default=1, gt=0, le=4096)
    instance_type: str | None = None  # the AWS type when it ran on AWS
    system: str | None = None  # "DGX A100 80GB", "Lambda Cloud", ...
    cpu_model: str | None = None
    # workload
    model: str = Field(min_length=1)
    model_variant: str | None = None
    family: Family | None = None  # schema 3 rows name it; None in a version-2 file
    parameters: int | None = Field(default=None, gt=0, le=10**13)  # the model's parameter count, as published
    tokens_per_sample: int | None = Field(default=None, gt=0, le=2**22)  # sequence length of a language model's sample
    image_size: int | None = Field(default=None, gt=0, le=MAX_IMAGE_SIZE)
    num_classes: int | None = Field(default=None, gt=0, le=MAX_NUM_CLASSES)
    precision: Precision
    batch_per_device: int | None = Field(default=None, gt=0, le=MAX_BATCH_SIZE)
    # How the publisher chose the batch across the table's devices: "per-device", each device its own
    # (the largest its memory holds: Lambda's suite runs Tacotron 2 at 48 a GPU on a V100-16GB and 256
    # on an A100-80GB), so the table's device ratios carry the batch's own gain as well as the
    # device's; "fixed", one batch on every device; None, not recorded. points.batch_of reads it.
    batch_policy: BatchPolicy | None = None
    batch_source: Source | None = None  # where batch_per_device was read, when not in the figure's own source
    global_batch: int | None = Field(default=None, gt=0, le=2**31)  # samples per optimizer step, all devices
    grad_accumulation: int | None = Field(default=None, gt=0, le=2**16)  # micro-batches per optimizer step
    strategy: Strategy | None = None  # None: the source does not say (a one-device row is "single")
    activation_checkpointing: bool | None = None  # recomputed activations (more FLOPs per sample)
    data_pipeline: Literal["synthetic", "real", "dali", "unknown"]
    memory_format: Literal["nchw", "nhwc", "unknown"]
    # software
    framework: str = Field(min_length=1)
    software: str | None = None
    stack: Literal["tuned", "default"]
    # the figure
    # total over gpus x nodes; the probe result's bounds and reasons (MIN/MAX_SAMPLES_PER_SEC)
    samples_per_sec: MeasuredRate
    rate_unit: RateUnit = "samples"  # what samples_per_sec counts
    tokens_per_sec: MeasuredRate | None = None  # total over gpus x nodes, where the source prints tokens/s
    relative_uncertainty: float | None = Field(default=None, gt=0, lt=1, allow_inf_nan=False)
    tuned: bool
    rung: str | None = None
    derived: str | None = None
    source: Source
    source_date: date | None = None  # None only where the source gives no date (say so in notes)
    notes: str | None = None

    @field_validator("id")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not _SLUG.match(v):
            raise ValueError(f"id {v!r} is not a slug (lower-case letters, digits, '.', '_', '-')")
        return v

    @field_validator("model")
    @classmethod
    def _lower(cls, v: str) -> str:
        if v != v.lower():
            raise ValueError(f"model {v!r} must be lower-case")
        return v

    @field_validator("derived")
    @classmethod
    def _says_how(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("derived must say how the figure was derived (or be null)")
        return v

    @field_validator("source_date", mode="before")
    @classmethod
    def _date(cls, v):
        # "YYYY-MM" (most sources give a month) or "YYYY-MM-DD"; a month reads as its first day.
        if isinstance(v, str):
            m = _DATE.match(v)
            if not m:
                raise ValueError(f"source_date {v!r} is not YYYY-MM or YYYY-MM-DD")
            try:
                return date(int(m[1]), int(m[2]), int(m[3] or 1))
            except ValueError as e:
                raise ValueError(f"source_date {v!r}: {e}") from None
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Measurement:
        if self.device == "cpu" and self.gpus != 1:
            raise ValueError("a CPU row has gpus 1 (the host)")
        if self.strategy == "single" and self.devices != 1:
            raise ValueError(f"strategy 'single' on {self.devices} devices")
        if self.strategy not in (None, "single") and self.devices == 1:
            raise ValueError(f"strategy {self.strategy!r} needs more than one device")
        if self.tokens_per_sec is not None:
            if self.rate_unit == "tokens" and self.tokens_per_sec != self.samples_per_sec:
                raise ValueError("rate_unit 'tokens': samples_per_sec is the tokens/s figure, tokens_per_sec repeats it")
            if self.rate_unit == "samples" and self.tokens_per_sample:
                implied = self.samples_per_sec * self.tokens_per_sample
                if abs(implied / self.tokens_per_sec - 1.0) > TOKENS_TOLERANCE:
                    raise ValueError(f"samples_per_sec x tokens_per_sample = {implied:,.0f} tokens/s, not the "
                                     f"{self.tokens_per_sec:,.0f} of tokens_per_sec")
        if self.global_batch is not None and self.batch_per_device and self.grad_accumulation:
            # a source's micro-batches need not divide its global batch (the last one short)
            most = self.batch_per_device * self.grad_accumulation * self.devices
            if not most - self.batch_per_device * self.devices < self.global_batch <= most:
                raise ValueError(f"global_batch {self.global_batch} does not fit batch_per_device x "
                                 f"grad_accumulation x devices = {most}")
        return self

    @property
    def sharded(self) -> bool:
        """Parameters or work split across devices (FSDP, ZeRO, model parallel)."""
        return self.strategy in SHARDED

    @property
    def workload_id(self) -> str:
        """The probe's workload id for the builtin models (resnet50-224px-1000c), else a readable one."""
        size = f"{self.image_size}px" if self.image_size else None
        classes = f"{self.num_classes}c" if self.num_classes else None
        tokens = f"{self.tokens_per_sample}tok" if self.tokens_per_sample else None
        return "-".join(p for p in (self.model, size, classes, tokens) if p)

    @property
    def builtin(self) -> bool:
        """One of the probe's builtin models: its rows get the probe's workload id, so a published
        figure and a probe of the same job line up."""
        return self.model in BUILTIN_MODELS

    @property
    def devices(self) -> int:
        return self.gpus * self.nodes

    @property
    def per_device_sps(self) -> float:
        return self.samples_per_sec / self.devices

    @property
    def uncertainty(self) -> float:
        if self.relative_uncertainty is not None:
            return self.relative_uncertainty
        return DERIVED_UNCERTAINTY if self.derived else READ_UNCERTAINTY

    @property
    def provenance(self) -> str:
        """One line: where the figure was read, and how it was derived when it was."""
        text = f"{self.source.where} [{self.source.label()}]"
        return f"{text}; derived: {self.derived}" if self.derived else text

    @property
    def torch_version(self) -> str | None:
        m = _TORCH.search(self.framework)
        return m[1] if m else None


# Fields a version-2 file may not use (added in 3), and the values 3 added to version-2 fields.
V3_FIELDS = ("family", "parameters", "tokens_per_sample", "global_batch", "grad_accumulation", "strategy",
             "activation_checkpointing", "rate_unit", "tokens_per_sec", "batch_policy", "batch_source")
V3_VALUES = {"precision": ("bf16-true",)}


class ReferenceSet(_Strict):
    schema_version: Literal[2, 3]
    about: str
    measurements: list[Measurement]

    @model_validator(mode="after")
    def _unique_ids(self) -> ReferenceSet:
        seen: set[str] = set()
        for m in self.measurements:
            if m.id in seen:
                raise ValueError(f"measurement id {m.id!r} appears more than once")
            seen.add(m.id)
        return self

    @model_validator(mode="after")
    def _fields_of_its_version(self) -> ReferenceSet:
        if self.schema_version >= 3:
            return self
        for m in self.measurements:
            used = [f for f in V3_FIELDS if f in m.model_fields_set]
            used += [f"{f} {getattr(m, f)!r}" for f, vals in V3_VALUES.items() if getattr(m, f) in vals]
            if used:
                raise ValueError(f"row {m.id!r} uses {', '.join(used)}, which need schema_version 3")
        return self

    def select(self, devices: Iterable[str] = (), models: Iterable[str] = ()) -> list[Measurement]:
        """Rows whose device / model is one of these (case-insensitive; empty means any)."""
        dev = {d.lower() for d in devices}
        mod = {m.lower() for m in models}
        return [m for m in self.measurements
                if (not dev or m.device.lower() in dev) and (not mod or m.model in mod)]

    def by_id(self, row_id: str) -> Measurement:
        for m in self.measurements:
            if m.id == row_id:
                return m
        raise KeyError(row_id)


def load_references(path: str | Path | None = None) -> ReferenceSet:
    """The shipped dataset (path None; read once per process), or a team's own file in this schema."""
    if path is None:
        return _builtin()
    return _load(Path(path))


@lru_cache(maxsize=1)
def _builtin() -> ReferenceSet:
    return _load(REFERENCE_PATH)


def _load(path: Path) -> ReferenceSet:
    return parse_file(path, file_bytes(path))


def file_bytes(path: Path) -> bytes:
    """A reference file's bytes, or one ReferenceFileError line (missing, a folder, too large)."""
    return read_bytes(path, "reference file", MAX_BYTES, ReferenceFileError)


def parse_file(path: Path, text: bytes) -> ReferenceSet:
    return loads(text, where=f"reference file {path}")


def loads(text: str | bytes, where: str = "reference data") -> ReferenceSet:
    data = parse_json(text, where, ReferenceFileError)  # the one JSON reader: nesting, huge integers
    if not isinstance(data, dict) or "measurements" not in data:
        raise ReferenceFileError(f"{where} is not a reference table (no 'measurements' list)")
    if data.get("schema_version") not in READABLE_VERSIONS:
        raise ReferenceFileError(f"{where} has schema_version {data.get('schema_version')!r}; this advisor reads "
                                 f"{' and '.join(map(str, READABLE_VERSIONS))} (see docs/estimates.md, 'Reference dataset')")
    try:
        return ReferenceSet.model_validate(data)
    except ValidationError as e:
        first = first_error(e)
        more = f" (and {first.more} more)" if first.more else ""
        raise ReferenceFileError(f"{where}: {_where_in(data, first.loc)}: {first.msg}{more}") from None
    except RecursionError:
        raise ReferenceFileError(f"{where} is nested too deeply to be a reference table") from None


def _where_in(data: dict, loc: tuple) -> str:
    """'measurements[3] (a100-80gb-1gpu-amp).samples_per_sec': the row's id when it has one."""
    if len(loc) >= 2 and loc[0] == "measurements" and isinstance(loc[1], int):
        rows = data.get("measurements")
        row = rows[loc[1]] if isinstance(rows, list) and loc[1] < len(rows) else None
        name = f" ({row['id']})" if isinstance(row, dict) and isinstance(row.get("id"), str) else ""
        rest = "".join(f".{p}" for p in loc[2:])
        return f"measurements[{loc[1]}]{name}{rest}"
    return ".".join(str(p) for p in loc) or "(top)"
