"""docs/ec2.md's recorded AWS session is what the code prints today: scripts/ec2_session.py runs
each of the page's `advisor` commands against moto in server mode (fixed seed, run id and clock),
in its own process, and every output the page shows must be what it printed, each table line within
100 columns. `scripts/regenerate_doc_outputs.py` rewrites the page when this fails."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import test_readme as tr

pytest.importorskip("moto")
ROOT = Path(__file__).resolve().parents[1]
PAGE = "docs/ec2.md"


@pytest.fixture(scope="module")
def recorded():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "ec2_session.py")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {line: (text, out) for line, text, out in json.loads(proc.stdout)}


def shown(cmd: tr.Command) -> list[str]:
    out = list(cmd.output)
    while out and not out[-1].strip():  # the blank line before the next command
        out.pop()
    return out


def test_every_aws_command_of_the_page_is_recorded(recorded):
    cmds = [c for c in tr.COMMANDS if c.page == PAGE]
    assert cmds and all(c.argv[0] == ".venv/bin/advisor" for c in cmds)
    assert sorted(recorded) == [c.line for c in cmds]
    kinds = {" ".join(c.argv[1:3]) for c in cmds}
    assert {"launch status", "launch cancel", "results pull"} <= kinds


def test_the_page_shows_what_the_commands_print(recorded):
    stale = [f"{PAGE}:{c.line}: {c.text}\n  shown:   {shown(c)}\n  printed: {recorded[c.line][1]}"
             for c in tr.COMMANDS if c.page == PAGE and shown(c) != recorded[c.line][1]]
    assert not stale, "run scripts/regenerate_doc_outputs.py:\n" + "\n".join(stale)


def test_the_recorded_tables_fit_100_columns(recorded):
    """Every line but the one-line messages (`advisor: ...`, which say one thing on one line and are
    not laid out) fits the 100-column terminal it was recorded in; the tables are there to check it."""
    lines = [ln for _, out in recorded.values() for ln in out]
    assert sum(set(ln) <= {"-", " "} and "---" in ln for ln in lines) >= 6  # plan x2, launch, status, pull x2, cancel
    too_wide = [ln for ln in lines if len(ln) > 100 and not ln.startswith("advisor: ")]
    assert not too_wide, "\n".join(too_wide)
