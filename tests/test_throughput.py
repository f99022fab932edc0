"""Where each throughput comes from: measured > reference > estimated, the bands, the exclusions."""

from __future__ import annotations

from datetime import timedelta

import pytest
from recommend_catalogs import NOW, instance, make_catalog, probe_result

from advisor.scaling import allreduce_seconds, overlap_efficiency
from advisor.throughput import Exclusion, ThroughputModel, reference_measurements
from catalog.hardware import UP_TO_BASELINE_SHARE, sustained_network_gbps
from lightning_module.workload_facts import FACTS

WID = "resnet50-224px-1000c"


def model(measurements=None, workload="resnet50", catalog=None, **kw):
    cat = catalog or make_catalog()
    wid = f"{workload}-224px-1000c"
    return cat, ThroughputModel(cat, FACTS[workload], wid, 224, measurements or [], now=NOW, **kw)


def ev(m, cat, name, **kw):
    return m.evaluate(cat.instance_types[name], **kw)


def test_reference_figures_are_the_articles_tuned_ones():
    cat, m = model()
    c7i = ev(m, cat, "c7i.2xlarge")
    g5 = ev(m, cat, "g5.2xlarge")
    assert (c7i.source, c7i.samples_per_sec, c7i.precision) == ("reference", 40.73, "bf16-mixed")
    assert (g5.source, g5.samples_per_sec) == ("reference", 926.0)
    assert c7i.low < 40.73 < c7i.high
    assert "Article A" in c7i.basis["provenance"]
    naive = [r for r in reference_measurements() if not r["tuned"]]
    assert {(r["instance_type"], r["samples_per_sec"]) for r in naive} >= {("c7i.2xlarge", 9.12), ("g5.2xlarge", 340.0)}


def test_measured_beats_reference():
    r = probe_result("c7i.2xlarge", 30.0)
    cat, m = model([r])
    t = ev(m, cat, "c7i.2xlarge")
    assert (t.source, t.samples_per_sec) == ("measured", 30.0)
    assert (t.low, t.high) == pytest.approx((29.4, 30.6))
    assert t.basis["result_id"] == r.result_id
    assert t.notes == []


def test_newest_measurement_wins_and_old_or_other_versions_are_flagged():
    newest = probe_result("c7i.2xlarge", 44.0, finished_at=NOW - timedelta(days=1))
    old = probe_result("g5.2xlarge", 800.0, accelerator="gpu", finished_at=NOW - timedelta(days=45),
                       torch="2.9.0")
    older_c7i = probe_result("c7i.2xlarge", 10.0, finished_at=NOW - timedelta(days=2))
    cat, m = model([newest, older_c7i, old])
    assert ev(m, cat, "c7i.2xlarge").samples_per_sec == 44.0
    g5 = ev(m, cat, "g5.2xlarge")
    assert g5.source == "measured"
    assert any("45 days ago" in n for n in g5.notes)
    assert any("torch 2.9.0" in n for n in g5.notes)


def test_estimates_scale_from_the_nearest_anchor_with_a_basis():
    cat, m = model()
    t = ev(m, cat, "c7i.8xlarge")  # same CPU, 4x the cores
    assert t.source == "estimated"
    assert t.basis["anchor"] == "c7i.2xlarge"
    assert t.basis["distance"] == "same CPU model"
    assert t.samples_per_sec == pytest.approx(4 * 40.73)
    assert t.basis["precision"] == "bf16-mixed"
    assert t.low < t.samples_per_sec < t.high


def test_estimated_gpu_uses_the_precision_the_device_has():
    cat, m = model()
    t4 = ev(m, cat, "g4dn.xlarge")  # T4: no bf16 -> fp16 (65 vs the A10G's 125)
    assert t4.basis["anchor"] == "g5.2xlarge" and t4.precision == "16-mixed"
    expected = 926 * min(65 / 125, 320 / 600)
    assert t4.samples_per_sec == pytest.approx(expected, rel=1e-3)


def test_band_widens_with_distance():
    # Anchor: your own g5.2xlarge probe; targets at increasing distance from it.
    r = probe_result("g5.2xlarge", 900.0, accelerator="gpu")
    cat, m = model([r], catalog=make_catalog(types={
        n: instance(n) for n in ("g5.2xlarge", "g5.12xlarge", "g4dn.xlarge", "c7i.8xlarge")}))
    m.anchors = [a for a in m.anchors if a.instance.name == "g5.2xlarge"]  # only the GPU anchor
    widths = {}
    for name in ("g5.12xlarge", "g4dn.xlarge", "c7i.8xlarge"):
        t = ev(m, cat, name)
        widths[name] = t.high / t.low
    assert widths["g5.12xlarge"] < widths["g4dn.xlarge"] < widths["c7i.8xlarge"]


def test_multi_gpu_instance_pays_for_its_interconnect():
    cat, m = model()
    t = ev(m, cat, "g5.12xlarge")  # 4x A10G over PCIe
    assert t.devices == 4
    assert "PCIe" in t.basis["interconnect"]
    eff = t.basis["intra_instance_efficiency"]
    # ResNet-50's 102 MB of gradients over PCIe Gen4: 2 x 3/4 x 102e6 / 31.5e9 = 4.9 ms per step,
    # well inside backward at batch 128 (0.138 s per step): no loss inside the instance.
    comm = float(allreduce_seconds(4, FACTS["resnet50"].gradient_bytes(), 31.5e9))
    assert t.intra_comm_seconds == pytest.approx(comm) == pytest.approx(4.87e-3, rel=0.01)
    assert eff == pytest.approx(float(overlap_efficiency(128 / 926, comm)))
    assert t.samples_per_sec == pytest.approx(4 * 926 * eff)
    # Over the much slower 2 Gbit/s of a hypothetical host bridge it would no longer hide.
    assert overlap_efficiency(128 / 926, allreduce_seconds(4, FACTS["resnet50"].gradient_bytes(), 0.25e9)) < 0.5
    p4d = ev(m, cat, "p4d.24xlarge")
    assert "NVLink" in p4d.basis["interconnect"] and p4d.basis["intra_instance_efficiency"] == 1.0


def test_exclusions():
    cat, m = model()
    trn = ev(m, cat, "trn1.2xlarge")
    assert isinstance(trn, Exclusion) and "Neuron SDK" in trn.reason
    small = ev(m, cat, "g4dn.xlarge", min_memory_gib=20)
    assert isinstance(small, Exclusion) and "16 GiB" in small.reason
    assert not isinstance(ev(m, cat, "g5.2xlarge", min_memory_gib=20), Exclusion)
    no_bf16 = ev(m, cat, "g4dn.xlarge", require_dtype="bf16")
    assert isinstance(no_bf16, Exclusion) and "bf16" in no_bf16.reason
    assert not isinstance(ev(m, cat, "g4dn.xlarge", require_dtype="fp16"), Exclusion)


def test_trainium_with_a_measurement_is_ranked():
    r = probe_result("trn1.2xlarge", 700.0, accelerator="tpu")
    cat, m = model([r])
    assert ev(m, cat, "trn1.2xlarge").source == "measured"


def test_unknown_accelerator_is_excluded_not_guessed():
    types = {n: instance(n) for n in ("c7i.2xlarge", "g5.2xlarge")}
    types["x1.gpu"] = instance("g5.2xlarge").model_copy(update={"name": "x1.gpu", "accelerator_model": "Mystery X9"})
    cat = make_catalog(types=types, offers=[("x1.gpu", "us-east-1", "on-demand", 1.0, None),
                                            ("g5.2xlarge", "us-east-1", "on-demand", 1.212, None)])
    _, m = model(catalog=cat)
    e = ev(m, cat, "x1.gpu")
    assert isinstance(e, Exclusion) and "unknown accelerator" in e.reason


def test_other_workloads_borrow_resnet50_utilisation_with_a_wider_band():
    cat, m = model(workload="resnet18")
    t = ev(m, cat, "c7i.2xlarge")
    assert t.source == "estimated"  # the published figure is for ResNet-50, not this workload
    ratio = FACTS["resnet50"].train_flops_per_sample / FACTS["resnet18"].train_flops_per_sample
    assert t.samples_per_sec == pytest.approx(40.73 * ratio)
    assert "workload_note" in t.basis
    assert t.high / t.low == pytest.approx((1.3 * 1.5) ** 2)


def test_workload_facts_match_the_reference_flop_count():
    f = FACTS["resnet50"]
    assert f.params == 25_557_032
    assert f.train_flops_per_sample / 1e9 == pytest.approx(24.30, abs=0.01)
    assert f.flops_per_sample(448) == pytest.approx(4 * f.train_flops_per_sample)
    # weights + grads + momentum (0.29 GiB) + 8 samples of activations (0.67 GiB)
    assert 0.9 < f.memory_floor_gib() < 1.1


def test_cpu_estimates_count_one_socket():
    types = {n: instance(n) for n in ("c7i.2xlarge",)}
    for name, vcpus in (("c7i.24xlarge", 96), ("c7i.48xlarge", 192)):
        types[name] = instance("c7i.8xlarge").model_copy(update={"name": name, "vcpus": vcpus})
    cat = make_catalog(types=types, offers=[(n, "us-east-1", "on-demand", 1.0, None) for n in types])
    _, m = model(catalog=cat)
    one, two = ev(m, cat, "c7i.24xlarge"), ev(m, cat, "c7i.48xlarge")
    assert one.samples_per_sec == pytest.approx(12 * 40.73)  # 48 cores vs the anchor's 4
    assert two.samples_per_sec == pytest.approx(one.samples_per_sec)  # the second socket adds nothing
    assert two.high == pytest.approx(2 * one.high)  # unless it does: the band allows it
    assert "2 sockets" in two.basis["socket_note"]


def test_up_to_network_is_taken_at_the_assumed_baseline():
    cat, m = model()
    g5 = ev(m, cat, "g5.2xlarge")  # "up to 10 Gbit/s"
    assert g5.basis["network_gbps_used"] == pytest.approx(10 * UP_TO_BASELINE_SHARE)
    assert "burst" in g5.basis["network_note"]
    p4d = ev(m, cat, "p4d.24xlarge")  # a sustained 400 Gbit/s
    assert p4d.basis["network_gbps_used"] == 400 and "network_note" not in p4d.basis
    it = cat.instance_types["g5.2xlarge"]
    assert sustained_network_gbps(it)[0] == pytest.approx(1.25)


def test_gpu_estimates_are_bounded_by_the_host_link():
    """Every sample's uint8 image crosses PCIe: FLOP scaling alone put the tiny MLP far past it."""
    cat, m = model(workload="mlp")
    t = ev(m, cat, "g4dn.xlarge")  # T4 on PCIe Gen3 x16
    cap = 15.75e9 / (3 * 224 * 224)
    assert t.samples_per_sec == pytest.approx(cap)
    assert t.high == pytest.approx(cap)
    assert t.low < cap  # an upper bound leaves the estimate as unsure below it as before
    assert t.basis["ingest_bound"]["input_bytes_per_sample"] == 3 * 224 * 224
    assert any("host link" in n for n in t.notes)
    # ResNet-50's ~1,000 samples/s per GPU is nowhere near the link: no cap, no note.
    cat, m = model()
    r = ev(m, cat, "g4dn.xlarge")
    assert "ingest_bound" not in r.basis and r.samples_per_sec < cap / 50
