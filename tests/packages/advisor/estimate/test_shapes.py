"""Workload shape in the cross-device model: per-workload intensity, leave-one-workload-out
calibration, derived figures as weak anchors, uncalibrated transfers across device kinds."""

from __future__ import annotations

import json
import math

import pytest
from factories import probe_result
from recommend_catalogs import NOW

from advisor.estimate.calibrate import (
    PROBED_KINDS,
    TRANSFER_SHARE,
    coverage,
    leave_one_workload_out,
    transfer_scale,
    transfer_weights,
)
from advisor.estimate.evaluate import by_workload
from advisor.estimate.model import build, shaped_transfers
from advisor.estimate.points import gpu_device
from advisor.estimate.predict import UNCALIBRATED
from advisor.estimate.shapes import INTENSITY_PATH, intensities, intensity_of
from advisor.estimate.split import ALL, NONE
from advisor.estimate.throughput import ThroughputModel
from advisor.store import ResultStore
from catalog import accelerators as acc
from lightning_module.contract.result import BUILTIN_MODELS
from lightning_module.contract.workload_facts import FACTS, facts_from_probes

OWN = "mypkg.models:Net"


def test_every_workload_is_shaped_with_how_or_unshaped_with_why(refs):
    body = json.loads(INTENSITY_PATH.read_text())
    shaped, unshaped = body["workloads"], body["unshaped"]
    for w in {m.model for m in refs.measurements} | set(BUILTIN_MODELS):
        assert (w in shaped) != (w in unshaped), w
    for w, v in shaped.items():
        assert v["derived"].startswith("counted by scripts/measure_workload_intensity.py")
        assert v["intensity"] == pytest.approx(v["train_flops_per_sample"] / v["traffic_bytes_per_sample"], rel=1e-3)
        # the split: FLOPs per byte of the ops without FLOPs, a part of every op's bytes
        assert v["split_intensity"] == pytest.approx(v["train_flops_per_sample"] / v["other_traffic_bytes_per_sample"],
                                                     rel=1e-3)
        assert 0 < v["other_traffic_bytes_per_sample"] < v["traffic_bytes_per_sample"]
    assert all(len(why) > 20 for why in unshaped.values())
    # The builtins' FLOPs are the probe's own count (lightning_module/contract/workload_facts.py).
    for w in ("resnet50", "resnet18"):
        assert shaped[w]["train_flops_per_sample"] == pytest.approx(FACTS[w].train_flops_per_sample, rel=1e-3)
    # ViT's attention is counted a little differently across torch versions (FACTS: torch 2.15).
    assert shaped["vit_b_16"]["train_flops_per_sample"] == pytest.approx(FACTS["vit_b_16"].train_flops_per_sample,
                                                                         rel=0.06)
    # Depthwise convolutions: EfficientNet moves far more bytes per FLOP than ResNet-50.
    assert intensities()["efficientnet-b0"] < intensities()["resnet50"] / 3
    # A transformer's bytes are mostly its matmuls' (fused attention moves no score matrix): the
    # split sets it further from ResNet-50 than every op's bytes did.
    split, every = intensities(), intensities(ALL)
    assert split["bert-large"] / split["resnet50"] > every["bert-large"] / every["resnet50"]


def test_a_users_intensity_comes_from_its_probe():
    assert intensity_of("resnet50") == intensities()["resnet50"]
    assert intensity_of(OWN, 2e9, 1e8) == pytest.approx(20.0)
    assert intensity_of(OWN) is None


def ratio(snapshot, workload: str, a: str, b: str) -> float:
    m = ThroughputModel(snapshot, FACTS[workload], f"{workload}-224px-1000c", now=NOW)
    return m.evaluate(snapshot.instance_types[a]).samples_per_sec / m.evaluate(snapshot.instance_types[b]).samples_per_sec


def test_device_ratios_differ_by_workload(refs, snapshot):
    """H100 over A100: the same for every workload with one shared intensity; now the model's shape
    gives the higher-intensity workloads more of the H100's FLOP/s. The shape alone (own_rows=False:
    ResNet-50's own published rows on both GPUs move its estimates, the others take each device's
    residual), and end to end (p5 over p4d) three different ratios."""
    f = build(refs.measurements, snapshot).fit
    h100, a100 = (gpu_device(acc.get(k), "16-mixed") for k in ("H100", "A100-40GB"))

    def shape(w: str) -> float:
        return math.exp(f.log_predict(h100, w, "default", level=0.0, own_rows=False)
                        - f.log_predict(a100, w, "default", level=0.0, own_rows=False))
    r50, r18, vit = (shape(w) for w in ("resnet50", "resnet18", "vit_b_16"))
    assert vit > r50 * 1.03 and r18 > r50 * 1.03
    ends = [ratio(snapshot, w, "p5.48xlarge", "p4d.24xlarge") for w in ("resnet50", "resnet18", "vit_b_16")]
    assert len({round(r, 3) for r in ends}) == 3


def test_the_shared_intensity_model_is_the_one_before_shapes(refs, snapshot):
    before = build(refs.measurements, snapshot, shape=NONE)
    after = build(refs.measurements, snapshot)
    assert before.fit.mem_factor == {} and after.fit.mem_factor["efficientnet-b0"] > 4
    dev = next(d for d in after.fit.devices.values() if d.key == "H100")
    # Before: every workload the same offset on one device; after: its own.
    assert before.fit.offset(dev, "bert-large") == before.fit.offset(dev, "efficientnet-b0")
    assert after.fit.offset(dev, "bert-large") < after.fit.offset(dev, "efficientnet-b0")


def test_leave_one_workload_out_predicts_inside_one_table_of_devices_the_probe_drives(refs, snapshot):
    model = build(refs.measurements, snapshot)
    held = leave_one_workload_out(model.points, intensities())
    assert held and all(h.point.device.kind in PROBED_KINDS for h in held)
    label = {p.label: p for p in model.points}
    for h in held:
        a = label[h.anchor]
        assert a.suite == h.point.suite and a.device.group != h.point.device.group and a.workload == h.why[0]
    checks = {c.workload: c for c in by_workload(model)}
    assert {"resnet50", "bert-large", "efficientnet-b0"} <= set(checks)
    assert all(0 <= c.coverage <= 1 and c.median_abs_error >= 0 for c in checks.values())
    b = model.bands
    assert math.isfinite(b.transfer_scale) and b.transfer_workloads == sum(c.shaped for c in checks.values())
    # The only CPU rows are ResNet-50's: with it held out no CPU is left, so no transfer from a CPU is calibrated.
    assert "cpu" not in b.transfer_from_kinds


def test_the_transfer_band_is_calibrated_on_every_shaped_workloads_transfers(refs, snapshot):
    model = build(refs.measurements, snapshot)
    held = shaped_transfers(leave_one_workload_out(model.points, intensities()), intensities())
    assert model.bands.transfer_scale == transfer_scale(held)
    assert coverage(held, model.bands.transfer_scale, transfer_weights(held)) >= TRANSFER_SHARE
    # One small workload's pairs far off the others widen the band for all (not ignored).
    for h in held:
        h.log_pred += 1.0 if h.why[0] == "efficientnet-b0" else 0.0
    assert transfer_scale(held) > model.bands.transfer_scale


def test_a_derived_figure_is_a_weak_anchor_not_a_reference(snapshot):
    m = ThroughputModel(snapshot, FACTS["resnet50"], "resnet50-224px-1000c", now=NOW)
    sizes = [m.evaluate(snapshot.instance_types[n]) for n in ("g5.xlarge", "g5.2xlarge", "g5.4xlarge")]
    assert all(t.source == "estimated" for t in sizes)
    # One A10G, one story: the sizes differ only where the host caps them (not here).
    assert len({round(t.samples_per_sec, 6) for t in sizes}) == 1 and not any("host_cap" in t.basis for t in sizes)
    assert "article-a-g5.2xlarge-tuned (derived: weight 0.11)" in sizes[1].basis["reference_rows"]
    # A figure read in its source still stands for its instance type.
    assert m.evaluate(snapshot.instance_types["c7i.2xlarge"]).source == "reference"


def cpu_only(snapshot, *extra):
    r = probe_result("c7i.2xlarge", 80.0, model=OWN, flops_per_sample=12e9)
    results = [r, *extra]
    return ThroughputModel(snapshot, facts_from_probes(OWN, 224, results), r.workload_id, 224, results, now=NOW)


def test_a_workload_known_only_from_a_cpu_is_uncalibrated_on_gpus(snapshot):
    m = cpu_only(snapshot)
    gpu = m.evaluate(snapshot.instance_types["g5.xlarge"])
    assert gpu.source == "estimated" and gpu.basis["band"]["calibrated"] == UNCALIBRATED
    assert any(n.startswith("uncalibrated: known only from CPU probes") for n in gpu.notes)
    # Another CPU is carried by the leave-one-workload-out band, calibrated.
    cpu = m.evaluate(snapshot.instance_types["c7i.8xlarge"])
    assert cpu.basis["band"]["calibrated"].startswith("leave-one-workload-out")
    # One GPU probe and the GPUs are calibrated again.
    m = cpu_only(snapshot, probe_result("g5.xlarge", 900.0, model=OWN, flops_per_sample=12e9, accelerator="gpu"))
    gpu = m.evaluate(snapshot.instance_types["g6.xlarge"])
    assert gpu.basis["band"]["calibrated"] != UNCALIBRATED and not any("uncalibrated" in n for n in gpu.notes)


def test_the_probe_plan_puts_a_gpu_probe_first_when_gpus_are_uncalibrated(cli, tmp_path):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(probe_result("c7i.2xlarge", 80.0, model=OWN, flops_per_sample=12e9))
    code, out, err = cli("recommend", "--budget", "200", "--deadline", "1d", "--samples", "3e7", "--workload", OWN,
                         "--store", str(db), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    first = doc["probe_next"][0]
    assert first["reason"].startswith("uncalibrated")
    rows = {r["instance_type"]: r for r in doc["recommendations"]}
    if first["instance_type"] in rows:
        assert rows[first["instance_type"]]["basis"]["band"]["calibrated"] == UNCALIBRATED


def test_cpus_do_not_scale_linearly_with_cores(snapshot):
    """c7i.48xlarge: one socket (96 vCPUs) counted, 12x the published c7i.2xlarge's peak. The
    middle is 12^0.5 x, the band spans no gain to 12x: not 12x from the core count alone."""
    m = ThroughputModel(snapshot, FACTS["resnet50"], "resnet50-224px-1000c", now=NOW)
    small = m.evaluate(snapshot.instance_types["c7i.2xlarge"])
    big = m.evaluate(snapshot.instance_types["c7i.48xlarge"])
    assert small.source == "reference" and big.source == "estimated"
    ratio = big.basis["cpu_scaling"]["peak_ratio_to_anchor"]
    assert ratio == pytest.approx(12.0, rel=0.01)
    assert big.samples_per_sec / small.samples_per_sec == pytest.approx(ratio**0.5, rel=0.15)
    assert big.low <= small.samples_per_sec * 1.05 and big.high >= small.samples_per_sec * ratio * 0.95
    assert any(n.startswith("CPU scaling: 12x") for n in big.notes)
    # The t4 estimate is no longer below a big CPU's middle figure.
    t4 = m.evaluate(snapshot.instance_types["g4dn.xlarge"])
    assert big.samples_per_sec < t4.samples_per_sec / 2


def test_the_decoders_counts_are_6n_plus_attention_from_their_published_configs(refs):
    """MPT's counted training FLOPs per token: 6 per parameter (NumParams as published with the
    rows) plus the attention's 12 x layers x d_model x sequence (QK^T and PV, forward and twice that
    backward, every query row); and a larger decoder reads a higher intensity (its matmuls grow with
    d_model squared, its elementwise bytes with d_model)."""
    shaped = json.loads(INTENSITY_PATH.read_text())["workloads"]
    params = {m.model: m.parameters for m in refs.measurements if m.model.startswith("mpt-")}
    layers = {"mpt-125m": (768, 12), "mpt-7b": (4096, 32), "mpt-70b": (8192, 80)}
    for name, (d, n) in layers.items():
        per_token = shaped[name]["train_flops_per_sample"] / 2048
        assert per_token == pytest.approx(6 * params[name] + 12 * n * d * 2048, rel=0.02), name
    order = [intensities()[f"mpt-{s}"] for s in ("125m", "350m", "760m", "1b", "3b", "7b", "13b", "30b", "70b")]
    assert order == sorted(order)
