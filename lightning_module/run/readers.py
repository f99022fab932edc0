"""Readings of what else is using the machine, for contract/contention.py's rules: the clocks at a
step boundary (Linux /proc: schedstat, stat, the children's CPU time), the load average, the CPUs
this process may use, and on a GPU its other compute processes and clocks (NVML). Where a source
is missing, the fields it would fill stay None.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from ..contract import cores
from ..contract.contention import GpuState, Reading

log = logging.getLogger(__name__)


# /proc files kept open and re-read from their start (pread): a look at the machine every few
# training steps then costs a read, not an open and a close as well (~20 us each on a VM). Keyed by
# path and, for a thread's own file, by its thread id (a forked child or a new thread opens its own).
_OPEN: dict[tuple[str, int], int] = {}


def _read_proc(path: str, per_thread: bool = False) -> str:
    key = (path, threading.get_native_id() if per_thread else 0)
    fd = _OPEN.get(key)
    if fd is None:
        fd = _OPEN[key] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.pread(fd, 1 << 16, 0).decode()
    except OSError:  # its thread ended and the id was reused, say: opened afresh next time
        del _OPEN[key]
        os.close(fd)
        raise


def _schedstat(path: str = "/proc/thread-self/schedstat") -> tuple[float, float] | None:
    try:
        run_ns, wait_ns, *_ = _read_proc(path, per_thread=True).split()
        return int(run_ns) / 1e9, int(wait_ns) / 1e9
    except (OSError, ValueError):
        return None


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def parse_stat(text: str, cpus: set[int] | None) -> tuple[int, int, int] | None:
    """(steal, total, busy) ticks over the given CPUs' lines of /proc/stat (all CPUs: None)."""
    steal = total = busy = 0
    seen = False
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        name, *vals = line.split()
        if cpus is None and name != "cpu":
            continue
        if cpus is not None and (name == "cpu" or int(name[3:]) not in cpus):
            continue
        # user nice system idle iowait irq softirq steal (guest is inside user)
        t = [int(x) for x in vals[:8]]
        steal, total, busy = steal + t[7], total + sum(t), busy + t[0] + t[1] + t[2] + t[5] + t[6]
        seen = True
    return (steal, total, busy) if seen else None


def _stat(cpus: set[int] | None) -> tuple[int, int, int] | None:
    try:
        return parse_stat(_read_proc("/proc/stat"), cpus)  # the cpu lines come first: 64 KiB holds them
    except (OSError, ValueError, IndexError):
        return None


def _children(pid: int) -> list[int]:
    """The live children a process's main thread started (/proc/PID/task/PID/children): loader
    workers and DDP ranks are started from it. This process's own file is kept open (_read_proc):
    it is read at every step."""
    try:
        path = f"/proc/{pid}/task/{pid}/children"
        if pid == os.getpid():
            return [int(k) for k in _read_proc(path).split()]
        with open(path) as f:
            return [int(k) for k in f.read().split()]
    except (OSError, ValueError):
        return []


def _children_cpu() -> float:
    """CPU seconds of this process's live descendants, from /proc: loader workers, the other DDP
    ranks and their own workers (grandchildren: before, another rank's workers counted as
    other processes' work), each with its ended children's time (cutime, cstime)."""
    total, todo, seen = 0.0, _children(os.getpid()), set()
    while todo:
        k = todo.pop()
        if k in seen:
            continue
        seen.add(k)
        try:
            with open(f"/proc/{k}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15]) / _TICK  # utime, stime, cutime, cstime
        except (OSError, ValueError, IndexError):
            continue
        todo.extend(_children(k))
    return total


def _allowed() -> set[int] | None:
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:
        return None


def _reaped_children_cpu() -> float:
    """CPU seconds of this process's children that have ended and been waited for: a loader's
    workers that are not persistent end at every epoch, and their time must not leave the
    process's count (it would show as other processes' work: contention.py's others' share)."""
    t = os.times()
    return t.children_user + t.children_system


def read_now() -> Reading:
    """The clocks now, from the calling thread (the one that trains)."""
    sched = _schedstat()
    stat = _stat(_allowed())
    return Reading(
        wall=time.perf_counter(), cpu=time.process_time() + _children_cpu() + _reaped_children_cpu(),
        run=sched[0] if sched else None, wait=sched[1] if sched else None,
        steal=stat[0] if stat else None, total=stat[1] if stat else None,
        busy=stat[2] / _TICK if stat else None,
    )


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def physical_cores(root: str = "/sys/devices/system/cpu") -> list[list[int]]:
    """The CPUs this process may use, grouped into physical cores (hyper-thread siblings together)
    from Linux's topology files; a CPU without them is its own core."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:
        cpus = list(range(os.cpu_count() or 1))
    core_of = {}
    for c in cpus:
        try:
            with open(f"{root}/cpu{c}/topology/physical_package_id") as pkg, open(f"{root}/cpu{c}/topology/core_id") as core:
                core_of[c] = (int(pkg.read()), int(core.read()))
        except (OSError, ValueError):
            pass
    return cores.by_core(cpus, core_of)


def pin(cpus: list[int]) -> None:
    """Every thread of this process on `cpus`, and the threads and loader workers it starts later.
    Linux's affinity is per thread: pinning only the calling thread leaves torch's OpenMP pool,
    made earlier, on the CPUs it had (a rank measured alone after another rank, in one process,
    would run on that other rank's CPUs)."""
    if not hasattr(os, "sched_setaffinity"):
        return
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:  # a thread that ended meanwhile
            pass
    os.sched_setaffinity(0, cpus)


def gpu_state(device_index: int = 0, own_pids: set[int] | None = None, nvml=None) -> GpuState | None:
    """Other compute processes on the GPU and its SM clock against the maximum, where NVML answers.

    `nvml` is the pynvml module (nvidia-ml-py) or a stand-in; None imports it, and a machine
    without it (or without a GPU) gives None. NVML numbers devices by PCI order, CUDA by
    CUDA_VISIBLE_DEVICES: the PCI bus id of torch's device picks the NVML handle.
    """
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML here: nothing to say
        return None
    own = own_pids if own_pids is not None else {os.getpid()}
    try:
        handle = None
        bus_id = _pci_bus_id(device_index)
        if bus_id:
            try:
                handle = nvml.nvmlDeviceGetHandleByPciBusId(bus_id)
            except Exception:  # noqa: BLE001
                handle = None
        if handle is None:
            handle = nvml.nvmlDeviceGetHandleByIndex(device_index)
        procs = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        others = sum(1 for p in procs if p.pid not in own)
        ratio = None
        try:
            now = nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)
            top = nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)
            ratio = now / top if top else None
        except Exception as e:  # noqa: BLE001 - clocks are not reported on every board
            log.debug("no GPU clocks: %s", e)
        return GpuState(others, ratio)
    except Exception:  # noqa: BLE001 - a driver that answers oddly must not stop a probe
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception as e:  # noqa: BLE001
            log.debug("nvmlShutdown: %s", e)


def _pci_bus_id(device_index: int) -> str | None:
    try:
        import torch

        p = torch.cuda.get_device_properties(device_index)
        return f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
    except Exception:  # noqa: BLE001
        return None


def own_process_tree() -> set[int]:
    """This process and its children (DDP ranks, loader workers), from /proc."""
    pids = {os.getpid()}
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                pids.update(int(p) for p in f.read().split())
    except OSError:
        pass
    return pids

