"""The package the probe instances install: a wheel built from this source tree, a wheel file,
or a pip requirement; checked before anything starts."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from ..errors import AdvisorError

_WHEEL_NAME_RE = re.compile(r"[A-Za-z0-9_.]+-[A-Za-z0-9_.!+]+(-\d[A-Za-z0-9_.]*)?(-[A-Za-z0-9_.]+){3}\.whl")

def is_local_package(package: str) -> bool:
    return package.endswith(".whl") or Path(package).exists()


def check_package(package: str) -> None:
    """Checked here, before anything starts or is confirmed: otherwise every instance boots,
    then pip fails."""
    if is_local_package(package):
        wheel = Path(package)
        if wheel.suffix != ".whl":
            raise AdvisorError(f"--package {package}: a local package must be a .whl file")
        if not _WHEEL_NAME_RE.fullmatch(wheel.name):
            raise AdvisorError(f"--package {package}: {wheel.name!r} is not a wheel file name "
                            "(name-version-python-abi-platform.whl), which pip on the instance would refuse")
        if not wheel.is_file():
            raise AdvisorError(f"--package {package}: no such wheel file")
    elif not package.strip() or any(c in package for c in "\n\r\0"):
        raise AdvisorError(f"--package {package!r} is not a pip requirement")


def project_root() -> Path | None:
    """The source tree this advisor runs from, or None for an installed (non-editable) copy."""
    root = Path(__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and b'name = "instance-advisor"' in pyproject.read_bytes():  # its own file: bytes, no decoding
        return root
    return None


_SOURCE_PARTS = ("pyproject.toml", "README.md", "advisor", "catalog", "lightning_module", "safeio")


def build_wheel(dest: Path) -> Path:
    """Build a wheel of this installation's source. The tree is copied first so the build
    leaves no build/ or egg-info behind in the user's checkout."""
    root = project_root()
    if root is None:
        raise AdvisorError("this advisor is not installed from a source tree: pass --package (a wheel or a pip requirement)")
    src = dest / "src"
    src.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for part in _SOURCE_PARTS:
        p = root / part
        if p.is_dir():
            shutil.copytree(p, src / part, ignore=ignore)
        elif p.is_file():
            shutil.copy2(p, src / part)
    out = dest / "wheel"
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--isolated", "-q", "-w", str(out), str(src)]
    import importlib.util

    if importlib.util.find_spec("setuptools") is not None:
        cmd.insert(cmd.index("--isolated"), "--no-build-isolation")  # no download of the build backend
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    wheels = sorted(out.glob("*.whl")) if out.is_dir() else []
    if proc.returncode != 0 or not wheels:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no wheel produced"]
        raise AdvisorError(f"building the wheel failed: {tail[0]}; pass --package to use a built one")
    return wheels[0]


def resolve_package(package: str | None, workdir: Path) -> tuple[Path | None, str | None]:
    """(wheel file to upload, None) or (None, pip requirement spec); validate_request has
    checked either."""
    if package is None:
        return build_wheel(workdir), None
    if is_local_package(package):
        return Path(package), None
    return None, package

