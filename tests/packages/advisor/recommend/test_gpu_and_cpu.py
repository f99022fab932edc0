"""The "GPU + CPU" variant (advisor/estimate/gpu_and_cpu.py): offered where a --cpu-too probe won,
never where it lost, and from the stated model elsewhere, end to end through `advisor recommend`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from factories import probe_result

from advisor.estimate import gpu_and_cpu as gc
from lightning_module.contract.result import GpuAndCpu, RankShare

GPU = "g5.2xlarge"


def cpu_too(together: float, ci: tuple[float, float], kept: bool, gpu: float = 1000.0, cpu: float = 100.0,
            busy: tuple[float, float] = (0.25, 0.24)) -> GpuAndCpu:
    return GpuAndCpu(ranks=[RankShare(device="gpu", batch_size=256, threads=1, samples_per_sec_alone=gpu, busy_seconds=busy[0]),
                            RankShare(device="cpu", batch_size=26, threads=6, samples_per_sec_alone=cpu, busy_seconds=busy[1])],
                     samples_per_sec=together, samples_per_sec_ci=ci, efficiency=together / (gpu + cpu), rounds=2, kept=kept)


def recommend(cli, tmp_path, g: GpuAndCpu | None) -> dict:
    r = probe_result(GPU, 1000.0, accelerator="gpu", gpus=("NVIDIA A10G",))
    r = r.model_copy(update={"gpu_and_cpu": g})
    f, db = tmp_path / "r.json", str(tmp_path / "r.db")
    f.write_text(r.model_dump_json())
    assert cli("results", "import", str(f), "--store", db)[0] == 0
    code, out, err = cli("recommend", "--workload", "resnet50", "--samples", "1e7", "--budget", "1000",
                         "--deadline", "30d", "--family", "g5,g6", "--top", "40", "--store", db, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def rows_of(doc: dict) -> list[dict]:
    return doc["recommendations"]


def test_a_cpu_too_probe_that_won_gives_its_type_the_variant(cli, tmp_path):
    doc = recommend(cli, tmp_path, cpu_too(1080.0, (1040.0, 1120.0), kept=True))
    mine = [r for r in rows_of(doc) if r["instance_type"] == GPU]
    assert mine, [r["instance_type"] for r in rows_of(doc)]
    for r in mine:
        v = r["gpu_and_cpu"]
        assert v["source"] == "measured" and v["gain"] == pytest.approx(0.08)
        assert v["low"] == pytest.approx(0.04) and v["high"] == pytest.approx(0.12)
        assert any(n.startswith("GPU + CPU variant: +8% (+4% to +12%, measured: your --cpu-too probe") for n in r["notes"])


def test_a_cpu_too_probe_that_lost_gives_no_variant_and_no_note_of_a_gain(cli, tmp_path):
    # The H100's ResNet-18 run, per 1,000 of GPU alone: 58.6% slower (docs/benchmarks.md).
    doc = recommend(cli, tmp_path, cpu_too(414.3, (313.3, 611.3), kept=False, busy=(0.087, 0.095)))
    assert rows_of(doc)
    for r in rows_of(doc):
        assert r["gpu_and_cpu"] is None
        assert not any("GPU + CPU" in n for n in r["notes"])


def test_without_a_cpu_too_probe_the_stated_model_offers_nothing_on_the_figures(cli, tmp_path):
    doc = recommend(cli, tmp_path, None)
    assert all(r["gpu_and_cpu"] is None for r in rows_of(doc))


def _cpu(per_device: float, low: float, high: float):
    from advisor.estimate.predict import Estimate

    return lambda it: Estimate(per_device, low, high, "32-true")


def test_the_model_is_the_stated_formula_and_its_band_brackets_it():
    from advisor import load_catalog

    it = load_catalog().instance_types["g5.16xlarge"]  # 64 vCPUs, one GPU
    # G = 100/s at batch 128: T = 1.28 s; 1 GB of gradients at exchange rate r GB/s.
    got = gc.estimate(it, (100.0, 80.0, 120.0), 128, _cpu(50.0, 40.0, 60.0), 10.0, 1e9, (0.8, 2.0, "g5.xlarge"))
    t, x = 1.28, 1e9 / 2.0e9
    assert got.gain == pytest.approx((100 * t + 0.8 * 50 * t) / (t + x) / 100 - 1)
    assert got.basis["loader_vcpus"] == 10 and got.basis["cpu_vcpus"] == 64 - 1 - 10
    assert got.low < got.gain < got.high and got.source == "estimated"
    assert got.variant == (got.low > 0)
    # The figures' range: e 0.25-0.92, exchange 0.29-0.96 GB/s, middle their geometric means.
    fig = gc.estimate(it, (100.0, 80.0, 120.0), 128, _cpu(50.0, 40.0, 60.0), 10.0, 1e9, None)
    assert fig.basis["combining_efficiency"] == [0.25, pytest.approx(0.48, abs=0.005), 0.92]
    mid = gc.estimate(it, (100.0, 80.0, 120.0), 128, _cpu(50.0, 40.0, 60.0), 10.0, 1e9,
                      (fig.basis["combining_efficiency"][1], fig.basis["exchange_gbs"][1], "g5.xlarge"))
    assert mid.gain == pytest.approx(fig.gain, rel=1e-2)  # measured at the figures' middle: the same middle
    assert fig.low < mid.low and fig.high > mid.high  # knowing less, a wider band
    # No vCPU left after the loaders: no variant, and the reason.
    assert "no vCPU left" in gc.estimate(it, (1e6, 1e6, 1e6), 128, _cpu(1, 1, 1), 10.0, 1e9, None)


def test_the_h100_figures_are_what_the_measured_inputs_read_back():
    # The --cpu-too run of docs/benchmarks.md: its e and exchange rate are the figures' ends.
    g = GpuAndCpu(ranks=[RankShare(device="gpu", batch_size=8227, threads=1, samples_per_sec_alone=80432.18,
                                   busy_seconds=0.0871972),
                         RankShare(device="cpu", batch_size=32, threads=15, samples_per_sec_alone=660.549,
                                   busy_seconds=0.0949857)],
                  samples_per_sec=33321.02, samples_per_sec_ci=(25198.29, 49171.6), efficiency=33321.02 / 81092.73,
                  rounds=3, kept=False)
    e, gbs = gc.measured_inputs(g, 44.726568e6)
    assert e == pytest.approx(0.51, abs=0.005)
    assert gbs == pytest.approx(gc.EXCHANGE_GBS_RANGE[0], abs=0.005)


def test_the_variant_is_a_ranked_row_of_its_own_on_the_pairs_figures(cli, tmp_path):
    """A --cpu-too probe that won: the type's GPU + CPU variant is a candidate with the pair's
    throughput and band, its own time and cost, ranked among the others by them; its GPUs-alone
    row stays, pointing at it."""
    from advisor import schemas

    doc = recommend(cli, tmp_path, cpu_too(1080.0, (1040.0, 1120.0), kept=True))
    schemas.model("recommend").model_validate(doc)
    rows = rows_of(doc)
    pair = [r for r in rows if r["variant"] == "gpu_and_cpu"]
    alone = [r for r in rows if r["instance_type"] == GPU and r["variant"] is None]
    assert pair and alone
    assert {r["instance_type"] for r in pair} == {GPU}  # only the type the probe measured wins
    for p in pair:
        a = next(r for r in alone if (r["region"], r["market"], r["count"]) == (p["region"], p["market"], 1))
        assert p["count"] == 1 and p["throughput_source"] == "measured"
        # 1,000/s measured alone x the probe's together / alone (1,080 in 1,040-1,120 over 1,000).
        assert (p["samples_per_sec"], p["throughput_low"], p["throughput_high"]) == pytest.approx((1080.0, 1040.0, 1120.0))
        assert p["hours"] == pytest.approx(a["hours"] * 1000.0 / 1080.0, rel=1e-6)
        assert p["cost_usd"] == pytest.approx(a["cost_usd"] * 1000.0 / 1080.0, rel=1e-6)
        assert p["usd_per_hour"] == a["usd_per_hour"] and p["rank"] < a["rank"]  # same price, faster: cheaper
        assert any(n.startswith("GPU + CPU variant: +8%") and "this row" in n and "one instance only" in n for n in p["notes"])
        assert any("ranked as its own row, g5.2xlarge + CPU" in n for n in a["notes"])
    ranks = [r["rank"] for r in rows]
    assert ranks == sorted(ranks)
    costs = [r["cost_usd_at_confidence"] for r in rows]
    assert costs == sorted(costs)  # cheapest: the pair's row sits where its own cost puts it


def test_the_variant_is_labelled_in_the_table_csv_page_and_left_out_of_skypilot(cli, tmp_path):
    doc = recommend(cli, tmp_path, cpu_too(1080.0, (1040.0, 1120.0), kept=True))
    db = str(tmp_path / "r.db")
    base = ["recommend", "--workload", "resnet50", "--samples", "1e7", "--budget", "1000", "--deadline", "30d",
            "--family", "g5,g6", "--top", "40", "--store", db]
    code, out, _ = cli(*base)
    assert code == 0 and any(ln.split()[1:5] == [GPU, "+", "CPU", "1"] for ln in out.splitlines())
    code, out, _ = cli(*base, "--format", "csv")
    head, *recs = out.splitlines()
    assert head.split(",")[:3] == ["rank", "instance_type", "variant"]
    assert sum(r.split(",")[2] == "gpu_and_cpu" for r in recs) == sum(r["variant"] == "gpu_and_cpu" for r in rows_of(doc)) > 0
    page = tmp_path / "a.html"
    assert cli(*base, "--format", "html", str(page))[0] == 0
    assert f'data-v="{GPU}">{GPU} + CPU</td>' in page.read_text()
    code, out, _ = cli(*base, "--format", "skypilot")
    assert code == 0
    left = next(ln for ln in out.splitlines() if ln.startswith("# Left out: "))
    assert f"{GPU} + CPU x1" in left and "HeteroDDP" in left
    listed = [ln for ln in out.splitlines() if ln.startswith("#   ")]
    assert listed and not any("+ CPU" in ln for ln in listed)
    first = next(r for r in rows_of(doc) if r["variant"] is None)
    assert listed[0].startswith(f"#   {first['rank']}. {first['instance_type']} x{first['count']} ")


def test_a_variant_is_never_ranked_across_instances_nor_probed_on_its_own(cli, tmp_path):
    from advisor import load_catalog
    from advisor.recommend.jobspec import JobSpec
    from advisor.recommend.planner import build_plan
    from advisor.recommend.rows import build
    from advisor.store import ResultStore

    recommend(cli, tmp_path, cpu_too(1080.0, (1040.0, 1120.0), kept=True))
    job = JobSpec(workload="resnet50", samples=1e9, budget_usd=5000.0, deadline_hours=100.0, families=["g5"],
                  objective="fastest", max_instances=4)
    plan = build_plan(load_catalog(), job, ResultStore(tmp_path / "r.db").results(), top=40)
    variants = [i for i, t in enumerate(plan.throughputs) if t.variant == "gpu_and_cpu"]
    assert [plan.types.names[i] for i in variants] == [GPU]
    c = plan.candidates
    pair, alone = np.isin(c.type_idx, variants), c.type_idx == plan.types.names.index(GPU)
    assert np.isfinite(c.samples_per_sec[pair & (c.k == 1)]).all()
    assert np.isnan(c.samples_per_sec[pair & (c.k > 1)]).all() and not c.feasible[pair & (c.k > 1)].any()
    assert np.isfinite(c.samples_per_sec[alone & (c.k > 1)]).all()  # the GPUs alone still scale out
    rows = build(plan)
    assert all(r.count == 1 for r in rows.candidates if r.variant)
    # A job big enough that a probe is worth its cost (at 1e7 samples none is, since the A10's
    # estimate gained the rows of seven more workloads, issue 31), small enough for the variant to rank.
    plan = build_plan(load_catalog(), job.model_copy(update={"objective": "cheapest", "samples": 3e7}),
                      ResultStore(tmp_path / "r.db").results(), top=40)
    rows = build(plan)
    assert any(r.variant for r in rows.candidates) and rows.probes
    assert all(plan.probe_offers[i] is None for i in variants)
    for p in rows.probes:  # a type's probe covers its variant: never a row of its own, nor itself in covers
        assert p.instance_type not in p.covers
    assert len({p.instance_type for p in rows.probes}) == len(rows.probes)


def test_no_variant_row_when_the_gains_band_reaches_zero(cli, tmp_path):
    doc = recommend(cli, tmp_path, cpu_too(1030.0, (990.0, 1070.0), kept=False))
    assert all(r["variant"] is None and r["gpu_and_cpu"] is None for r in rows_of(doc))


def test_the_estimated_pairs_band_is_the_model_at_the_ends_of_its_inputs():
    from advisor import load_catalog

    it = load_catalog().instance_types["g5.16xlarge"]
    got = gc.estimate(it, (100.0, 80.0, 120.0), 128, _cpu(50.0, 40.0, 60.0), 10.0, 1e9, (0.8, 2.0, "g5.xlarge"))
    mid, low, high = got.together
    assert mid == pytest.approx(100.0 * (1 + got.gain))

    def together(g, c):  # batch 128 on one GPU, e 0.8, 1 GB at 2 GB/s
        t = 128 / g
        return (g * t + 0.8 * c * t) / (t + 0.5)

    assert (low, high) == pytest.approx((together(80.0, 40.0), together(120.0, 60.0)))
    assert low < mid < high


def test_the_modelled_variant_reaches_the_cli_on_a_type_never_run_together(cli, tmp_path):
    """A --cpu-too probe of a small MLP on g5.2xlarge (its GPU 500/s alone, its CPU 2,000/s alone,
    the CPU at 80% of that together) gives its e and exchange rate to the model: on g4dn.16xlarge,
    never probed, 62 vCPUs are left for a CPU rank beside its T4, and the modelled variant is a row
    of `advisor recommend` of its own, in the table and in --format json."""
    from advisor import schemas

    g = GpuAndCpu(ranks=[RankShare(device="gpu", batch_size=256, threads=1, samples_per_sec_alone=500.0,
                                   busy_seconds=256 / 500.0),
                         RankShare(device="cpu", batch_size=26, threads=6, samples_per_sec_alone=2000.0,
                                   busy_seconds=26 / 0.8 / 2000.0)],
                  # 545/s together: a 5 ms exchange a step, quick enough that the variant's whole band on
                  # g4dn.16xlarge stays above zero with the estimate's band as wide as it now is (at 540/s,
                  # a 10 ms exchange, its low end sat at -0.08%)
                  samples_per_sec=545.0, samples_per_sec_ci=(525.0, 565.0), efficiency=545.0 / 2500.0, rounds=2, kept=True)
    r = probe_result(GPU, 500.0, accelerator="gpu", gpus=("NVIDIA A10G",), model="mlp").model_copy(update={"gpu_and_cpu": g})
    f, db = tmp_path / "r.json", str(tmp_path / "r.db")
    f.write_text(r.model_dump_json())
    assert cli("results", "import", str(f), "--store", db)[0] == 0
    base = ["recommend", "--workload", "mlp", "--samples", "1e7", "--budget", "1000", "--deadline", "30d",
            "--family", "g4dn", "--top", "100", "--store", db]
    code, out, err = cli(*base, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    schemas.model("recommend").model_validate(doc)
    rows = [x for x in rows_of(doc) if x["instance_type"] == "g4dn.16xlarge"]
    pair = [x for x in rows if x["variant"] == "gpu_and_cpu"]
    alone = [x for x in rows if x["variant"] is None and x["count"] == 1]
    assert pair and alone, [(x["instance_type"], x["variant"]) for x in rows_of(doc)]
    for p in pair:
        a = next(x for x in alone if (x["region"], x["market"]) == (p["region"], p["market"]))
        v = p["gpu_and_cpu"]
        assert p["count"] == 1 and p["throughput_source"] == "estimated" and v["source"] == "estimated"
        assert 0 < v["low"] < v["gain"] < v["high"]  # the band above zero: why the variant is offered
        assert v["basis"]["combining_efficiency"] == [0.8, 0.8, 0.8]  # the probe's e, read back
        assert v["basis"]["cpu_vcpus"] == 64 - 1 - v["basis"]["loader_vcpus"]
        assert "your --cpu-too probe on g5.2xlarge" in v["basis"]["from"]
        assert p["samples_per_sec"] == pytest.approx(a["samples_per_sec"] * (1 + v["gain"]), rel=1e-6)
        assert p["hours"] == pytest.approx(a["hours"] * a["samples_per_sec"] / p["samples_per_sec"], rel=1e-6)
        assert any(n.startswith("GPU + CPU variant: +") and "estimated" in n and "this row" in n for n in p["notes"])
    code, out, err = cli(*base)
    assert code == 0, err
    table = [ln.split() for ln in out.splitlines()]
    assert sum(c[1:5] == ["g4dn.16xlarge", "+", "CPU", "1"] and "est." in c for c in table) == len(pair)


def test_the_probes_inputs_are_worked_out_once_per_plan_not_per_type(monkeypatch):
    from advisor import load_catalog
    from advisor.recommend.jobspec import JobSpec
    from advisor.recommend.planner import build_plan

    calls = []
    real = gc.measured_inputs
    monkeypatch.setattr(gc, "measured_inputs", lambda *a: calls.append(a) or real(*a))
    r = probe_result(GPU, 1000.0, accelerator="gpu", gpus=("NVIDIA A10G",))
    r = r.model_copy(update={"gpu_and_cpu": cpu_too(1080.0, (1040.0, 1120.0), kept=True)})
    job = JobSpec(workload="resnet50", samples=1e7, budget_usd=1000.0, deadline_hours=720.0, families=["g4dn", "g5", "g6"])
    plan = build_plan(load_catalog(), job, [r], top=40)
    modelled = [t for t in plan.throughputs if t.gpu_and_cpu is not None and t.gpu_and_cpu.source == "estimated"]
    assert len(modelled) > 10 and len(calls) == 1
