"""The run manifest: what `advisor launch` started, kept as JSON in the data dir.

It is written before the first instance is requested and again after each request, each time
to a temporary file renamed over the old one, so a crash mid-launch loses no instance id and
never leaves half a file. It holds no presigned URLs (they are bearer tokens) and no
credentials. A copy without local details goes to S3 as `<prefix>/<run_id>/run.json` so
`results pull` on another machine knows which instance types to expect.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from catalog.io import first_error, read_json_file, save_atomic
from catalog.models import NAME_PATTERN

from ..errors import AdvisorError
from ..paths import data_dir
from .aws import S3Location

MANIFEST_VERSION = 1
MANIFEST_MAX_BYTES = 16 * 2**20  # a run of 1,000 instances is well under 1 MB


class LaunchEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instance_type: str
    arch: Literal["x86_64", "arm64"]
    ami: str
    root_device: str | None = None  # set when DeleteOnTermination had to be overridden
    root_volume_gib: int | None = None
    kept_volumes: dict[str, int | None] = {}  # other EBS devices (GiB) whose DeleteOnTermination was overridden
    market: Literal["on-demand", "spot"]
    usd_per_hour: float | None = None  # from the catalog at launch time; None when unknown
    state: Literal["pending", "launched", "failed"] = "pending"
    instance_id: str | None = None
    error_code: str | None = None
    error: str | None = None
    result_key: str
    log_key: str
    launched_at: datetime | None = None


class RunManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    manifest_version: int = MANIFEST_VERSION
    run_id: str
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    region: str
    bucket: str
    prefix: str  # the run's own prefix, e.g. "probes/20261121-0700-ab12cd"
    workload: str
    probe_args: list[str] = []
    max_minutes: int
    package: str  # the S3 key of the uploaded wheel, or the pip requirement spec
    entries: list[LaunchEntry] = []

    def entry(self, instance_type: str) -> LaunchEntry:
        for e in self.entries:
            if e.instance_type == instance_type:
                return e
        raise KeyError(instance_type)


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
    try:
        return RunManifest.model_validate(doc)
    except ValidationError as e:
        raise AdvisorError(f"run manifest {path} is not valid: {first_error(e).msg}") from None


def list_run_ids() -> list[str]:
    d = runs_dir()
    if not d.is_dir():
        return []
    return sorted(p.stem for p in d.glob("*.json") if not p.name.startswith("."))
