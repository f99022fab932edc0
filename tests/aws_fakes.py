"""What moto lacks, served in-process: EC2's Service Quotas and GetSpotPlacementScores.

moto 5.2's Service Quotas backend knows only VPC quotas, and GetSpotPlacementScores raises
NotImplementedError. Clients made through advisor.ec2.aws.client get a botocore before-call
hook (the mechanism botocore's own Stubber uses) that answers those two operations from plain
dicts the test controls; every other call goes on to moto (or wherever it goes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from advisor.ec2 import aws as ec2_aws
from advisor.ec2.quotas import CLASSES

NAMES = {q.code: q.name for c in CLASSES for q in (c.on_demand, c.spot) if q}


@dataclass
class FakeAccount:
    quotas: dict[str, float] = field(default_factory=lambda: dict.fromkeys(NAMES, 1024.0))  # code -> vCPUs
    scores: dict[str, int] = field(default_factory=dict)  # region -> spot placement score
    deny: set[str] = field(default_factory=set)  # operation names answered AccessDenied
    calls: list[tuple[str, dict]] = field(default_factory=list)  # (operation, params)


def serve_account(monkeypatch, account: FakeAccount | None = None) -> FakeAccount:
    from botocore.awsrequest import AWSResponse
    from botocore.exceptions import ClientError

    account = account or FakeAccount()
    real = ec2_aws.client
    asked: dict[str, dict] = {}  # operation -> its API parameters (before-call sees the HTTP request)

    def remember(params, model, **_):
        asked[model.name] = dict(params)

    def answer(model, **_):
        params = asked.pop(model.name, {})
        account.calls.append((model.name, params))
        if model.name in account.deny:
            code = "UnauthorizedOperation" if model.name == "GetSpotPlacementScores" else "AccessDeniedException"
            raise ClientError({"Error": {"Code": code, "Message": f"not allowed to {model.name}"}}, model.name)
        if model.name == "ListServiceQuotas":
            body = {"Quotas": [{"ServiceCode": "ec2", "QuotaCode": code, "QuotaName": NAMES.get(code, code),
                                "Value": v} for code, v in account.quotas.items()]}
        else:
            body = {"SpotPlacementScores": [{"Region": r, "Score": s} for r, s in account.scores.items()
                                            if r in params.get("RegionNames", [])]}
        return AWSResponse(None, 200, {}, None), body

    def client(service, region, **cfg):
        c = real(service, region, **cfg)
        for svc, op in (("service-quotas", "ListServiceQuotas"), ("ec2", "GetSpotPlacementScores")):
            if service == svc:
                c.meta.events.register(f"before-parameter-build.{svc}.{op}", remember)
                c.meta.events.register_first(f"before-call.{svc}.{op}", answer)
        return c

    monkeypatch.setattr(ec2_aws, "client", client)
    return account


def put_public_parameter(name: str, value: str, region: str = "us-east-1") -> None:
    """moto refuses put_parameter under /aws (as AWS does): add the public parameter to its
    backend the way moto loads its own /aws/service parameters."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ssm.models import Parameter, ssm_backends

    backend = ssm_backends[DEFAULT_ACCOUNT_ID][region]
    backend._parameters[name].append(
        Parameter(account_id=DEFAULT_ACCOUNT_ID, name=name, value=value, parameter_type="String",
                  description=None, allowed_pattern=None, keyid=None,
                  last_modified_date=datetime.now(timezone.utc), version=1, data_type="text")
    )


class LocalServer:
    """An HTTP server on 127.0.0.1, on a free port, in a thread: `answer(handler)` writes each
    reply (any method). `stop` is set on close, for answers that wait."""

    def __init__(self, answer, path: str = ""):
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                answer(self)

            do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _answer

            def log_message(self, *a):
                pass

        self.stop = threading.Event()
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class BadEndpoint(LocalServer):
    """An endpoint for AWS_ENDPOINT_URL that accepts AWS calls and answers them wrongly: mode
    html (a proxy's 200 page), garbage (a 500 that is not XML or JSON), html500 (a load
    balancer's <html> 5xx: botocore retries it), xml (well-formed XML that is no AWS answer),
    hang (accepts, reads the request, never answers)."""

    def __init__(self, mode: str):
        self.mode = mode
        self.requests = 0
        super().__init__(self._reply)

    def _reply(self, h) -> None:
        self.requests += 1
        if self.mode == "hang":
            self.stop.wait(30)
            return
        status, body = {"html": (200, b"<!DOCTYPE html><html><body>Sign in to the proxy</body></html>"),
                        "garbage": (500, b"oops \x00\xff not xml"),
                        "html500": (503, b"<html><body>Service Unavailable</body></html>"),
                        "xml": (200, b"<?xml version='1.0'?><status>ok</status>")}[self.mode]
        h.send_response(status)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)
