"""The run manifest: what `advisor launch` started, kept as JSON in the data dir.

It is written before the first instance is requested and again after each request, each time
to a temporary file renamed over the old one, so a crash mid-launch loses no instance id and
never leaves half a file. It holds no presigned URLs (they are bearer tokens) and no
credentials. A copy without local details goes to S3 as `<prefix>/<run_id>/run.json` so
`results pull` on another machine knows which instance types to expect.
"""

from __future__ import annotations

import json
import re
import secrets
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from catalog.models import NAME_PATTERN, Arch, Market, Price
from safeio import first_error, one_line, read_json_file, save_atomic

from ..errors import AdvisorError
from ..paths import data_dir
from . import MAX_WATCHDOG_MINUTES, MIN_MINUTES
from .aws import BUCKET_PATTERN, S3Location

MANIFEST_VERSION = 1
MANIFEST_MAX_BYTES = 16 * 2**20  # a run of 1,000 instances is well under 1 MB
MAX_VOLUME_GIB = 65536  # EBS's largest volume (64 TiB)
MAX_ENTRIES = 10**6  # as --max-instances

# Strict as the probe results are (lightning_module/contract/result.py): a manifest is read back
# from the data dir and, written by anyone, from S3; what it says decides what `results pull` and
# `launch status` look for. Numbers are numbers (no true for 1), finite and bounded; text is one line.
_STRICT = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)
# An S3 key: 1,024 bytes at most (S3's limit), printable, no "..": it becomes a path in messages.
S3Key = Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(one_line)]
AwsId = Annotated[str, Field(max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")]  # an AMI, instance or error code
LaunchState = Literal["pending", "launched", "failed"]  # an entry's: asked for, running, refused


def _aware_time(v: datetime) -> datetime:
    if v.tzinfo is None:
        raise ValueError("a time without a UTC offset")
    if v > datetime.now(timezone.utc) + timedelta(days=1):
        raise ValueError(f"{v.isoformat()} is in the future")
    return v


Time = Annotated[datetime, AfterValidator(_aware_time)]


class LaunchEntry(BaseModel):
    model_config = _STRICT

    instance_type: str = Field(pattern=NAME_PATTERN)
    arch: Arch
    ami: AwsId
    # set when DeleteOnTermination had to be overridden
    root_device: Annotated[str, Field(max_length=128), AfterValidator(one_line)] | None = None
    root_volume_gib: int | None = Field(default=None, ge=1, le=MAX_VOLUME_GIB)
    # other EBS devices (GiB) whose DeleteOnTermination was overridden
    kept_volumes: dict[Annotated[str, Field(max_length=128), AfterValidator(one_line)],
                       Annotated[int, Field(ge=1, le=MAX_VOLUME_GIB)] | None] = Field(default={}, max_length=100)
    market: Market
    usd_per_hour: Price | None = None  # from the catalog at launch time; None when unknown
    state: LaunchState = "pending"
    instance_id: AwsId | None = None
    error_code: AwsId | None = None
    error: Annotated[str, Field(max_length=4096), AfterValidator(one_line)] | None = None
    result_key: S3Key
    log_key: S3Key
    launched_at: Time | None = None


class RunManifest(BaseModel):
    model_config = _STRICT

    manifest_version: Literal[1] = MANIFEST_VERSION
    run_id: str = Field(pattern=NAME_PATTERN)
    created_at: Time = Field(default_factory=lambda: datetime.now(timezone.utc))
    region: str = Field(pattern=NAME_PATTERN)
    bucket: str = Field(pattern=BUCKET_PATTERN)
    prefix: S3Key  # the run's own prefix, e.g. "probes/20261121-0700-ab12cd"
    workload: Annotated[str, Field(min_length=1, max_length=300), AfterValidator(one_line)]
    probe_args: list[Annotated[str, Field(max_length=4096), AfterValidator(one_line)]] = Field(default=[], max_length=1000)
    max_minutes: int = Field(ge=MIN_MINUTES, le=MAX_WATCHDOG_MINUTES)
    # the S3 key of the uploaded wheel, or the pip requirement spec
    package: Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(one_line)]
    code: S3Key | None = None  # the S3 key of the user's own code (launch --code), when shipped
    entries: list[LaunchEntry] = Field(default=[], max_length=MAX_ENTRIES)

    def entry(self, instance_type: str) -> LaunchEntry:
        for e in self.entries:
            if e.instance_type == instance_type:
                return e
        raise KeyError(instance_type)


def validated(model: type[BaseModel], doc, where: str):
    """`model` from a parsed JSON document (safeio.parse_json's), validated in JSON mode: strict,
    with times as ISO 8601 text; any problem is one AdvisorError line."""
    try:
        return model.model_validate_json(json.dumps(doc))
    except ValidationError as e:
        first = first_error(e)
        raise AdvisorError(f"{where} is not a valid run manifest: {first.at}: {first.msg}") from None


def run_keys(s3: S3Location, run_id: str, instance_type: str) -> tuple[str, str]:
    """Where an instance of the run uploads its result and its log (the layout `results pull` reads)."""
    return s3.key(run_id, instance_type, "result.json"), s3.key(run_id, instance_type, "probe.log")


def new_run_id(now: datetime | None = None) -> str:
    """Sortable by time, unique without coordination."""
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def runs_dir() -> Path:
    return data_dir() / "runs"


def manifest_path(run_id: str) -> Path:
    # As new_run_id() writes them (20261121-070000-ab12cd): never "..", ".x", "a/b", nor a name
    # too long for the file system.
    if not re.fullmatch(NAME_PATTERN, run_id):
        raise AdvisorError(f"invalid run id {run_id[:80]!r}")
    return runs_dir() / f"{run_id}.json"


def save(manifest: RunManifest) -> Path:
    path = manifest_path(manifest.run_id)
    save_atomic(manifest, path, indent=2)
    return path


def load(run_id: str) -> RunManifest | None:
    """The local manifest, or None when this machine did not launch that run."""
    path = manifest_path(run_id)
    if not path.exists():
        return None
    doc = read_json_file(path, "run manifest", MANIFEST_MAX_BYTES, AdvisorError)
    return validated(RunManifest, doc, f"run manifest {path}")


def list_run_ids() -> list[str]:
    d = runs_dir()
    if not d.is_dir():
        return []
    return sorted(p.stem for p in d.glob("*.json") if not p.name.startswith("."))
