"""Data-parallel scaling: how much of k devices' (or k instances') ideal throughput is left.

A data-parallel step all-reduces the fp32 gradients; a ring all-reduce moves 2 x (n-1)/n x
gradient bytes through each participant's link. Communication overlaps with the backward pass
(BACKWARD_SHARE of the step's compute); only the rest is exposed.
efficiency = compute / (compute + exposed). Inside a multi-GPU instance the link is NVLink or
PCIe (catalog.hardware.interconnect); between instances it is the instance's network bandwidth.
Pure arithmetic on numbers and arrays: the ranker's benchmark feeds it synthetic tables.
"""

from __future__ import annotations

import math

import numpy as np

BACKWARD_SHARE = 2.0 / 3.0  # backward ~ 2x forward FLOPs, so ~2/3 of a step's compute
# A step's batch when the efficiency model needs a step time (the workload's default batch).
DEFAULT_BATCH = 128


def allreduce_seconds(n, grad_bytes, bytes_per_s):
    """Ring all-reduce time for n participants (0 for one); vectorised over any argument."""
    n = np.asarray(n, dtype=float)
    return 2.0 * np.maximum(n - 1.0, 0.0) / np.maximum(n, 1.0) * grad_bytes / bytes_per_s


def overlap_efficiency(step_s, comm_s, overlap: float = BACKWARD_SHARE):
    """Share of ideal throughput left once the communication that backward cannot hide is added."""
    step_s = np.asarray(step_s, dtype=float)
    exposed = np.maximum(np.asarray(comm_s, dtype=float) - overlap * step_s, 0.0)
    return step_s / (step_s + exposed)


def intra_instance(n: int, ic: tuple[str, float] | None, per_device_sps: float,
                   grad_bytes: float) -> tuple[float, float, float, str | None]:
    """(step compute seconds, intra-instance all-reduce seconds, efficiency, interconnect words)
    for n devices joined by ic = (words, GB/s per direction), None for one device."""
    step = DEFAULT_BATCH / per_device_sps
    if ic is None:
        return step, 0.0, 1.0, None
    words, gbs = ic
    comm = float(allreduce_seconds(n, grad_bytes, gbs * 1e9))
    if math.isnan(comm):  # the parameter count is unknown, so the all-reduce cannot be modelled
        return step, 0.0, 1.0, words + "; its all-reduce not modelled (parameter count unknown)"
    eff = float(overlap_efficiency(step, comm))
    return step, comm, eff, words


def scale_out(samples_per_sec: np.ndarray, step_s: np.ndarray, intra_s: np.ndarray, inter_unit_s: np.ndarray,
              multi_node: np.ndarray | None, max_k: int) -> tuple[np.ndarray, np.ndarray]:
    """(throughput (T, K), efficiency relative to one instance (T, K)) for k = 1..max_k, per type:
    one instance's samples/s, its step's compute seconds, its own all-reduce seconds, 2 x gradient
    bytes over its network's bytes/s, and measured samples/s at k instances (NaN where none)."""
    k = np.arange(1, max_k + 1, dtype=float)[None, :]
    step = step_s[:, None]
    intra = intra_s[:, None]
    inter = inter_unit_s[:, None] * (k - 1.0) / k
    # The instance's own NVLink/PCIe all-reduce and the network one share backward's overlap.
    eff_k = overlap_efficiency(step, intra + np.where(k > 1, inter, 0.0))
    eff_1 = overlap_efficiency(step_s, intra_s)[:, None]
    rel = eff_k / eff_1
    thr = k * samples_per_sec[:, None] * rel
    if multi_node is not None:
        measured = multi_node[:, :max_k]
        has = np.isfinite(measured)
        thr = np.where(has, measured, thr)
        rel = np.where(has, measured / (k * samples_per_sec[:, None]), rel)
    return thr, rel
