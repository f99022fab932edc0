"""The host floor of a GPU step: a small model's GPU estimate is the host's dispatch of its ops, not
the roofline's; a large model's is untouched; the constants come from their data file."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from factories import probe_result
from recommend_catalogs import NOW

from advisor.estimate import host_floor
from advisor.estimate.throughput import ThroughputModel
from advisor.store import ResultStore
from lightning_module.contract.result import WorkloadShape
from lightning_module.contract.workload_facts import FACTS, facts_from_probes

OWN = "mypkg.models:Tiny"
TINY_OPS, TINY_BATCH = 126, 16  # examples/tinylm.py (d_model 64, 2 layers) as the probe counts it
RESNET50_OPS = 466  # torchvision resnet50, counted by the probe's TrafficCounter on the CPU (training_step + backward)


TINY_LOADER = 187151.24  # samples/s per worker, its loader timed alone by the probe (host_floor.json)


def tiny_probe(ops: int | None = TINY_OPS, instance_type: str = "c7a.large", sps: float = 628.0,
               accelerator: str = "cpu", batch: int = TINY_BATCH, workers: int = 0):
    r = probe_result(instance_type, sps, model=OWN, flops_per_sample=62e6, accelerator=accelerator,
                     precision="32-true")
    return r.model_copy(update={"config": r.config.model_copy(update={"batch_size": batch, "num_workers": workers}),
                                "pipeline_samples_per_sec_per_worker": TINY_LOADER,
                                "shape": WorkloadShape(data_source="module", ops_per_step=ops)})


def tiny_floor(batch: int = TINY_BATCH, loader: float | None = TINY_LOADER) -> float:
    return host_floor.HostFloor(TINY_OPS, batch, loader).samples_per_sec


def own_model(snapshot, *results):
    results = list(results)
    return ThroughputModel(snapshot, facts_from_probes(OWN, 224, results), results[0].workload_id, 224, results,
                           now=NOW)


def test_the_constants_come_from_their_data_file_with_a_source():
    c = host_floor.constants()
    body = json.loads(host_floor.FLOOR_PATH.read_text())
    assert c.source.startswith("derived:") and "docs/benchmarks.md @ commit a9b7672" in c.source
    assert (c.step_host_s, c.op_host_s) == (body["step_host_s"], body["op_host_s"])
    # They are the line through the measured figures stated beside them, not typed in: each fitted
    # example's floor is its measurement.
    step, op = host_floor.derive(body["fitted_on"])
    assert c.step_host_s == pytest.approx(step, rel=1e-4) and c.op_host_s == pytest.approx(op, rel=1e-4)
    for f in body["fitted_on"]:
        assert host_floor.floor_of(f) == pytest.approx(f["samples_per_sec"], rel=1e-4)
    # The held-out example: its floor lies above its measurement (a floor on time), within the band.
    (held,) = body["held_out"]
    assert held["samples_per_sec"] < host_floor.floor_of(held) < c.below * held["samples_per_sec"]
    assert c.below > 1 and c.above > 1 and "held-out" in c.band_why


def test_the_floor_caps_a_small_workloads_gpu_estimate(snapshot):
    floored = own_model(snapshot, tiny_probe())
    roofline = own_model(snapshot, tiny_probe(ops=None))
    floor = tiny_floor()
    assert floor == pytest.approx(3130.77, rel=1e-3)  # the H100 measurement the constants were fitted on
    c = host_floor.constants()
    for name in ("g4dn.xlarge", "g6.xlarge"):
        it = snapshot.instance_types[name]
        th, before = floored.evaluate(it), roofline.evaluate(it)
        assert before.samples_per_sec > 10 * floor and "host_floor" not in before.basis  # the defect
        assert th.samples_per_sec == pytest.approx(floor)
        assert (th.low, th.high) == pytest.approx((floor / c.below, floor * c.above))  # the floor's own band
        assert th.notes[0] == f"host-bound: ~{TINY_OPS} ops a step at batch {TINY_BATCH} and the loader in its " \
                              f"process cap one GPU near {floor:,.0f}/s; a larger batch, loader workers or " \
                              "torch.compile/CUDA graphs raise it"
        b = th.basis["host_floor"]
        assert b["binds"] and (b["ops_per_step"], b["batch"]) == (TINY_OPS, TINY_BATCH)
        assert (b["step_host_s"], b["op_host_s"]) == (c.step_host_s, c.op_host_s) and b["source"] == c.source
    # Loader workers make the batches beside the training process: only the dispatch is left.
    workers = own_model(snapshot, tiny_probe(workers=2)).evaluate(snapshot.instance_types["g4dn.xlarge"])
    assert workers.samples_per_sec == pytest.approx(tiny_floor(loader=None)) and tiny_floor(loader=None) > floor
    assert workers.basis["host_floor"]["loader_samples_per_sec"] is None
    # Eight GPUs: each its own process, each floored, times the instance's scaling.
    p5 = floored.evaluate(snapshot.instance_types["p5.48xlarge"])
    assert p5.low / 8 <= 3130.77 <= p5.high / 8 and p5.samples_per_sec <= 8 * floor


def test_cpus_are_not_floored(snapshot):
    it = snapshot.instance_types["c7i.8xlarge"]
    th = own_model(snapshot, tiny_probe()).evaluate(it)
    assert "host_floor" not in th.basis
    assert th.samples_per_sec == own_model(snapshot, tiny_probe(ops=None)).evaluate(it).samples_per_sec


def test_an_older_result_without_the_count_changes_nothing(snapshot):
    facts = facts_from_probes(OWN, 224, [tiny_probe(ops=None)])
    assert facts.ops_per_step is None and own_model(snapshot, tiny_probe(ops=None)).host_floor is None


def test_a_resnet50_sized_step_never_binds(snapshot):
    """466 ops at the batch published figures use: the floor is far above any GPU's rate."""
    plain = ThroughputModel(snapshot, FACTS["resnet50"], "resnet50-224px-1000c", now=NOW)
    counted = ThroughputModel(snapshot, replace(FACTS["resnet50"], ops_per_step=RESNET50_OPS, ops_batch=256),
                              "resnet50-224px-1000c", now=NOW)
    floor = 256 / host_floor.step_seconds(RESNET50_OPS)
    assert floor > 20_000  # ~24,500/s per GPU; ResNet-50 on an H100 is published near 3,000
    estimated = 0
    for it in snapshot.instance_types.values():
        if it.accelerator_kind != "gpu":
            continue
        a, b = plain.evaluate(it), counted.evaluate(it)
        if getattr(b, "source", None) != "estimated":
            continue
        estimated += 1
        assert (b.samples_per_sec, b.low, b.high) == (a.samples_per_sec, a.low, a.high)
        assert not b.basis["host_floor"]["binds"] and not any(n.startswith("host-bound") for n in b.notes)
        assert b.samples_per_sec / b.devices < floor / 3
    assert estimated > 10


def test_a_gpu_probe_above_the_floor_raises_it(snapshot):
    gpu = tiny_probe(instance_type="g5.xlarge", sps=4700.0, accelerator="gpu")
    m = own_model(snapshot, gpu, tiny_probe())
    raised = 4700.0 / tiny_floor()
    assert m.host_floor.raised_by == pytest.approx(raised)
    th = m.evaluate(snapshot.instance_types["g6.xlarge"])
    assert th.samples_per_sec <= 4700.0 * 1.0001 and th.basis["host_floor"]["raised_by_gpu_probe"] == round(raised, 3)


def test_recommend_says_it_in_the_table_and_the_json(cli, tmp_path):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(tiny_probe())
    base = ("recommend", "--budget", "200", "--deadline", "1d", "--samples", "3e7", "--workload", OWN,
            "--store", str(db), "--family", "g4dn", "--top", "50")
    code, out, err = cli(*base, "--format", "json")
    assert code == 0, err
    row = next(r for r in json.loads(out)["recommendations"] if r["instance_type"] == "g4dn.xlarge" and r["count"] == 1
               and r["variant"] is None)
    assert row["samples_per_sec"] == pytest.approx(3130.77, rel=1e-3) and row["notes"][0].startswith("host-bound: ~126 ops")
    assert row["basis"]["host_floor"]["binds"] and row["basis"]["host_floor"]["source"].startswith("derived:")
    code, out, err = cli(*base)
    assert code == 0, err
    assert "host-bound" in out
