"""Prose that explains an output names what the output shows: the README's "why a X comes first"
and docs/recommend.md's "Reading the example" name the type the README's example table ranks first
(scripts/regenerate_doc_outputs.py rewrites the table; this test fails until the prose follows)."""

from __future__ import annotations

import re

from test_layout import PACKAGES
from test_readme import DOCS, README

EXAMPLE = "$ .venv/bin/advisor recommend --budget 500 --deadline 2d --samples 1e8\n"


def first_ranked(text: str) -> str:
    """The instance type of rank 1 in the table under the README's main example."""
    after = text[text.index(EXAMPLE):]
    row = re.search(r"^1\s+(\S+)\s", after, re.MULTILINE)
    assert row, "the README's main example shows a ranked table"
    return row.group(1)


def test_the_readme_explains_the_row_its_table_ranks_first():
    text = README.read_text()
    named = re.findall(r"why an? (\S+?) comes first", text)
    assert named, "the README's pointer to 'How to read that answer' names the first row"
    assert set(named) == {first_ranked(text)}


def test_reading_the_example_names_the_first_row_and_quotes_no_figures_of_it():
    page = (DOCS / "recommend.md").read_text()
    section = page[page.index("## Reading the example"):]
    section = section[:section.index("\n## ", 5)]
    m = re.search(r"The first row of \[the README's example\]\([^)]*\)\s+is\s+(?:one|two|three|four)\s+(\S+)", section)
    assert m and m.group(1) == first_ranked(README.read_text())
    # Figures of the output (hours, dollars, samples/s, bands) drift each time the table is
    # regenerated: the prose (outside the console blocks) points at the table instead.
    prose = re.sub(r"```.*?```", "", section, flags=re.DOTALL)
    figure = re.search(r"\$\d|\d+(\.\d+)? (hours|h\b)|\d,\d{3}(/s| samples)|\d+-\d[\d,]*\b", prose)
    assert figure is None, figure


def test_the_readme_callback_example_runs_outside_the_checkout(tmp_path):
    """Pasted into a project of the reader's own: only the installed packages are importable (no
    examples/, no checkout on the path), the working directory is elsewhere."""
    import subprocess
    import sys

    from test_readme import ROOT, blocks

    site = tmp_path / "site"
    site.mkdir()
    for pkg in PACKAGES:  # what pyproject's packages.find installs
        (site / pkg).symlink_to(ROOT / pkg)
    work = tmp_path / "project"
    work.mkdir()
    (body,) = [b for lang, b in blocks(README.read_text()) if lang == "python" and "ThroughputCallback" in
               "\n".join(line for _, line in b)]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(site),
           "INSTANCE_ADVISOR_DATA_DIR": str(tmp_path / "data"), "INSTANCE_ADVISOR_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", "\n".join(line for _, line in body)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-800:]
    assert proc.stdout.strip().splitlines()[-1].startswith("training run custom-"), proc.stdout[-300:]
