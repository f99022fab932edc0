"""Every command the README and the docs pages show runs as shown after the README's two setup commands.

The pages are README.md, then every docs/*.md page (PAGE_ORDER first, any other page after them by
name). Their ```console blocks (`$ ` lines) and ```sh blocks (every line) are their commands. Each
`advisor` command is parsed by the real parser (a renamed option fails here, whether or not the
command is run); the offline ones are then run by bash, README first and then the pages in that
order, in one scratch directory that has the checkout's files, fresh cache and data dirs, and a
`.venv/bin/advisor` that runs this checkout, so a command may use what an earlier one made (the
results store that docs/results.md imports into, say). A command is expected to exit 0 unless its
transcript shows an error line (then that line must be what it prints, exit 2) or an `echo $?`
after it says otherwise. Every relative link in the pages must point at a file that exists, and
at a heading of it when it names an anchor.
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
DOCS = ROOT / "docs"
# The order the docs pages' commands run in, after the README's (the original README's order).
PAGE_ORDER = ("recommend.md", "estimates.md", "probe.md", "results.md", "ec2.md", "catalog.md", "iam.md",
              "exit-codes.md", "install.md", "benchmarks.md")


def doc_pages() -> list[Path]:
    """README.md, then docs/*.md: those of PAGE_ORDER in that order, any other after them by name."""
    found = {p.name: p for p in DOCS.glob("*.md")}
    ordered = [found.pop(name) for name in PAGE_ORDER if name in found]
    return [README, *ordered, *(found[name] for name in sorted(found))]


PAGES = doc_pages()


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()

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
    page: str  # the page's path from the checkout's root
    line: int
    text: str
    output: list[str]
    expect_status: int | None = None  # from a following `echo $?`

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

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


def readme_commands(text: str, page: str = "README.md") -> list[Command]:
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
                pending = Command(page, n, cmd.strip(), [])
                cmds.append(pending)
            elif lang == "console" and pending is not None:
                pending.output.append(raw)
            i += 1
    return cmds


COMMANDS = [c for page in PAGES for c in readme_commands(page.read_text(), rel(page))]
README_COMMANDS = [c for c in COMMANDS if c.page == "README.md"]


def test_readme_shows_commands():
    assert "advisor recommend" in " ".join(c.text for c in README_COMMANDS)
    text = " ".join(c.text for c in COMMANDS)
    for needle in ("advisor recommend", "advisor catalog show", "advisor catalog info", "advisor results"):
        assert needle in text


def test_commands_live_in_console_or_sh_blocks():
    """A `$ ` line in any other block is a command this test would never run."""
    for page in PAGES:
        for lang, body in blocks(page.read_text()):
            for n, raw in body:
                if lang != "console" and raw.startswith("$ "):
                    pytest.fail(f"{rel(page)}:{n}: a command in a ```{lang or '(plain)'} block: use ```console")


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: c.where)
def test_command_runs_from_the_setup_venv(cmd):
    """After the setup nothing is on PATH: every command names .venv/bin/... (or is a builtin)."""
    assert cmd.argv and cmd.argv[0] in ALLOWED_PROGRAMS, (
        f"{cmd.where}: {cmd.text!r} starts with {cmd.argv[0]!r}, which is not on PATH after the two "
        "setup commands: write .venv/bin/advisor (or .venv/bin/python)")


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if c.argv[0] == ".venv/bin/advisor"], ids=lambda c: c.where)
def test_advisor_command_parses(cmd):
    from advisor.cli import build_parser

    argv = cmd.argv[1:]
    argv = argv[:next((i for i, a in enumerate(argv) if SHELL_OPERATORS.match(a)), len(argv))]
    shown = cmd.error_shown()
    try:
        build_parser().parse_args(argv)
    except SystemExit as e:
        assert e.code == 2 and shown and "error: argument" in shown, (
            f"{cmd.where}: {cmd.text!r} does not parse (exit {e.code})")


def scratch_checkout(d: Path, columns: int) -> dict[str, str]:
    """Make d look like the checkout after setup (where commands may write files); the environment
    its commands run in. Also scripts/regenerate_doc_outputs.py's."""
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
        COLUMNS=str(columns),
    )
    return env


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A directory that looks like the checkout after setup, where commands may write files."""
    d = tmp_path_factory.mktemp("readme")
    return d, scratch_checkout(d, 200)


def git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout


def test_offline_commands_run_as_shown(scratch):
    """README, then the docs pages in PAGE_ORDER, one scratch dir: a command may use what an earlier one made.
    None of them writes into the checkout: `git status` is as it was, and the scratch dir (the
    checkout's files, linked) has nothing new beside what the setup made (.venv, cache, data)."""
    d, env = scratch
    status_before = git_status()
    entries_before = {p.name for p in d.iterdir()}
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
            failures.append(f"{cmd.where}: {cmd.text!r} exited {proc.returncode}, {cmd.page} shows {want}: "
                            f"{(err_lines or proc.stderr.strip().splitlines()[-1:] or [''])[0]}")
        elif (shown := cmd.error_shown()) and shown not in err_lines:
            failures.append(f"{cmd.where}: {cmd.text!r} printed {err_lines}, {cmd.page} shows {shown!r}")
        elif want == 0 and (err_lines or "Traceback" in proc.stderr):
            failures.append(f"{cmd.where}: {cmd.text!r} printed an error: {proc.stderr.strip()[-300:]}")
    assert not failures, "\n".join(failures)
    assert ran >= 10
    assert git_status() == status_before, "a README/docs command wrote into the checkout"
    assert {p.name for p in d.iterdir()} - entries_before <= {"cache", "data", "lightning_logs"}, (
        "a README/docs command wrote a file where it was run (the checkout): write to /tmp instead")


# Options that write a file, and where a shown command may point them: a temporary place, not the checkout.
WRITING_OPTIONS = ("--output", "--plot", "--profile", "--store")


def written_paths(cmd: Command) -> list[str]:
    argv = cmd.argv
    out = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in WRITING_OPTIONS]
    out += [a.split("=", 1)[1] for a in argv if a.split("=", 1)[0] in WRITING_OPTIONS and "=" in a]
    out += [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in (">", ">>")]
    out += [a.lstrip("0123456789").lstrip(">") for a in argv if re.fullmatch(r"[0-9]?>>?\S+", a)]
    return out


def test_shown_commands_write_to_a_temporary_place():
    """Every command shown, run here or not (the probe, launch), writes its files outside the
    checkout (/tmp, $TMPDIR) or where git ignores them: following the docs leaves `git status` clean."""
    text_blocks = [Command(rel(page), n, line.strip(), []) for page in PAGES for lang, body in blocks(page.read_text())
                   if lang in ("text", "") for n, line in body if line.strip().startswith(".venv/bin/advisor")]
    bad = []
    for cmd in COMMANDS + text_blocks:
        for path in written_paths(cmd):
            if path.startswith(("/tmp/", "$TMPDIR", "${TMPDIR", "/dev/null")):
                continue
            ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT, check=False).returncode == 0
            if not ignored:
                bad.append(f"{cmd.where}: {cmd.text!r} writes {path} into the checkout")
    assert not bad, "\n".join(bad)
    assert written_paths(Command("x", 1, ".venv/bin/advisor probe --output r.json --plot=p.png > out.txt", [])) == [
        "r.json", "p.png", "out.txt"]


PYTHON_BLOCKS = [(rel(page), body) for page in PAGES for lang, body in blocks(page.read_text()) if lang == "python"]


@pytest.mark.parametrize("page,body", PYTHON_BLOCKS, ids=[f"{p}:{b[0][0]}" for p, b in PYTHON_BLOCKS])
def test_python_examples_run_as_shown(scratch, page, body):
    """A ```python block is a program a reader pastes: it runs, with the checkout's packages."""
    d, env = scratch
    code = "\n".join(line for _, line in body)
    proc = subprocess.run([sys.executable, "-c", code], check=False, cwd=d, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"{page}:{body[0][0]}: {proc.stderr.strip()[-500:]}"


def test_ci_runs_the_readme_setup_commands():
    """.ci/run is the README's two fresh-machine commands, as written (plus its torchvision check)."""
    setup = [c.text for c in README_COMMANDS[:2]]
    assert setup[0].startswith("python3 -m venv .venv ") and "-e '.[dev]'" in setup[0]
    assert setup[1].startswith(".venv/bin/python -m pytest")
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert all(cmd in ci for cmd in setup), f".ci/run does not run {setup}"


# A markdown link or image: [text](target) or ![alt](target "title"); the text may wrap over lines.
LINK = re.compile(r'!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def unfenced(text: str) -> str:
    """The text with its fenced blocks blanked out (line numbers kept)."""
    lines, fenced = [], False
    for raw in text.splitlines():
        if FENCE.match(raw):
            fenced = not fenced
        lines.append("" if fenced or FENCE.match(raw) else raw)
    return "\n".join(lines)


def prose(text: str) -> str:
    """The text outside fenced blocks and inline code (line numbers kept)."""
    return re.sub(r"`[^`]*`", lambda m: re.sub(r"[^\n]", " ", m.group(0)), unfenced(text))


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to
    hyphens, a repeated one numbered -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    for line in unfenced(text).splitlines():
        if m := HEADING.match(line):
            slug = re.sub(r"[^\w\- ]", "", m.group(1).replace("`", "").strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def relative_links(page: Path):
    """(line, target) of every link in the page that is not a URL."""
    text = prose(page.read_text())
    for m in LINK.finditer(text):
        target = m.group(1)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto:
            yield text.count("\n", 0, m.start()) + 1, target


def test_anchor_rule():
    page = "# A: `advisor x`\n## Can your account get it: `--check-account`\n## A: advisor x\n```sh\n# no heading\n```\n"
    assert anchors(page) == {"a-advisor-x", "can-your-account-get-it---check-account", "a-advisor-x-1"}


def test_relative_links_resolve():
    """Every relative link in README.md and docs/*.md names a file that exists (and its anchor a heading)."""
    broken = []
    for page in PAGES:
        for n, target in relative_links(page):
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.is_relative_to(ROOT):
                broken.append(f"{rel(page)}:{n}: {target}: outside the checkout")
            elif not dest.exists():
                broken.append(f"{rel(page)}:{n}: {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
                broken.append(f"{rel(page)}:{n}: {target}: {rel(dest)} has no heading with that anchor")
    assert not broken, "\n".join(broken)


def test_readme_links_every_docs_page():
    """A page the README does not link is a page a reader never finds."""
    linked = {(README.parent / target.partition("#")[0]).resolve() for _, target in relative_links(README)}
    missing = [rel(p) for p in PAGES[1:] if p.resolve() not in linked]
    assert not missing, f"README.md links none of {missing}"


def test_the_setup_says_what_it_downloads_and_shows_the_core_install():
    """The set-up stays one command for everything, and says beside it what that downloads and how
    long it takes, and shows the core install (what recommend needs) as a command of its own, the
    same one docs/install.md gives."""
    text = README.read_text()
    section = text[text.index("## On a fresh machine"):]
    section = " ".join(section[:section.index("\n## ", 1)].split())
    assert re.search(r"downloads about [\d.]+ GB .* into a [\d.]+ GB venv: about \d+ minutes", section)
    assert re.search(r"the core install \([^)]*: \d+ MB, about \d+ s\)", section)
    core = [c.text for c in README_COMMANDS if c.text.startswith("python3 -m venv .venv-core ")]
    assert core == [README_COMMANDS[2].text], "the core install right after the two set-up commands"
    assert core[0] in (DOCS / "install.md").read_text()
