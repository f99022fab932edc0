"""How every AWS call of this project is made, and how its failures read.

One home for the botocore configuration (bounded connect and read timeouts, retries), a guard
against endpoints that do not behave like AWS (a proxy's HTML page, garbage, an endpoint that
accepts the connection and never answers, a whole command running past its deadline), and the
one translation of any boto failure into one line a user can act on. The catalog refresh
(catalog/aws/refresh.py) and the EC2 side (advisor/ec2/: launch, status, cancel, pull, the account
check) both use it; it lives in catalog because catalog never imports advisor.

boto3 and botocore are imported inside functions only: importing this module stays cheap.
"""

from __future__ import annotations

import re
import time
from typing import Any

from safeio import parse_json

# Per attempt: a connection that takes more than CONNECT_TIMEOUT_S to open, or an answer that
# sends nothing for READ_TIMEOUT_S, is a failed attempt. Real AWS answers the calls made here in
# well under a second or two; these leave a wide margin and still stop a silent endpoint.
CONNECT_TIMEOUT_S = 10
READ_TIMEOUT_S = 20
# Attempts of one call that may end in a timeout or a dropped connection before the call fails:
# one retry covers a lost packet, and a silent endpoint costs 2 x READ_TIMEOUT_S, not botocore's
# max_attempts x 60 s (550 s measured before this guard).
TIMEOUT_ATTEMPTS = 2
# Throttling is retried by botocore's own retry modes (with backoff) up to this many attempts;
# a server error (5xx) only up to SERVER_ERROR_ATTEMPTS: an endpoint that fails three times in
# a row is not going to answer this command.
MAX_ATTEMPTS = 8
SERVER_ERROR_ATTEMPTS = 3

DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "AuthFailure",
          "UnrecognizedClientException", "InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException",
          "SignatureDoesNotMatch", "OptInRequired", "RequestExpired", "UnauthorizedException"}
THROTTLED = {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException",
             "RequestThrottled", "RequestThrottledException", "SlowDown"}


def config(mode: str = "standard", **extra: Any):
    from botocore.config import Config

    return Config(retries={"mode": mode, "max_attempts": MAX_ATTEMPTS}, connect_timeout=CONNECT_TIMEOUT_S,
                  read_timeout=READ_TIMEOUT_S, **extra)


class Deadline:
    """The time one whole command may spend on AWS calls (a catalog refresh)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def passed(self) -> bool:
        return time.monotonic() > self.at


def make_client(service: str, region: str | None, *, session=None, deadline: Deadline | None = None,
                mode: str = "standard", **extra: Any):
    """A boto3 client with this module's config and guard. Credentials are resolved here, so
    missing or partial ones raise (a BotoCoreError) here, to be translated by `explain`."""
    import boto3

    session = session or boto3.session.Session()
    try:
        client = session.client(service, region_name=region, config=config(mode, **extra))
    except ValueError as e:  # AWS_ENDPOINT_URL that is no URL ("Invalid endpoint: ...")
        raise error_classes()[2](error=_line(e)) from None
    guard(client, deadline)
    return client


# ---------------------------------------------------------------- the guard


def _error_classes():
    from botocore.exceptions import BotoCoreError

    class NotAwsResponse(BotoCoreError):
        fmt = "{endpoint_url} answered {operation} with {what}, not an AWS response"

    class DeadlineExceeded(BotoCoreError):
        fmt = "gave up after {seconds:.0f} s (the time allowed for the whole command)"

    class BadConfiguration(BotoCoreError):
        fmt = "{error}"

    return NotAwsResponse, DeadlineExceeded, BadConfiguration


_CLASSES: tuple[type, type, type] | None = None


def error_classes() -> tuple[type, type, type]:
    """(NotAwsResponse, DeadlineExceeded, BadConfiguration): BotoCoreError subclasses, made
    once, so every `except BotoCoreError` already in place catches them."""
    global _CLASSES
    if _CLASSES is None:
        _CLASSES = _error_classes()
    return _CLASSES


# S3 answers these with a body whose root element is known; an empty parse of anything else
# would read as "no objects" (rest-xml names no root in its models, so these are listed).
_REST_XML_ROOTS = {"ListObjectsV2": "ListBucketResult", "ListObjects": "ListBucketResult",
                   "CreateMultipartUpload": "InitiateMultipartUploadResult",
                   "CompleteMultipartUpload": "CompleteMultipartUploadResult"}
_XML_ROOT_RE = re.compile(rb"^\s*(?:<\?xml[^>]*\?>\s*)?<([A-Za-z_][\w.\-]*:)?([A-Za-z_][\w.\-]*)")


def _looks_like_html(body: bytes) -> bool:
    head = body[:256].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html"))


def check_response(protocol: str, operation: str, status: int, body: bytes | None) -> str | None:
    """What is wrong with an HTTP answer to an AWS call, or None when it can be AWS's.

    Checked before botocore parses it: an HTML page parses as XML with no fields (a KeyError
    later, or an empty catalog), and garbage raises botocore's ResponseParserError, which is no
    BotoCoreError. A 5xx with an empty or HTML body is left to botocore, which retries it."""
    if not isinstance(body, (bytes, bytearray)):
        return None  # a streaming body (S3 GetObject): read by the caller
    stripped = body.strip()
    if not stripped:
        return None
    if status >= 500 and stripped.startswith(b"<html>"):
        return None  # botocore's "generic error response" (a load balancer's page): a ClientError, retried
    if _looks_like_html(stripped):
        return f"an HTML page (HTTP {status})"
    if protocol in ("json", "rest-json"):
        try:
            doc = parse_json(stripped, "response")  # the one JSON reader; FileError is a ValueError
        except ValueError:
            return f"a body that is not JSON (HTTP {status})"
        return None if isinstance(doc, dict) else f"JSON that is not an object (HTTP {status})"
    # ec2, query, rest-xml
    m = _XML_ROOT_RE.match(stripped)
    if not m:
        return f"a body that is not XML (HTTP {status})"
    from xml.etree import ElementTree

    try:
        ElementTree.fromstring(stripped)
    except ElementTree.ParseError:
        return f"malformed XML (HTTP {status})"
    root = m.group(2).decode()
    if 200 <= status < 300:
        expected = f"{operation}Response" if protocol in ("ec2", "query") else _REST_XML_ROOTS.get(operation)
        if expected is not None and root != expected:
            return f"an XML document <{root}> (HTTP {status})"
    return None


def guard(client, deadline: Deadline | None = None) -> None:
    """Hook the checks above into one client's event stream."""
    from botocore.exceptions import (
        ClientError,
        ConnectionClosedError,
        ReadTimeoutError,
    )
    from botocore.exceptions import ConnectionError as NoConnection  # botocore's, not the builtin

    not_aws, too_late, _ = error_classes()
    endpoint = client.meta.endpoint_url
    protocol = client.meta.service_model.protocol

    def before_parse(operation_model, response_dict, **_):
        problem = check_response(protocol, operation_model.name, response_dict.get("status_code", 0),
                                 response_dict.get("body"))
        if problem:
            raise not_aws(endpoint_url=endpoint, operation=operation_model.name, what=problem)

    def needs_retry(attempts, operation, response=None, caught_exception=None, **_):
        # Raised here, the exception ends the call: botocore's retry handler never sees it.
        if isinstance(caught_exception, (ReadTimeoutError, NoConnection, ConnectionClosedError)) \
                and attempts >= TIMEOUT_ATTEMPTS:
            raise caught_exception
        if response is not None and response[0].status_code >= 500 and attempts >= SERVER_ERROR_ATTEMPTS:
            raise ClientError(response[1], operation.name)
        if deadline is not None and deadline.passed():
            raise too_late(seconds=deadline.seconds)

    client.meta.events.register("before-parse", before_parse)
    client.meta.events.register_first("needs-retry", needs_retry)


# ---------------------------------------------------------------- the translation


def explain(e: BaseException, doing: str, *, denied_hint: str = "") -> str:
    """One line saying what failed while `doing` and what to do about it; never a secret.

    `denied_hint` is added when AWS refused for lack of permission (which IAM actions the
    command needs)."""
    from botocore.exceptions import (
        ClientError,
        ConnectTimeoutError,
        CredentialRetrievalError,
        EndpointConnectionError,
        InvalidRegionError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
        ProfileNotFound,
        ReadTimeoutError,
        TokenRetrievalError,
        UnknownEndpointError,
    )
    from botocore.exceptions import (
        ConnectionClosedError as Closed,
    )
    from botocore.exceptions import (
        ConnectionError as NoConnection,
    )
    from botocore.parsers import ResponseParserError

    not_aws, too_late, bad_config = error_classes()
    if isinstance(e, bad_config):
        return f"{doing}: {e} (check AWS_ENDPOINT_URL and the AWS configuration)"
    if isinstance(e, PartialCredentialsError):
        return (f"{doing}: the AWS credentials are incomplete ({e}); set both AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, or use a profile (AWS_PROFILE)")
    if isinstance(e, NoCredentialsError):
        return f"{doing}: no AWS credentials found (set AWS_PROFILE, run 'aws configure', or use an instance role)"
    if isinstance(e, ProfileNotFound):
        return f"{doing}: {e} (check AWS_PROFILE and ~/.aws/config)"
    if isinstance(e, (TokenRetrievalError, CredentialRetrievalError)) or type(e).__name__.startswith("SSO"):
        return f"{doing}: the AWS credentials could not be loaded ({_line(e)}); for SSO run 'aws sso login'"
    if isinstance(e, NoRegionError):
        return f"{doing}: no AWS region (pass --region or set AWS_DEFAULT_REGION)"
    if isinstance(e, (InvalidRegionError, UnknownEndpointError)):
        return f"{doing}: {_line(e)}"
    if isinstance(e, ClientError):
        err = e.response.get("Error", {})
        code = str(err.get("Code") or "Error")
        msg = _line(str(err.get("Message") or ""))[:300]
        if code.isdigit():  # no AWS error: botocore's code is the HTTP status
            what = "an HTML error page" if "<html" in msg.lower() else (msg[:120] or "no message")
            return (f"{doing}: the endpoint answered HTTP {code} ({what}); "
                    "try again later, or check AWS_ENDPOINT_URL and any proxy")
        if code in DENIED:
            return f"{doing}: AWS refused ({code}{': ' + msg if msg else ''}){'; ' + denied_hint if denied_hint else ''}"
        if code in THROTTLED:
            return f"{doing}: AWS throttled the requests ({code}) after {MAX_ATTEMPTS} attempts; try again later"
        return f"{doing}: {code}{': ' + msg if msg else ''}"
    if isinstance(e, too_late):
        return f"{doing}: {e}; try again, or with less to do (fewer regions)"
    if isinstance(e, not_aws):
        return f"{doing}: {e}; check AWS_ENDPOINT_URL, the region and any proxy"
    if isinstance(e, ResponseParserError):
        return (f"{doing}: the endpoint's answer could not be read as an AWS response; "
                "check AWS_ENDPOINT_URL, the region and any proxy")
    if isinstance(e, (ReadTimeoutError, Closed)):
        url = getattr(e, "kwargs", {}).get("endpoint_url", "the AWS endpoint")
        return (f"{doing}: {url} accepted the connection but did not answer within {READ_TIMEOUT_S} s "
                f"({TIMEOUT_ATTEMPTS} attempts); check the network, AWS_ENDPOINT_URL and any proxy")
    if isinstance(e, (EndpointConnectionError, ConnectTimeoutError, NoConnection)):
        url = getattr(e, "kwargs", {}).get("endpoint_url", "the AWS endpoint")
        return f"{doing}: cannot reach {url} ({type(e).__name__}); check the network, the region and AWS_ENDPOINT_URL"
    return f"{doing}: {type(e).__name__}: {_line(e)[:300]}"


def _line(e: object) -> str:
    return " ".join(str(e).split())


def errors() -> tuple[type[BaseException], ...]:
    """Every exception a boto call can raise for reasons outside the program: catch these
    around calls, and `explain` them."""
    from botocore.exceptions import BotoCoreError, ClientError
    from botocore.parsers import ResponseParserError

    return (ClientError, BotoCoreError, ResponseParserError)
