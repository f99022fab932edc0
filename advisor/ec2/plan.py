"""The launch plan: the request, its validation, and everything short of starting an instance
(architectures, the Deep Learning AMI, the AMI's volumes, prices, EC2's DryRun check per type).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import AdvisorError
from ..output import warn
from . import MAX_INSTANCES, MAX_MINUTES, MAX_WATCHDOG_MINUTES, MIN_MINUTES, aws
from .aws import S3Location, error_code, error_line
from .code import check_code
from .package import check_package

log = logging.getLogger(__name__)

TAG_RUN = "instance-advisor:run-id"
TAG_WORKLOAD = "instance-advisor:workload"
TAG_ROLE = "instance-advisor:role"
ROLE_PROBE = "probe"

# The PyTorch Deep Learning AMI (CUDA torch in /opt/pytorch, NVIDIA driver), per architecture,
# looked up through its public SSM parameters. The torch version is part of the parameter
# name and moves on, so the newest one present is picked rather than a pinned name; see
# https://docs.aws.amazon.com/dlami/latest/devguide/find-dlami-id.html
DLAMI_PARAMETER_PATH = "/aws/service/deeplearning/ami/{arch}/"
DLAMI_PARAMETER_RE = re.compile(
    r"/oss-nvidia-driver-gpu-pytorch-(\d+)\.(\d+)-ubuntu-(\d+)\.(\d+)/latest/ami-id$"
)

# Presigned URLs outlive the watchdog by this much: they are signed before RunInstances, and
# the --max-minutes clock starts only when the user-data runs (pending, boot, cloud-init). The
# uploads themselves end before the watchdog (userdata.ProbeScript.upload_reserve_s). 20 minutes
# is a chosen margin for that start-up, not a measurement of it.
URL_GRACE_MINUTES = 20


@dataclass
class PlannedLaunch:
    instance_type: str
    arch: str
    ami: str
    market: str
    usd_per_hour: float | None
    max_cost_usd: float | None
    check_error: str | None = None  # the DryRun check failed for this type: it is skipped
    root_device: str | None = None  # set when the AMI would keep its root volume after termination
    root_volume_gib: int | None = None
    kept_volumes: dict[str, int | None] = field(default_factory=dict)  # other EBS devices the AMI would keep: GiB

    def row(self) -> dict[str, Any]:
        return {
            "instance_type": self.instance_type,
            "arch": self.arch,
            "ami": self.ami,
            "market": self.market,
            "usd_per_hour": self.usd_per_hour if self.usd_per_hour is not None else "unknown",
            "max_cost_usd": round(self.max_cost_usd, 2) if self.max_cost_usd is not None else "unknown",
            "check": self.check_error or "ok",
        }


def launchable(plan: list[PlannedLaunch]) -> list[PlannedLaunch]:
    """The planned launches that passed their checks; none is an AdvisorError (launch's CLI says so
    before it asks for confirmation, execute() before it uploads anything)."""
    ok = [p for p in plan if p.check_error is None]
    if not ok:
        raise AdvisorError("no instance type passed the checks (quota, AMI, EC2 DryRun); nothing launched")
    return ok


@dataclass
class LaunchRequest:
    instance_types: list[str]
    s3: S3Location
    region: str
    market: str = "on-demand"
    workload: str = "resnet50"
    probe_args: list[str] = field(default_factory=list)
    max_minutes: int = MAX_MINUTES
    max_instances: int = MAX_INSTANCES
    ami: str | None = None
    subnet: str | None = None
    security_group: str | None = None
    iam_instance_profile: str | None = None
    package: str | None = None
    code: str | None = None  # the user's own code (advisor/ec2/code.py): a project, a wheel or a package folder
    requirements: str | None = None  # a pip requirements file for it
    config: str | None = None  # the local --config file the probe args name (shipped in the code bundle)


# name-version(-build)?-python-abi-platform.whl (the binary distribution format): pip refuses
# any other name, and the name goes into the user-data script.
# Options the launcher sets itself; a user passing them in --probe-args would contradict it.
_RESERVED_PROBE_ARGS = ("--workload", "--instance-type", "--output")


def validate_request(req: LaunchRequest) -> None:
    types = req.instance_types
    if not types:
        raise AdvisorError("--instance-type is empty: give one or more types, e.g. g5.xlarge,g6.xlarge")
    dupes = sorted({t for t in types if types.count(t) > 1})
    if dupes:
        raise AdvisorError(f"--instance-type names {dupes[0]} more than once")
    bad = [t for t in types if not re.fullmatch(r"[a-z0-9][a-z0-9\-]*\.[a-z0-9\-]+", t)]
    if bad:
        raise AdvisorError(f"{bad[0]!r} is not an instance type name (like g5.xlarge)")
    if req.max_instances < 1:
        raise AdvisorError(f"--max-instances {req.max_instances}: must be at least 1 (it caps how many "
                           "instances one launch may start)")
    if len(types) > req.max_instances:
        raise AdvisorError(
            f"{len(types)} instance types would start {len(types)} instances, more than "
            f"--max-instances {req.max_instances}; raise --max-instances if you mean it"
        )
    if req.package is not None:
        check_package(req.package)
    check_code(req.code, req.workload, req.requirements, req.config)
    if not MIN_MINUTES <= req.max_minutes <= MAX_WATCHDOG_MINUTES:
        raise AdvisorError(f"--max-minutes {req.max_minutes} is out of range ({MIN_MINUTES} to {MAX_WATCHDOG_MINUTES})")
    for a in req.probe_args:
        if a.split("=", 1)[0] in _RESERVED_PROBE_ARGS:
            raise AdvisorError(f"--probe-args must not contain {a.split('=', 1)[0]}: launch sets it")
    from pydantic import ValidationError

    from lightning_module.contract.result import WorkloadSpec
    from safeio import first_error

    try:
        WorkloadSpec(model=req.workload)
    except ValidationError as e:
        raise AdvisorError(first_error(e).msg) from None



def describe_types(ec2, types: list[str]) -> dict[str, tuple[str, int]]:
    """Instance type -> (architecture, vCPUs), from DescribeInstanceTypes."""
    from botocore.exceptions import BotoCoreError, ClientError

    archs: dict[str, tuple[str, int]] = {}
    try:
        for page in ec2.get_paginator("describe_instance_types").paginate(InstanceTypes=types):
            for it in page.get("InstanceTypes", []):
                supported = it.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
                arch = "arm64" if "arm64" in supported and "x86_64" not in supported else "x86_64"
                archs[it["InstanceType"]] = (arch, int(it.get("VCpuInfo", {}).get("DefaultVCpus") or 0))
    except ClientError as e:
        if error_code(e) == "InvalidInstanceType":
            raise AdvisorError(error_line(e)) from None
        raise aws.user_error(e, "describing instance types") from None
    except BotoCoreError as e:
        raise aws.user_error(e, "describing instance types") from None
    missing = [t for t in types if t not in archs]
    if missing:
        raise AdvisorError(f"instance type {missing[0]} is not offered in {ec2.meta.region_name}")
    return archs


def resolve_dlami(ssm, arch: str) -> tuple[str, str]:
    """(AMI id, parameter name) of the newest PyTorch DLAMI for `arch` in the client's region."""
    from botocore.exceptions import BotoCoreError, ClientError

    best: tuple[tuple[int, ...], str, str] | None = None
    try:
        pages = ssm.get_paginator("get_parameters_by_path").paginate(
            Path=DLAMI_PARAMETER_PATH.format(arch=arch), Recursive=True
        )
        for page in pages:
            for p in page["Parameters"]:
                m = DLAMI_PARAMETER_RE.search(p["Name"])
                if m:
                    key = tuple(int(g) for g in m.groups())
                    if best is None or key > best[0]:
                        best = (key, p["Value"], p["Name"])
    except (ClientError, BotoCoreError) as e:
        raise AdvisorError(
            f"cannot look up the Deep Learning AMI for {arch} ({error_line(e)}); "
            "grant ssm:GetParametersByPath or pass --ami"
        ) from None
    if best is None:
        raise AdvisorError(
            f"no PyTorch Deep Learning AMI parameter under {DLAMI_PARAMETER_PATH.format(arch=arch)} "
            f"in {ssm.meta.region_name}; pass --ami"
        )
    return best[1], best[2]


def catalog_prices(catalog, region: str, market: str, types: Iterable[str]) -> dict[str, float | None]:
    """Price per hour from the catalog's columns; None where the catalog has no offer."""
    wanted = set(types)
    prices: dict[str, float | None] = dict.fromkeys(wanted)
    ro = catalog.offers.get(region) if catalog is not None else None
    if ro is not None:
        for t, m, usd in zip(ro.instance_type, ro.market, ro.usd_per_hour):
            if t in wanted and m == market:
                prices[t] = usd
    return prices


def run_instances_params(
    *,
    req: LaunchRequest,
    run_id: str,
    instance_type: str,
    ami: str,
    user_data: str | None,
    root_device: str | None = None,
    root_volume_gib: int | None = None,
    kept_volumes: dict[str, int | None] | None = None,
) -> dict[str, Any]:
    tags = [
        {"Key": TAG_RUN, "Value": run_id},
        {"Key": TAG_WORKLOAD, "Value": req.workload[:256]},
        {"Key": TAG_ROLE, "Value": ROLE_PROBE},
        {"Key": "Name", "Value": f"advisor-probe {instance_type} {run_id}"},
    ]
    params: dict[str, Any] = {
        "ImageId": ami,
        "InstanceType": instance_type,
        "MinCount": 1,
        "MaxCount": 1,
        "InstanceInitiatedShutdownBehavior": "terminate",
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": tags},
            {"ResourceType": "volume", "Tags": tags},
        ],
        # IMDSv2 only: the probe reads its instance type through a session token.
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
    }
    if root_device:
        # Whatever the AMI says, the root volume goes with the instance: no orphaned EBS bill.
        ebs: dict[str, Any] = {"DeleteOnTermination": True}
        if root_volume_gib:
            ebs["VolumeSize"] = root_volume_gib
        params["BlockDeviceMappings"] = [{"DeviceName": root_device, "Ebs": ebs}]
    for device, gib in (kept_volumes or {}).items():  # the AMI's snapshot and size; only the deletion changes
        ebs = {"DeleteOnTermination": True, **({"VolumeSize": gib} if gib else {})}
        params.setdefault("BlockDeviceMappings", []).append({"DeviceName": device, "Ebs": ebs})
    if user_data is not None:
        params["UserData"] = user_data
        # botocore retries a RunInstances whose answer was lost; the token makes EC2 answer the
        # retry with the first instance instead of starting a second one.
        params["ClientToken"] = f"{run_id}:{instance_type}"[:64]
    if req.market == "spot":
        params["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
        }
    if req.subnet:
        params["SubnetId"] = req.subnet
    if req.security_group:
        params["SecurityGroupIds"] = [req.security_group]
    if req.iam_instance_profile:
        params["IamInstanceProfile"] = {"Name": req.iam_instance_profile}
    return params


def dry_run_check(ec2, params: dict[str, Any]) -> str | None:
    """EC2's own permission and parameter check. Raises AdvisorError when the caller may not
    launch at all; returns an error line (not raised) when only this type is refused."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        ec2.run_instances(DryRun=True, **params)
    except ClientError as e:
        code = error_code(e)
        if code == "DryRunOperation":
            return None
        if code in ("UnauthorizedOperation", "AuthFailure", "UnrecognizedClientException",
                    "InvalidClientTokenId", "ExpiredToken", "RequestExpired"):
            raise AdvisorError(f"not allowed to launch instances: {error_line(e)}") from None
        return error_line(e)
    except BotoCoreError as e:
        raise aws.user_error(e, "EC2 dry-run check") from None
    return "the DryRun check did not answer DryRunOperation"


@dataclass
class AmiFacts:
    arch: str | None = None
    root_override: tuple[str, int | None] | None = None  # (device, GiB) when the root volume would be kept
    kept_volumes: dict[str, int | None] = field(default_factory=dict)  # non-root EBS devices that would be kept: GiB


def describe_amis(ec2, amis: set[str]) -> dict[str, AmiFacts]:
    """Each AMI's architecture, and (device, size) of every EBS volume that would outlive the
    instance (DeleteOnTermination false: common for data volumes of an AMI made from an
    instance), which the launch then overrides. An AMI that cannot be described is left to its
    own mapping and to EC2's DryRun check."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        images = ec2.describe_images(ImageIds=sorted(amis))["Images"]
    except ClientError as e:
        if error_code(e).startswith("InvalidAMIID"):
            raise AdvisorError(f"AMI not found in {ec2.meta.region_name}: {error_line(e)}") from None
        log.warning("cannot describe %s (%s): root volumes keep the AMI's DeleteOnTermination", sorted(amis), error_line(e))
        return {}
    except BotoCoreError as e:
        raise aws.user_error(e, "describing AMIs") from None
    out: dict[str, AmiFacts] = {}
    for img in images:
        facts = out[img["ImageId"]] = AmiFacts(arch=img.get("Architecture"))
        root = img.get("RootDeviceName")
        for bdm in img.get("BlockDeviceMappings", []):
            ebs = bdm.get("Ebs")
            if not ebs or ebs.get("DeleteOnTermination", False):
                continue
            if root and bdm.get("DeviceName") == root:
                facts.root_override = (root, ebs.get("VolumeSize"))
            elif bdm.get("DeviceName"):
                facts.kept_volumes[bdm["DeviceName"]] = ebs.get("VolumeSize")
    return out


def plan_launch(req: LaunchRequest, catalog=None) -> list[PlannedLaunch]:
    """Everything short of starting instances: validation, the bucket, architectures, AMIs,
    prices, the vCPU quotas and a DryRun check per type."""
    from . import account

    validate_request(req)
    aws.s3_client_for(req.s3.bucket, req.region)  # the bucket exists and is reachable
    aws.warn_if_temporary_credentials((req.max_minutes + URL_GRACE_MINUTES) * 60)  # before the confirmation
    ec2 = aws.client("ec2", req.region)
    described = describe_types(ec2, req.instance_types)
    archs = {t: arch for t, (arch, _) in described.items()}
    quotas = account.Account(cache_seconds=0, purpose="the launch's quota check")
    over_quota = account.launch_refusals(req.region, req.market, {t: v for t, (_, v) in described.items()}, quotas)
    for w in quotas.warnings:
        warn(f"{w}: the launch may still fail on a vCPU limit")
    amis: dict[str, str] = {}
    if req.ami:
        amis = {a: req.ami for a in set(archs.values())}
    else:
        ssm = aws.client("ssm", req.region)
        for arch in sorted(set(archs.values())):
            amis[arch], name = resolve_dlami(ssm, arch)
            log.info("AMI for %s: %s (%s)", arch, amis[arch], name)
    facts = describe_amis(ec2, set(amis.values()))
    prices = catalog_prices(catalog, req.region, req.market, req.instance_types)
    plan = []
    for t in req.instance_types:
        price = prices.get(t)
        p = PlannedLaunch(
            instance_type=t,
            arch=archs[t],
            ami=amis[archs[t]],
            market=req.market,
            usd_per_hour=price,
            max_cost_usd=None if price is None else price * req.max_minutes / 60,
        )
        f = facts.get(p.ami, AmiFacts())
        p.root_device, p.root_volume_gib = f.root_override or (None, None)
        p.kept_volumes = dict(f.kept_volumes)
        if t in over_quota:  # before its DryRun: EC2's DryRun does not check quotas
            p.check_error = over_quota[t]
        elif f.arch and f.arch != p.arch:
            p.check_error = f"AMI {p.ami} is {f.arch}; {t} needs {p.arch} (give --ami per architecture: launch them separately)"
        else:
            params = run_instances_params(req=req, run_id="dry-run", instance_type=t, ami=p.ami, user_data=None,
                                          root_device=p.root_device, root_volume_gib=p.root_volume_gib,
                                          kept_volumes=p.kept_volumes)
            failed = dry_run_check(ec2, params)
            p.check_error = f"the EC2 DryRun check failed: {failed}" if failed else None
        plan.append(p)
    return plan

