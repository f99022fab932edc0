"""`advisor recommend` end to end: known answers on a hand-made catalog, the shipped snapshot,
the infeasible path, measured results taking over, bad input, and the torch-free import path."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from checkout import ROOT
from factories import probe_result
from recommend_catalogs import write_catalog

from advisor.store import ResultStore

REQUIRED_KEYS = {"instance_type", "count", "region", "market", "samples_per_sec", "throughput_source",
                 "throughput_low", "throughput_high", "hours", "cost_usd", "samples_per_dollar", "feasible",
                 "reason"}


@pytest.fixture
def catalog_file(tmp_path):
    return write_catalog(tmp_path / "cat.json")


def point_estimate(cli):
    """The CLI with --confidence 0: ranking on the point estimate."""
    return lambda *args: cli(*args, "--confidence", "0")


def run_json(cli, *args):
    code, out, err = cli("recommend", *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_cheapest_on_a_hand_made_catalog(cli, catalog_file):
    # The point-estimate rules (ties, merged counts, the frontier's end); the confidence's own tests
    # are in test_confidence.py.
    cli = point_estimate(cli)
    doc = run_json(cli, "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--family", "c7i",
                   "--catalog", catalog_file)
    best = doc["recommendations"][0]
    # Two to four c7i.2xlarge cost the same as one (the all-reduce hides behind backward): the
    # row with fewer instances stands for them, and says how fast the others are.
    assert (best["instance_type"], best["count"]) == ("c7i.2xlarge", 1)
    assert [a["count"] for a in best["also_counts"]] == [2, 3, 4]
    assert best["also_counts"][-1]["hours"] == pytest.approx(best["hours"] / 4)
    assert any("same cost with 2-4 instances" in n for n in best["notes"])
    doc = run_json(cli, "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--family", "c7i",
                   "--catalog", catalog_file, "--objective", "pareto")
    # On the Pareto front the fastest of those equal-cost options stands alone: 4 x c7i.2xlarge (a
    # c7i.8xlarge is 4x the price for ~2x the throughput: CPU scaling is not linear in the cores).
    assert next((r["instance_type"], r["count"]) for r in doc["recommendations"]) == ("c7i.2xlarge", 4)
    doc = run_json(cli, "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--family", "c7i",
                   "--catalog", catalog_file, "--max-instances", "1")
    best = doc["recommendations"][0]
    assert REQUIRED_KEYS <= best.keys()
    # c7i.2xlarge (published 40.73/s) beats c7i.8xlarge (estimated ~2x that at 4x the price).
    assert (best["instance_type"], best["count"], best["region"], best["market"]) == (
        "c7i.2xlarge", 1, "us-east-1", "on-demand")
    assert best["throughput_source"] == "reference"
    assert abs(best["samples_per_dollar"] - 410_723) <= 1
    assert best["hours"] == pytest.approx(1e6 / 40.73 / 3600)
    assert best["cost_usd"] == pytest.approx(best["hours"] * 0.357)
    big = next(r for r in doc["recommendations"] if r["instance_type"] == "c7i.8xlarge")
    assert big["throughput_source"] == "estimated" and big["cost_usd"] > best["cost_usd"] * 1.5
    assert big["basis"]["reference_rows"] == ["article-a-c7i.2xlarge-ipex"]


def test_spot_row_carries_the_interruption_loss(cli, catalog_file):
    doc = run_json(cli, "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--family", "c7i",
                   "--market", "spot", "--catalog", catalog_file)
    best = doc["recommendations"][0]
    assert (best["instance_type"], best["market"], best["interruption_bucket"]) == ("c7i.2xlarge", "spot", "<5%")
    lam = 0.025 / 730  # bucket <5%: midpoint 2.5% per month
    loss = (30 / 2 + 5) / 60
    assert best["samples_per_dollar"] == pytest.approx(1_135_771 * (1 - lam * loss), abs=1)
    assert best["expected_interruptions"] == pytest.approx(lam * best["hours"])


def test_fastest_and_scale_out(cli, catalog_file):
    doc = run_json(cli, "--budget", "1000", "--deadline", "2d", "--samples", "1e6", "--family", "c7i",
                   "--objective", "fastest", "--max-instances", "3", "--catalog", catalog_file)
    best = doc["recommendations"][0]
    assert (best["instance_type"], best["count"]) == ("c7i.8xlarge", 3)
    one = next(r for r in doc["recommendations"] if r["instance_type"] == "c7i.8xlarge" and r["count"] == 1)
    assert best["hours"] < one["hours"] and best["cost_usd"] >= one["cost_usd"] - 1e-9


def test_pareto(cli, catalog_file):
    doc = run_json(cli, "--budget", "1000", "--deadline", "2d", "--samples", "1e8", "--objective", "pareto",
                   "--catalog", catalog_file)
    rows = doc["recommendations"]
    assert rows and all(r["feasible"] for r in rows)
    # The frontier is on the figures ranked at --confidence (the band's quantile): two rows near a tie
    # on their point figures (g5.12xlarge and p4d.24xlarge, $51 each) may cross there.
    costs = [r["cost_usd_at_confidence"] for r in rows]
    hours = [r["hours_at_confidence"] for r in rows]
    assert costs == sorted(costs) and hours == sorted(hours, reverse=True)


def test_market_any_adds_spot_with_fallback(cli, catalog_file):
    doc = run_json(cli, "--budget", "1000", "--deadline", "2d", "--samples", "1e6", "--family", "c7i",
                   "--market", "any", "--top", "30", "--catalog", catalog_file)
    markets = {r["market"] for r in doc["recommendations"]}
    assert markets == {"on-demand", "spot", "spot+od-fallback"}


def test_nothing_feasible_suggests_budget_and_deadline(cli, catalog_file):
    code, out, err = cli("recommend", "--budget", "1", "--deadline", "1h", "--samples", "1e8", "--catalog", catalog_file)
    assert code == 0, err
    assert "Nothing meets both the budget and the deadline" in out
    assert "--budget" in out and "--deadline" in out
    doc = run_json(cli, "--budget", "1", "--deadline", "1h", "--samples", "1e8", "--catalog", catalog_file)
    assert doc["feasible"] is False and doc["recommendations"] == []
    closest = doc["closest"]
    assert closest and not any(r["feasible"] for r in closest)
    for r in closest:
        assert r["reason"]
        assert r["budget_needed_usd"] or r["deadline_needed_hours"]
        if r["budget_needed_usd"]:
            assert r["budget_needed_usd"] >= r["cost_usd"]
        if r["deadline_needed_hours"]:
            assert r["deadline_needed_hours"] >= r["hours_pessimistic"]
    # Taking the first suggestion makes that candidate feasible.
    r = closest[0]
    budget = str(r["budget_needed_usd"] or 1)
    deadline = f"{r['deadline_needed_hours']}h" if r["deadline_needed_hours"] else "1h"
    doc = run_json(cli, "--budget", budget, "--deadline", deadline, "--samples", "1e8", "--catalog", catalog_file,
                   "--top", "50")
    assert any((x["instance_type"], x["count"], x["market"]) == (r["instance_type"], r["count"], r["market"])
               for x in doc["recommendations"])


def test_measured_result_takes_over(cli, catalog_file, tmp_path):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(probe_result("c7i.2xlarge", 60.0))
    doc = run_json(cli, "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--family", "c7i",
                   "--catalog", catalog_file, "--store", str(db))
    best = doc["recommendations"][0]
    assert (best["instance_type"], best["throughput_source"], best["samples_per_sec"]) == ("c7i.2xlarge", "measured", 60.0)
    # The estimate for the bigger c7i now scales from the user's own number.
    other = next(r for r in doc["recommendations"] if r["instance_type"] == "c7i.8xlarge")
    # 4x the cores of the same CPU, 2x the throughput in the middle of the published bracket (none
    # to 4x): mostly the probe's 2 x 60, a little the published figure's 2 x 40.73.
    assert 2 * 40.73 < other["samples_per_sec"] < 120.0 * 1.001
    assert other["basis"]["probes"][0]["instance_type"] == "c7i.2xlarge"
    assert other["basis"]["probes"][0]["weight"] > 0.7


def test_missing_store_is_not_created(cli, catalog_file, tmp_path):
    # A mistyped --store would rank without the user's measurements: said, not silently ignored.
    db = tmp_path / "none" / "r.db"
    code, _, err = cli("recommend", "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--catalog", catalog_file,
                       "--store", str(db))
    assert code == 2 and "does not exist" in err
    assert not db.parent.exists()
    run_json(cli, "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--catalog", catalog_file)  # default: none yet
    assert not (tmp_path / "data").exists()


def test_excluded_are_listed_with_reasons(cli, catalog_file):
    doc = run_json(cli, "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--catalog", catalog_file,
                   "--min-accelerator-memory", "20")
    reasons = {e["instance_type"]: e["reason"] for e in doc["excluded"]}
    assert "Neuron SDK" in reasons["trn1.2xlarge"]
    assert "16 GiB" in reasons["g4dn.xlarge"]
    code, out, _ = cli("recommend", "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--catalog",
                       catalog_file, "--show-excluded")
    assert code == 0 and "Excluded (1)" in out and "trn1.2xlarge" in out
    # A CPU instance's "device memory" is the host's: 16 GiB c7i.2xlarge is out at 20 GiB.
    assert "host memory" in reasons["c7i.2xlarge"]


def test_probe_next_names_the_commands(cli, catalog_file):
    code, out, _ = cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--catalog", catalog_file)
    assert code == 0
    assert "Probe next" in out and "advisor launch --instance-type" in out and "--s3 s3://BUCKET/prefix" in out


def test_csv_and_markdown(cli, catalog_file):
    code, out, _ = cli("recommend", "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--catalog",
                       catalog_file, "--format", "csv")
    assert code == 0
    header = out.splitlines()[0].split(",")
    assert REQUIRED_KEYS <= set(header)
    code, out, _ = cli("recommend", "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--catalog",
                       catalog_file, "--format", "markdown")
    assert code == 0 and "| rank" in out


def test_shipped_snapshot_main_job(cli):
    code, out, err = cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8")
    assert code == 0, err
    assert "samples/s" in out and "\n1 " in out
    doc = run_json(cli, "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--market", "any")
    rows = doc["recommendations"]
    assert len(rows) == 10 and all(r["feasible"] for r in rows)
    # At the default confidence (0.9) the figures checked and ranked on are the 90% ones.
    assert doc["job"]["confidence"] == 0.9
    assert all(math.isfinite(r["cost_usd_at_confidence"]) and r["cost_usd_at_confidence"] <= 500
               and r["hours_at_confidence"] <= 48 for r in rows)
    assert all(r["cost_usd_at_confidence"] >= r["cost_usd"] and r["hours_at_confidence"] >= r["hours"] for r in rows)
    assert [r["cost_usd_at_confidence"] for r in rows] == sorted(r["cost_usd_at_confidence"] for r in rows)
    assert {e["instance_type"].split(".")[0] for e in doc["excluded"]} >= {"trn1", "inf2", "dl1"}


def test_plot_writes_a_png(cli, catalog_file, tmp_path):
    png = tmp_path / "plot.png"
    code, _, err = cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--catalog",
                       catalog_file, "--market", "any", "--plot", str(png))
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


NO_HEAVY = """
import sys
from advisor.cli import main
heavy = ("torch", "lightning", "torchvision", "matplotlib", "boto3", "botocore")
assert not [m for m in heavy if m in sys.modules], "import advisor.cli"
code = main(["recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--market", "any",
             "--format", "json"] + sys.argv[1:])
assert code == 0
print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)
"""


@pytest.mark.parametrize("extra", [[], ["--store", "STORE"]])
def test_recommend_imports_nothing_heavy(tmp_path, extra):
    if extra:
        db = tmp_path / "r.db"
        with ResultStore(db) as s:
            s.add(probe_result("c7i.2xlarge", 60.0))
        extra = ["--store", str(db)]
    p = subprocess.run([sys.executable, "-c", NO_HEAVY, *extra], check=False, capture_output=True, text=True, timeout=60,
                       cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip().splitlines()[-1] == "[]"


def test_measured_multi_node_probe_overrides_the_model(cli, catalog_file, tmp_path):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(probe_result("g5.2xlarge", 900.0, accelerator="gpu"))
        s.add(probe_result("g5.2xlarge", 1500.0, accelerator="gpu", num_nodes=2))
    doc = run_json(cli, "--budget", "1000", "--deadline", "2d", "--samples", "1e7", "--family", "g5",
                   "--objective", "fastest", "--max-instances", "2", "--top", "20", "--catalog", catalog_file,
                   "--store", str(db))
    rows = {(r["instance_type"], r["count"]): r for r in doc["recommendations"] if r["market"] == "on-demand"}
    assert rows[("g5.2xlarge", 1)]["samples_per_sec"] == 900.0
    assert rows[("g5.2xlarge", 2)]["samples_per_sec"] == 1500.0
    assert rows[("g5.2xlarge", 2)]["scale_out_efficiency"] == pytest.approx(1500 / 1800)


def test_stale_and_other_version_measurements_warn(cli, catalog_file, tmp_path):
    from datetime import datetime, timedelta, timezone

    now = datetime.now(timezone.utc)
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(probe_result("g5.2xlarge", 900.0, accelerator="gpu", finished_at=now - timedelta(hours=1)))
        s.add(probe_result("c7i.2xlarge", 41.0, finished_at=now - timedelta(days=40), torch="2.4.0"))
    code, _, err = cli("recommend", "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--catalog",
                         catalog_file, "--store", str(db))
    assert code == 0
    warning = [line for line in err.splitlines() if "c7i.2xlarge" in line]
    assert warning and "40 days ago" in warning[0] and "torch 2.4.0" in warning[0]
    assert "g5.2xlarge" not in err


def test_a_users_own_workload_is_ranked_from_its_probes(cli, catalog_file, tmp_path):
    model = "mypkg.models:Net"
    db = tmp_path / "r.db"
    args = ["--budget", "100", "--deadline", "2d", "--samples", "1e6", "--workload", model, "--catalog", catalog_file,
            "--store", str(db)]
    ResultStore(db).close()  # an empty store
    code, _, err = cli("recommend", *args)
    assert code == 2 and "no probe results" in err and "advisor probe --workload mypkg.models:Net" in err
    with ResultStore(db) as s:
        s.add(probe_result("c7i.2xlarge", 80.0, model=model, flops_per_sample=12e9))
    doc = run_json(cli, *args, "--top", "20")
    assert doc["workload_id"].startswith("custom-")
    rows = {(r["instance_type"], r["count"]): r for r in doc["recommendations"]}
    assert rows[("c7i.2xlarge", 1)]["throughput_source"] == "measured"
    # Same CPU, 4x the cores, scaled from the user's own number: between no gain and 4x (the
    # published bracket of CPU scaling), 2x in the middle.
    est = rows[("c7i.8xlarge", 1)]
    assert est["throughput_source"] == "estimated" and est["samples_per_sec"] == pytest.approx(160.0, rel=0.15)
    assert est["throughput_low"] <= 80.0 * 1.01 and est["throughput_high"] >= 320.0 * 0.99
    assert est["basis"]["cpu_scaling"]["peak_ratio_to_anchor"] == pytest.approx(4.0)
    # Its own probe only: never another workload's published figures scaled by a FLOPs ratio.
    assert est["basis"]["probes"][0]["weight"] == 1.0 and est["basis"]["reference_weight"] == 0.0
    # The parameter count is unknown: no all-reduce model, so only single instances are offered.
    assert {k for _, k in rows} == {1}
    code, _, err = cli("recommend", *args, "--datamodule", "x.y:Z")
    assert code == 2 and "no probe results" in err  # a different id (another datamodule): nothing measured for it


def test_a_users_own_workload_without_a_flop_count_is_estimated_from_its_probe(cli, catalog_file, tmp_path):
    """No FLOPs per sample: the probe itself sets the level; every estimate rests on it."""
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(probe_result("g5.2xlarge", 500.0, accelerator="gpu", model="mypkg.models:Net"))
    doc = run_json(cli, "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--workload", "mypkg.models:Net",
                   "--catalog", catalog_file, "--store", str(db), "--top", "20")
    rows = {r["instance_type"]: r for r in doc["recommendations"]}
    assert rows["g5.2xlarge"]["throughput_source"] == "measured"
    est = [r for r in doc["recommendations"] if r["throughput_source"] == "estimated"]
    assert est and all(r["basis"]["probes"][0]["instance_type"] == "g5.2xlarge" for r in est)


def shaped(r, parameters: int, fixed_gib: float, per_sample_gib: float, batches=(8, 16), where="accelerator",
           pipeline: float | None = None):
    """A probe result of a user's module with the shape a probe records (ProbeResult.shape)."""
    from lightning_module.contract.result import MemoryFit, WorkloadShape

    fit = MemoryFit.fitted(where, [(b, fixed_gib + per_sample_gib * b) for b in batches])
    shape = WorkloadShape(parameters=parameters, trainable_parameters=parameters, parameter_bytes=4.0 * parameters,
                          optimizer_state_bytes=8.0 * parameters, data_source="module", memory=fit)
    cfg = r.config.model_copy(update={"batch_size": batches[-1]})
    return r.model_copy(update={"shape": shape, "config": cfg, "pipeline_samples_per_sec_per_worker": pipeline})


def test_a_users_workload_shape_excludes_devices_too_small_and_says_when_the_batch_shrinks(cli, catalog_file, tmp_path):
    model = "mypkg.models:Big"
    db = tmp_path / "r.db"
    with ResultStore(db) as s:  # 11 GiB fixed + 0.75 GiB per sample, measured on an A100 at batch 8 and 16
        s.add(shaped(probe_result("p4d.24xlarge", 4000.0, accelerator="gpu", devices=8, model=model,
                                  flops_per_sample=5e10), 10**9, 11.0, 0.75))
    doc = run_json(cli, "--budget", "10000", "--deadline", "30d", "--samples", "1e6", "--workload", model,
                   "--catalog", catalog_file, "--store", str(db), "--top", "50", "--show-excluded")
    excluded = {e["instance_type"]: e["reason"] for e in doc["excluded"]}
    # A T4 (16 GiB) cannot hold 11 + 8 x 0.75 = 17.0 GiB
    assert excluded["g4dn.xlarge"] == "needs 17.0 GiB at batch 8 (your probe's memory fit); T4 has 16"
    rows = {(r["instance_type"], r["count"]): r for r in doc["recommendations"]}
    a10g = rows[("g5.2xlarge", 1)]  # 24 GiB: batch 17 at most, above the probe's 16
    assert not any("holds batch" in n for n in a10g["notes"])
    # With the parameter count known, the all-reduce model applies: several instances are offered.
    assert {k for _, k in rows} > {1}


def test_the_memory_fit_excludes_with_the_reason_and_notes_a_smaller_batch():
    from recommend_catalogs import NOW, make_catalog

    from advisor.estimate.throughput import Exclusion, ThroughputModel
    from lightning_module.contract.workload_facts import facts_from_probes

    model = "mypkg.models:Big"
    r = shaped(probe_result("p4d.24xlarge", 4000.0, accelerator="gpu", devices=8, model=model), 10**8, 16.0, 0.5,
               batches=(4, 32))
    facts = facts_from_probes(model, 224, [r])
    assert facts.params == 10**8 and facts.gradient_bytes() == 4e8 and facts.best_batch == 32
    cat = make_catalog()
    m = ThroughputModel(cat, facts, r.workload_id, 224, [r], now=NOW)
    t4 = m.evaluate(cat.instance_types["g4dn.xlarge"])  # 16 GiB < 16 + 4 x 0.5
    assert isinstance(t4, Exclusion) and t4.reason == "needs 18.0 GiB at batch 4 (your probe's memory fit); T4 has 16"
    a10g = m.evaluate(cat.instance_types["g5.2xlarge"])  # (24 - 16) / 0.5 = 16 < 32
    assert not isinstance(a10g, Exclusion)
    assert any(n.startswith("holds batch 16 per device at most") and "best 32" in n for n in a10g.notes)
    a100 = m.evaluate(cat.instance_types["p4d.24xlarge"])  # 40 GiB: batch 48
    assert not any("holds batch" in n for n in a100.notes)
    # A host fit says nothing of a GPU's memory, and a GPU fit nothing of a CPU instance's.
    assert not isinstance(m.evaluate(cat.instance_types["c7i.2xlarge"]), Exclusion)


def test_a_users_workload_is_capped_by_its_own_pipeline_only():
    from recommend_catalogs import NOW, make_catalog

    from advisor.estimate.host import host_cap
    from advisor.estimate.throughput import ThroughputModel
    from lightning_module.contract.workload_facts import facts_from_probes

    cat = make_catalog()
    g5 = cat.instance_types["g5.12xlarge"]
    assert host_cap(g5, 224, None, images=False) is None  # no image figure for a token loader
    cap = host_cap(g5, 224, 100.0, images=False)
    assert cap["caps"] == {"vCPUs": 100 * (48 - 4)} and cap["pipeline_rate_from"] == "your probe"
    model = "mypkg.models:Tok"
    r = shaped(probe_result("c7i.2xlarge", 50_000.0, model=model, flops_per_sample=1e6), 10**6, 0.5, 0.001,
               where="host", pipeline=30.0)
    m = ThroughputModel(cat, facts_from_probes(model, 224, [r]), r.workload_id, 224, [r], now=NOW)
    t = m.evaluate(cat.instance_types["g5.2xlarge"])
    assert t.samples_per_sec <= 30.0 * 7 * 1.0001 and t.basis["host_cap"]["binding"] == "vCPUs"


def test_probe_results_without_an_instance_type_are_said_to_be_unused(cli, catalog_file, tmp_path):
    model = "mypkg.models:Net"
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(probe_result("c7i.2xlarge", 80.0, model=model))
        s.add(probe_result(None, 6724.0, model=model, n=1))  # probed off EC2 without a label
        s.add(probe_result(None, 2000.0, model=model, n=2, accelerator="gpu", gpus=("Imaginary GPU 9000",)))
    code, _, err = cli("recommend", "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--workload", model,
                       "--catalog", catalog_file, "--store", str(db))
    assert code == 0, err
    assert "1 probe result(s) of this workload not used: no instance type of this catalog" in err
    # The factory's fingerprint says no clock: a CPU it cannot place, and the line says why.
    assert "1 CPU probe result(s) of this workload off EC2 not used: its fingerprint has no clock" in err


def test_a_gpu_probe_off_ec2_anchors_the_estimates_through_its_gpu(cli, tmp_path):
    # Your own workstation's (or a lent machine's) GPU is a measured device of the cross-device
    # model: its figure re-anchors the estimates of every type, the A10G's own sizes nearest.
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(probe_result(None, 2000.0, accelerator="gpu", gpus=("NVIDIA A10G",)))
    args = ("recommend", "--budget", "1000", "--deadline", "7d", "--samples", "1e8", "--family", "g5",
            "--region", "us-east-1", "--format", "json")
    code, base, _ = cli(*args)
    code, out, err = cli(*args, "--store", str(db))
    assert code == 0, err
    assert "1 probe result(s) off EC2 used as measurements of their GPU (NVIDIA A10G)" in err
    before = {(r["instance_type"], r["count"]): r for r in json.loads(base)["recommendations"]}
    rows = [r for r in json.loads(out)["recommendations"] if r["instance_type"] == "g5.xlarge" and r["count"] == 1]
    assert rows and rows[0]["throughput_source"] == "estimated"
    (probe,) = rows[0]["basis"]["probes"]
    assert probe["instance_type"] is None and probe["machine"] == "NVIDIA A10G" and probe["distance"] == 0.0
    assert any("your NVIDIA A10G (off EC2) probe" in n for n in rows[0]["notes"])
    # Pulled towards the 2,000/s measured on that GPU, from the published figures' estimate below it.
    assert rows[0]["samples_per_sec"] > before[("g5.xlarge", 1)]["samples_per_sec"] * 1.3


def test_a_cpu_probe_off_ec2_or_an_unknown_gpu_stays_unused(cli, catalog_file, tmp_path):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(probe_result(None, 2000.0, accelerator="gpu", gpus=("Imaginary GPU 9000",)))
        s.add(probe_result(None, 50.0, n=1))
    code, _, err = cli("recommend", "--budget", "100", "--deadline", "2d", "--samples", "1e6",
                       "--catalog", catalog_file, "--store", str(db))
    assert code == 0, err
    assert "1 probe result(s) of this workload not used" in err and "off EC2 used" not in err
    assert "1 CPU probe result(s) of this workload off EC2 not used: its fingerprint has no clock" in err


def test_references_none_counts_a_gpu_probe_off_ec2_as_a_device_model(cli, tmp_path):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(probe_result(None, 2000.0, accelerator="gpu", gpus=("NVIDIA A10G",)))
    code, _, err = cli("recommend", "--budget", "1000", "--deadline", "7d", "--samples", "1e8", "--references", "none",
                       "--store", str(db))
    assert code == 2 and "(you have 1: A10)" in err  # the A10G counts as its device group
