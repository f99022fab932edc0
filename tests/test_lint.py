"""The tree passes ruff with the project's settings (pyproject.toml [tool.ruff]: line length 130,
E501 selected), so a long line or an unsorted import fails here, not in a reviewer's eye."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_passes_on_the_tree():
    pytest.importorskip("ruff", reason="ruff is a dev dependency (pip install -e '.[dev]')")
    p = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", str(ROOT)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
