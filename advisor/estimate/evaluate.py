"""How honest the estimates are: leave-one-device-out over a reference set.

Used by `advisor references check` and benchmarks/estimate_accuracy.py. Each device model is held
out, the anchor fit is redone without it, and its rows are predicted (at their own stack, workload
and precision). A row is covered when its published figure lies inside the band; the band's scale
is itself calibrated without that device (nested), so coverage is out of sample too.
The probe case predicts a held-out device's row from one row of another device in the same
benchmark suite (the single-probe case: your one probe, the shape of the model, nothing else).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..records import fact, record
from .calibrate import Held, band_scale, distance, leave_one_device_out, weighted_quantile
from .fit import fit, group_weights
from .model import FLOPS, CrossDeviceModel, shaped_transfers
from .points import Point, _row_device


@record(description="One held-out reference row (advisor/estimate/evaluate.py: CheckRow).")
@dataclass
class CheckRow:
    device: str = fact()  # the device model held out
    key: str = fact()  # its variant
    row: str = fact("the reference row's id")
    workload: str = fact()
    precision: str = fact()
    stack: str = fact()
    published: float = fact("samples/s per device")
    predicted: float = fact()
    low: float = fact()
    high: float = fact()
    error: float = fact("predicted / published - 1")
    covered: bool = fact()
    distance: float = fact()
    extrapolation: str = fact()
    anchor: str | None = fact(default=None)  # probe case: the row it was re-anchored on


@dataclass
class Check:
    rows: list[CheckRow]
    probe_rows: list[CheckRow]
    skipped: list[tuple[str, str]]  # rows the fit cannot use, and why
    not_estimable: list[CheckRow]  # held-out devices with no anchor of their kind left (not counted)

    def summary(self, probe: bool = False) -> dict:
        rows = self.probe_rows if probe else self.rows
        if not rows:
            return {"rows": 0}
        w = group_weights([r.device for r in rows])
        err = np.array([abs(r.error) for r in rows])
        cov = np.array([r.covered for r in rows], float)
        per_dev = self.per_device(probe)
        worst = max(per_dev, key=lambda d: d["median_abs_error"])
        return {
            "rows": len(rows), "devices": len(per_dev),
            "median_abs_error": weighted_quantile(err, w, 0.5),  # each device weighted equally
            "median_abs_error_rows": float(np.median(err)),
            "coverage": float((cov * w).sum() / w.sum()),
            "worst_device": worst["device"], "worst_median_abs_error": worst["median_abs_error"],
        }

    def per_device(self, probe: bool = False) -> list[dict]:
        out = []
        rows = self.probe_rows if probe else self.rows
        for dev in sorted({r.device for r in rows}):
            mine = [r for r in rows if r.device == dev]
            out.append({
                "device": dev, "rows": len(mine),
                "median_ratio": float(np.median([r.predicted / r.published for r in mine])),
                "median_abs_error": float(np.median([abs(r.error) for r in mine])),
                "covered": float(np.mean([r.covered for r in mine])),
                "extrapolation": mine[0].extrapolation,
            })
        return out


def check(model: CrossDeviceModel) -> Check:
    # The model as built: with the workloads' shapes when it has them (as its bands were calibrated).
    held, probe_held = leave_one_device_out(model.points, FLOPS, model.intensities())
    estimable = [h for h in held if h.estimable]
    rows = _rows(estimable, "model")
    lost = _rows([h for h in held if not h.estimable], "model", scale=model.bands.model_scale)
    return Check(rows, _rows(probe_held, "probe"), model.skipped, lost)


def _rows(held: list[Held], kind: str, scale: float | None = None) -> list[CheckRow]:
    # The band scale calibrated on every held-out device but this one (nested, out of sample).
    scales = {g: band_scale([h for h in held if h.point.device.group != g]) if scale is None else scale
              for g in {h.point.device.group for h in held}}
    out = []
    for h in held:
        s = scales[h.point.device.group]
        w = s * (1.0 + h.distance)
        p = h.point
        pred = math.exp(h.log_pred)
        out.append(CheckRow(
            p.device.group, p.device.key, p.label, p.workload, p.precision, p.stack, p.sps, pred,
            pred * math.exp(-w), pred * math.exp(w), pred / p.sps - 1.0, abs(h.resid) <= w, h.distance,
            "; ".join(h.why) or ("-" if kind == "model" else ""), h.anchor))
    return out


@dataclass
class RatioCheck:
    suite: str
    device: str
    baseline: str  # the suite's device the ratio is taken to
    published: float  # device / baseline, per device, as published
    predicted: float  # the same ratio from the model

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1.0


def out_of_fit_ratios(model: CrossDeviceModel, rows, catalog) -> list[RatioCheck]:
    """Figures the fit never sees (other frameworks: MLPerf's MXNet, ...) still say how devices
    compare within one stack: each suite's per-device ratios to its most common device, against
    the model's. A check on data outside the dataset's fitted rows, not a fit."""
    fitted = {p.label for p in model.points}
    suites: dict[str, list] = {}
    for m in rows:
        if m.id in fitted or m.nodes > 1:
            continue
        dev, _ = _row_device(m, catalog)
        if dev is None or dev.kind != "gpu":
            continue
        # One framework family is one stack here (MLPerf's MXNet submissions across rounds).
        suites.setdefault(f"{m.model} {m.precision} {m.framework.split()[0]}", []).append((m, dev))
    out = []
    for suite, members in sorted(suites.items()):
        keys = {dev.key for _, dev in members}
        if len(keys) < 2:
            continue
        by_key: dict[str, list] = {}
        for m, dev in members:
            by_key.setdefault(dev.key, []).append((m, dev))
        base_key = min(by_key, key=lambda k: (-len(by_key[k]), k))
        base_m, base_dev = by_key[base_key][0]
        base_sps = float(np.median([m.per_device_sps / model.efficiency(m.gpus) for m, _ in by_key[base_key]]))
        f = model.fit
        # A workload outside the fit still has its counted intensity (as a user's probed one does).
        counted = (model.intensities() or {}).get(base_m.model)
        for key, ms in sorted(by_key.items()):
            if key == base_key:
                continue
            m, dev = ms[0]
            sps = float(np.median([x.per_device_sps / model.efficiency(x.gpus) for x, _ in ms]))
            pred = math.exp(f.log_predict(dev, m.model, m.stack, level=0.0, intensity=counted) -
                            f.log_predict(base_dev, base_m.model, base_m.stack, level=0.0, intensity=counted))
            out.append(RatioCheck(suite, key, base_key, sps / base_sps, pred))
    return out


@dataclass
class WorkloadCheck:
    workload: str
    devices: int  # device models it has fitted rows on
    pairs: int  # (anchor row, target row) pairs on two device models
    median_abs_error: float  # predicted / published ratio to the anchor, each target device weighted equally
    coverage: float  # share inside the transfer band, its scale calibrated without this workload
    median_ratio: float
    shaped: bool = True  # its intensity is counted (else predicted at ResNet-50's; not in the band's calibration)


def by_workload(model: CrossDeviceModel, widest: bool = False, among: tuple[str, ...] = ()) -> list[WorkloadCheck]:
    """Leave-one-workload-out: each workload fitted out, given its shape and one measured device,
    its other devices predicted; per workload the ratio error and the nested band's coverage.
    `widest`: the band's scale the widest of the other workloads' own (calibrate.widest_transfer_scale,
    the rule before the pooled quantile), for the benchmark's before/after. `among`: only workloads whose name
    starts with one of these, each calibrated on the others of them alone (transformers on
    transformers)."""
    from .calibrate import coverage, leave_one_workload_out, transfer_scale, transfer_weights, widest_transfer_scale

    shapes = model.intensities()
    held = leave_one_workload_out(model.points, shapes)
    if among:
        held = [h for h in held if h.why[0].startswith(among)]
    out = []
    for w in sorted({h.why[0] for h in held}):
        mine = [h for h in held if h.why[0] == w]
        # calibrated without this workload, by the rule the product uses (or the widest-workload one
        # before it), on the workloads whose shape is counted (model.shaped_transfers)
        rest = shaped_transfers([h for h in held if h.why[0] != w], shapes)
        scale = (widest_transfer_scale(rest) if widest else transfer_scale(rest)) if rest else float("nan")
        wts = transfer_weights(mine)
        err = np.array([abs(math.expm1(-h.resid)) for h in mine])
        ratio = np.array([math.exp(-h.resid) for h in mine])
        out.append(WorkloadCheck(w, len({h.point.device.group for h in mine}), len(mine),
                                 weighted_quantile(err, wts, 0.5), coverage(mine, scale, wts),
                                 weighted_quantile(ratio, wts, 0.5), shapes is None or w in shapes))
    return out


@dataclass
class ExternalRow:
    row: str
    device: str  # the device variant (its key)
    gpus: int
    stack: str
    published: float  # per device
    predicted: float  # per device, at the row's own stack and GPU count
    low: float
    high: float
    source: str

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1.0

    @property
    def covered(self) -> bool:
        return self.low <= self.published <= self.high


def external(model: CrossDeviceModel, rows, catalog) -> tuple[list[ExternalRow], list[tuple[str, str]]]:
    """Published figures the model never saw (benchmarks/external_figures.json), predicted the way
    an estimate from references is (predict.py _from_references: the fit at the device, the band
    bands.model_scale x (1 + distance)), each at its own stack (a default-stack figure against the
    estimate over the fitted tuned/default factor) and GPU count (the published scaling rule).
    Returns (rows, skipped with why)."""
    fitted = {p.label for p in model.points}
    f, out, skipped = model.fit, [], []
    for m in rows:
        if m.id in fitted:
            skipped.append((m.id, "in the fitted dataset: not an outside check"))
            continue
        dev, why = _row_device(m, catalog)
        if dev is None or m.model not in f.level or m.nodes > 1:
            skipped.append((m.id, why or ("multi-node" if m.nodes > 1 else f"no {m.model} rows in the fit")))
            continue
        d, _ = distance(dev, m.model, f)
        w = model.bands.model_scale * (1.0 + d)
        pred = math.exp(f.log_predict(dev, m.model, m.stack)) * model.efficiency(m.gpus)
        out.append(ExternalRow(m.id, dev.key, m.gpus, m.stack, m.per_device_sps, pred, pred * math.exp(-w),
                               pred * math.exp(w), m.source.label()))
    return out, skipped


@dataclass
class WorkloadRatio:
    """One workload's device ratio a/b, published within one table and predicted with the workload
    fitted out (leave-one-workload-out: its shape and the other workloads' rows only)."""

    pair: tuple[str, str]  # (device a, device b) keys, a the one of the larger peak
    workload: str
    published: float  # a / b per device, the geometric mean over the tables that publish both
    predicted: float
    tables: int

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1.0


@dataclass
class PairCheck:
    pair: tuple[str, str]
    ratios: list[WorkloadRatio]

    @property
    def median_abs_error(self) -> float:
        return float(np.median([abs(r.error) for r in self.ratios]))

    @property
    def published_spread(self) -> float:
        """max / min published ratio across the pair's workloads."""
        xs = [r.published for r in self.ratios]
        return max(xs) / min(xs)

    @property
    def predicted_spread(self) -> float:
        xs = [r.predicted for r in self.ratios]
        return max(xs) / min(xs)

    @property
    def rank_correlation(self) -> float:
        """Spearman's rho between predicted and published ratios (nan under three workloads)."""
        if len(self.ratios) < 3:
            return float("nan")
        return spearman([r.predicted for r in self.ratios], [r.published for r in self.ratios])


def spearman(x, y) -> float:
    """Spearman's rank correlation (ties take their mean rank); nan where one side has no spread."""
    rx, ry = _ranks(np.asarray(x, float)), _ranks(np.asarray(y, float))
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=float)
    for v in np.unique(x):  # ties: their mean rank
        same = x == v
        ranks[same] = ranks[same].mean()
    return ranks


def device_pair_ratios(model: CrossDeviceModel, min_workloads: int = 2, matched: bool = False) -> list[PairCheck]:
    """For every device pair that two or more workloads were published on (inside one table each:
    one source, stack and precision), each workload's ratio a/b, published against predicted with
    that workload fitted out (its intensity given, its level cancels in the ratio).

    `matched`: only the published pairs a user's transfer is, one GPU on each device at one batch
    (calibrate.like_for_like). Without it a device's figure is the median of all its rows in the
    table, n-GPU rows included (each divided by the published scaling rule for every workload:
    Tacotron 2's 8-GPU rows on an H100 scale at ~0.5, so H100 / H100 PCIe read 0.76 where one GPU
    each reads 1.22) and each device at the batch its table chose for it (Tacotron 2's 4.5x from a
    V100-16GB at batch 48 to an A100-80GB at 256)."""
    from .calibrate import PROBED_KINDS, like_for_like

    intensity = model.intensities()
    published: dict[tuple[tuple[str, str], str], list[float]] = {}
    devices: dict[str, object] = {}
    for suite in sorted({p.suite for p in model.points}):
        rows = [p for p in model.points if p.suite == suite and p.device.kind in PROBED_KINDS
                and (not matched or p.devices == 1)]
        by_key: dict[str, list[float]] = {}
        of_key: dict[str, list[Point]] = {}
        for p in rows:
            by_key.setdefault(p.device.key, []).append(math.log(p.sps))
            of_key.setdefault(p.device.key, []).append(p)
            devices[p.device.key] = p.device
        keys = sorted(by_key)
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                if matched and not all(like_for_like(x, y) for x in of_key[a] for y in of_key[b]):
                    continue
                hi, lo = sorted((a, b), key=lambda k: (devices[k].peak, k), reverse=True)
                r = float(np.median(by_key[hi])) - float(np.median(by_key[lo]))
                published.setdefault(((hi, lo), rows[0].workload), []).append(r)
    by_pair: dict[tuple[str, str], list[str]] = {}
    for pair, w in published:
        by_pair.setdefault(pair, []).append(w)
    pairs = {pair: ws for pair, ws in by_pair.items() if len(set(ws)) >= min_workloads}
    fits: dict[str, object] = {}
    out = []
    for pair, ws in sorted(pairs.items()):
        ratios = []
        for w in sorted(set(ws)):
            if w not in fits:
                fits[w] = fit([p for p in model.points if p.workload != w], intensity)
            f = fits[w]
            shape = (intensity or {}).get(w)
            a, b = (devices[k] for k in pair)
            pred = f.log_predict(a, w, "tuned", level=0.0, intensity=shape) - \
                f.log_predict(b, w, "tuned", level=0.0, intensity=shape)
            pub = published[(pair, w)]
            ratios.append(WorkloadRatio(pair, w, math.exp(float(np.mean(pub))), math.exp(pred), len(pub)))
        out.append(PairCheck(pair, ratios))
    return out
