"""Probe instance types on the instance types themselves: start one EC2 instance per type, each
runs `advisor probe` from its user-data and sends the result back through S3.

EC2 is the scheduler: there is no controller process. Each instance is tagged with the run id
(so `status` and `cancel` find it without local state), powers itself off when the probe ends
or when the watchdog fires, and is launched with InstanceInitiatedShutdownBehavior=terminate
so powering off ends the billing.

boto3 is imported inside functions only (see advisor/ec2/__init__.py).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import AdvisorError
from . import aws
from . import manifest as manifests
from .aws import error_code, error_line
from .code import BUNDLE_NAME, build_bundle, check_code, is_custom, top_package
from .manifest import LaunchEntry, RunManifest, run_keys
from .package import resolve_package
from .plan import (
    ROLE_PROBE,
    TAG_ROLE,
    TAG_RUN,
    URL_GRACE_MINUTES,
    LaunchRequest,
    PlannedLaunch,
    launchable,
    run_instances_params,
)
from .userdata import USER_DATA_LIMIT, ProbeScript, render

log = logging.getLogger(__name__)

# Launch errors expected to concern one instance type only (capacity, quotas, a type the AMI or
# subnet cannot take). Every failure fails only its own entry and the others still launch (the
# DryRun check passed the same parameters); a code outside this set is logged as well, since it
# may be a problem with the request that every type will meet.
PER_TYPE_ERRORS = {
    "InsufficientInstanceCapacity",
    "InstanceLimitExceeded",
    "VcpuLimitExceeded",
    "MaxSpotInstanceCountExceeded",
    "SpotMaxPriceTooLow",
    "InsufficientCapacity",
    "Unsupported",
    "UnsupportedOperation",
    "InvalidParameterCombination",
    "InvalidParameterValue",
}

ACTIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]


# ---------------------------------------------------------------- launching


def execute(
    req: LaunchRequest,
    plan: list[PlannedLaunch],
    *,
    run_id: str | None = None,
    on_launch: Callable[[LaunchEntry], None] | None = None,
) -> RunManifest:
    """Upload the package, write the manifest, start one instance per planned type."""
    to_launch = launchable(plan)
    run_id = run_id or manifests.new_run_id()
    s3 = aws.s3_client_for(req.s3.bucket, req.region)
    package_key, spec = upload_package(s3, req, run_id)
    code_key = upload_code(s3, req, run_id)
    m = new_manifest(req, run_id, to_launch, package_key or spec or "", code_key)
    manifests.save(m)  # before the first instance is requested: no instance id can be lost
    publish_manifest(s3, req, m)
    ec2 = aws.client("ec2", req.region)
    for entry in m.entries:
        user_data = render(probe_script(s3, req, run_id, entry, package_key, spec, code_key))
        start_instance(ec2, req, run_id, entry, user_data)
        manifests.save(m)
        if on_launch is not None:
            on_launch(entry)
    return m


def upload_package(s3, req: LaunchRequest, run_id: str) -> tuple[str | None, str | None]:
    """(S3 key of the uploaded wheel, None) or (None, pip requirement spec)."""
    from boto3.exceptions import S3UploadFailedError
    from botocore.exceptions import BotoCoreError, ClientError

    with tempfile.TemporaryDirectory(prefix="advisor-launch-") as tmp:
        wheel, spec = resolve_package(req.package, Path(tmp))
        if wheel is None:
            return None, spec
        package_key = req.s3.key(run_id, "package", wheel.name)
        try:
            s3.upload_file(str(wheel), req.s3.bucket, package_key)
        except (ClientError, BotoCoreError) as e:
            raise aws.user_error(e, f"uploading the package to {req.s3}") from None
        except S3UploadFailedError as e:  # the transfer manager's wrapper of client errors
            raise AdvisorError(f"uploading the package to {req.s3}: {error_line(e)}") from None
        except OSError as e:  # the wheel went away since it was checked
            raise AdvisorError(f"--package {wheel}: {e.strerror or e}") from None
    return package_key, None


def upload_code(s3, req: LaunchRequest, run_id: str) -> str | None:
    """The user's code bundle (advisor/ec2/code.py) uploaded beside the package; its S3 key, or None
    when the launch ships no code."""
    code = check_code(req.code, req.workload, req.requirements, req.config)
    if code is None:
        return None
    key = req.s3.key(run_id, "code", BUNDLE_NAME)
    with tempfile.TemporaryDirectory(prefix="advisor-code-") as tmp:
        bundle = build_bundle(code, Path(tmp), req.requirements, req.config,
                              top=top_package(req.workload) if is_custom(req.workload) else None)
        _upload(s3, bundle, req.s3.bucket, key, f"your code to {req.s3}")
    return key


def _upload(s3, path: Path, bucket: str, key: str, what: str) -> None:
    from boto3.exceptions import S3UploadFailedError
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        s3.upload_file(str(path), bucket, key)
    except (ClientError, BotoCoreError) as e:
        raise aws.user_error(e, f"uploading {what}") from None
    except S3UploadFailedError as e:  # the transfer manager's wrapper of client errors
        raise AdvisorError(f"uploading {what}: {error_line(e)}") from None


def new_manifest(req: LaunchRequest, run_id: str, to_launch: list[PlannedLaunch], package: str,
                 code: str | None = None) -> RunManifest:
    m = RunManifest(
        run_id=run_id,
        region=req.region,
        bucket=req.s3.bucket,
        prefix=req.s3.key(run_id),
        workload=req.workload,
        probe_args=req.probe_args,
        max_minutes=req.max_minutes,
        package=package,
        code=code,
    )
    for p in to_launch:
        result_key, log_key = run_keys(req.s3, run_id, p.instance_type)
        m.entries.append(
            LaunchEntry(instance_type=p.instance_type, arch=p.arch, ami=p.ami, market=p.market,
                        usd_per_hour=p.usd_per_hour, result_key=result_key, log_key=log_key,
                        root_device=p.root_device, root_volume_gib=p.root_volume_gib, kept_volumes=p.kept_volumes)
        )
    return m


def publish_manifest(s3, req: LaunchRequest, m: RunManifest) -> None:
    """run.json on S3 tells `results pull` on another machine which types to expect."""
    from botocore.exceptions import BotoCoreError, ClientError

    key = req.s3.key(m.run_id, "run.json")
    try:
        s3.put_object(Bucket=req.s3.bucket, Key=key, Body=m.model_dump_json(indent=2).encode(),
                      ContentType="application/json")
    except (ClientError, BotoCoreError) as e:
        raise aws.user_error(e, f"writing {key}") from None


def probe_script(s3, req: LaunchRequest, run_id: str, entry: LaunchEntry,
                 package_key: str | None, spec: str | None, code_key: str | None = None) -> ProbeScript:
    """The instance's script, with presigned URLs for its uploads and the package download."""
    expires = (req.max_minutes + URL_GRACE_MINUTES) * 60

    def presign(method: str, key: str) -> str:
        return s3.generate_presigned_url(method, Params={"Bucket": req.s3.bucket, "Key": key}, ExpiresIn=expires)

    return ProbeScript(
        run_id=run_id,
        instance_type=entry.instance_type,
        workload=req.workload,
        max_minutes=req.max_minutes,
        result_url=presign("put_object", entry.result_key),
        log_url=presign("put_object", entry.log_key),
        package_url=None if package_key is None else presign("get_object", package_key),
        package_filename=None if package_key is None else package_key.rsplit("/", 1)[1],
        package_spec=spec,
        probe_args=req.probe_args,
        code_url=None if code_key is None else presign("get_object", code_key),
    )


def start_instance(ec2, req: LaunchRequest, run_id: str, entry: LaunchEntry, user_data: str) -> None:
    """RunInstances for one entry; its outcome is recorded on the entry, never raised."""
    from botocore.exceptions import BotoCoreError, ClientError

    if len(user_data.encode()) > USER_DATA_LIMIT:
        entry.state, entry.error_code = "failed", "UserDataTooLarge"
        entry.error = f"user-data is {len(user_data.encode())} bytes, over EC2's 16 KiB limit"
        return
    params = run_instances_params(req=req, run_id=run_id, instance_type=entry.instance_type,
                                  ami=entry.ami, user_data=user_data, root_device=entry.root_device,
                                  root_volume_gib=entry.root_volume_gib, kept_volumes=entry.kept_volumes)
    try:
        resp = ec2.run_instances(**params)
        inst = resp["Instances"][0]
        entry.state, entry.instance_id = "launched", inst["InstanceId"]
        entry.launched_at = inst.get("LaunchTime") or datetime.now(timezone.utc)
    except ClientError as e:
        entry.state, entry.error_code, entry.error = "failed", error_code(e), error_line(e)
        if error_code(e) not in PER_TYPE_ERRORS:
            log.warning("launch of %s failed with %s", entry.instance_type, error_code(e))
    except BotoCoreError as e:
        entry.state, entry.error_code, entry.error = "failed", type(e).__name__, error_line(e)


# ---------------------------------------------------------------- status and cancel


def find_instances(ec2, run_id: str, states: list[str] | None = None) -> list[dict[str, Any]]:
    from botocore.exceptions import BotoCoreError, ClientError

    # EC2 reads * and ? in filter values as wildcards: `cancel '*'` would reach every run.
    if not run_id or any(c in run_id for c in "*?\\"):
        raise AdvisorError(f"invalid run id {run_id!r}")
    filters = [{"Name": f"tag:{TAG_RUN}", "Values": [run_id]}, {"Name": f"tag:{TAG_ROLE}", "Values": [ROLE_PROBE]}]
    if states:
        filters.append({"Name": "instance-state-name", "Values": states})
    found = []
    try:
        for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for res in page["Reservations"]:
                found.extend(res["Instances"])
    except (ClientError, BotoCoreError) as e:
        raise aws.user_error(e, "describing instances") from None
    return found


def _market(inst: dict[str, Any]) -> str:
    return "spot" if inst.get("InstanceLifecycle") == "spot" else "on-demand"


def uploaded_keys(m: RunManifest | None, region: str) -> set[str] | None:
    """Keys under the run's prefix, or None when they cannot be listed."""
    if m is None:
        return None
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        s3 = aws.client("s3", region)
        keys: set[str] = set()
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=m.bucket, Prefix=m.prefix + "/"):
            keys.update(o["Key"] for o in page.get("Contents", []))
        return keys
    except (ClientError, BotoCoreError) as e:
        log.warning("cannot list s3://%s/%s: %s", m.bucket, m.prefix, error_line(e))
        return None


def run_status(run_id: str, region: str | None) -> list[dict[str, Any]]:
    m = manifests.load(run_id)
    region = m.region if m else aws.default_region(region)
    instances = find_instances(aws.client("ec2", region), run_id)
    keys = uploaded_keys(m, region)
    by_id = {i["InstanceId"]: i for i in instances}
    rows = []
    seen: set[str] = set()
    entries = m.entries if m else []
    for e in entries:
        inst = by_id.get(e.instance_id or "")
        seen.add(e.instance_id or "")
        rows.append({
            "instance_type": e.instance_type,
            "instance_id": e.instance_id,
            "market": e.market,
            "state": inst["State"]["Name"] if inst else ("launch failed" if e.state == "failed" else "not found"),
            "launched_at": e.launched_at,
            "result": _upload_state(keys, e.result_key, e.log_key, inst["State"]["Name"] if inst else None),
            "error": e.error,
        })
    for inst in instances:  # launched from another machine, or the manifest is gone
        if inst["InstanceId"] in seen:
            continue
        rows.append({
            "instance_type": inst["InstanceType"],
            "instance_id": inst["InstanceId"],
            "market": _market(inst),
            "state": inst["State"]["Name"],
            "launched_at": inst.get("LaunchTime"),
            "result": "unknown",
            "error": (inst.get("StateReason") or {}).get("Message") if inst["State"]["Name"] == "terminated" else None,
        })
    if not rows:
        raise AdvisorError(f"no instances tagged {TAG_RUN}={run_id} in {region} and no local manifest for that run")
    return rows


def _upload_state(keys: set[str] | None, result_key: str, log_key: str, state: str | None) -> str:
    if keys is None:
        return "unknown"
    if result_key in keys:
        return "uploaded"
    if log_key in keys:
        return "failed (log only)"
    if state in (None, "terminated", "shutting-down"):
        return "none"  # the instance is gone without uploading: spot reclaim, cancel, or no boot
    return "not yet"


def cancel_run(run_id: str, region: str | None) -> list[dict[str, Any]]:
    from botocore.exceptions import BotoCoreError, ClientError

    m = manifests.load(run_id)
    region = m.region if m else aws.default_region(region)
    ec2 = aws.client("ec2", region)
    live = find_instances(ec2, run_id, states=ACTIVE_STATES)
    if not live:
        return []
    ids = [i["InstanceId"] for i in live]
    try:
        resp = ec2.terminate_instances(InstanceIds=ids)
    except (ClientError, BotoCoreError) as e:
        raise aws.user_error(e, f"terminating {len(ids)} instance(s) of run {run_id}") from None
    types = {i["InstanceId"]: i["InstanceType"] for i in live}
    return [
        {
            "instance_type": types.get(c["InstanceId"]),
            "instance_id": c["InstanceId"],
            "previous_state": c["PreviousState"]["Name"],
            "state": c["CurrentState"]["Name"],
        }
        for c in resp["TerminatingInstances"]
    ]


