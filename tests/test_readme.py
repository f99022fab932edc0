"""Every command the README shows runs as shown after its two setup commands.

The README's ```console blocks (`$ ` lines) and ```sh blocks (every line) are its commands. Each
`advisor` command is parsed by the real parser (a renamed option fails here, whether or not the
command is run); the offline ones are then run, in README order, by bash, in one scratch
directory that has the checkout's files, fresh cache and data dirs, and a `.venv/bin/advisor`
that runs this checkout. A command is expected to exit 0 unless its transcript shows an error
line (then that line must be what it prints, exit 2) or an `echo $?` after it says otherwise.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

# Commands shown but not run here, by their first words, and why.
NOT_RUN = {
    "python3 -m venv .venv ": "the setup itself: CI runs it in a fresh clone (.ci/run)",
    "python3 -m venv .venv-core ": "the core install: tests/test_install.py runs it in a fresh venv",
    ".venv/bin/python -m pytest": "the test suite: this test is part of it",
    ".venv/bin/python benchmarks/": "benchmarks: minutes of work that print figures; timings need a quiet machine",
    ".venv/bin/advisor catalog refresh": "calls the AWS APIs (needs credentials)",
    ".venv/bin/advisor launch": "starts EC2 instances (needs AWS)",
    ".venv/bin/advisor recommend --budget 500 --deadline 2d --samples 1e8 --check-account":
        "asks the AWS account (Service Quotas, spot placement scores)",
    ".venv/bin/advisor results pull": "downloads from S3 (needs AWS)",
    ".venv/bin/advisor probe --workload resnet18": "trains ResNet-18 for minutes",
}
# What may start a command: the venv the setup made, or a shell builtin for the transcript.
ALLOWED_PROGRAMS = (".venv/bin/advisor", ".venv/bin/python", "python3", "echo")
ERROR_LINE = re.compile(r"^advisor(?: [a-z-]+)*: error: .*")


@dataclass
class Command:
    line: int
    text: str
    output: list[str]
    expect_status: int | None = None  # from a following `echo $?`

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.text, comments=True)

    def skip_reason(self) -> str | None:
        flat = " ".join(self.argv)
        return next((why for start, why in NOT_RUN.items() if flat.startswith(start)), None)

    def error_shown(self) -> str | None:
        return next((o for o in self.output if ERROR_LINE.match(o)), None)

    def expected_status(self) -> int:
        if self.expect_status is not None:
            return self.expect_status
        return 2 if self.error_shown() else 0


FENCE = re.compile(r"^(\s*)```(\S*)")
# Where a shell line stops being the advisor's own arguments.
SHELL_OPERATORS = re.compile(r"^(\||\|\||&&|;|[0-9]?>.*|<.*)$")


def blocks(text: str):
    """(language, [(line number, line without the fence's indent)]) of every fenced block."""
    lang, indent, body = None, "", []
    for n, raw in enumerate(text.splitlines(), 1):
        if m := FENCE.match(raw):
            if lang is None:
                lang, indent, body = m.group(2), m.group(1), []
            else:
                yield lang, body
                lang = None
        elif lang is not None:
            body.append((n, raw[len(indent):] if raw.startswith(indent) else raw.lstrip()))


def readme_commands(text: str) -> list[Command]:
    cmds: list[Command] = []
    for lang, body in blocks(text):
        if lang not in ("console", "sh"):
            continue
        pending: Command | None = None
        i = 0
        while i < len(body):
            n, raw = body[i]
            if raw.startswith("$ ") or (lang == "sh" and raw.strip() and not raw.startswith("#")):
                cmd = raw.removeprefix("$ ")
                while cmd.endswith("\\") and i + 1 < len(body):
                    i += 1
                    cmd = cmd[:-1] + " " + body[i][1].strip()
                if cmd.strip() == "echo $?" and pending is not None and i + 1 < len(body):
                    pending.expect_status = int(body[i + 1][1])
                    i += 2
                    continue
                pending = Command(n, cmd.strip(), [])
                cmds.append(pending)
            elif lang == "console" and pending is not None:
                pending.output.append(raw)
            i += 1
    return cmds


COMMANDS = readme_commands(README.read_text())


def test_readme_shows_commands():
    text = " ".join(c.text for c in COMMANDS)
    for needle in ("advisor recommend", "advisor catalog show", "advisor catalog info", "advisor results"):
        assert needle in text


def test_commands_live_in_console_or_sh_blocks():
    """A `$ ` line in any other block is a command this test would never run."""
    for lang, body in blocks(README.read_text()):
        for n, raw in body:
            if lang != "console" and raw.startswith("$ "):
                pytest.fail(f"README.md:{n}: a command in a ```{lang or '(plain)'} block: use ```console")


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: f"L{c.line}")
def test_command_runs_from_the_setup_venv(cmd):
    """After the setup nothing is on PATH: every command names .venv/bin/... (or is a builtin)."""
    assert cmd.argv and cmd.argv[0] in ALLOWED_PROGRAMS, (
        f"README.md:{cmd.line}: {cmd.text!r} starts with {cmd.argv[0]!r}, which is not on PATH after the two "
        "setup commands: write .venv/bin/advisor (or .venv/bin/python)")


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if c.argv[0] == ".venv/bin/advisor"], ids=lambda c: f"L{c.line}")
def test_advisor_command_parses(cmd):
    from advisor.cli import build_parser

    argv = cmd.argv[1:]
    argv = argv[:next((i for i, a in enumerate(argv) if SHELL_OPERATORS.match(a)), len(argv))]
    shown = cmd.error_shown()
    try:
        build_parser().parse_args(argv)
    except SystemExit as e:
        assert e.code == 2 and shown and "error: argument" in shown, (
            f"README.md:{cmd.line}: {cmd.text!r} does not parse (exit {e.code})")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A directory that looks like the checkout after setup, where commands may write files."""
    d = tmp_path_factory.mktemp("readme")
    for entry in ROOT.iterdir():
        if entry.name not in (".venv", ".git"):
            (d / entry.name).symlink_to(entry)
    bin_dir = d / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    # What pip's console script does (so the command sees itself as .venv/bin/advisor), and python.
    (bin_dir / "advisor").write_text(f"#!{sys.executable}\nimport sys\nfrom advisor.cli import main\nsys.exit(main())\n")
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for exe in bin_dir.iterdir():
        exe.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("INSTANCE_ADVISOR_")}
    env.update(
        PYTHONPATH=str(ROOT),  # the checkout under test, as the editable install would give
        INSTANCE_ADVISOR_CACHE_DIR=str(d / "cache"),
        INSTANCE_ADVISOR_DATA_DIR=str(d / "data"),
        COLUMNS="200",
    )
    return d, env


def test_offline_commands_run_as_shown(scratch):
    """In README order, one scratch dir: a command may use what an earlier one made."""
    d, env = scratch
    failures = []
    ran = 0
    for cmd in COMMANDS:
        if cmd.skip_reason() or cmd.argv[0] == "echo":
            continue
        proc = subprocess.run(["bash", "-c", cmd.text], check=False, cwd=d, env=env, capture_output=True, text=True,
                              timeout=300)
        ran += 1
        want = cmd.expected_status()
        err_lines = [ln for ln in proc.stderr.splitlines() if ERROR_LINE.match(ln)]
        if proc.returncode != want:
            failures.append(f"README.md:{cmd.line}: {cmd.text!r} exited {proc.returncode}, README shows {want}: "
                            f"{(err_lines or proc.stderr.strip().splitlines()[-1:] or [''])[0]}")
        elif (shown := cmd.error_shown()) and shown not in err_lines:
            failures.append(f"README.md:{cmd.line}: {cmd.text!r} printed {err_lines}, README shows {shown!r}")
        elif want == 0 and (err_lines or "Traceback" in proc.stderr):
            failures.append(f"README.md:{cmd.line}: {cmd.text!r} printed an error: {proc.stderr.strip()[-300:]}")
    assert not failures, "\n".join(failures)
    assert ran >= 10


def test_ci_runs_the_readme_setup_commands():
    """.ci/run is the README's two fresh-machine commands, as written (plus its torchvision check)."""
    setup = [c.text for c in COMMANDS[:2]]
    assert setup[0].startswith("python3 -m venv .venv ") and "-e '.[dev]'" in setup[0]
    assert setup[1].startswith(".venv/bin/python -m pytest")
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert all(cmd in ci for cmd in setup), f".ci/run does not run {setup}"
