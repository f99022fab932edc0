"""Your own code on the probe instances: `advisor launch --code PATH [--requirements FILE]`.

A custom workload (`--workload package.module:Class`) is code the instance does not have. --code
names it as one of:
- a project folder (pyproject.toml or setup.py): built here into a wheel (pip wheel --no-deps, on a
  copy of the folder without .git, virtual environments and build output, so the checkout stays
  clean);
- a wheel file (.whl) of it;
- the package folder itself (with __init__.py): shipped as it is and put on PYTHONPATH;
- a folder of modules (what `advisor probe` imported through PYTHONPATH: the workload's module
  `gan.py`, or its package `gan/`, inside): shipped as it is and itself put on PYTHONPATH.
With `--requirements FILE` (pip's format) for what it imports beyond torch and Lightning, and the
file a `--probe-args "--config FILE"` names, it goes up as one bundle (code.tar.gz) beside the
advisor's wheel; the instance unpacks it, installs the wheel and the requirements under the same
constraints that keep the AMI's torch, and runs the probe. Everything is checked here first (the
module is in the code, the files exist, the requirements install from an index), since a mistake
found on the instance costs every instance's boot.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import AdvisorError

# recommend's probe plan imports this module for code_path_hint: what only a launch needs (tar, zip,
# pip, the catalog's readers) is imported where it is used.

BUNDLE_NAME = "code.tar.gz"
CODE_DIR = "code"  # where the instance unpacks it, under the probe's working directory
CONFIG_DIR = "config"  # the --config file, in the bundle
MAX_REQUIREMENTS_BYTES = 1 << 20
MAX_TREE_BYTES = 512 << 20  # a project past this holds data, not code: ship a wheel of it instead
# Not code: left out of the copy a wheel is built from, and of a package folder's bundle.
IGNORED = (".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "node_modules", "__pycache__", "*.pyc",
           "*.egg-info", "build", "dist", ".mypy_cache", ".pytest_cache", ".ruff_cache", "lightning_logs")
# Requirement lines pip would read as files on the instance, which only this machine has.
_LOCAL_LINE = re.compile(r"^\s*(-e|--editable|-r|--requirement|-c|--constraint|\.|/|~|file:)")


@dataclass(frozen=True)
class Code:
    """What --code names, checked: its kind ("project" | "wheel" | "package" | "modules") and path."""

    kind: str
    path: Path


def top_package(ref: str) -> str:
    """'mypkg.models:Net' -> 'mypkg'."""
    return ref.partition(":")[0].split(".")[0]


def is_custom(workload: str) -> bool:
    return ":" in workload


def check_code(code: str | None, workload: str, requirements: str | None = None, config: str | None = None) -> Code | None:
    """The --code, --requirements and --config a launch ships, checked before anything starts."""
    if code is None:
        if is_custom(workload):
            raise AdvisorError(f"--workload {workload} is your own code: give --code PATH (your project folder, a "
                               "wheel of it, or its package folder) so the probe instances can import it")
        if requirements is not None:
            raise AdvisorError("--requirements installs what your own code needs: give --code too")
        if config is not None:
            raise AdvisorError("--probe-args --config configures your own code: give --code too")
        return None
    path = Path(code)
    if not path.exists():
        raise AdvisorError(f"--code {code}: no such file or folder")
    top = top_package(workload) if is_custom(workload) else None
    if path.is_file():
        from .package import _WHEEL_NAME_RE

        if path.suffix != ".whl" or not _WHEEL_NAME_RE.fullmatch(path.name):
            raise AdvisorError(f"--code {code}: a file must be a wheel (name-version-python-abi-platform.whl)")
        got = Code("wheel", path)
        if top is not None and not _wheel_has(path, top):
            raise AdvisorError(f"--code {code}: the wheel has no package or module {top!r} for --workload {workload}")
    elif (path / "pyproject.toml").is_file() or (path / "setup.py").is_file():
        got = Code("project", path)
        if top is not None and not any(p.exists() for p in (path / top, path / "src" / top, path / f"{top}.py",
                                                             path / "src" / f"{top}.py")):
            raise AdvisorError(f"--code {code}: the project has no {top}/ (nor src/{top}/) for --workload {workload}")
    elif (path / "__init__.py").is_file():
        got = Code("package", path)
        if top is not None and path.resolve().name != top:
            raise AdvisorError(f"--code {code}: ships the package {path.resolve().name!r}; --workload {workload} "
                               f"imports {top!r} (give the folder {top}/, or the project above it)")
    elif top is not None and ((path / f"{top}.py").is_file() or (path / top).is_dir()):
        got = Code("modules", path)
    else:
        raise AdvisorError(f"--code {code}: neither a project (pyproject.toml or setup.py), a wheel, a package "
                           "folder (__init__.py)"
                           + (f", nor a folder holding {top}.py or {top}/ for --workload {workload}" if top else ""))
    if requirements is not None:
        check_requirements(requirements)
    if config is not None and not Path(config).is_file():
        raise AdvisorError(f"--probe-args --config {config}: no such file")
    return got


def _wheel_has(wheel: Path, top: str) -> bool:
    import zipfile

    try:
        with zipfile.ZipFile(wheel) as z:
            return any(n == f"{top}.py" or n.startswith(f"{top}/") for n in z.namelist())
    except (OSError, zipfile.BadZipFile) as e:
        raise AdvisorError(f"--code {wheel}: not a readable wheel ({e})") from None


def check_requirements(requirements: str) -> None:
    from catalog.io import FileError, decode_text, read_bytes

    try:
        text = decode_text(read_bytes(requirements, "--requirements", MAX_REQUIREMENTS_BYTES, AdvisorError),
                           f"--requirements {requirements}", AdvisorError)
    except FileError as e:
        raise AdvisorError(str(e)) from None
    for n, line in enumerate(text.splitlines(), 1):
        if _LOCAL_LINE.match(line):
            raise AdvisorError(f"--requirements {requirements}:{n}: {line.strip()[:80]!r} names a local file, which the "
                               "instance does not have: put that code in --code, or name a package on an index")


def _build_wheel(project: Path, dest: Path) -> Path:
    """pip wheel --no-deps on a copy of the project (its checkout stays as it was)."""
    import shutil
    import subprocess
    import sys

    src = dest / "src"
    if (size := _tree_bytes(project)) > MAX_TREE_BYTES:
        raise AdvisorError(f"--code {project}: {size >> 20} MiB of files is more than code; build a wheel "
                           "(python -m build --wheel) and give --code dist/NAME.whl")
    shutil.copytree(project, src, ignore=shutil.ignore_patterns(*IGNORED))
    out = dest / "wheel"
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)]
    if _setuptools_build(project) and importlib.util.find_spec("setuptools") is not None:
        cmd.insert(4, "--no-build-isolation")  # the backend is here: no download of it
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    wheels = sorted(out.glob("*.whl")) if out.is_dir() else []
    if proc.returncode != 0 or not wheels:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no wheel produced"]
        raise AdvisorError(f"--code {project}: building its wheel failed: {tail[0][:300]}; build it yourself and "
                           "give --code dist/NAME.whl")
    return wheels[0]


def _tree_bytes(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file() and not _ignored(f, root))


def _ignored(f: Path, root: Path) -> bool:
    import fnmatch

    return any(fnmatch.fnmatch(part, pat) for part in f.relative_to(root).parts for pat in IGNORED)


def _setuptools_build(project: Path) -> bool:
    """Whether the project builds with setuptools (pyproject's build-backend, or no pyproject)."""
    pyproject = project / "pyproject.toml"
    if not pyproject.is_file():
        return True
    m = re.search(r'^\s*build-backend\s*=\s*"([^"]+)"', pyproject.read_text(errors="replace"), re.MULTILINE)
    return m is None or m.group(1).startswith("setuptools")


def build_bundle(code: Code, dest: Path, requirements: str | None = None, config: str | None = None,
                 top: str | None = None) -> Path:
    """code.tar.gz: wheels/NAME.whl (a project built, or the wheel given) or src/PACKAGE/ (a package
    folder), requirements.txt, config/NAME. `top`: the package the workload imports, which a built
    wheel must hold."""
    import tarfile

    bundle = dest / BUNDLE_NAME
    with tarfile.open(bundle, "w:gz") as tar:
        if code.kind in ("package", "modules"):  # src/ is what the instance puts on PYTHONPATH
            if code.kind == "modules" and (size := _tree_bytes(code.path)) > MAX_TREE_BYTES:
                raise AdvisorError(f"--code {code.path}: {size >> 20} MiB of files is more than code: give the "
                                   "package folder, or a wheel of the project")
            tar.add(code.path, arcname="src" if code.kind == "modules" else f"src/{code.path.resolve().name}",
                    filter=lambda ti: None if any(_match(p) for p in Path(ti.name).parts) else ti)
        else:
            wheel = code.path if code.kind == "wheel" else _build_wheel(code.path, dest)
            if top is not None and not _wheel_has(wheel, top):
                raise AdvisorError(f"--code {code.path}: the wheel built from it has no package {top!r} (the project "
                                   f"does not package it): give --code the package folder {top}/ instead")
            tar.add(wheel, arcname=f"wheels/{wheel.name}")
        if requirements is not None:
            tar.add(requirements, arcname="requirements.txt")
        if config is not None:
            tar.add(config, arcname=f"{CONFIG_DIR}/{Path(config).name}")
    return bundle


def _match(part: str) -> bool:
    import fnmatch

    return any(fnmatch.fnmatch(part, pat) for pat in IGNORED)


def shipped_config(probe_args: list[str]) -> tuple[list[str], str | None]:
    """probe args with a `--config FILE` pointed at the bundle's copy (the instance runs the probe in
    the folder it unpacked the bundle beside), and the local FILE; the args as they were if none."""
    out, config = list(probe_args), None
    for i, a in enumerate(out):
        if a == "--config" and i + 1 < len(out):
            config = out[i + 1]
            out[i + 1] = f"{CODE_DIR}/{CONFIG_DIR}/{Path(config).name}"
        elif a.startswith("--config="):
            config = a.split("=", 1)[1]
            out[i] = f"--config={CODE_DIR}/{CONFIG_DIR}/{Path(config).name}"
    return out, config


def code_path_hint(workload: str) -> str:
    """What to pass as --code for a workload on this machine: its package folder (shipped as it is),
    or 'YOUR_PACKAGE' when it cannot be found here. Finds, never imports (no torch)."""
    top = top_package(workload)
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    locations = list(getattr(spec, "submodule_search_locations", None) or []) if spec is not None else []
    if not locations and spec is not None and spec.origin and spec.origin.endswith(".py"):
        locations = [str(Path(spec.origin).parent)]  # a top-level module: the folder of modules holding it
    if not locations or "site-packages" in Path(locations[0]).parts:
        return "YOUR_PACKAGE"  # not found, or installed: the project's folder or a wheel is the user's to name
    where = Path(locations[0])
    try:
        rel = where.resolve().relative_to(Path.cwd().resolve())
        return str(rel)
    except ValueError:
        return str(where)
