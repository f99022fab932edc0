"""The run_cpu rung: the process set-up `torch.backends.xeon.run_cpu` gives a training script.

run_cpu preloads a memory allocator (tcmalloc, else jemalloc, with jemalloc's MALLOC_CONF) and,
with Intel's OpenMP runtime (libiomp5, the `intel-openmp` pip package), sets KMP_AFFINITY and
KMP_BLOCKTIME; it sets OMP_NUM_THREADS to the physical cores and pins the process to them (numactl
-C / taskset). All of that acts when a process starts, so the rung is measured in a child process
(child.py) started with `environment()`. Here Intel OpenMP is used on Intel CPUs only, and the
libraries are found as installed shared libraries: Debian's libgoogle-perftools4 / libjemalloc2
ship only versioned files (libtcmalloc.so.4), which run_cpu's own search (lib*.so) misses.
"""

from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass, field
from importlib import metadata
from typing import get_args

from ..contract.result import Allocator, ProbeConfig
from . import hardware

ALLOCATORS = get_args(Allocator)  # run_cpu's order of preference
# The values torch.backends.xeon.run_cpu sets (torch/backends/xeon/run_cpu.py).
JEMALLOC_CONF = "oversize_threshold:1,background_thread:true,metadata_thp:auto"
KMP_AFFINITY = "granularity=fine,compact,1,0"
KMP_BLOCKTIME = "1"
INSTALL_HINT = ("Debian/Ubuntu: apt-get install libgoogle-perftools4 (tcmalloc) or libjemalloc2; "
                "Intel CPUs: pip install intel-openmp")


def library_dirs(environ=os.environ) -> list[str]:
    """Where run_cpu looks, plus the multiarch directories Debian installs into."""
    dirs = [f"{environ[k]}/lib" for k in ("CONDA_PREFIX", "VIRTUAL_ENV") if environ.get(k)]
    dirs += [f"{sys.prefix}/lib", os.path.expanduser("~/.local/lib"), "/usr/local/lib", "/usr/local/lib64"]
    multiarch = getattr(sys.implementation, "_multiarch", None)
    if multiarch:
        dirs += [f"/usr/lib/{multiarch}", f"/lib/{multiarch}"]
    dirs += ["/usr/lib", "/usr/lib64"]
    return list(dict.fromkeys(dirs))


def find_library(stem: str, dirs: list[str]) -> str | None:
    """lib<stem>.so, else the newest-looking lib<stem>.so.<version>, in the first directory that has one."""
    for d in dirs:
        exact = os.path.join(d, f"lib{stem}.so")
        if os.path.isfile(exact):
            return exact
        versioned = sorted(glob.glob(os.path.join(d, f"lib{stem}.so.*")), key=len)
        versioned = [p for p in versioned if os.path.isfile(p)]
        if versioned:
            return versioned[0]  # the shortest name is the soname (libtcmalloc.so.4), not a debug variant
    return None


def iomp_library(dirs: list[str]) -> str | None:
    """libiomp5.so from the intel-openmp distribution (wherever pip put it), else from the directories."""
    try:
        files = metadata.distribution("intel-openmp").files or []
        for f in files:
            if f.name == "libiomp5.so":
                path = os.path.realpath(f.locate())
                if os.path.isfile(path):
                    return path
    except metadata.PackageNotFoundError:
        pass
    return find_library("iomp5", dirs)


@dataclass
class RunCpuSetup:
    """What the rung would change here, or why it cannot run (`missing`)."""

    allocator: str | None = None
    allocator_path: str | None = None
    openmp: str | None = None
    iomp_path: str | None = None
    cores: list[int] = field(default_factory=list)
    missing: str | None = None

    def describe(self) -> str:
        parts = [f"{self.allocator}" if self.allocator else "default allocator",
                 "Intel OpenMP" if self.openmp else "default OpenMP",
                 f"{len(self.cores)} physical core(s) pinned"]
        return ", ".join(parts)


def plan(manufacturer: str | None, cpuinfo: str, allowed: set[int], dirs: list[str],
         iomp: str | None) -> RunCpuSetup:
    p = RunCpuSetup(cores=hardware.one_cpu_per_core(cpuinfo, allowed))
    for name in ALLOCATORS:
        path = find_library(name, dirs)
        if path:
            p.allocator, p.allocator_path = name, path
            break
    if manufacturer == "intel" and iomp:
        p.openmp, p.iomp_path = "intel", iomp
    smt = len(p.cores) < len(allowed)
    if p.allocator is None and p.openmp is None and not smt:
        p.missing = f"no tcmalloc or jemalloc library found ({INSTALL_HINT})"
    return p


def plan_here(manufacturer: str | None) -> RunCpuSetup:
    cpuinfo = hardware.read_cpuinfo()
    try:
        allowed = set(os.sched_getaffinity(0))
    except AttributeError:
        allowed = set(range(os.cpu_count() or 1))
    dirs = library_dirs()
    return plan(manufacturer, cpuinfo, allowed, dirs, iomp_library(dirs))


def environment(config: ProbeConfig, p: RunCpuSetup, base: dict[str, str]) -> dict[str, str]:
    """The child's environment for `config` (its allocator and OpenMP), as run_cpu builds it.
    A value the user set already is kept, as run_cpu keeps it."""
    env = dict(base)
    preload = [x for x in env.get("LD_PRELOAD", "").split(":") if x]

    def add(path: str) -> None:
        if path not in preload:
            preload.insert(0, path)

    if config.allocator:
        path = p.allocator_path if p.allocator == config.allocator else find_library(config.allocator, library_dirs())
        if not path:
            raise FileNotFoundError(f"lib{config.allocator}.so not found")
        add(path)
        if config.allocator == "jemalloc":
            env.setdefault("MALLOC_CONF", JEMALLOC_CONF)
    if config.openmp == "intel":
        path = p.iomp_path or iomp_library(library_dirs())
        if not path:
            raise FileNotFoundError("libiomp5.so not found (pip install intel-openmp)")
        add(path)
        env.setdefault("KMP_AFFINITY", KMP_AFFINITY)
        env.setdefault("KMP_BLOCKTIME", KMP_BLOCKTIME)
    if preload:
        env["LD_PRELOAD"] = ":".join(preload)
    env.setdefault("OMP_NUM_THREADS", str(len(p.cores)))
    return env
