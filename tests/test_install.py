"""The core install (no extras) in a fresh venv: recommend, catalog and results work without torch,
and the probe says in one line what to install.

It pip-installs this checkout into a new venv the way docs/install.md does (`pip install --isolated .`),
so it needs the package registry; it is skipped, saying so, when the registry cannot be reached.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What a wheel is built from (pyproject.toml's packages and readme); copied, so the build writes
# its build/ and egg-info into the copy, not the checkout.
SOURCE = ("pyproject.toml", "README.md", "advisor", "catalog", "lightning_module", "safeio")
PROBE_MODULES = ("torch", "torchvision", "lightning", "matplotlib")


def _pip(prefix: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([str(prefix / "bin" / "python"), "-m", "pip", *args], check=False, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("core-install")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCE:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, src / name)
    # Can pip reach the registry at all (its own configuration, no cache)? If not, skip.
    probe = _pip(Path(sys.prefix), "download", "--isolated", "--no-cache-dir", "--no-deps", "--retries", "1",
                 "--timeout", "20", "--dest", str(tmp / "dl"), "tabulate", timeout=120)
    if probe.returncode != 0:
        pytest.skip("the package registry cannot be reached: "
                    + (probe.stderr.strip().splitlines() or ["pip download failed"])[-1])
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    res = _pip(venv, "install", "--isolated", str(src), timeout=900)
    assert res.returncode == 0, f"core install failed: {res.stderr[-2000:]}"
    return venv


def _advisor(venv: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INSTANCE_ADVISOR_")}
    env.update(INSTANCE_ADVISOR_CACHE_DIR=str(tmp_path / "cache"), INSTANCE_ADVISOR_DATA_DIR=str(tmp_path / "data"))
    return subprocess.run([str(venv / "bin" / "advisor"), *args], check=False, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=env)


def test_core_install_has_no_torch(core_venv):
    code = f"import importlib.util as u; print([m for m in {PROBE_MODULES!r} if u.find_spec(m)])"
    out = subprocess.run([str(core_venv / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_core_install_recommends(core_venv, tmp_path):
    res = _advisor(core_venv, tmp_path, "recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8",
                   "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["feasible"] and doc["recommendations"][0]["cost_usd"] <= 500


@pytest.mark.parametrize("args", [
    ("--version",),
    ("catalog", "show", "--family", "p5,G6E", "--format", "json"),
    ("catalog", "info"),
    ("results", "list", "--format", "json"),
])
def test_core_install_runs_the_torch_free_commands(core_venv, tmp_path, args):
    res = _advisor(core_venv, tmp_path, *args)
    assert res.returncode == 0 and res.stdout.strip() and "Traceback" not in res.stderr, res.stderr


def test_core_install_probe_says_what_to_install(core_venv, tmp_path):
    res = _advisor(core_venv, tmp_path, "probe", "--workload", "mlp")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "instance-advisor[probe]" in res.stderr, res.stderr
