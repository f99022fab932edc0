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
    assert tiny_floor() == pytest.approx(3130.77, rel=1e-3)  # the H100 measurement the constants were fitted on
    c = host_floor.constants()
    for name in ("g4dn.xlarge", "g6.xlarge"):
        it = snapshot.instance_types[name]
        mid, low, high = host_floor.HostFloor(TINY_OPS, TINY_BATCH, TINY_LOADER).on_host(it.cpu_clock_ghz)
        th, before = floored.evaluate(it), roofline.evaluate(it)
        assert before.samples_per_sec > 10 * mid and "host_floor" not in before.basis  # the defect
        assert th.samples_per_sec == pytest.approx(mid)
        assert (th.low, th.high) == pytest.approx((low, high))  # the clock's range times the constants' band
        assert low < mid / c.below and high > mid * c.above  # the reference clock's range widens it
        assert th.notes[0] == f"host-bound: ~{TINY_OPS} ops a step at batch {TINY_BATCH} and the loader in its " \
                              f"process cap one GPU near {mid:,.0f}/s on this {it.cpu_clock_ghz:g} GHz host; a larger " \
                              "batch, loader workers or torch.compile/CUDA graphs raise it"
        b = th.basis["host_floor"]
        assert b["binds"] and (b["ops_per_step"], b["batch"]) == (TINY_OPS, TINY_BATCH)
        assert (b["step_host_s"], b["op_host_s"]) == (c.step_host_s, c.op_host_s) and b["source"] == c.source
        assert b["host_clock_ghz"] == it.cpu_clock_ghz and b["reference_clock_source"].startswith("derived")
    # Loader workers make the batches beside the training process: only the dispatch is left.
    g4dn = snapshot.instance_types["g4dn.xlarge"]
    workers = own_model(snapshot, tiny_probe(workers=2)).evaluate(g4dn)
    bare = host_floor.HostFloor(TINY_OPS, TINY_BATCH).on_host(g4dn.cpu_clock_ghz)[0]
    assert workers.samples_per_sec == pytest.approx(bare) and bare > floored.evaluate(g4dn).samples_per_sec
    assert workers.basis["host_floor"]["loader_samples_per_sec"] is None
    # Eight GPUs: each its own process, each floored, times the instance's scaling.
    p5 = snapshot.instance_types["p5.48xlarge"]
    mid, low, high = host_floor.HostFloor(TINY_OPS, TINY_BATCH, TINY_LOADER).on_host(p5.cpu_clock_ghz)
    th = floored.evaluate(p5)
    assert th.low / 8 <= mid <= th.high / 8 and th.samples_per_sec <= 8 * mid


def test_the_same_gpu_behind_a_faster_host_gets_a_higher_floor(snapshot):
    """g4dn's Cascade Lake sustains 2.5 GHz, g6's and gr6's Milan 3.4 GHz: with the loader's
    workers (no loader term), the floors stand as the clocks; before, every host had the H100's."""
    m = own_model(snapshot, tiny_probe(workers=2))
    g4dn, g6 = snapshot.instance_types["g4dn.xlarge"], snapshot.instance_types["g6.xlarge"]
    slow, fast = m.evaluate(g4dn), m.evaluate(g6)
    assert (g4dn.cpu_clock_ghz, g6.cpu_clock_ghz) == (2.5, 3.4)
    assert fast.samples_per_sec / slow.samples_per_sec == pytest.approx(3.4 / 2.5)
    # The same GPU (L4) on a host the catalog says is slower: only the host's clock changes.
    slower = g6.model_copy(update={"cpu_clock_ghz": 2.5})
    assert m.evaluate(slower).samples_per_sec == pytest.approx(slow.samples_per_sec)
    assert m.evaluate(slower).samples_per_sec < fast.samples_per_sec


def test_a_small_models_one_gpu_figures_rank_as_their_hosts_clocks(snapshot):
    """Issue 33: one figure (the H100 host's) for every GPU instance; now one per host clock, in its order."""
    m = own_model(snapshot, tiny_probe(workers=2))
    per: dict[str, tuple[float, float]] = {}
    for it in snapshot.instance_types.values():
        if it.accelerator_kind == "gpu" and it.accelerator_count == 1 and it.cpu_clock_ghz:
            th = m.evaluate(it)
            if getattr(th, "source", None) == "estimated" and th.basis["host_floor"]["binds"]:
                per[it.name] = (it.cpu_clock_ghz, th.samples_per_sec)
    assert {"g4dn.xlarge", "g5.xlarge", "g6.xlarge"} <= set(per)
    assert len({round(sps) for _, sps in per.values()}) == len({clock for clock, _ in per.values()}) >= 3
    ranked = sorted(per.values(), key=lambda cs: cs[1])
    assert [clock for clock, _ in ranked] == sorted(clock for clock, _ in ranked)


def test_a_host_of_unknown_clock_keeps_the_reference_figure_in_a_wider_band(snapshot):
    m = own_model(snapshot, tiny_probe())
    g6 = snapshot.instance_types["g6.xlarge"]
    known, unknown = m.evaluate(g6), m.evaluate(g6.model_copy(update={"cpu_clock_ghz": None}))
    assert unknown.samples_per_sec == pytest.approx(tiny_floor())  # the reference host's, no clock guessed
    assert unknown.high / unknown.low > known.high / known.low
    b = unknown.basis["host_floor"]
    assert b["host_clock_ghz"] is None and b["host_speed"] == 1.0 and b["host_speed_unknown"].startswith("derived")
    assert "uncatalogued clock" in unknown.notes[0]


def test_the_clock_ranges_are_the_catalogs(snapshot):
    """host_speed's derived ranges are the snapshot's sustained clocks they name: the reference's
    those of the hosts with its ISA (AMX, AVX512-BF16), the unknown host's those of the GPU hosts."""
    from catalog import accelerators as acc

    body = json.loads(host_floor.FLOOR_PATH.read_text())["host_speed"]
    amx = {it.cpu_clock_ghz for it in snapshot.instance_types.values()
           if {"amx_bf16", "avx512_bf16"} <= acc.cpu_isa(it) and it.cpu_clock_ghz}
    gpu = {it.cpu_clock_ghz for it in snapshot.instance_types.values() if it.accelerator_kind == "gpu" and it.cpu_clock_ghz}
    assert body["reference_clock_ghz"] == [min(amx), max(amx)]
    assert body["unknown_host_clock_ghz"] == [min(gpu), max(gpu)]
    assert any(it.accelerator_kind == "gpu" and not it.cpu_clock_ghz for it in snapshot.instance_types.values())
    mid = host_floor.host_speed(3.0)
    assert mid.low < mid.ratio < mid.high and mid.ratio == pytest.approx(3.0 / (2.4 * 3.2) ** 0.5)


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
    """Its measurement over the floor at its own host (g5's 3.3 GHz) raises every host's floor."""
    gpu = tiny_probe(instance_type="g5.xlarge", sps=4700.0, accelerator="gpu")
    m = own_model(snapshot, gpu, tiny_probe())
    plain = host_floor.HostFloor(TINY_OPS, TINY_BATCH, TINY_LOADER)
    raised = 4700.0 / plain.on_host(snapshot.instance_types["g5.xlarge"].cpu_clock_ghz)[0]
    assert raised > 1 and m.host_floor.raised_by == pytest.approx(raised)
    assert m.host_floor.on_host(3.3)[0] == pytest.approx(4700.0)  # on its own host: the measurement
    g6 = snapshot.instance_types["g6.xlarge"]
    th = m.evaluate(g6)
    assert th.samples_per_sec == pytest.approx(raised * plain.on_host(g6.cpu_clock_ghz)[0])
    assert th.basis["host_floor"]["raised_by_gpu_probe"] == round(raised, 3)


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
    g4dn = host_floor.HostFloor(TINY_OPS, TINY_BATCH, TINY_LOADER).on_host(2.5)[0]  # g4dn's Cascade Lake, 2.5 GHz
    assert row["samples_per_sec"] == pytest.approx(g4dn, rel=1e-3) and row["notes"][0].startswith("host-bound: ~126 ops")
    assert row["basis"]["host_floor"]["binds"] and row["basis"]["host_floor"]["source"].startswith("derived:")
    code, out, err = cli(*base)
    assert code == 0, err
    assert "host-bound" in out
