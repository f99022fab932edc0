"""A probe measured while the machine was busy (issue 33): it never anchors while a quiet probe of
the workload on the same kind of device is stored, and alone it anchors with its slowdown in its band."""

from __future__ import annotations

import math

import pytest
from factories import probe_result
from recommend_catalogs import NOW

from advisor.estimate.throughput import ThroughputModel
from lightning_module.contract.contention import MAX_LOST_SHARE, slowdown
from lightning_module.contract.result import Contention
from lightning_module.contract.workload_facts import FACTS

# The training thread waited for a CPU half of its wall time: alone it would have run 2x as fast.
BUSY = Contention(contended=True, steps=20, contended_steps=20, wait_share=0.5, cpus=8, cores_in_use=4,
                  reasons=["20 of 20 timed steps contended"])
QUIET = Contention(contended=False, steps=20, wait_share=0.01, cpus=8, cores_in_use=4)


def busy(r, c: Contention = BUSY):
    return r.model_copy(update={"contention": c, "reliable": False, "unreliable_reasons": c.reasons})


def model(measurements, catalog):
    return ThroughputModel(catalog, FACTS["resnet50"], "resnet50-224px-1000c", 224, measurements, now=NOW)


def ev(m, cat, name):
    return m.evaluate(cat.instance_types[name])


def test_the_slowdown_is_the_share_of_time_lost_to_others():
    assert slowdown(None) == 1.0 and slowdown(QUIET) == 1.0
    assert slowdown(BUSY) == pytest.approx(2.0)
    assert slowdown(BUSY.model_copy(update={"wait_share": 0.1, "steal_share": 0.75})) == pytest.approx(4.0)
    assert slowdown(BUSY.model_copy(update={"wait_share": None, "others_share": 0.5})) == pytest.approx(2.0)
    assert slowdown(BUSY.model_copy(update={"wait_share": 1.0})) == pytest.approx(1 / (1 - MAX_LOST_SHARE))


def test_a_busy_probe_does_not_anchor_while_a_quiet_one_of_the_workload_on_a_cpu_exists(snapshot):
    quiet = probe_result("c7i.8xlarge", 100.0, n=0)
    noisy = busy(probe_result("c7i.4xlarge", 5.0, n=5))  # newer, and 20x too low
    m = model([noisy, quiet], snapshot)
    t = ev(m, snapshot, "c7i.4xlarge")
    assert t.source == "estimated"  # its own busy figure is not used, not even as its type's measurement
    assert [p["instance_type"] for p in t.basis["probes"]] == ["c7i.8xlarge"]
    assert any("measured while the machine was busy" in w and "not used" in w for w in m.warnings)
    alone = model([quiet], snapshot)
    assert t.samples_per_sec == pytest.approx(ev(alone, snapshot, "c7i.4xlarge").samples_per_sec)


def test_on_one_type_the_quiet_probe_is_its_measurement_though_the_busy_one_is_newer(snapshot):
    quiet = probe_result("c7i.2xlarge", 40.0, n=0)
    noisy = busy(probe_result("c7i.2xlarge", 2.0, n=9))
    t = ev(model([noisy, quiet], snapshot), snapshot, "c7i.2xlarge")
    assert (t.source, t.samples_per_sec, t.basis["result_id"]) == ("measured", 40.0, quiet.result_id)


def test_a_quiet_probe_of_another_device_kind_leaves_a_busy_gpu_probe_in_use(snapshot):
    cpu = probe_result("c7i.8xlarge", 100.0, n=0)
    gpu = busy(probe_result("g6.xlarge", 600.0, n=3, accelerator="gpu"))
    t = ev(model([gpu, cpu], snapshot), snapshot, "g6.xlarge")
    assert t.source == "measured" and t.basis["result_id"] == gpu.result_id


def test_a_busy_probe_alone_anchors_with_its_slowdown_in_its_band(snapshot):
    quiet_run = probe_result("c7i.2xlarge", 20.0).model_copy(update={"contention": QUIET})
    busy_run = busy(probe_result("c7i.2xlarge", 20.0))
    mq, mb = model([quiet_run], snapshot), model([busy_run], snapshot)
    # Its own type: the measured figure, the band's top at least twice it.
    tb = ev(mb, snapshot, "c7i.2xlarge")
    assert (tb.source, tb.samples_per_sec) == ("measured", 20.0)
    assert tb.high >= 2.0 * 20.0 * 1.02 - 1e-9 and tb.basis["contention_slowdown"] == pytest.approx(2.0)
    assert any("busy" in n and "2x faster alone" in n for n in tb.notes)
    # Its neighbours: centred between its figure and twice it, the band wider by the slowdown.
    nq, nb = ev(mq, snapshot, "c7i.8xlarge"), ev(mb, snapshot, "c7i.8xlarge")
    assert nb.basis["probes"][0]["contention_slowdown"] == pytest.approx(2.0)
    # The probe's own source moves up by sqrt(2) and, wider, counts less beside the published rows'.
    assert nb.samples_per_sec > nq.samples_per_sec * math.sqrt(2.0) ** nb.basis["probes"][0]["weight"]
    assert nq.basis["probes"][0]["weight"] > nb.basis["probes"][0]["weight"]
    assert nb.high / nb.low > nq.high / nq.low
    assert any("busy" in w and "anchors with its slowdown" in w for w in mb.warnings)
