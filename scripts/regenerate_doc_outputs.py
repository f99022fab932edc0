"""Rewrite the output shown under README/docs console commands from real runs.

Runs every offline command of README.md and docs/*.md in order, the way tests/test_readme.py does
(a scratch copy of the checkout, fresh cache and data dirs, stdout and stderr together), at
COLUMNS=100, and replaces the output shown under each command whose shown output matches
--match (a regular expression; default: any table, i.e. a line of dashes) with what it printed.
docs/ec2.md's AWS session is recorded against moto by scripts/ec2_session.py and replaced whole
(--no-ec2 leaves it). Other commands the test does not run (the probe) keep what they show.

    .venv/bin/python scripts/regenerate_doc_outputs.py [--match REGEX] [--dry-run]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import test_readme as tr  # the commands, and which are run, as the test sees them

sys.path.insert(0, str(ROOT / "scripts"))


def scratch_env(d: Path) -> dict[str, str]:
    return tr.scratch_checkout(d, 100)


def output_span(lines: list[str], cmd_line: int) -> tuple[int, int]:
    """0-based [start, end) of the output lines under the command starting at 1-based cmd_line (the
    blank lines before the next command stay)."""
    i = cmd_line - 1
    while lines[i].rstrip().endswith("\\"):
        i += 1
    start = end = i + 1
    while end < len(lines) and not tr.FENCE.match(lines[end]) and not lines[end].lstrip().startswith("$ "):
        end += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return start, end


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--match", default=r"^\s*-{3,}(\s+-{3,})*\s*$", help="regex an output line must match")
    ap.add_argument("--dry-run", action="store_true", help="say what would change, write nothing")
    ap.add_argument("--no-ec2", action="store_true", help="leave docs/ec2.md's recorded AWS session as it is")
    args = ap.parse_args()
    match = re.compile(args.match)
    changes: dict[str, list[tuple[int, list[str]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        env = scratch_env(d)
        for cmd in tr.COMMANDS:
            if cmd.skip_reason() or cmd.argv[0] == "echo":
                continue
            proc = subprocess.run(["bash", "-c", f"{cmd.text} 2>&1"], cwd=d, env=env, capture_output=True, text=True,
                                  timeout=300, check=False)
            if cmd.page.endswith(".md") and any(match.search(o) for o in cmd.output):
                new = proc.stdout.rstrip("\n").splitlines()
                changes.setdefault(cmd.page, []).append((cmd.line, new))
    if not args.no_ec2:
        import ec2_session

        changes[ec2_session.PAGE] = [(line, new) for line, _, new in ec2_session.record()]
    for page, edits in changes.items():
        path = ROOT / page
        lines = path.read_text().splitlines()
        indent_of = {}
        for line_no, new in sorted(edits, reverse=True):  # bottom first: line numbers above stay right
            start, end = output_span(lines, line_no)
            indent = re.match(r"\s*", lines[line_no - 1]).group(0)
            indent_of[line_no] = indent
            replacement = [indent + x if x else x for x in new]
            if lines[start:end] != replacement:
                print(f"{page}:{line_no}: {end - start} lines -> {len(replacement)}")
                lines[start:end] = replacement
        if not args.dry_run:
            path.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
