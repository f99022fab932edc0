"""Multi-rank runs: Lightning's DDP launcher (it re-runs this command once per extra rank), with a
watch on the other ranks so that one that dies or stops answering ends the probe in one line.

Lightning's own observer SIGKILLs the main process when a child rank dies (no message, exit 137),
and a rank that hangs leaves the others waiting in a collective for torch's default half hour. Here
the process group times out after `--rank-timeout`, and a failure in a multi-rank run is turned
into RankLost (contract/ladder.py), which ends the probe: the ranks are out of step, so the next
rung could only mismatch its collectives.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import torch
from lightning.pytorch.strategies import DDPStrategy, ModelParallelStrategy
from lightning.pytorch.strategies.launchers.subprocess_script import _SubprocessScriptLauncher

from ..contract.ladder import RankLost

log = logging.getLogger(__name__)

POLL_S = 0.5
# How long the watch leaves the main thread to notice a lost rank itself (its next collective
# fails at once when a peer's socket closes) before it ends the process from the side.
GRACE_S = 20.0

_children: list[subprocess.Popen] = []  # the extra ranks this process launched (rank 0 only)
_lost: list[str] = []  # what the watch saw: "rank 1 exited with status 3"
_stopping: list[bool] = []  # set once this process stops its ranks itself: their deaths are its own doing


def _default_on_lost(message: str) -> None:
    log.error("%s", message)
    os.kill(os.getpid(), signal.SIGKILL)


# What the watch does when the main thread did not end the run within GRACE_S of a rank's death
# (it may be stuck in the process group's set-up): the CLI installs a one-line error and exit 1.
on_lost: Callable[[str], None] = _default_on_lost


def stop_children() -> None:
    """Kill the extra ranks (SIGKILL: SIGTERM does not reach a rank stuck in a collective)."""
    _stopping.append(True)
    for p in _children:
        if p.poll() is None:
            p.kill()
    for p in _children:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def _watch(first_rank: int) -> None:
    reported = False
    while True:
        time.sleep(POLL_S)
        codes = [p.poll() for p in _children]
        if all(c == 0 for c in codes) or _stopping:
            return
        bad = [(first_rank + i, c) for i, c in enumerate(codes) if c not in (None, 0)]
        if bad and not reported:
            rank, code = bad[0]
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            _lost.append(f"rank {rank} {how}")
            reported = True
            deadline = time.monotonic() + GRACE_S
            while time.monotonic() < deadline and not _stopping:
                time.sleep(POLL_S)
            if _stopping:
                return  # the main thread noticed and is ending the run itself
            stop_children()
            on_lost(f"{_lost[0]} during the run, and the run did not end within {GRACE_S:g} s")
            return


class WatchedLauncher(_SubprocessScriptLauncher):
    """Lightning's launcher, with the watch above instead of its SIGKILLing observer."""

    def launch(self, function, *args, trainer=None, **kwargs):
        from lightning.fabric.utilities.distributed import _set_num_threads_if_needed

        self.cluster_environment.validate_settings(num_devices=self.num_processes, num_nodes=self.num_nodes)
        if not self.cluster_environment.creates_processes_externally:
            self._call_children_scripts()
            _children.extend(self.procs)
            first = self.cluster_environment.node_rank() * self.num_processes + 1
            threading.Thread(target=_watch, args=(first,), name="rank-watch", daemon=True).start()
        _set_num_threads_if_needed(num_processes=self.num_processes)
        return function(*args, **kwargs)


class WatchedDDP(DDPStrategy):
    """DDP whose collectives time out after `rank_timeout_s` and whose ranks are watched."""

    def _configure_launcher(self) -> None:
        super()._configure_launcher()
        if self._start_method == "popen":
            self._launcher = WatchedLauncher(self.cluster_environment, self.num_processes, self.num_nodes)


def watched_ddp(accelerator: str, rank_timeout_s: float) -> WatchedDDP:
    backend = "nccl" if accelerator == "gpu" else "gloo"
    return WatchedDDP(process_group_backend=backend, timeout=timedelta(seconds=rank_timeout_s))


class WatchedFSDP(ModelParallelStrategy):
    """FSDP2 (torch's fully_shard) on Lightning's ModelParallelStrategy, with the ranks watched and
    collectives bounded as WatchedDDP's. Lightning's own "fsdp" (FSDP1) needs a GPU; fully_shard also
    runs on CPU ranks over gloo. A module with its own configure_model() shards itself there; any
    other is sharded here: each repeated layer (layers.find_layers) one unit, then the rest, every
    parameter split over the data-parallel ranks (FSDP full shard)."""

    strategy_name = "fsdp"

    def _configure_launcher(self) -> None:
        if not self.cluster_environment.creates_processes_externally:
            self._launcher = WatchedLauncher(self.cluster_environment, self.num_processes, self.num_nodes)

    def setup(self, trainer) -> None:
        from lightning.pytorch.utilities.model_helpers import is_overridden

        if is_overridden("configure_model", self.lightning_module):
            return super().setup(trainer)
        from lightning.pytorch.strategies import model_parallel
        from lightning.pytorch.trainer.states import TrainerFn
        from torch.distributed.fsdp import fully_shard

        from .layers import find_layers

        mesh = self.device_mesh["data_parallel"]
        module = self.lightning_module
        for layer in find_layers(module):
            if any(p.requires_grad for p in layer.parameters()):
                fully_shard(layer, mesh=mesh)
        fully_shard(module, mesh=mesh)
        # The rest of ModelParallelStrategy.setup, past its demand for a configure_model().
        self.accelerator.setup(trainer)
        model_parallel._materialize_distributed_module(self.model, self.root_device)
        self.model = self.precision_plugin.convert_module(self.model)
        self.model_to_device()
        self.barrier()
        if trainer.state.fn == TrainerFn.FITTING:
            self.setup_optimizers(trainer)
        self.setup_precision_plugin()
        if trainer.state.fn == TrainerFn.FITTING:
            model_parallel._optimizers_to_device(self.optimizers, self.root_device)
        return None


def watched_fsdp(accelerator: str, ranks: int, rank_timeout_s: float) -> WatchedFSDP:
    backend = "nccl" if accelerator == "gpu" else "gloo"
    return WatchedFSDP(data_parallel_size=ranks, tensor_parallel_size=1, process_group_backend=backend,
                       timeout=timedelta(seconds=rank_timeout_s))


def peak_gib(accelerator: str) -> float:
    """This process's peak: CUDA max allocated on a GPU, else its peak resident memory."""
    from .devices import peak_rss_gib

    return torch.cuda.max_memory_allocated() / 2**30 if accelerator == "gpu" and torch.cuda.is_available() else peak_rss_gib()


def gather_peaks(trainer, device, accelerator: str) -> list[float] | None:
    """Every rank's peak memory (GiB), rank 0 first: a collective, so every rank calls it; None for
    one rank, or when the gather fails (the record goes without it)."""
    if trainer.world_size <= 1:
        return None
    try:
        got = trainer.strategy.all_gather(torch.tensor([peak_gib(accelerator)], dtype=torch.float64, device=device))
    except Exception as e:  # noqa: BLE001 - a figure to record, never worth failing a run
        log.warning("the ranks' peak memory could not be gathered: %s", e)
        return None
    return [float(x) for x in got.reshape(-1).tolist()]


def _is_collective_failure(exc: BaseException) -> bool:
    """A failure only a multi-rank run has: a peer's socket closed, a collective timed out."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, torch.distributed.DistError):
            return True
        text = str(exc)
        if any(k in text for k in ("gloo", "NCCL", "Connection reset by peer", "Connection closed by peer",
                                   "Timed out waiting", "timed out", "ProcessGroup")):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def lost_rank(exc: BaseException, rank_timeout_s: float) -> RankLost | None:
    """The RankLost a multi-rank run's failure means, or None when it is an ordinary rung failure
    (every rank raised the same, such as an out-of-memory or a batch the loader ignores)."""
    deadline = time.monotonic() + 2 * POLL_S + 1.0
    while not _lost and _children and time.monotonic() < deadline and any(p.poll() is None for p in _children):
        time.sleep(0.1)  # the dead child may not be reaped yet: its exit status says more than gloo
    if not _lost:
        for i, p in enumerate(_children):
            if p.poll() not in (None, 0):
                code = p.returncode
                _lost.append(f"rank {i + 1} " + (f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"))
                break
    if _lost:
        why = f"{_lost[0]}; the other ranks were stopped"
    elif _is_collective_failure(exc):
        timed_out = "time" in str(exc).lower()
        why = (f"a collective waited past --rank-timeout {rank_timeout_s:g} s for another rank (it hung, or its "
               "steps take longer than that)" if timed_out else
               f"another rank stopped answering ({type(exc).__name__}: {str(exc).splitlines()[0][:160]})")
    else:
        return None
    stop_children()
    return RankLost(f"multi-rank run failed: {why}")
