"""Every AWS-using command against endpoints that misbehave and credentials that are half
there (issue 11): one line and exit 2 (or, for the account check, a warning and `unknown`),
never a traceback, and a silent endpoint costs seconds, not minutes.

The endpoint is a local HTTP server on 127.0.0.1 (tests/aws_fakes.BadEndpoint) reached through
AWS_ENDPOINT_URL, as a wrong endpoint, a proxy's sign-in page or a dead VPC endpoint would be.
The read timeout is cut to 1 s so that `hang` runs quickly; what it checks is that a call is
tried TIMEOUT_ATTEMPTS times, then fails in one line."""

from __future__ import annotations

import pytest
from aws_fakes import BadEndpoint

from catalog.aws import call

MODES = ("html", "garbage", "html500", "xml", "hang")

COMMANDS = {
    "refresh": ("catalog", "refresh", "--regions", "us-east-1", "--spot-advisor", "{advisor}"),
    "launch": ("launch", "--instance-types", "g5.xlarge", "--s3", "s3://probe-bucket/p", "--region", "us-east-1",
               "--package", "instance-advisor==0.1.0", "--yes"),
    "launch-mars": ("launch", "--instance-types", "g5.xlarge", "--s3", "s3://probe-bucket/p", "--region", "mars-1",
                    "--package", "instance-advisor==0.1.0", "--yes"),
    "status": ("launch", "status", "20261124-000000-abcdef", "--region", "us-east-1"),
    "cancel": ("launch", "cancel", "20261124-000000-abcdef", "--region", "us-east-1"),
    "pull": ("results", "pull", "s3://probe-bucket/p"),
}


@pytest.fixture
def advisor_file(tmp_path):
    f = tmp_path / "advisor.json"  # so the refresh fetches nothing but AWS
    f.write_text('{"spot_advisor": {"us-east-1": {"Linux": {"c7i.large": {"r": 1, "s": 60}}}}}')
    return str(f)


@pytest.fixture
def creds(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEFORTESTS0001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake")


@pytest.fixture(params=MODES)
def endpoint(request, monkeypatch):
    e = BadEndpoint(request.param)
    monkeypatch.setenv("AWS_ENDPOINT_URL", e.url)
    monkeypatch.setattr(call, "READ_TIMEOUT_S", 1)
    monkeypatch.setattr(call, "CONNECT_TIMEOUT_S", 1)
    yield e
    e.close()


def one_line_error(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if not ln.startswith("advisor: warning:")]
    assert len(lines) == 1 and lines[0].startswith("advisor: error: "), err
    return lines[0]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_misbehaving_endpoint_is_one_line(cli, creds, endpoint, command, advisor_file):
    argv = [a.replace("{advisor}", advisor_file) for a in COMMANDS[command]]
    code, _out, err = cli(*argv)
    assert code == 2, err
    line = one_line_error(err)
    assert endpoint.requests >= 1
    if endpoint.mode == "hang":
        assert "did not answer within 1 s (2 attempts)" in line
        assert endpoint.requests <= 2  # the first call's two attempts, then the command stops
    elif endpoint.mode == "html500":
        assert "the endpoint answered HTTP 503" in line
        assert endpoint.requests <= call.SERVER_ERROR_ATTEMPTS + 1  # retried, but not 8 times
    elif endpoint.mode == "garbage" and line.startswith("advisor: error: S3 bucket"):
        assert "answered HTTP 500" in line  # S3's HeadBucket: a HEAD answer has no body to judge
    else:
        assert "not an AWS response" in line and endpoint.url in line
    if command == "refresh":
        assert line.endswith("the previous catalog is kept")


def test_account_check_against_a_misbehaving_endpoint_warns_and_ranks(cli, creds, endpoint):
    code, out, err = cli("recommend", "--budget", "5000", "--deadline", "3d", "--samples", "1e8", "--check-account",
                         "--market", "any", "--format", "json")
    assert code == 0 and "Traceback" not in err, err
    warnings = [ln for ln in err.splitlines()
                if ln.startswith(("advisor: warning: servicequotas:", "advisor: warning: ec2:GetSpotPlacementScores"))]
    # one per API, not one per region or candidate: an endpoint that fails stops that API everywhere
    assert len(warnings) == 2, err
    assert '"obtainable": "unknown"' in out and '"obtainable": "yes"' not in out
    # each API's first call with its retries, then that API stops (not once per region or candidate)
    assert endpoint.requests <= 2 * max(call.TIMEOUT_ATTEMPTS, call.SERVER_ERROR_ATTEMPTS + 1)


PARTIAL = {**COMMANDS, "recommend": ("recommend", "--budget", "5000", "--deadline", "3d", "--samples", "1e8",
                                     "--check-account")}


@pytest.mark.parametrize("command", list(PARTIAL))
def test_partial_credentials_are_one_line(cli, monkeypatch, command, advisor_file):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEFORTESTS0001")  # and no AWS_SECRET_ACCESS_KEY
    argv = [a.replace("{advisor}", advisor_file) for a in PARTIAL[command]]
    code, _out, err = cli(*argv)
    assert code == 2
    line = one_line_error(err)
    assert "the AWS credentials are incomplete" in line and "AWS_SECRET_ACCESS_KEY" in line


@pytest.mark.parametrize("command", ["refresh", "status", "pull"])
def test_unknown_profile_is_one_line(cli, monkeypatch, command, advisor_file):
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    argv = [a.replace("{advisor}", advisor_file) for a in COMMANDS[command]]
    code, _out, err = cli(*argv)
    assert code == 2 and "no-such-profile" in one_line_error(err)


def test_an_endpoint_url_that_is_no_url_is_one_line(cli, creds, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "not a url")
    code, _out, err = cli(*COMMANDS["status"])
    assert code == 2 and "Invalid endpoint" in one_line_error(err)


def test_the_refresh_has_a_deadline(cli, creds, monkeypatch, advisor_file):
    # every call answers slowly but in time: the whole refresh still stops at its deadline
    from catalog.aws import refresh

    e = BadEndpoint("hang")
    monkeypatch.setenv("AWS_ENDPOINT_URL", e.url)
    monkeypatch.setattr(call, "READ_TIMEOUT_S", 1)
    monkeypatch.setattr(call, "TIMEOUT_ATTEMPTS", 100)  # retries alone would go on for minutes
    monkeypatch.setattr(refresh, "SECONDS_PER_REGION", 3)
    try:
        code, _out, err = cli(*[a.replace("{advisor}", advisor_file) for a in COMMANDS["refresh"]])
        assert code == 2
        assert "gave up after 3 s (the time allowed for the whole command)" in one_line_error(err)
        assert e.requests < 10  # the deadline stopped it: 100 attempts were allowed
    finally:
        e.close()
