"""Workload shape for the cross-device model: each workload's arithmetic intensity.

The memory term of the model (fit.py, split.py) is F beta / (I B): with one intensity I for every
workload, every workload gains the same from a faster device. advisor/data/workload_intensity.json
holds the intensities of the builtin and the reference dataset's workloads, counted offline by
scripts/measure_workload_intensity.py the way the probe counts a user's model
(lightning_module/run/counting.py StepCounter): `split_intensity`, FLOPs per byte of the ops
without FLOPs (split.SPLIT, what the model uses), and `intensity`, FLOPs per byte of every op
(split.ALL, the model before the split, kept for the benchmark's before/after). A user's own
workload takes its probe's count. A workload with neither is *unshaped*: the model gives it the
reference workload's intensity and the estimate says so. JSON only: `advisor recommend` never
imports torch.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from .split import ALL, NONE, SPLIT

INTENSITY_PATH = Path(__file__).resolve().parents[1] / "data" / "workload_intensity.json"
# The workload whose intensity theta_m describes (the dataset's best-known one); others scale by it.
REFERENCE_WORKLOAD = "resnet50"


FIELD = {SPLIT: "split_intensity", ALL: "intensity"}  # the table's field for each shape


@lru_cache(maxsize=1)
def _body() -> dict:
    return json.loads(INTENSITY_PATH.read_text(encoding="utf-8"))


def intensities(shape: str = SPLIT) -> dict[str, float] | None:
    """workload -> training FLOPs per byte (per sample) for every workload the table shapes this way
    (an entry counted before the split has no split_intensity: unshaped until recounted); None for NONE."""
    if shape == NONE:
        return None
    return {w: float(v[FIELD[shape]]) for w, v in _body()["workloads"].items() if v.get(FIELD[shape])}


def unshaped_reason(workload: str) -> str:
    """Why a workload has no intensity (a dataset workload the script could not define or has not
    recounted, or one of yours whose probe did not count the traffic of its ops without FLOPs)."""
    body = _body()
    if workload in body["workloads"]:
        return "its entry in workload_intensity.json was counted before the split (rerun scripts/measure_workload_intensity.py)"
    return body.get("unshaped", {}).get(workload, "its probe did not count the traffic of its ops without FLOPs "
                                                  "(a probe with result schema 6 or later does)")


def intensity_of(workload: str, flops_per_sample: float | None = None,
                 other_traffic_bytes_per_sample: float | None = None) -> float | None:
    """A workload's split intensity: the table's, else its probe's own count, else None (unshaped)."""
    known = intensities(SPLIT).get(workload)
    if known is not None:
        return known
    if flops_per_sample and other_traffic_bytes_per_sample:
        return flops_per_sample / other_traffic_bytes_per_sample
    return None
