"""Run the advisor as an unprivileged user (root ignores file modes, so a read-only file or folder
means nothing to it): with setpriv when the tests run as root, else as the current user."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
READER = os.environ.get("ADVISOR_TEST_READER_UID", "65534")


def run_as_reader(argv: list[str], env_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "INSTANCE_ADVISOR_CACHE_DIR": str(env_dir / "cache"),
           "INSTANCE_ADVISOR_DATA_DIR": str(env_dir / "data"), "HOME": str(env_dir)}
    env.pop("INSTANCE_ADVISOR_STORE", None)
    prefix = []
    if os.geteuid() == 0:
        prefix = ["setpriv", f"--reuid={READER}", f"--regid={READER}", "--clear-groups"]
    return subprocess.run([*prefix, sys.executable, "-m", "advisor", *argv], check=False, env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@contextmanager
def shared_dir():
    """A folder the unprivileged user can reach (pytest's tmp_path is root's, mode 0700)."""
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot act as an unprivileged user")
    d = Path(tempfile.mkdtemp(prefix="advisor-shared-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        for p in d.rglob("*"):
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(d, ignore_errors=True)
