"""The cross-device model built from a reference set: anchor fit, scaling efficiency, bands.

Everything is computed from the reference rows (a team's own file too): the fit takes a few
milliseconds and the leave-one-device-out band calibration one refit per device, ~0.1 s for the
shipped dataset. `advisor recommend` keeps the result in its cache dir (cache.py), keyed by every
input, so a changed input is never served a stale model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from catalog.models import Catalog
from lightning_module.contract.workload_facts import FACTS

from .calibrate import (
    CALIBRATED_SHARE,
    Efficiency,
    band_scale,
    coverage,
    efficiency_from_pairs,
    leave_one_device_out,
)
from .fit import Fit, fit
from .points import Point, reference_points

FLOPS = {name: f.train_flops_per_sample for name, f in FACTS.items()}


@dataclass
class Bands:
    model_scale: float  # log half-width per unit of (1 + distance), no probe
    probe_scale: float  # the same for estimates re-anchored by a probe
    share: float  # the share of held-out points the scales were set to cover
    coverage_model: float
    coverage_probe: float


@dataclass
class CrossDeviceModel:
    fit: Fit
    efficiency: Efficiency
    bands: Bands
    points: list[Point]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    origin: str = "builtin"

    def describe(self) -> dict:
        return {**self.fit.describe(), "reference": self.origin,
                "scaling_loss_per_doubling": round(self.efficiency.loss_per_doubling, 4),
                "band_scale": round(self.bands.model_scale, 3), "probe_band_scale": round(self.bands.probe_scale, 3)}


def build(rows, catalog: Catalog | None, origin: str = "builtin") -> CrossDeviceModel:
    eff = efficiency_from_pairs(rows)
    points, skipped = reference_points(rows, catalog, eff)
    if not points:
        raise ValueError("no reference row can be fitted (see 'advisor references check')")
    return CrossDeviceModel(fit(points), eff, compute_bands(points), points, skipped, origin)


def compute_bands(points: list[Point]) -> Bands:
    held, probe_held = leave_one_device_out(points, FLOPS)
    held = [h for h in held if h.estimable]
    s0, s1 = band_scale(held), band_scale(probe_held)
    if math.isnan(s0):
        raise ValueError("too few devices to calibrate the bands (leave-one-device-out needs two devices of a kind)")
    if math.isnan(s1):
        s1 = s0  # no two devices in one suite: a probe's band is taken as the model's
    return Bands(s0, s1, CALIBRATED_SHARE, coverage(held, s0), coverage(probe_held, s1))
