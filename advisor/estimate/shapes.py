"""Workload shape for the cross-device model: each workload's arithmetic intensity.

The memory term of the model (fit.py) is F beta / (I B): with one intensity I for every workload,
every workload gains the same from a faster device. advisor/data/workload_intensity.json holds the
intensity of the builtin and the reference dataset's workloads, counted offline by
scripts/measure_workload_intensity.py the way the probe counts a user's model (FLOPs / unfused
bytes per sample, run/peaks.py TrafficCounter); a user's own workload takes its probe's count. A
workload with neither is *unshaped*: the model gives it the reference workload's intensity and the
estimate says so. JSON only: `advisor recommend` never imports torch.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

INTENSITY_PATH = Path(__file__).resolve().parents[1] / "data" / "workload_intensity.json"
# The workload whose intensity theta_m describes (the dataset's best-known one); others scale by it.
REFERENCE_WORKLOAD = "resnet50"


@lru_cache(maxsize=1)
def _table() -> tuple[dict[str, float], dict[str, str]]:
    body = json.loads(INTENSITY_PATH.read_text(encoding="utf-8"))
    return ({w: float(v["intensity"]) for w, v in body["workloads"].items()}, dict(body.get("unshaped", {})))


def intensities() -> dict[str, float]:
    """workload -> training FLOPs per byte of memory traffic (per sample), for every shaped workload."""
    return dict(_table()[0])


def unshaped_reason(workload: str) -> str:
    """Why a workload has no intensity (a dataset workload the script could not define, or one of yours
    whose probe did not count its traffic)."""
    return _table()[1].get(workload, "its probe did not count its memory traffic (a probe with this version does)")


def intensity_of(workload: str, flops_per_sample: float | None = None,
                 traffic_bytes_per_sample: float | None = None) -> float | None:
    """A workload's intensity: the table's, else its probe's own count, else None (unshaped)."""
    known = _table()[0].get(workload)
    if known is not None:
        return known
    if flops_per_sample and traffic_bytes_per_sample:
        return flops_per_sample / traffic_bytes_per_sample
    return None
