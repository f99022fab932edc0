"""Shared fixtures: every test gets its own cache/data dirs, so nothing touches ~/.cache."""

from __future__ import annotations

import sys
import textwrap

import pytest


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("INSTANCE_ADVISOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("INSTANCE_ADVISOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("INSTANCE_ADVISOR_STORE", raising=False)
    # AWS code under test must never reach a real endpoint or real credentials.
    for k in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    # Tables as a very wide terminal prints them (each row on its line), so a test reads cells
    # whole; the tests of fitting a width set COLUMNS themselves (tests/packages/advisor/test_table_width.py).
    monkeypatch.setenv("COLUMNS", "1000")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # nor the public Spot Instance Advisor file: nothing listens on the discard port, so a refresh
    # that fetches it fails at once (keeping previous buckets) unless a test serves one itself
    monkeypatch.setenv("INSTANCE_ADVISOR_SPOT_ADVISOR_URL", "http://127.0.0.1:9/spot-advisor-data.json")
    return tmp_path


@pytest.fixture
def cli(capsys):
    """Run the advisor CLI in-process: returns (exit_code, stdout, stderr)."""
    from advisor.cli import main

    def run(*argv: str):
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse exits on bad arguments
            code = e.code if isinstance(e.code, int) else 1
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """write(name, source): a user's module written to tmp_path and importable by name, as their
    own package would be; dropped from sys.modules after the test, so the next test's module of that
    name is read afresh."""
    names = []

    def write(name: str, source: str) -> str:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        monkeypatch.syspath_prepend(str(tmp_path))
        names.append(name)
        return name

    yield write
    for name in names:
        sys.modules.pop(name, None)
