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
    leave_one_workload_out,
    transfer_scale,
    transfer_weights,
)
from .fit import Fit, fit
from .points import Point, reference_points
from .shapes import intensities
from .split import NONE, SPLIT

FLOPS = {name: f.train_flops_per_sample for name, f in FACTS.items()}


@dataclass
class Bands:
    model_scale: float  # log half-width per unit of (1 + distance), no probe
    probe_scale: float  # the same for estimates re-anchored by a probe
    share: float  # the share of held-out points the scales were set to cover
    coverage_model: float
    coverage_probe: float
    # A workload known from one device (leave-one-workload-out), by the distance between the devices:
    transfer_scale: float = float("nan")  # nan: no workload with rows on two device models
    coverage_transfer: float = float("nan")
    transfer_workloads: int = 0  # workloads the transfer scale was calibrated on
    # kinds a transfer *from* was calibrated for (an anchor of that kind predicted another kind's rows)
    transfer_from_kinds: list[str] = field(default_factory=list)


@dataclass
class CrossDeviceModel:
    fit: Fit
    efficiency: Efficiency
    bands: Bands
    points: list[Point]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    origin: str = "builtin"
    # split.SPLIT: each workload's split intensity; split.ALL: every op's bytes (before the split);
    # split.NONE: one shared intensity (the model before workload shapes)
    shape: str = SPLIT

    @property
    def shaped(self) -> bool:
        return self.shape != NONE

    def intensities(self) -> dict[str, float] | None:
        """The workload intensities the model was fitted with (None: one shared)."""
        return intensities(self.shape)

    def describe(self) -> dict:
        return {**self.fit.describe(), "reference": self.origin,
                "scaling_loss_per_doubling": round(self.efficiency.loss_per_doubling, 4),
                "band_scale": round(self.bands.model_scale, 3), "probe_band_scale": round(self.bands.probe_scale, 3)}


def build(rows, catalog: Catalog | None, origin: str = "builtin", shape: str = SPLIT) -> CrossDeviceModel:
    """The model of a reference set; `shape` split.ALL or split.NONE give the models before the split
    and before workload shapes (kept for benchmarks/estimate_accuracy.py's before/after)."""
    eff = efficiency_from_pairs(rows)
    points, skipped = reference_points(rows, catalog, eff)
    if not points:
        raise ValueError("no reference row can be fitted (see 'advisor references check')")
    given = intensities(shape)
    return CrossDeviceModel(fit(points, given), eff, compute_bands(points, given), points, skipped, origin, shape)


# --references none: the model's shape (theta_m, theta_o) and the workload's level fitted on your
# probes alone need a residual to calibrate a band on: probes on at least this many device models
# (level + two shape parameters, and one left over for each leave-one-out fit to be checked on).
MIN_PROBED_DEVICES = 4


def from_probes(points: list[Point], workload: str, intensity: float | None) -> CrossDeviceModel:
    """The model fitted on a user's probes alone (`--references none`): no published figure, no
    published n-GPU scaling (the all-reduce model alone), bands from leaving each probed device
    out. Raises ValueError with what to probe when there are too few device models."""
    groups = sorted({p.device.group for p in points})
    if len(groups) < MIN_PROBED_DEVICES:
        have = f"{len(groups)}: {', '.join(groups)}" if groups else "none"
        raise ValueError(f"--references none fits the model on your probes alone, which needs probes of {workload} on at "
                         f"least {MIN_PROBED_DEVICES} device models (you have {have}); probe "
                         f"{MIN_PROBED_DEVICES - len(groups)} more device model(s), or use --references builtin")
    given = {workload: intensity} if intensity else None
    bands = compute_bands(points, given)
    return CrossDeviceModel(fit(points, given, reference=workload), Efficiency(0.0, []), bands, points, [],
                            "none (your probes alone)", shape=SPLIT if given else NONE)


def shaped_transfers(held: list, intensity: dict[str, float] | None) -> list:
    """The held-out transfers the transfer band is calibrated on: of workloads whose shape is counted
    (all, in the model before shapes). A user's workload carries its probe's count; a dataset
    workload with none is predicted at ResNet-50's intensity, an error a user's estimate does not have."""
    return [h for h in held if h.why[0] in intensity] if intensity else held


def compute_bands(points: list[Point], intensity: dict[str, float] | None = None) -> Bands:
    held, probe_held = leave_one_device_out(points, FLOPS, intensity)
    held = [h for h in held if h.estimable]
    s0, s1 = band_scale(held), band_scale(probe_held)
    if math.isnan(s0):
        raise ValueError("too few devices to calibrate the bands (leave-one-device-out needs two devices of a kind)")
    if math.isnan(s1):
        s1 = s0  # no two devices in one suite: a probe's band is taken as the model's
    moved = shaped_transfers(leave_one_workload_out(points, intensity), intensity)
    s2 = transfer_scale(moved)
    c2 = coverage(moved, s2, transfer_weights(moved)) if moved else float("nan")
    kind_of = {p.label: p.device.kind for p in points}
    from_kinds = sorted({kind_of[h.anchor] for h in moved if kind_of[h.anchor] != h.point.device.kind})
    return Bands(s0, s1, CALIBRATED_SHARE, coverage(held, s0), coverage(probe_held, s1), s2, c2,
                 len({h.why[0] for h in moved}), from_kinds)

