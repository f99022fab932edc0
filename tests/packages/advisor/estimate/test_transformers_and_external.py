"""A second transformer in the dataset (BERT-Base), a workload's own residual on a device, the
leave-one-device-out check of the shaped model, and the held-out published figures the benchmark
checks the model against (benchmarks/external_figures.json)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from advisor.estimate.calibrate import leave_one_device_out
from advisor.estimate.evaluate import by_workload, check, external
from advisor.estimate.fit import own_key
from advisor.estimate.model import FLOPS, build
from advisor.estimate.references import load_references
from advisor.estimate.shapes import intensities
from advisor.estimate.split import NONE

EXTERNAL = Path(__file__).resolve().parents[4] / "benchmarks" / "external_figures.json"


@pytest.fixture(scope="module")
def model(refs, snapshot):
    return build(refs.measurements, snapshot)


def test_bert_base_mirrors_bert_large_in_one_table(refs):
    """The BERT-Base rows are the same Lambda CSV rows (machine, GPU count, precision) as BERT-Large's."""
    def key(m):
        return m.source.where.split(", column")[0], m.precision, m.gpus, m.device, m.device_variant

    base = {key(m): m for m in refs.measurements if m.model == "bert-base"}
    large = {key(m): m for m in refs.measurements if m.model == "bert-large" and m.id.startswith("lambda-v1-")}
    assert base and set(base) == set(large)
    for k, m in base.items():
        assert f"column bert_base_squad: {m.samples_per_sec:g}" in m.source.where
        assert m.source.commit == large[k].source.commit and m.stack == large[k].stack
    # A smaller network on the same GPU: more sequences per second.
    assert all(base[k].samples_per_sec > large[k].samples_per_sec for k in base)
    assert intensities()["bert-base"] < intensities()["bert-large"]


def test_two_transformers_calibrate_each_others_band(model):
    checks = {c.workload: c for c in by_workload(model, among=("bert",))}
    assert set(checks) == {"bert-base", "bert-large"}
    assert all(0 <= c.coverage <= 1 for c in checks.values())
    # Calibrated on the other alone, each differs from the band calibrated on every other workload.
    every = {c.workload: c for c in by_workload(model)}
    assert {w: c.median_abs_error for w, c in checks.items()} == {w: every[w].median_abs_error for w in checks}


def test_a_workload_takes_its_own_residual_on_a_device(model):
    f = model.fit
    a10 = next(d for d in f.devices.values() if d.group == "A10")
    assert own_key("A10", "bert-large") in f.resid and own_key("A10", "resnet50") in f.resid
    # Another workload (a user's) takes the device's residual over all its rows.
    pooled = f.log_predict(a10, "resnet50", "default", level=0.0) - f.log_predict(a10, "resnet50", "default", level=0.0,
                                                                                    own_rows=False)
    mean, n = f.resid[own_key("A10", "resnet50")]
    assert pooled == pytest.approx(mean * n / (n + 2.0))
    own = f.log_predict(a10, "someone/else", "default", level=0.0) - f.log_predict(a10, "someone/else", "default",
                                                                                   level=0.0, own_rows=False)
    mean, n = f.resid["A10"]
    assert own == pytest.approx(mean * n / (n + 2.0))
    assert f.resid[own_key("A10", "bert-large")][0] != f.resid[own_key("A10", "resnet50")][0]


def test_leave_one_device_out_checks_the_model_as_built(model, refs, snapshot):
    """The check fits the shaped model when the model is shaped (its bands were calibrated so)."""
    shaped, _ = leave_one_device_out(model.points, FLOPS, intensities())
    shared, _ = leave_one_device_out(model.points, FLOPS, None)
    rows = {r.row: r.predicted for r in check(model).rows}
    h = next(h for h in shaped if h.point.workload == "bert-large" and h.estimable)
    assert rows[h.point.label] == pytest.approx(math.exp(h.log_pred))
    other = next(x for x in shared if x.point.label == h.point.label)
    assert other.log_pred != pytest.approx(h.log_pred)
    before = build(refs.measurements, snapshot, shape=NONE)
    assert {r.row: r.predicted for r in check(before).rows}[h.point.label] == pytest.approx(math.exp(other.log_pred))


def test_the_external_figures_are_not_in_the_dataset(refs):
    ext = load_references(EXTERNAL).measurements
    assert len(ext) >= 10 and {m.model for m in ext} == {"resnet50"}
    ids = {m.id for m in refs.measurements}
    read = {(m.source.label(), m.source.where) for m in refs.measurements}
    for m in ext:
        assert m.id not in ids and (m.source.label(), m.source.where) not in read, m.id
        assert m.precision in ("16-mixed", "bf16-mixed") and m.source.commit


def test_external_predicts_each_figure_at_its_own_stack(model, refs, snapshot):
    ext = load_references(EXTERNAL).measurements
    rows, skipped = external(model, ext, snapshot)
    assert len(rows) + len(skipped) == len(ext) and rows
    for r in rows:
        assert r.low < r.predicted < r.high and r.covered == (r.low <= r.published <= r.high)
    # A default-stack figure is compared with the estimate over the fitted tuned/default factor.
    by_id = {m.id: m for m in ext}
    r = next(r for r in rows if by_id[r.row].stack == "default")
    m = by_id[r.row]
    f = model.fit
    dev = next(d for d in f.devices.values() if d.key == r.device)
    assert r.predicted == pytest.approx(math.exp(f.log_predict(dev, "resnet50", "tuned") - f.sigma) * model.efficiency(m.gpus))
    # A row the model was fitted on is no outside check.
    fitted = next(x for x in refs.measurements if x.id == model.points[0].label)
    _, why = external(model, [fitted], snapshot)
    assert why and "fitted" in why[0][1]
