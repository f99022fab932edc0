"""Step time of sharded data parallel (FSDP / ZeRO) training, and its calibration.

Per device, per micro-batch: compute = tokens / (peak x MFU / FLOPs per token); communication =
- FSDP full shard (ZeRO-3): the bf16 weights all-gathered forward and backward and the gradients
  reduce-scattered, every micro-batch: an all-gather or reduce-scatter moves half an all-reduce's
  bytes, so 3 x 1/2 = 1.5 x DDP's gradient all-reduce (Rajbhandari et al. 2020, arXiv:1910.02054, 7.2.2);
- DDP / ZeRO-1 / ZeRO-2 (FSDP SHARD_GRAD_OP): one gradient all-reduce's bytes per optimizer step (section 7).
The link is the instance's NVLink/PCIe (catalog interconnect) within one instance, else the slower
of it and the instance's network shared by its devices. Communication hides behind up to
`overlap` x compute; the rest is exposed. MFU and overlap are fitted (SHARDED_FIT) on published
sharded rows by benchmarks/llm_fit.py's scale-out part.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .scaling import allreduce_seconds

SHARDED_FIT = Path(__file__).resolve().parents[1] / "data" / "sharded_fit.json"
FULL_SHARD = "full_shard"  # FSDP FULL_SHARD / ZeRO-3
GRAD_SHARD = "grad_shard"  # DDP, ZeRO-1, ZeRO-2, FSDP SHARD_GRAD_OP: DDP's bytes


@lru_cache(maxsize=1)
def fitted() -> dict:
    return json.loads(SHARDED_FIT.read_text())


def comm_bytes(kind: str, grad_bytes: float, weight_bytes: float) -> float:
    """All-reduce-equivalent bytes per communication round: FSDP gathers the weights twice and
    reduce-scatters the gradients (each half an all-reduce), ZeRO-1/2 all-reduce the gradients."""
    if kind == FULL_SHARD:
        return weight_bytes + grad_bytes / 2.0
    return grad_bytes


def link_bytes_per_s(per_instance: int, instances: int, interconnect_gbs: float | None,
                     network_gbps: float | None) -> float:
    intra = (interconnect_gbs or 0.0) * 1e9
    inter = (network_gbps or 0.0) * 1e9 / 8.0 / per_instance  # the instance's network, shared by its devices
    if instances == 1:
        return intra or inter
    return min(x for x in (intra or inter, inter) if x) if inter else 0.0


def exposed_efficiency(compute_s: float, comm_s: float, overlap: float) -> float:
    """compute / (compute + the communication that `overlap` x compute cannot hide), in (0, 1]."""
    overlap = min(max(overlap, 0.0), 1.0)
    return compute_s / (compute_s + max(comm_s - overlap * compute_s, 0.0))


@dataclass(frozen=True)
class Case:
    """One sharded run as the model needs it."""

    kind: str
    devices: int  # all of them
    per_instance: int
    micro_tokens: int  # per device per micro-batch
    accum: int  # micro-batches per optimizer step
    flops_per_token: float
    peak_flops: float  # one device, dense 16-bit
    param_bytes: float  # bf16 weights
    grad_bytes: float  # bf16 gradients of the trained weights
    link: float  # bytes/s


def per_device_tokens_per_sec(c: Case, mfu: float, overlap: float) -> float:
    compute = c.micro_tokens * c.flops_per_token / (c.peak_flops * mfu)
    n = c.devices
    rounds = 1.0 if c.kind == FULL_SHARD else 1.0 / max(c.accum, 1)  # FSDP: every micro-batch
    comm = float(allreduce_seconds(n, comm_bytes(c.kind, c.grad_bytes, c.param_bytes), c.link)) * rounds if c.link else math.inf
    if n == 1:
        comm = 0.0
    return c.micro_tokens / compute * exposed_efficiency(compute, comm, overlap)


MFU_GRID = tuple(round(0.20 + 0.01 * i, 2) for i in range(41))  # 0.20 .. 0.60
OVERLAP_GRID = tuple(round(0.1 * i, 1) for i in range(11))  # 0 .. 1


def fit(cases: list[Case], observed: list[float]) -> tuple[float, float]:
    """(MFU, overlap) minimising the median |log error| over a grid (robust to a few odd rows), the
    mean breaking ties (rows whose communication hides at several overlaps fit them all)."""
    best = None
    for m in MFU_GRID:
        for o in OVERLAP_GRID:
            errs = [abs(math.log(per_device_tokens_per_sec(c, m, o) / y)) for c, y in zip(cases, observed)]
            key = (round(statistics.median(errs), 12), round(statistics.fmean(errs), 12))
            if best is None or key < best[0]:
                best = (key, m, o)
    return best[1], best[2]


def leave_one_out(cases: list[Case], observed: list[float]) -> list[float]:
    """Each row predicted by the constants fitted on all the others: signed relative errors."""
    errors = []
    for i in range(len(cases)):
        rest = [c for j, c in enumerate(cases) if j != i]
        ys = [y for j, y in enumerate(observed) if j != i]
        m, o = fit(rest, ys)
        errors.append(per_device_tokens_per_sec(cases[i], m, o) / observed[i] - 1.0)
    return errors


def band(errors: list[float], coverage: float = 0.8) -> tuple[float, float]:
    """Multiplicative band (low, high) on a prediction from the residuals' central `coverage`."""
    s = sorted(errors)
    lo = s[math.floor((1 - coverage) / 2 * (len(s) - 1))]
    hi = s[math.ceil((1 + coverage) / 2 * (len(s) - 1))]
    # prediction = truth x (1 + e), so truth = prediction / (1 + e)
    return 1.0 / (1.0 + hi), 1.0 / (1.0 + lo)
