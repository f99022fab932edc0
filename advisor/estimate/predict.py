"""Prediction: one device's throughput for the user's workload, its band and its basis.

Without probes the level comes from the workload's reference rows (its fitted lambda; a user's
own workload has none and is estimated from its probes only, never from another workload's
figures scaled by FLOPs per sample) and the estimate is for
the probe's own stack after its ladder (points.PROBE_STACK: AMP + channels_last in plain PyTorch,
which the dataset puts at its tuned level); the band's lower end reaches the NCHW default level,
where a GPU on which channels_last does not win still is.

With probes the level is re-anchored: each probe's measured / predicted ratio on its own device
moves every other estimate. Each probe (carried over by the model's device ratio) and the
reference estimate are sources with calibrated half-widths s, averaged with weights 1/s^2: the
probe-calibrated half-width grows with the distance to the target (and doubles for an unreliable
probe); the reference estimate's includes the stack spread (the probe measured your stack, the
published rows did not). A probe of another device kind than the fit knows is not used.

`Estimator.with_measurements()` re-estimates given other (e.g. hypothetical) measurements: what a
probe plan needs to ask "what would probing X change?".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from catalog.accelerators import AcceleratorSpec
from catalog.hardware import best_dtype
from catalog.models import Catalog, InstanceType
from lightning_module.contract.contention import slowdown

from .calibrate import TRANSFER_SHARE, distance, level_for, pair_distance
from .fit import CPU_CHANNELS_EXPONENT, CPU_SCALING, cpu_channels_log, cpu_log_peak
from .model import FLOPS, CrossDeviceModel
from .points import (
    PRECISION_OF_DTYPE,
    PROBE_STACK,
    CpuHost,
    Device,
    cpu_device,
    gpu_device,
    instance_device,
)
from .shapes import intensity_of, unshaped_reason

UNCALIBRATED = "uncalibrated"  # a band no held-out case of its kind stands behind
UNRELIABLE_WIDEN = 2.0  # an unreliable probe's half-width against a reliable one's (a quarter of its weight)


@dataclass(frozen=True)
class Measured:
    """A user's probe as the estimator uses it: per device, as if on one device."""

    instance_type: str | None  # None: a machine off EC2 (or a type the catalog does not list)
    result_id: str
    precision: str
    per_device_sps: float
    reliable: bool = True
    gpu: AcceleratorSpec | None = None  # off EC2: the GPU its fingerprint names, the device it measured
    cpu: CpuHost | None = None  # off EC2, a CPU probe: the host CPU its fingerprint describes
    machine: str | None = None  # off EC2: that GPU (or CPU) as the machine named it
    # Measured while the machine was busy (contention.slowdown; 1: quiet): alone it ran up to this
    # much faster, so it anchors the band from its figure to this times it, centred between them.
    slowdown: float = 1.0

    @property
    def where(self) -> str:
        """The probe's machine in a note: its instance type, or what it is off EC2."""
        return self.instance_type or f"{self.machine} (off EC2)"


@dataclass
class Estimate:
    per_device: float  # samples/s of one device (the middle of the band)
    low: float
    high: float
    precision: str
    basis: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class Estimator:
    """Per-device estimates for one workload on any instance type of a catalog."""

    def __init__(self, model: CrossDeviceModel, catalog: Catalog, workload: str, flops_per_sample: float,
                 measured: list[Measured] | None = None, use_references: bool = True,
                 intensity: float | None = None):
        self.model = model
        # The workload's shape: the table's intensity for a known workload, its probe's for yours.
        self.intensity = intensity_of(workload) or intensity
        self.given_intensity = intensity
        self.catalog = catalog
        self.workload = workload
        self.flops = flops_per_sample
        self.use_references = use_references
        self.measured = list(measured or [])
        flops = dict(FLOPS)
        if math.isfinite(flops_per_sample) and workload not in flops:
            flops[workload] = flops_per_sample
        self.level = level_for(model.fit, workload, flops) if use_references else 0.0
        if self.level is not None and workload in FLOPS and math.isfinite(flops_per_sample):
            self.level += math.log(FLOPS[workload] / flops_per_sample)  # another image size: FLOPs ~ pixels
        # A user's own workload has no published rows: the reference level would be another
        # workload's figures scaled by a FLOPs ratio, which says nothing about its speed. Its
        # estimates rest on its own probes alone (carried between devices by the model's ratios).
        # Rows of its own: a builtin's published ones, or (--references none) the probes the model was fitted on.
        self.own_rows = workload in FLOPS or workload in model.fit.level
        self._probes = [self._probe_point(m) for m in self.measured]
        self._facts: dict[Device, tuple[list[str], list[Device]]] = {}

    def with_measurements(self, measured: list[Measured]) -> Estimator:
        """The same estimator, re-anchored on these measurements instead."""
        return Estimator(self.model, self.catalog, self.workload, self.flops, measured, self.use_references,
                         self.given_intensity)

    # -- probes --------------------------------------------------------------------------------

    def _probe_point(self, m: Measured):
        if m.gpu is not None:  # a GPU off EC2: the device is what it measured, whatever the host
            dev = gpu_device(m.gpu, m.precision)
        elif m.cpu is not None:  # a CPU off EC2: its fingerprint's cores x clock x ISA, as a type's
            dev = cpu_device(m.cpu, m.precision)
        else:
            it = self.catalog.instance_types.get(m.instance_type)
            dev = instance_device(it, m.precision) if it is not None else None
        if dev is None:
            return None
        pred = self.model.fit.log_predict(dev, self.workload, PROBE_STACK, level=self.level or 0.0,
                                          own_rows=self.use_references, intensity=self.intensity)
        return dev, math.log(m.per_device_sps) - pred, m

    # -- one instance type ---------------------------------------------------------------------

    def estimate(self, it: InstanceType) -> Estimate | str:
        """The estimate for one device of `it`, or why there is none."""
        dtype = best_dtype(it)
        if dtype is None:
            return f"unknown accelerator {it.accelerator_model!r}: no peak figures to estimate from"
        precision = PRECISION_OF_DTYPE[dtype]
        dev = instance_device(it, precision)
        if dev is None:
            return "no peak FLOP/s or memory bandwidth for this device (CPU clock or accelerator spec missing)"
        known = self.model.fit.knows(dev.kind)
        # A probe of another kind says nothing calibrated about this one unless the fit knows both.
        probes = [p for p in self._probes
                  if p is not None and (p[0].kind == dev.kind or (known and self.model.fit.knows(p[0].kind)))]
        if not known and not probes:
            what = "CPU" if dev.kind == "cpu" else dev.kind
            return (f"no published row and no probe on any {what}: an estimate across device kinds is not "
                    f"calibrated; probe one {what} instance type")
        reference = self._from_references(dev, precision) if (known and self.use_references and self.own_rows
                                                               and self.level is not None) else None
        if probes:
            return self._anchored(dev, precision, probes, reference)
        if reference is not None:
            return reference
        if not self.use_references:
            return "not measured, and --references none: estimates need at least one probe of this workload"
        return f"no reference rows for {self.workload}: probe it on one instance type first"

    def _from_references(self, dev: Device, precision: str) -> Estimate:
        f, bands = self.model.fit, self.model.bands
        mid = f.log_predict(dev, self.workload, PROBE_STACK, level=self.level, intensity=self.intensity)
        d, why = distance(dev, self.workload, f)
        w = bands.model_scale * (1.0 + d)
        # The ladder keeps its best rung: where channels_last does not pay, the probe still gets
        # the NCHW default level, tuned/default below the estimate.
        stack = max(f.stack_log(dev), 0.0)
        # Above: a tuned stack bought more on some of the generation's devices than its fitted
        # factor (the A100: DLE's NHWC + DALI 1.72x Lambda's NCHW, the family 1.30x): the upper end
        # reaches the most it bought on any of them.
        above = max(0.0, f.sigma_band.get(dev.family or "", (0.0, 0.0))[1] - f.stack_log(dev)) if dev.kind != "cpu" else 0.0
        basis = self._basis(dev, precision, mid) | {
            "band": {"log_half_width": round(w, 3), "distance": round(d, 2), "extrapolation": why or ["inside the fitted range"],
                     "stack_spread": round(math.exp(stack), 3), "stack_above": round(math.exp(above), 3),
                     "calibrated": f"leave-one-device-out: covers {bands.coverage_model:.0%} of held-out figures "
                                   f"(target {bands.share:.0%}); band = x/exp({bands.model_scale:.3f} x (1 + distance)), "
                                   "lower end / the generation's tuned/default stack ratio, upper end x the most a tuned "
                                   "stack bought on one of its devices over that ratio"},
        }
        notes = [f"extrapolated: {'; '.join(why)}"] if d >= 1 else []
        est = Estimate(math.exp(mid), math.exp(mid - stack - w), math.exp(mid + w + above), precision, basis, notes)
        if dev.kind == "cpu" and f.cpu_ref:
            _cpu_bracket(est, dev.peak / f.cpu_ref, "the published CPU rows' counted peak")
            _channels_band(est, dev, None, f.cpu_channels_ref, "the published CPU rows'")
        return est

    def _anchored(self, dev: Device, precision: str, probes, reference: Estimate | None) -> Estimate:
        """Each probe, carried over by the model's device ratio, and the reference estimate are
        estimates of one number with calibrated half-widths s; they are averaged with weights 1/s^2
        (the nearest, most reliable source counts most). The band is the narrowest single source's:
        their errors share the model, so averaging does not shrink it."""
        f = self.model.fit
        base = f.log_predict(dev, self.workload, PROBE_STACK, level=self.level or 0.0, own_rows=self.use_references,
                             intensity=self.intensity)
        scale, calibrated = self._probe_band(dev, probes)
        sources, used = [], []
        for pdev, shift, m in probes:
            d = pair_distance(pdev, dev)
            half = scale * (1.0 + d) * (1.0 if m.reliable else UNRELIABLE_WIDEN)
            busy = math.log(m.slowdown) / 2  # from its figure to slowdown x it, centred between
            sources.append((base + shift + _cpu_carry(dev, pdev, f.cpu_ref) + busy, half + busy))
            used.append({"instance_type": m.instance_type, "machine": m.machine, "result_id": m.result_id,
                         "measured_per_device": round(m.per_device_sps, 2),
                         # exp(log(measured) - shift): no division by exp(shift), which underflows to 0
                         "predicted_per_device": round(math.exp(math.log(m.per_device_sps) - shift), 2),
                         "ratio": round(math.exp(shift), 3), "distance": round(d, 2), "reliable": m.reliable}
                        | ({"contention_slowdown": round(m.slowdown, 3)} if m.slowdown > 1.0 else {}))
        if reference is not None:
            # The published rows do not know your stack: their estimate, with a half-width that
            # includes the stack spread.
            lo, hi = math.log(reference.low), math.log(reference.high)
            sources.append((math.log(reference.per_device), (hi - lo) / 2))
        weights = [1.0 / h**2 for _, h in sources]
        total = sum(weights)
        mid = sum(w * m for w, (m, _) in zip(weights, sources)) / total
        half = min(h for _, h in sources)
        for u, wt in zip(used, weights):
            u["weight"] = round(wt / total, 3)
        nearest = min(u["distance"] for u in used)
        basis = self._basis(dev, precision, mid) | {
            "probes": used,
            "reference_weight": round(weights[-1] / total, 3) if reference is not None else 0.0,
            "band": {"log_half_width": round(half, 3), "distance_to_nearest_probe": nearest,
                     "calibrated": calibrated},
        }
        notes = []
        if not any(u["reliable"] for u in used):
            notes.append("re-anchored on unreliable probes only: band widened")
        if calibrated == UNCALIBRATED and reference is None:
            kinds = "/".join(sorted({p[0].kind.upper() for p in probes}))
            notes.append(f"uncalibrated: known only from {kinds} probes, and no published workload shows how a {kinds} "
                         f"figure carries to a {dev.kind.upper()}: probe one {dev.kind.upper()} instance type")
        if self.intensity is None and self.model.shaped and not self.own_rows:
            notes.append(f"unshaped: {unshaped_reason(self.workload)}; the memory term takes ResNet-50's intensity")
        est = Estimate(math.exp(mid), math.exp(mid - half), math.exp(mid + half), precision, basis, notes)
        cpus = [(abs(math.log(dev.peak / p[0].peak)), p) for p in probes if p[0].kind == "cpu"]
        if dev.kind == "cpu" and cpus:
            _, (pdev, _, m) = min(cpus, key=lambda c: c[0])  # the nearest CPU probe in counted peak
            _cpu_bracket(est, dev.peak / pdev.peak, f"your {m.where} probe's counted peak")
            _channels_band(est, dev, pdev, f.cpu_channels_ref, f"your {m.where} probe's")
        return est

    def _probe_band(self, dev: Device, probes) -> tuple[float, str]:
        """(band scale, how it was calibrated) for estimates carried from probes to `dev`. A workload
        with published rows: one device's row predicted from another's in the same suite. Your own
        workload: leave-one-workload-out (a workload known from one device). A transfer across
        device kinds that no held-out workload showed: the widest scale, and `uncalibrated`."""
        bands = self.model.bands
        if self.own_rows or math.isnan(bands.transfer_scale):
            scale, words = bands.probe_scale, (
                f"one device's published figure predicted from another's in the same suite: covers "
                f"{bands.coverage_probe:.0%} of held-out pairs (target {bands.share:.0%})")
        else:
            scale, words = bands.transfer_scale, (
                f"leave-one-workload-out: a workload fitted out, given its shape and one device, its other devices "
                f"predicted: covers {bands.coverage_transfer:.0%} of held-out pairs over {bands.transfer_workloads} "
                f"workloads (their {TRANSFER_SHARE:.0%} quantile, each workload weighted equally; pairs at one batch)")
        if all(p[0].kind != dev.kind and p[0].kind not in bands.transfer_from_kinds for p in probes):
            return max(scale, bands.model_scale, bands.transfer_scale if not math.isnan(bands.transfer_scale) else 0.0), \
                UNCALIBRATED
        return scale, (f"{words}; half-width {scale:.3f} x (1 + distance) per probe (x{UNRELIABLE_WIDEN:g} unreliable), "
                       "the narrowest source's")

    def _basis(self, dev: Device, precision: str, log_mid: float) -> dict:
        f = self.model.fit
        rows, near = self._device_facts(dev)
        return {
            "model": f.describe() | {"reference": self.model.origin if self.use_references else "none (probes only)"},
            "device": dev.key, "precision": precision, "peak_tflops": round(dev.peak, 2),
            "bandwidth_gbs": dev.bandwidth,
            "workload_level": None if self.level is None else round(self.level, 3),
            "reference_rows": rows,  # this device's own published rows (they move its estimate)
            "nearest_anchor_devices": [g.key for g in near] if self.use_references else [],
            "per_device_samples_per_sec": round(math.exp(log_mid), 2),
        } | self._family(dev)

    def _family(self, dev: Device) -> dict:
        """What a device with no rows of its own took from its architecture's fitted devices."""
        factor, family = self.model.fit.family_factor(dev, self.workload)
        if family is None:
            return {}
        siblings = sorted({d.group for d in self.model.fit.devices.values() if d.family == family})
        return {"architecture_family": {"family": family, "factor": round(factor, 3), "devices": siblings,
                                        "why": "no rows of its own: its architecture's fitted devices' mean "
                                               "residual (for this workload where they have its rows), n devices "
                                               "counting n / (n + 2)"}}


    def _device_facts(self, dev: Device) -> tuple[list[str], list[Device]]:
        """(this device's own published rows, the three fitted devices nearest it): the same for
        every size of one device, so worked out once per device."""
        if dev not in self._facts:
            # A derived row is a weak anchor: said so, with its weight against a read one.
            rows = [p.label + (f" (derived: weight {p.weight:.2g})" if p.weight < 1 else "")
                    for p in self.model.points if p.device.group == dev.group] if self.use_references else []
            self._facts[dev] = (rows, sorted(self.model.fit.devices.values(), key=lambda g: pair_distance(g, dev))[:3])
        rows, near = self._facts[dev]
        return list(rows), near


def _cpu_carry(dev: Device, probe: Device, ref: float | None) -> float:
    """A CPU probe carried to another CPU scales from the probe's own counted peak, as the model
    scales from its CPU anchors' (fit.cpu_log_peak): linear below it, CPU_SCALING of the way above,
    so that _cpu_bracket's no-gain-to-linear band is centred on it. Returns the log correction to
    the model's own ratio (0 for a GPU)."""
    if dev.kind != "cpu" or probe.kind != "cpu":
        return 0.0
    own = cpu_log_peak(dev.peak, probe.peak) - math.log(probe.peak)
    return own - (cpu_log_peak(dev.peak, ref) - cpu_log_peak(probe.peak, ref))


def _channels_band(est: Estimate, dev: Device, anchor: Device | None, ref: float | None, whose: str) -> None:
    """Say what memory channels moved a CPU estimate by against its anchor (the published CPU rows,
    or a CPU probe), and widen the band from no channel effect to twice it: the exponent is one
    observation (fit.py). A CPU whose count is unknown (a family without a sourced count, a machine
    off EC2), target or anchor, is taken at the published rows' balance `ref`."""
    if not ref:
        return
    mine = dev.channels_per_core or ref
    theirs = (anchor.channels_per_core or ref) if anchor is not None else ref
    log_f = cpu_channels_log(mine, ref) - cpu_channels_log(theirs, ref)
    if abs(log_f) < 0.005:
        return
    f = math.exp(log_f)
    est.low = min(est.low, est.per_device / f, est.per_device * f)
    est.high = max(est.high, est.per_device / f, est.per_device * f)
    est.basis["memory_channels"] = {
        "channels_per_core": round(mine, 4), "anchor_channels_per_core": round(theirs, 4),
        "factor": round(f, 3), "exponent": round(CPU_CHANNELS_EXPONENT, 3),
        "band": "no channel effect to twice it (Article C: ~20% from 8 vs 4 channels, one observation)"}
    unknown = [what for what, d in (("this CPU's", dev), ("the anchor's", anchor))
               if d is not None and not d.channels_per_core]
    said = f" ({' and '.join(unknown)} count unknown: taken at the published rows')" if unknown else ""
    est.notes.append(f"memory channels: {mine:.3g} per core against {whose} {theirs:.3g}{said}: x{f:.2f} "
                     "(Article C's ~20% per doubling, one observation; band from no effect to twice it)")


def _cpu_bracket(est: Estimate, ratio: float, anchor: str) -> None:
    """Widen a CPU estimate to what is known of CPU scaling: `ratio` (> 1) x its anchor's counted
    peak gains between nothing and `ratio` (fit.CPU_SCALING: the middle is ratio^0.5). Below the
    anchor the estimate is linear (fit.cpu_log_peak) and nothing is added."""
    if ratio < 1.02:
        return
    # The bracket's ends (exponent 0 and 1) against the middle (exponent CPU_SCALING).
    lo_f, hi_f = 1.0 / ratio**CPU_SCALING, ratio / ratio**CPU_SCALING
    est.low, est.high = min(est.low, est.per_device * lo_f), max(est.high, est.per_device * hi_f)
    est.basis["cpu_scaling"] = {"peak_ratio_to_anchor": round(ratio, 3), "anchor": anchor, "exponent": CPU_SCALING,
                                "bracket": "no gain (Article A: a second socket gave none) to linear in the cores' FLOP/s"}
    est.notes.append(f"CPU scaling: {ratio:.3g}x {anchor}; published figures bracket the gain between none and "
                     f"{ratio:.3g}x (middle {ratio ** CPU_SCALING:.2g}x)")


def measured_from(result, devices_in_run: int, efficiency) -> Measured:
    """A ProbeResult as one device's figure: a multi-GPU probe divided by n x efficiency(n)."""
    n = max(1, devices_in_run)
    return Measured(result.instance_type, result.result_id, result.config.precision,
                    result.samples_per_sec / n / efficiency(n), bool(getattr(result, "reliable", True)),
                    slowdown=slowdown(getattr(result, "contention", None)))


