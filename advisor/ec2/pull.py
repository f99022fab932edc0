"""`results pull`: bring probe results of launched runs from S3 into the results store.

Layout written by `advisor launch` under s3://bucket/prefix:
    <run_id>/run.json                     the run (instance types expected)
    <run_id>/package/<wheel>              the package the instances installed
    <run_id>/<instance_type>/result.json  the ProbeResult (only when the probe succeeded)
    <run_id>/<instance_type>/probe.log    everything the instance's script printed

Importing is idempotent: the store ignores a result_id it already has, so pulling twice adds
nothing.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Literal, get_args

from catalog.models import NAME_PATTERN
from lightning_module.contract.result import ResultError, parse_result
from safeio import parse_json

from ..errors import AdvisorError
from ..output import safe_text, warn
from ..records import JsonForm, fact
from . import aws
from . import manifest as manifests
from .aws import S3Location, error_line
from .manifest import run_keys

log = logging.getLogger(__name__)

LOG_TAIL_LINES = 15
LOG_TAIL_BYTES = 64 * 1024  # only the end of a probe.log is fetched: a 50 MB log is not downloaded
LOG_LINE_CHARS = 500
MAX_RESULT_BYTES = 32 * 1024 * 1024  # a ProbeResult is a few KiB; anything this big is not one

# "ignored": a key that is no run of ours (a run id ".." or ".hidden", an odd instance type); said,
# and the rest pulled.
Status = Literal["imported", "duplicate", "failed", "corrupt", "missing", "not launched", "ignored"]
STATUSES: tuple[str, ...] = get_args(Status)


@dataclass
class PullRow:
    """One launched instance's result, as pulled: `results pull`'s table, CSV and JSON runs."""

    run_id: str = fact()
    # "" for a run folder that is not an advisor run
    instance_type: str = fact("null for a run folder that is not an advisor run",
                              json=JsonForm(str | None, lambda t, _row: t or None))
    status: Status = fact()
    result_id: str | None = fact(default=None)
    samples_per_sec: float | None = fact(default=None)
    detail: str | None = fact(default=None)
    log_tail: list[str] = fact("the last lines of a failed instance's log", default_factory=list, csv=False)


def _list_keys(s3, bucket: str, prefix: str) -> list[str]:
    from botocore.exceptions import BotoCoreError, ClientError

    keys: list[str] = []
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(o["Key"] for o in page.get("Contents", []))
    except (ClientError, BotoCoreError) as e:
        raise aws.user_error(e, f"listing s3://{bucket}/{prefix}") from None
    return keys


def _get(s3, bucket: str, key: str, limit: int | None = None, tail: int | None = None) -> bytes:
    """The object (at most `limit` bytes, else ResultError), or only its last `tail` bytes."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        obj = s3.get_object(Bucket=bucket, Key=key, **({"Range": f"bytes=-{tail}"} if tail else {}))
        if limit is not None and obj.get("ContentLength", 0) > limit:
            raise ResultError(f"s3://{bucket}/{key}: {obj['ContentLength']} bytes is too large for a probe result")
        n = limit + 1 if limit is not None else tail
        return obj["Body"].read() if n is None else obj["Body"].read(n)
    except (ClientError, BotoCoreError) as e:
        raise aws.user_error(e, f"downloading s3://{bucket}/{key}") from None


def _log_tail(s3, bucket: str, key: str) -> list[str]:
    """The last lines of a probe.log, made safe to print (no escape sequences, bounded length)."""
    text = _get(s3, bucket, key, tail=LOG_TAIL_BYTES).decode("utf-8", errors="replace")
    lines = [safe_text(ln.rstrip(), LOG_LINE_CHARS) for ln in text.splitlines() if ln.strip()]
    return lines[-LOG_TAIL_LINES:]


def _our_name(part: str) -> bool:
    """A run id or instance type as launch writes them (20261121-070000-abcdef, g5.xlarge): never
    "..", ".hidden", "" or anything with control characters."""
    return re.fullmatch(NAME_PATTERN, part) is not None and part.strip(".") != ""


def _expected_types(s3, loc: S3Location, run_id: str, keys: set[str]) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """Instance types the run launched (in launch order), the launch errors of those that never
    started, and the manifest's entries that are not valid (name -> why). The local manifest knows
    the errors; run.json on S3 knows the types."""
    local = manifests.load(run_id)
    if local is not None:
        return [e.instance_type for e in local.entries], {
            e.instance_type: e.error or "launch failed" for e in local.entries if e.state == "failed"
        }, {}
    run_key = loc.key(run_id, "run.json")
    if run_key in keys:
        where = f"s3://{loc.bucket}/{run_key}"
        try:
            doc = parse_json(_get(s3, loc.bucket, run_key, limit=MAX_RESULT_BYTES), where, AdvisorError)
            if not isinstance(doc, dict):
                raise AdvisorError(f"{where} is not a valid run manifest: not a JSON object")
            entries = doc.get("entries")
            # The run and each entry apart: a bad entry (written by hand or another tool) gets its
            # own "ignored" row, and the good ones are still expected.
            manifests.validated(manifests.RunManifest, {**doc, "entries": []}, where)
            expected, bad = [], {}
            for i, e in enumerate(entries if isinstance(entries, list) else []):
                name = e.get("instance_type") if isinstance(e, dict) else None
                name = name if isinstance(name, str) and name else f"entries[{i}]"
                try:
                    expected.append(manifests.validated(manifests.LaunchEntry, e, where).instance_type)
                except AdvisorError as err:
                    bad[name] = str(err).split(": ", 1)[1] if ": " in str(err) else str(err)
            return expected, {}, bad
        except (ValueError, RecursionError) as e:  # AdvisorError, ResultError
            warn(f"{safe_text(error_line(e))}; its instance types are taken from the keys")
    return [], {}, {}


def pull(loc: S3Location, store, run_id: str | None = None, region: str | None = None) -> list[PullRow]:
    s3 = aws.s3_client_for(loc.bucket, region)
    base = loc.key(run_id) + "/" if run_id else (loc.prefix + "/" if loc.prefix else "")
    keys = set(_list_keys(s3, loc.bucket, base))
    if not run_id and loc.prefix and loc.key("run.json") in keys:
        # the URL names a run's own prefix (s3://bucket/probes/<run_id>): pull that run
        parent, _, run_id = loc.prefix.rpartition("/")
        loc = S3Location(loc.bucket, parent)
    root = loc.prefix + "/" if loc.prefix else ""

    # run id -> instance types seen in the keys
    seen: dict[str, list[str]] = {}
    for k in sorted(keys):
        parts = k[len(root):].split("/")
        if len(parts) == 3 and parts[2] in ("result.json", "probe.log"):
            seen.setdefault(parts[0], [])
            if parts[1] not in seen[parts[0]]:
                seen[parts[0]].append(parts[1])
        elif len(parts) == 2 and parts[1] == "run.json":
            seen.setdefault(parts[0], [])
    if run_id:
        seen.setdefault(run_id, [])
    if not keys and not (run_id and manifests.load(run_id)):
        raise AdvisorError(f"nothing under {loc}{'/' + run_id if run_id else ''}: no launched run has written there")

    if not seen:
        raise AdvisorError(f"no probe runs under {loc}: expected <run_id>/run.json or <run_id>/<type>/result.json keys")
    rows: list[PullRow] = []
    for rid in sorted(seen):
        if not _our_name(rid):
            rows.append(PullRow(run_id=rid, instance_type="", status="ignored",
                                detail="not a run id written by 'advisor launch'"))
            continue
        expected, launch_errors, bad = _expected_types(s3, loc, rid, keys)
        for t, why in bad.items():
            rows.append(PullRow(run_id=rid, instance_type=t, status="ignored",
                                detail=f"an invalid entry named in the run manifest ({why})"))
        types = expected + [t for t in seen[rid] if t not in expected and t not in bad]
        for t in types:
            if not _our_name(t):
                where = " (named in the run manifest)" if t in expected else ""
                rows.append(PullRow(run_id=rid, instance_type=t, status="ignored",
                                    detail=f"not an instance type name{where}"))
                continue
            try:
                rows.append(_pull_one(s3, loc, store, rid, t, keys, launch_errors.get(t)))
            except AdvisorError as e:  # this object could not be downloaded: said, and the others pulled
                rows.append(PullRow(run_id=rid, instance_type=t, status="corrupt", detail=str(e)))
    return rows


def _pull_one(s3, loc: S3Location, store, run_id: str, itype: str, keys: set[str], launch_error: str | None) -> PullRow:
    result_key, log_key = run_keys(loc, run_id, itype)
    row = PullRow(run_id=run_id, instance_type=itype, status="missing")
    if result_key in keys:
        where = f"s3://{loc.bucket}/{result_key}"
        try:
            result = parse_result(_get(s3, loc.bucket, result_key, limit=MAX_RESULT_BYTES), where=where)
        except ResultError as e:
            row.status, row.detail = "corrupt", str(e)
            return row
        row.result_id, row.samples_per_sec = result.result_id, result.samples_per_sec
        if result.instance_type and result.instance_type != itype:
            row.detail = f"the result says it ran on {result.instance_type}"
        row.status = "imported" if store.add(result) else "duplicate"
        return row
    if log_key in keys:
        row.status = "failed"
        row.log_tail = _log_tail(s3, loc.bucket, log_key)
        row.detail = " | ".join(row.log_tail[-3:]) or "empty log"
        return row
    if launch_error:
        row.status, row.detail = "not launched", launch_error
        return row
    row.detail = "no result or log uploaded yet (still running, or the instance never got that far)"
    return row


def summary(rows: list[PullRow]) -> str:
    counts = {s: sum(r.status == s for r in rows) for s in STATUSES}
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "nothing"


__all__ = ["STATUSES", "PullRow", "pull", "summary"]
