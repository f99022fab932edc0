"""Where the checkout is, for tests in any folder below tests/ (they read its docs, data and code)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository
TESTS = ROOT / "tests"
