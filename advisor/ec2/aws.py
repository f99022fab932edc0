"""AWS plumbing shared by launch, status/cancel and pull: clients, the translation of AWS
failures into one-line user errors, regions, S3 locations.

boto3 is imported inside functions only (see advisor/ec2/__init__.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from catalog.aws import call

from ..errors import AdvisorError


def client(service: str, region: str | None, **config: Any):
    """A client with the project's timeouts, retries and guard (catalog/aws/call.py). Credentials
    are resolved here: missing or partial ones are a one-line AdvisorError."""
    try:
        return call.make_client(service, region, **config)
    except call.errors() as e:
        raise user_error(e, f"connecting to AWS {service}") from None


def error_code(e: Exception) -> str:
    resp = getattr(e, "response", None)  # None on botocore's HTTP errors (a read timeout)
    return (resp if isinstance(resp, dict) else {}).get("Error", {}).get("Code", type(e).__name__)


def error_line(e: Exception) -> str:
    """`Code: message` on one line, from a botocore ClientError or any exception."""
    resp = getattr(e, "response", None)
    if isinstance(resp, dict) and resp:
        err = resp.get("Error", {})
        msg = str(err.get("Message") or e)
        return f"{err.get('Code', 'Error')}: {' '.join(msg.split())}"
    return " ".join(str(e).split()) or type(e).__name__


def user_error(e: BaseException, doing: str, denied_hint: str = "") -> AdvisorError:
    """One-line AdvisorError for an AWS failure while `doing` (the translation is call.explain,
    shared with the catalog refresh)."""
    return AdvisorError(call.explain(e, doing, denied_hint=denied_hint))


def default_region(region: str | None) -> str:
    if region:
        return region
    import boto3

    try:
        r = boto3.session.Session().region_name
    except call.errors() as e:  # AWS_PROFILE names no profile
        raise user_error(e, "AWS configuration") from None
    if not r:
        raise AdvisorError("no AWS region: pass --region or set AWS_DEFAULT_REGION")
    return r


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str  # no leading or trailing slash; may be empty

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"


# An S3 bucket's name: 3 to 63 lowercase letters, digits, dots and hyphens, a letter or digit at each end.
BUCKET_PATTERN = r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$"


def parse_s3_url(url: str) -> S3Location:
    if not url.startswith("s3://"):
        raise AdvisorError(f"{url!r} is not an S3 URL: expected s3://bucket/prefix")
    bucket, _, prefix = url[5:].partition("/")
    if not re.match(BUCKET_PATTERN, bucket):
        raise AdvisorError(f"{url!r}: {bucket!r} is not a valid S3 bucket name")
    return S3Location(bucket, prefix.strip("/"))


_AWS_S3_HOST_RE = re.compile(r"s3([.-][a-z0-9-]+)*\.amazonaws\.com(\.cn)?")


def s3_client_for(bucket: str, region: str | None):
    """An S3 client in the bucket's own region, so presigned URLs are signed for it."""
    from botocore.exceptions import BotoCoreError, ClientError

    s3 = client("s3", region, signature_version="s3v4")
    try:
        resp = s3.head_bucket(Bucket=bucket)
        bucket_region = resp["ResponseMetadata"]["HTTPHeaders"].get("x-amz-bucket-region")
    except ClientError as e:
        headers = e.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        bucket_region = headers.get("x-amz-bucket-region")
        if error_code(e) in ("404", "NoSuchBucket"):
            raise AdvisorError(f"S3 bucket {bucket!r} does not exist") from None
        if error_code(e) in ("403", "AccessDenied"):
            raise AdvisorError(f"S3 bucket {bucket!r}: access denied (need s3:ListBucket, s3:GetObject, s3:PutObject)") from None
        if not bucket_region:
            raise user_error(e, f"S3 bucket {bucket!r}") from None
    except BotoCoreError as e:
        raise user_error(e, f"S3 bucket {bucket!r}") from None
    if bucket_region and bucket_region != s3.meta.region_name:
        s3 = client("s3", bucket_region, signature_version="s3v4")
    # botocore presigns virtual-host URLs on the global endpoint (bucket.s3.amazonaws.com), which
    # S3 answers with a 307 for a bucket younger than a day and refuses in opt-in regions
    # (boto/boto3#3015); curl --fail takes a 307 as success, so a result would be lost silently.
    # Forcing virtual addressing names the regional host. A dotted bucket is already presigned
    # path-style on the regional endpoint (a dotted virtual host fails S3's TLS certificate),
    # and a custom endpoint (a local S3, a VPC endpoint) is left as configured.
    host = urlsplit(s3.meta.endpoint_url).hostname or ""
    if "." not in bucket and _AWS_S3_HOST_RE.fullmatch(host):
        s3 = client("s3", s3.meta.region_name, signature_version="s3v4", s3={"addressing_style": "virtual"})
    return s3



def warn_if_temporary_credentials(expires_s: int) -> None:
    """A presigned URL dies with the credentials that signed it: with temporary ones (SSO, an
    assumed role) an upload at the end of a long probe can be refused."""
    import boto3

    from ..output import warn

    try:
        creds = boto3.session.Session().get_credentials()
    except call.errors():
        return  # the clients made before this one said what is wrong with them
    if creds is not None and creds.get_frozen_credentials().token and expires_s > 3600:
        warn(f"the presigned upload URLs are signed with temporary credentials; they stop working when those "
             f"expire, which may be before the {expires_s // 60} minutes a probe may need: long-lived "
             "credentials (or a shorter --max-minutes) avoid lost results")

