"""Step time of sharded data parallel (FSDP / ZeRO) training, and its calibration.

Per device, per micro-batch: compute = tokens x (FLOPs per token / (peak x MFU) + memory-bound
bytes per token / HBM bandwidth), FLOPs per token `training_flops_per_token` (the weights' 6N and
the attention's 12 L d s, each + a third with activation checkpointing), memory-bound bytes a
fitted number per n_layers x d_model (the norms, residual adds, activation function and attention
kernel I/O each read and write a few d_model-wide tensors a layer: a roofline's second term, which
is why narrow models reach a smaller share of peak); communication =
- FSDP full shard (ZeRO-3): the bf16 weights all-gathered forward and backward and the gradients
  reduce-scattered, every micro-batch: an all-gather or reduce-scatter moves half an all-reduce's
  bytes, so 3 x 1/2 = 1.5 x DDP's gradient all-reduce (Rajbhandari et al. 2020, arXiv:1910.02054, 7.2.2);
- DDP / ZeRO-1 / ZeRO-2 (FSDP SHARD_GRAD_OP): one gradient all-reduce's bytes per optimizer step (section 7);
- FSDP accumulating under no_sync: the weights gathered every micro-batch, the gradients
  reduce-scattered once a step;
- hybrid shard: FSDP inside the instance, its gradient shard all-reduced across instances once a step.
The link is the instance's NVLink/PCIe (catalog interconnect) within one instance, else the slower
of it and the instance's network shared by its devices. Communication hides behind up to
`overlap` x compute; the rest is exposed. MFU, overlap and the memory-bound bytes are fitted
(SHARDED_FIT) on published sharded rows by benchmarks/llm_fit.py's scale-out part, with their
leave-one-out band. This is the one model of a sharded step's time: recommend --model-shape's
tokens/s on one GPU or many, every strategy (advisor/estimate/strategy.py builds its Case), is
`predict` with the fitted constants, and its band is the fit's leave-one-out band of the runs of
the same reach (inside one instance, or across several).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from .scaling import allreduce_seconds

SHARDED_FIT = Path(__file__).resolve().parents[1] / "data" / "sharded_fit.json"
MODEL_SHAPES = Path(__file__).resolve().parents[1] / "data" / "reference_model_shapes.json"
FULL_SHARD = "full_shard"  # FSDP FULL_SHARD / ZeRO-3
GRAD_SHARD = "grad_shard"  # DDP, ZeRO-1, ZeRO-2, FSDP SHARD_GRAD_OP: DDP's bytes
HYBRID_SHARD = "hybrid_shard"  # FSDP HYBRID_SHARD: full shard inside an instance, replicated across them


@lru_cache(maxsize=1)
def fitted() -> dict:
    return json.loads(SHARDED_FIT.read_text())


@lru_cache(maxsize=1)
def reference_model_shapes() -> dict:
    """The published rows' architectures (n_layers, d_model ...), keyed by the rows' model name."""
    return json.loads(MODEL_SHAPES.read_text())["models"]


def training_flops_per_token(params: float, n_layers: int, attn_dim: int, seq_len: int, weights_train: bool = True,
                             checkpointing: bool = False) -> float:
    """Forward + backward FLOPs of one token: 2N forward, 2N for the inputs' gradients and, where the
    weights train, 2N for theirs (6N; 4N with a frozen base), plus the attention's score and value
    products, 4 L d s forward and twice that backward: 12 L d s (Chowdhery et al. 2022, PaLM,
    arXiv:2204.02311, appendix B; llm-foundry's MPT flops_per_batch counts the same). Activation
    checkpointing runs each block's forward again: + 2N and + 4 L d s (Korthikanti et al. 2022, section 5)."""
    weights = (6.0 if weights_train else 4.0) + (2.0 if checkpointing else 0.0)
    attention = 12.0 * n_layers * attn_dim * seq_len * (1.0 + (1.0 / 3.0 if checkpointing else 0.0))
    return weights * params + attention


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
    # The memory-bound kernels (norms, residual adds, the MLP's activation, the attention kernel's
    # reads and writes) move a number of bytes a token in proportion to n_layers x d_model (each
    # reads and writes a few d_model-wide tensors a layer; a third more with checkpointing):
    # `layer_width` is that product, `hbm` the device's memory bandwidth (bytes/s).
    layer_width: float = 0.0
    hbm: float = 0.0
    # FSDP (full or hybrid) accumulating under no_sync: the gradients reduce-scattered once a step
    no_sync: bool = False
    # Hybrid shard only: `link` is the instance's own, `inter_link` the instance's network per device.
    inter_link: float = 0.0
    # The share of the modelled compute rate left by work the FLOP count misses (QLoRA's
    # dequantization of the 4-bit base: advisor/data/llm_throughput.json); 1 for every published row.
    compute_share: float = 1.0


def compute_seconds(c: Case, mfu: float, width_bytes: float = 0.0) -> float:
    """One micro-batch's compute on one device. `width_bytes`: the memory-bound kernels' bytes a
    token per unit of n_layers x d_model."""
    return c.micro_tokens * (c.flops_per_token / (c.peak_flops * mfu)
                             + (width_bytes * c.layer_width / c.hbm if c.hbm else 0.0)) / c.compute_share


def comm_seconds(c: Case) -> float:
    """One micro-batch's communication (a step's spread over its micro-batches where it happens
    once a step); inf where a link the run needs is unknown."""
    n = c.devices
    if n == 1:
        return 0.0
    if not c.link:
        return math.inf
    accum = max(c.accum, 1)
    if c.kind == GRAD_SHARD:
        return float(allreduce_seconds(n, comm_bytes(GRAD_SHARD, c.grad_bytes, c.param_bytes), c.link)) / accum
    # the gathers every micro-batch; the reduce-scatter too, or once a step under no_sync
    fsdp = comm_bytes(FULL_SHARD, c.grad_bytes / (accum if c.no_sync else 1), c.param_bytes)
    if c.kind == FULL_SHARD:
        return float(allreduce_seconds(n, fsdp, c.link))
    m = c.per_instance
    inside = float(allreduce_seconds(m, fsdp, c.link))
    if n == m:
        return inside
    if not c.inter_link:
        return math.inf
    return inside + float(allreduce_seconds(n // m, c.grad_bytes / m, c.inter_link)) / accum


def per_device_tokens_per_sec(c: Case, mfu: float, overlap: float, width_bytes: float = 0.0) -> float:
    compute = compute_seconds(c, mfu, width_bytes)
    return c.micro_tokens / compute * exposed_efficiency(compute, comm_seconds(c), overlap)


@dataclass(frozen=True)
class Prediction:
    """One device's tokens/s under the fitted constants, its band, and the communication efficiency."""

    tokens_per_sec: float
    low: float
    high: float
    efficiency: float  # compute / (compute + exposed communication), 1 = none exposed


ONE_INSTANCE, SEVERAL_INSTANCES = "one_instance", "several_instances"


def reach(devices: int, per_instance: int) -> str:
    """Whether a run's communication stays inside one instance or crosses the network: the fit's
    leave-one-out errors differ in kind between the two (the band of each: SHARDED_FIT bands)."""
    return ONE_INSTANCE if devices <= per_instance else SEVERAL_INSTANCES


def predict(c: Case) -> Prediction:
    """The calibrated model (SHARDED_FIT): one device's tokens/s, and the leave-one-out band of the
    published runs of the same reach (within one instance, one GPU included, or across several)."""
    f = fitted()
    compute = compute_seconds(c, f["mfu"], f["memory_bound_bytes"])
    eff = exposed_efficiency(compute, comm_seconds(c), f["overlap"])
    rate = c.micro_tokens / compute * eff
    b = f["bands"][reach(c.devices, c.per_instance)]
    return Prediction(rate, rate * b["low"], rate * b["high"], eff)


MFU_GRID = tuple(round(0.20 + 0.01 * i, 2) for i in range(66))  # 0.20 .. 0.85
OVERLAP_GRID = tuple(round(0.1 * i, 1) for i in range(11))  # 0 .. 1
# Bytes a token per n_layers x d_model: 0 (compute-bound only) to 1,200. Counted for an MPT block in
# bf16, forward: norms 2 x 4, residual adds 2 x 6, GELU 16, the attention kernel's q, k, v and output
# 8: about 44 bytes per d_model a layer, and twice that backward: about 130 (derived).
WIDTH_GRID = tuple(float(50 * i) for i in range(25))


def _log_errors(cases: list[Case], observed: list[float]) -> tuple[np.ndarray, list[tuple[float, float, float]]]:
    """|log(predicted / observed)| for every grid point (rows) and case (columns)."""
    grid = [(m, o, w) for m in MFU_GRID for o in OVERLAP_GRID for w in WIDTH_GRID]
    flops = np.array([c.flops_per_token / c.peak_flops for c in cases])
    width = np.array([c.layer_width / c.hbm if c.hbm else 0.0 for c in cases])
    tokens = np.array([float(c.micro_tokens) for c in cases])
    share = np.array([c.compute_share for c in cases])
    comm = np.array([comm_seconds(c) for c in cases])
    g = np.array(grid)
    compute = tokens[None, :] * (flops[None, :] / g[:, :1] + g[:, 2:3] * width[None, :]) / share[None, :]
    exposed = np.maximum(comm[None, :] - g[:, 1:2] * compute, 0.0)
    rate = tokens[None, :] / (compute + exposed)
    return np.abs(np.log(rate / np.array(observed)[None, :])), grid


def _best(errs: np.ndarray, grid: list) -> tuple[float, float, float]:
    """The grid point of least median |log error|, the mean breaking ties (rows whose communication
    hides at several overlaps fit them all)."""
    med, mean = np.round(np.median(errs, axis=1), 12), np.round(errs.mean(axis=1), 12)
    return grid[int(np.lexsort((mean, med))[0])]


def fit(cases: list[Case], observed: list[float]) -> tuple[float, float, float]:
    """(MFU, overlap, memory-bound bytes per n_layers x d_model) minimising the median |log error|
    over a grid (robust to a few odd rows)."""
    errs, grid = _log_errors(cases, observed)
    return _best(errs, grid)


def leave_one_out(cases: list[Case], observed: list[float]) -> list[float]:
    """Each row predicted by the constants fitted on all the others: signed relative errors."""
    errs, grid = _log_errors(cases, observed)
    out = []
    for i in range(len(cases)):
        m, o, w = _best(np.delete(errs, i, axis=1), grid)
        out.append(per_device_tokens_per_sec(cases[i], m, o, w) / observed[i] - 1.0)
    return out


def band(errors: list[float], coverage: float = 0.8) -> tuple[float, float]:
    """Multiplicative band (low, high) on a prediction from the residuals' central `coverage`."""
    s = sorted(errors)
    lo = s[math.floor((1 - coverage) / 2 * (len(s) - 1))]
    hi = s[math.ceil((1 + coverage) / 2 * (len(s) - 1))]
    # prediction = truth x (1 + e), so truth = prediction / (1 + e)
    return 1.0 / (1.0 + hi), 1.0 / (1.0 + lo)
