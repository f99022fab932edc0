"""A step's time split by what bounds it (split.py), the stack factor per architecture family
(fit.py) and device ratios by workload (evaluate.device_pair_ratios)."""

from __future__ import annotations

import math
import statistics

import pytest
from recommend_catalogs import NOW

from advisor.estimate.evaluate import device_pair_ratios, spearman
from advisor.estimate.fit import stack_families
from advisor.estimate.model import build
from advisor.estimate.split import ALL, memory_share, seconds_per_flop
from advisor.estimate.throughput import ThroughputModel
from lightning_module.contract.workload_facts import FACTS


def test_a_workload_half_in_memory_gains_the_bandwidth_ratio_on_that_half():
    # Device b: 100 TFLOP/s, 1000 GB/s; device a: 3x the FLOP/s, 1.6x the bandwidth.
    theta_m, beta = 0.05, 1.0
    m = (1 / 100) / (theta_m * beta / 1000)  # on b the memory term equals the compute term
    tb = seconds_per_flop(1 / 100, beta / 1000, m, theta_m, 0.0)
    ta = seconds_per_flop(1 / 300, beta / 1600, m, theta_m, 0.0)
    assert memory_share(1 / 100, beta / 1000, m, theta_m, 0.0) == pytest.approx(0.5)
    assert tb / ta == pytest.approx(1 / (0.5 / 3 + 0.5 / 1.6))
    # All compute: the FLOP/s ratio; all memory: the bandwidth ratio.
    assert seconds_per_flop(1 / 100, beta / 1000, 0.0, theta_m, 0.0) / seconds_per_flop(
        1 / 300, beta / 1600, 0.0, theta_m, 0.0) == pytest.approx(3.0)


def test_the_stack_factor_is_a_generations_and_the_a100s_tuned_row_is_inside_its_band(refs, snapshot):
    model = build(refs.measurements, snapshot)
    f = model.fit
    fams = stack_families(model.points)
    assert "NVIDIA Ampere" in fams and set(f.sigma_family) == set(fams)
    # The A100: DLE's NHWC + DALI against Lambda's NCHW, more than the pooled factor of before (1.249).
    lo, hi = f.sigma_band["NVIDIA Ampere"]
    assert lo <= f.sigma_family["NVIDIA Ampere"] <= hi and math.exp(hi) > 1.5
    row = refs.by_id("dle-pt2103-rn50-dgxa100-80-1gpu-amp")
    tm = ThroughputModel(snapshot, FACTS["resnet50"], "resnet50-224px-1000c", now=NOW)
    est = tm.estimator.estimate(snapshot.instance_types["p4de.24xlarge"])
    assert est.low <= row.samples_per_sec <= est.high, (est.low, est.per_device, est.high)
    assert est.basis["band"]["stack_above"] > 1.0


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3], [5, 5, 5]) != spearman([1, 2, 3], [5, 5, 5])  # nan: no spread


def test_device_pair_ratios_are_published_inside_one_table_and_predicted_with_the_workload_out(refs, snapshot):
    model = build(refs.measurements, snapshot, shape=ALL)
    pairs = {pc.pair: pc for pc in device_pair_ratios(model)}
    assert pairs and all(len({r.workload for r in pc.ratios}) >= 2 for pc in pairs.values())
    pc = pairs[("A100-80GB", "V100-16GB")]
    assert {"resnet50", "bert-large", "efficientnet-b0"} <= {r.workload for r in pc.ratios}
    # Lambda's BERT-Large table: its rows of each device (the A100 80GB's PCIe and SXM4 alike), their median.
    lam = [p for p in model.points if p.workload == "bert-large" and "lambdal" in p.suite]
    a = statistics.median(math.log(p.sps) for p in lam if p.device.key == "A100-80GB")
    b = statistics.median(math.log(p.sps) for p in lam if p.device.key == "V100-16GB")
    bert = next(r for r in pc.ratios if r.workload == "bert-large")
    assert bert.tables == 1 and bert.published == pytest.approx(math.exp(a - b))
    assert pc.published_spread >= 1.0 and pc.predicted_spread >= 1.0


def test_matched_device_pair_ratios_take_one_gpu_each_at_one_batch(refs, snapshot):
    # Lambda's table runs each GPU at the batch its memory holds and also publishes n-GPU rows: its
    # H100 / H100 PCIe Tacotron 2 ratio as published mixes the H100's 8-GPU rows (scaling ~0.5) with
    # one PCIe GPU; matched, both are 80 GB cards at one batch and one GPU each.
    model = build(refs.measurements, snapshot)
    pairs = {pc.pair: pc for pc in device_pair_ratios(model)}
    matched = {pc.pair: pc for pc in device_pair_ratios(model, matched=True)}
    taco = {name: next(r for r in d[("H100", "H100-PCIE")].ratios if r.workload == "tacotron2")
            for name, d in (("all", pairs), ("matched", matched))}
    one = [p for p in model.points if p.workload == "tacotron2" and "lambdal" in p.suite and p.devices == 1
           and p.device.key in ("H100", "H100-PCIE")]
    by = {k: statistics.median(math.log(p.sps) for p in one if p.device.key == k) for k in ("H100", "H100-PCIE")}
    assert taco["matched"].published == pytest.approx(math.exp(by["H100"] - by["H100-PCIE"]))
    assert taco["all"].published < 1.0 < taco["matched"].published  # the 8-GPU rows pulled the H100 below its PCIe card
    # A pair at two batches (a 16 GB V100 against an 80 GB A100: Tacotron 2 at 48 and 256) is not matched.
    assert "tacotron2" in {r.workload for r in pairs[("A100-80GB", "V100-16GB")].ratios}
    av = matched.get(("A100-80GB", "V100-16GB"))
    assert av is None or "tacotron2" not in {r.workload for r in av.ratios}
