"""Probe instance types on the instance types themselves: start one EC2 instance per type, each
runs `advisor probe` from its user-data and sends the result back through S3.

EC2 is the scheduler: there is no controller process. Each instance is tagged with the run id
(so `status` and `cancel` find it without local state), powers itself off when the probe ends
or when the watchdog fires, and is launched with InstanceInitiatedShutdownBehavior=terminate
so powering off ends the billing.

boto3 is imported inside functions only: `advisor.cli` imports the command module that
imports this one.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import UserError
from . import manifest as manifests
from .manifest import LaunchEntry, RunManifest
from .userdata import ProbeScript, render

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
# EC2's limit on user-data: "limited to 16 KB, in raw form, before it is base64-encoded",
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html
USER_DATA_LIMIT = 16 * 1024

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


# ---------------------------------------------------------------- AWS plumbing


def aws_client(service: str, region: str | None, **config: Any):
    import boto3
    from botocore.config import Config

    cfg = Config(retries={"mode": "standard", "max_attempts": 8}, **config)
    return boto3.client(service, region_name=region, config=cfg)


def error_code(e: Exception) -> str:
    return getattr(e, "response", {}).get("Error", {}).get("Code", type(e).__name__)


def error_line(e: Exception) -> str:
    """`Code: message` on one line, from a botocore ClientError or any exception."""
    resp = getattr(e, "response", None)
    if resp:
        err = resp.get("Error", {})
        msg = str(err.get("Message") or e)
        return f"{err.get('Code', 'Error')}: {' '.join(msg.split())}"
    return " ".join(str(e).split()) or type(e).__name__


def aws_user_error(e: Exception, doing: str) -> UserError:
    """One-line UserError for AWS failures that are the user's to fix (credentials, region,
    permissions, missing resources)."""
    from botocore.exceptions import NoCredentialsError, NoRegionError

    if isinstance(e, NoCredentialsError):
        return UserError(f"{doing}: no AWS credentials found (set AWS_PROFILE or run 'aws configure')")
    if isinstance(e, NoRegionError):
        return UserError(f"{doing}: no AWS region (pass --region or set AWS_DEFAULT_REGION)")
    return UserError(f"{doing}: {error_line(e)}")


def default_region(region: str | None) -> str:
    if region:
        return region
    import boto3

    r = boto3.session.Session().region_name
    if not r:
        raise UserError("no AWS region: pass --region or set AWS_DEFAULT_REGION")
    return r


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str  # no leading or trailing slash; may be empty

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"


_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")


def parse_s3_url(url: str) -> S3Location:
    if not url.startswith("s3://"):
        raise UserError(f"{url!r} is not an S3 URL: expected s3://bucket/prefix")
    bucket, _, prefix = url[5:].partition("/")
    if not _BUCKET_RE.match(bucket):
        raise UserError(f"{url!r}: {bucket!r} is not a valid S3 bucket name")
    return S3Location(bucket, prefix.strip("/"))


_AWS_S3_HOST_RE = re.compile(r"s3([.-][a-z0-9-]+)*\.amazonaws\.com(\.cn)?")


def s3_client_for(bucket: str, region: str | None):
    """An S3 client in the bucket's own region, so presigned URLs are signed for it."""
    from botocore.exceptions import BotoCoreError, ClientError

    s3 = aws_client("s3", region, signature_version="s3v4")
    try:
        resp = s3.head_bucket(Bucket=bucket)
        bucket_region = resp["ResponseMetadata"]["HTTPHeaders"].get("x-amz-bucket-region")
    except ClientError as e:
        headers = e.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        bucket_region = headers.get("x-amz-bucket-region")
        if error_code(e) in ("404", "NoSuchBucket"):
            raise UserError(f"S3 bucket {bucket!r} does not exist") from None
        if error_code(e) in ("403", "AccessDenied"):
            raise UserError(f"S3 bucket {bucket!r}: access denied (need s3:ListBucket, s3:GetObject, s3:PutObject)") from None
        if not bucket_region:
            raise aws_user_error(e, f"S3 bucket {bucket!r}") from None
    except BotoCoreError as e:
        raise aws_user_error(e, f"S3 bucket {bucket!r}") from None
    if bucket_region and bucket_region != s3.meta.region_name:
        s3 = aws_client("s3", bucket_region, signature_version="s3v4")
    # botocore presigns virtual-host URLs on the global endpoint (bucket.s3.amazonaws.com), which
    # S3 answers with a 307 for a bucket younger than a day and refuses in opt-in regions
    # (boto/boto3#3015); curl --fail takes a 307 as success, so a result would be lost silently.
    # Forcing virtual addressing names the regional host. A dotted bucket is already presigned
    # path-style on the regional endpoint (a dotted virtual host fails S3's TLS certificate),
    # and a custom endpoint (a local S3, a VPC endpoint) is left as configured.
    host = urlsplit(s3.meta.endpoint_url).hostname or ""
    if "." not in bucket and _AWS_S3_HOST_RE.fullmatch(host):
        s3 = aws_client("s3", s3.meta.region_name, signature_version="s3v4", s3={"addressing_style": "virtual"})
    return s3


# ---------------------------------------------------------------- planning


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


@dataclass
class LaunchRequest:
    instance_types: list[str]
    s3: S3Location
    region: str
    market: str = "on-demand"
    workload: str = "resnet50"
    probe_args: list[str] = field(default_factory=list)
    max_minutes: int = 45
    max_instances: int = 8
    ami: str | None = None
    subnet: str | None = None
    security_group: str | None = None
    iam_instance_profile: str | None = None
    package: str | None = None


# name-version(-build)?-python-abi-platform.whl (the binary distribution format): pip refuses
# any other name, and the name goes into the user-data script.
_WHEEL_NAME_RE = re.compile(r"[A-Za-z0-9_.]+-[A-Za-z0-9_.!+]+(-\d[A-Za-z0-9_.]*)?(-[A-Za-z0-9_.]+){3}\.whl")

# Options the launcher sets itself; a user passing them in --probe-args would contradict it.
_RESERVED_PROBE_ARGS = ("--workload", "--instance-type", "--output")


def validate_request(req: LaunchRequest) -> None:
    types = req.instance_types
    if not types:
        raise UserError("--instance-types is empty: give one or more types, e.g. g5.xlarge,g6.xlarge")
    dupes = sorted({t for t in types if types.count(t) > 1})
    if dupes:
        raise UserError(f"--instance-types names {dupes[0]} more than once")
    bad = [t for t in types if not re.fullmatch(r"[a-z0-9][a-z0-9\-]*\.[a-z0-9\-]+", t)]
    if bad:
        raise UserError(f"{bad[0]!r} is not an instance type name (like g5.xlarge)")
    if len(types) > req.max_instances:
        raise UserError(
            f"{len(types)} instance types would start {len(types)} instances, more than "
            f"--max-instances {req.max_instances}; raise --max-instances if you mean it"
        )
    if req.package is not None:
        _check_package(req.package)
    if req.max_minutes < 5 or req.max_minutes > 24 * 60:
        raise UserError(f"--max-minutes {req.max_minutes} is out of range (5 to 1440)")
    for a in req.probe_args:
        if a.split("=", 1)[0] in _RESERVED_PROBE_ARGS:
            raise UserError(f"--probe-args must not contain {a.split('=', 1)[0]}: launch sets it")
    from pydantic import ValidationError

    from lightning_module.result import WorkloadSpec

    try:
        WorkloadSpec(model=req.workload)
    except ValidationError as e:
        raise UserError(str(e.errors()[0]["msg"]).removeprefix("Value error, ")) from None


def _is_local_package(package: str) -> bool:
    return package.endswith(".whl") or Path(package).exists()


def _check_package(package: str) -> None:
    """Checked here, before anything starts or is confirmed: otherwise every instance boots,
    then pip fails."""
    if _is_local_package(package):
        wheel = Path(package)
        if wheel.suffix != ".whl":
            raise UserError(f"--package {package}: a local package must be a .whl file")
        if not _WHEEL_NAME_RE.fullmatch(wheel.name):
            raise UserError(f"--package {package}: {wheel.name!r} is not a wheel file name "
                            "(name-version-python-abi-platform.whl), which pip on the instance would refuse")
        if not wheel.is_file():
            raise UserError(f"--package {package}: no such wheel file")
    elif not package.strip() or any(c in package for c in "\n\r\0"):
        raise UserError(f"--package {package!r} is not a pip requirement")


def instance_architectures(ec2, types: list[str]) -> dict[str, str]:
    from botocore.exceptions import BotoCoreError, ClientError

    archs: dict[str, str] = {}
    try:
        for page in ec2.get_paginator("describe_instance_types").paginate(InstanceTypes=types):
            for it in page["InstanceTypes"]:
                supported = it.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
                archs[it["InstanceType"]] = "arm64" if "arm64" in supported and "x86_64" not in supported else "x86_64"
    except ClientError as e:
        if error_code(e) == "InvalidInstanceType":
            raise UserError(error_line(e)) from None
        raise aws_user_error(e, "describing instance types") from None
    except BotoCoreError as e:
        raise aws_user_error(e, "describing instance types") from None
    missing = [t for t in types if t not in archs]
    if missing:
        raise UserError(f"instance type {missing[0]} is not offered in {ec2.meta.region_name}")
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
        raise UserError(
            f"cannot look up the Deep Learning AMI for {arch} ({error_line(e)}); "
            "grant ssm:GetParametersByPath or pass --ami"
        ) from None
    if best is None:
        raise UserError(
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
    """EC2's own permission and parameter check. Raises UserError when the caller may not
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
            raise UserError(f"not allowed to launch instances: {error_line(e)}") from None
        return error_line(e)
    except BotoCoreError as e:
        raise aws_user_error(e, "EC2 dry-run check") from None
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
            raise UserError(f"AMI not found in {ec2.meta.region_name}: {error_line(e)}") from None
        log.warning("cannot describe %s (%s): root volumes keep the AMI's DeleteOnTermination", sorted(amis), error_line(e))
        return {}
    except BotoCoreError as e:
        raise aws_user_error(e, "describing AMIs") from None
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
    prices and a DryRun check per type."""
    validate_request(req)
    s3_client_for(req.s3.bucket, req.region)  # the bucket exists and is reachable
    _warn_if_temporary_credentials((req.max_minutes + URL_GRACE_MINUTES) * 60)  # before the confirmation
    ec2 = aws_client("ec2", req.region)
    archs = instance_architectures(ec2, req.instance_types)
    amis: dict[str, str] = {}
    if req.ami:
        amis = {a: req.ami for a in set(archs.values())}
    else:
        ssm = aws_client("ssm", req.region)
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
        if f.arch and f.arch != p.arch:
            p.check_error = f"AMI {p.ami} is {f.arch}; {t} needs {p.arch} (give --ami per architecture: launch them separately)"
        else:
            params = run_instances_params(req=req, run_id="dry-run", instance_type=t, ami=p.ami, user_data=None,
                                          root_device=p.root_device, root_volume_gib=p.root_volume_gib,
                                          kept_volumes=p.kept_volumes)
            p.check_error = dry_run_check(ec2, params)
        plan.append(p)
    return plan


# ---------------------------------------------------------------- the package


def project_root() -> Path | None:
    """The source tree this advisor runs from, or None for an installed (non-editable) copy."""
    root = Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and 'name = "instance-advisor"' in pyproject.read_text():
        return root
    return None


_SOURCE_PARTS = ("pyproject.toml", "README.md", "advisor", "catalog", "lightning_module")


def build_wheel(dest: Path) -> Path:
    """Build a wheel of this installation's source. The tree is copied first so the build
    leaves no build/ or egg-info behind in the user's checkout."""
    root = project_root()
    if root is None:
        raise UserError("this advisor is not installed from a source tree: pass --package (a wheel or a pip requirement)")
    src = dest / "src"
    src.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for part in _SOURCE_PARTS:
        p = root / part
        if p.is_dir():
            shutil.copytree(p, src / part, ignore=ignore)
        elif p.is_file():
            shutil.copy2(p, src / part)
    out = dest / "wheel"
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--isolated", "-q", "-w", str(out), str(src)]
    import importlib.util

    if importlib.util.find_spec("setuptools") is not None:
        cmd.insert(cmd.index("--isolated"), "--no-build-isolation")  # no download of the build backend
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    wheels = sorted(out.glob("*.whl")) if out.is_dir() else []
    if proc.returncode != 0 or not wheels:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no wheel produced"]
        raise UserError(f"building the wheel failed: {tail[0]}; pass --package to use a built one")
    return wheels[0]


def resolve_package(package: str | None, workdir: Path) -> tuple[Path | None, str | None]:
    """(wheel file to upload, None) or (None, pip requirement spec); validate_request has
    checked either."""
    if package is None:
        return build_wheel(workdir), None
    if _is_local_package(package):
        return Path(package), None
    return None, package


# ---------------------------------------------------------------- launching


def _warn_if_temporary_credentials(expires_s: int) -> None:
    """A presigned URL dies with the credentials that signed it: with temporary ones (SSO, an
    assumed role) an upload at the end of a long probe can be refused."""
    import boto3

    from ..output import warn

    creds = boto3.session.Session().get_credentials()
    if creds is not None and creds.get_frozen_credentials().token and expires_s > 3600:
        warn(f"the presigned upload URLs are signed with temporary credentials; they stop working when those "
             f"expire, which may be before the {expires_s // 60} minutes a probe may need: long-lived "
             "credentials (or a shorter --max-minutes) avoid lost results")


def run_keys(s3: S3Location, run_id: str, instance_type: str) -> tuple[str, str]:
    return s3.key(run_id, instance_type, "result.json"), s3.key(run_id, instance_type, "probe.log")


def execute(
    req: LaunchRequest,
    plan: list[PlannedLaunch],
    *,
    run_id: str | None = None,
    on_launch: Callable[[LaunchEntry], None] | None = None,
) -> RunManifest:
    """Upload the package, write the manifest, start one instance per planned type."""
    from boto3.exceptions import S3UploadFailedError
    from botocore.exceptions import BotoCoreError, ClientError

    to_launch = [p for p in plan if p.check_error is None]
    if not to_launch:
        raise UserError("no instance type passed the EC2 DryRun check; nothing launched")
    run_id = run_id or manifests.new_run_id()
    s3 = s3_client_for(req.s3.bucket, req.region)
    expires = (req.max_minutes + URL_GRACE_MINUTES) * 60

    with tempfile.TemporaryDirectory(prefix="advisor-launch-") as tmp:
        wheel, spec = resolve_package(req.package, Path(tmp))
        package_key = None
        try:
            if wheel is not None:
                package_key = req.s3.key(run_id, "package", wheel.name)
                s3.upload_file(str(wheel), req.s3.bucket, package_key)
        except (ClientError, BotoCoreError) as e:
            raise aws_user_error(e, f"uploading the package to {req.s3}") from None
        except S3UploadFailedError as e:  # the transfer manager's wrapper of client errors
            raise UserError(f"uploading the package to {req.s3}: {error_line(e)}") from None
        except OSError as e:  # the wheel went away since it was checked
            raise UserError(f"--package {wheel}: {e.strerror or e}") from None

    m = RunManifest(
        run_id=run_id,
        region=req.region,
        bucket=req.s3.bucket,
        prefix=req.s3.key(run_id),
        workload=req.workload,
        probe_args=req.probe_args,
        max_minutes=req.max_minutes,
        package=package_key or spec or "",
    )
    for p in to_launch:
        result_key, log_key = run_keys(req.s3, run_id, p.instance_type)
        m.entries.append(
            LaunchEntry(instance_type=p.instance_type, arch=p.arch, ami=p.ami, market=p.market,
                        usd_per_hour=p.usd_per_hour, result_key=result_key, log_key=log_key,
                        root_device=p.root_device, root_volume_gib=p.root_volume_gib, kept_volumes=p.kept_volumes)
        )
    manifests.save(m)
    try:
        s3.put_object(
            Bucket=req.s3.bucket,
            Key=req.s3.key(run_id, "run.json"),
            Body=m.model_dump_json(indent=2).encode(),
            ContentType="application/json",
        )
    except (ClientError, BotoCoreError) as e:
        raise aws_user_error(e, f"writing {req.s3.key(run_id, 'run.json')}") from None

    ec2 = aws_client("ec2", req.region)
    for entry in m.entries:
        presign = s3.generate_presigned_url
        script = ProbeScript(
            run_id=run_id,
            instance_type=entry.instance_type,
            workload=req.workload,
            max_minutes=req.max_minutes,
            result_url=presign("put_object", Params={"Bucket": req.s3.bucket, "Key": entry.result_key}, ExpiresIn=expires),
            log_url=presign("put_object", Params={"Bucket": req.s3.bucket, "Key": entry.log_key}, ExpiresIn=expires),
            package_url=None if package_key is None else presign(
                "get_object", Params={"Bucket": req.s3.bucket, "Key": package_key}, ExpiresIn=expires
            ),
            package_filename=None if package_key is None else package_key.rsplit("/", 1)[1],
            package_spec=spec,
            probe_args=req.probe_args,
        )
        user_data = render(script)
        if len(user_data.encode()) > USER_DATA_LIMIT:
            entry.state, entry.error_code = "failed", "UserDataTooLarge"
            entry.error = f"user-data is {len(user_data.encode())} bytes, over EC2's 16 KiB limit"
        else:
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
        manifests.save(m)
        if on_launch is not None:
            on_launch(entry)
    return m


# ---------------------------------------------------------------- status and cancel


def find_instances(ec2, run_id: str, states: list[str] | None = None) -> list[dict[str, Any]]:
    from botocore.exceptions import BotoCoreError, ClientError

    # EC2 reads * and ? in filter values as wildcards: `cancel '*'` would reach every run.
    if not run_id or any(c in run_id for c in "*?\\"):
        raise UserError(f"invalid run id {run_id!r}")
    filters = [{"Name": f"tag:{TAG_RUN}", "Values": [run_id]}, {"Name": f"tag:{TAG_ROLE}", "Values": [ROLE_PROBE]}]
    if states:
        filters.append({"Name": "instance-state-name", "Values": states})
    found = []
    try:
        for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for res in page["Reservations"]:
                found.extend(res["Instances"])
    except (ClientError, BotoCoreError) as e:
        raise aws_user_error(e, "describing instances") from None
    return found


def _market(inst: dict[str, Any]) -> str:
    return "spot" if inst.get("InstanceLifecycle") == "spot" else "on-demand"


def uploaded_keys(m: RunManifest | None, region: str) -> set[str] | None:
    """Keys under the run's prefix, or None when they cannot be listed."""
    if m is None:
        return None
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        s3 = aws_client("s3", region)
        keys: set[str] = set()
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=m.bucket, Prefix=m.prefix + "/"):
            keys.update(o["Key"] for o in page.get("Contents", []))
        return keys
    except (ClientError, BotoCoreError) as e:
        log.warning("cannot list s3://%s/%s: %s", m.bucket, m.prefix, error_line(e))
        return None


def run_status(run_id: str, region: str | None) -> list[dict[str, Any]]:
    m = manifests.load(run_id)
    region = m.region if m else default_region(region)
    instances = find_instances(aws_client("ec2", region), run_id)
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
        raise UserError(f"no instances tagged {TAG_RUN}={run_id} in {region} and no local manifest for that run")
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
    region = m.region if m else default_region(region)
    ec2 = aws_client("ec2", region)
    live = find_instances(ec2, run_id, states=ACTIVE_STATES)
    if not live:
        return []
    ids = [i["InstanceId"] for i in live]
    try:
        resp = ec2.terminate_instances(InstanceIds=ids)
    except (ClientError, BotoCoreError) as e:
        raise aws_user_error(e, f"terminating {len(ids)} instance(s) of run {run_id}") from None
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


