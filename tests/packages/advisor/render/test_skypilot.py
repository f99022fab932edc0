"""`advisor recommend --format skypilot`: a SkyPilot task for the ranked candidates. Checked against
SkyPilot's documented task schema (https://docs.skypilot.co/en/latest/reference/yaml-spec.html: the
fields written here, as sky/utils/schemas.py of skypilot 0.14.1 types them), and by SkyPilot's own
loader (skypilot is a test-only dependency, in the dev extra: `recommend` never imports it)."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

yaml = pytest.importorskip("yaml")
jsonschema = pytest.importorskip("jsonschema")

from checkout import ROOT

JOB = ("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--format", "skypilot")

# The task fields this writes, typed as skypilot 0.14.1's sky/utils/schemas.py types them (its task,
# resources and single-resource schemas; additionalProperties False as there).
ENTRY = {"type": "object", "additionalProperties": False, "required": ["infra", "instance_type", "use_spot"],
         "properties": {"infra": {"type": "string", "pattern": r"^aws/[a-z]{2}(-[a-z]+)+-\d$"},
                        "instance_type": {"type": "string"}, "use_spot": {"type": "boolean"},
                        "max_hourly_cost": {"type": "number", "exclusiveMinimum": 0}}}
TASK = {"type": "object", "additionalProperties": False, "required": ["name", "num_nodes", "resources", "run"],
        "properties": {
            "name": {"type": "string"}, "num_nodes": {"type": "integer", "minimum": 1},
            "envs": {"type": "object", "additionalProperties": {"type": "string"}},
            "run": {"type": "string"},
            "resources": {"type": "object", "additionalProperties": False, "required": ["ordered"], "properties": {
                "ordered": {"type": "array", "items": ENTRY, "minItems": 1},
                "job_recovery": {"type": "object", "additionalProperties": False, "properties": {
                    "strategy": {"type": "string", "enum": ["FAILOVER", "EAGER_NEXT_REGION"]},
                    "max_restarts_on_errors": {"type": "integer", "minimum": 0}}}}}}}


def task_of(cli, *args):
    code, out, err = cli(*JOB, *args)
    assert code == 0, err
    return out, yaml.safe_load(out)


def test_the_ranked_candidates_in_order_with_spot_recovery(cli):
    doc = json.loads(cli(*JOB[:-2], "--market", "any", "--format", "json")[1])
    out, task = task_of(cli, "--market", "any")
    jsonschema.validate(task, TASK)
    rows = doc["recommendations"]
    k = rows[0]["count"]
    assert task["num_nodes"] == k
    want = []
    for r in rows:
        if r["count"] != k:
            continue
        for spot in {"on-demand": [False], "spot": [True], "spot+od-fallback": [True, False]}[r["market"]]:
            e = (f"aws/{r['region']}", r["instance_type"], spot)
            if e not in want:
                want.append(e)
    got = [(e["infra"], e["instance_type"], e["use_spot"]) for e in task["resources"]["ordered"]]
    assert got == want[:len(got)] and len(got) >= 2
    assert task["resources"]["job_recovery"]["strategy"] == "FAILOVER"
    # The cost ceiling: the budget over count x the time at the confidence.
    first = rows[0]
    assert task["resources"]["ordered"][0]["max_hourly_cost"] == pytest.approx(
        500 / (first["count"] * first["hours_at_confidence"]), abs=1e-4)
    # The comment block carries the figures and their sources.
    assert "# resnet50-224px-1000c: 1e+08 samples" in out
    first = rows[0]
    assert re.search(rf"#   1\. {re.escape(first['instance_type'])} x{first['count']} \S+ spot at \$[\d.]+/h: .* at 90% "
                     rf"confidence; {first['samples_per_sec']:,.0f} samples/s \(estimated [\d,]+-[\d,]+/s\)", out)
    assert task["run"].strip().startswith("torchrun --nproc_per_node=")


def test_several_nodes_run_torchrun_with_skypilots_node_variables(cli):
    _, task = task_of(cli, "--objective", "fastest")
    jsonschema.validate(task, TASK)
    assert task["num_nodes"] > 1 and "job_recovery" not in task["resources"]  # on-demand only
    for var in ("$SKYPILOT_NUM_NODES", "$SKYPILOT_NODE_RANK", "$SKYPILOT_NODE_IPS", "SKYPILOT_NUM_GPUS_PER_NODE",
                "$TRAIN_SCRIPT"):
        assert var in task["run"]
    # The run line is valid shell (bash -n parses it without running it).
    subprocess.run(["bash", "-n"], input=task["run"], text=True, check=True)
    assert task["envs"]["STRATEGY"] == "ddp"  # rows that name no strategy: torchrun's one process per GPU


def test_the_task_names_the_picks_strategy_for_the_script():
    from types import SimpleNamespace

    from advisor.render.skypilot import strategy_of

    assert strategy_of(SimpleNamespace(strategy="fsdp")) == "fsdp"
    assert strategy_of(SimpleNamespace(strategy=None)) == strategy_of(SimpleNamespace()) == "ddp"


def test_with_own_prices_the_ceiling_is_left_out(cli, tmp_path):
    p = tmp_path / "p.json"
    p.write_text('{"discounts": [{"percent": 20}]}')
    out, task = task_of(cli, "--prices", str(p))
    jsonschema.validate(task, TASK)
    assert all("max_hourly_cost" not in e for e in task["resources"]["ordered"])
    assert "max_hourly_cost is left out" in out and f"prices from {p}" in out


def test_nothing_fits_is_a_comment_and_no_task(cli):
    out, task = task_of(cli, "--budget", "5")
    assert task is None and "# No task: nothing meets the budget and the deadline" in out


# SkyPilot's AWS catalog columns (sky/catalog/data_fetchers/fetch_aws.py of skypilot 0.14.1): its loader
# checks each instance type and region against this file, which it otherwise downloads from GitHub.
SKY_COLUMNS = ("InstanceType", "AcceleratorName", "AcceleratorCount", "vCPUs", "MemoryGiB", "GpuInfo", "Price",
               "SpotPrice", "Region", "AvailabilityZone", "Arch", "LocalDiskType", "NVMeSupported", "LocalDiskSize",
               "LocalDiskCount", "MaximumEfaInterfaces")
# Runs in its own process with HOME in the test's folder: SkyPilot writes ~/.sky.
# Task.validate() is what `sky launch` runs on a task before anything else (sky/execution.py): it
# checks each resource's instance type and region against the catalog (from_yaml alone does not).
LOADER = """
import json, sys
import sky
t = sky.Task.from_yaml(sys.argv[1])
t.validate()
print(json.dumps({"num_nodes": t.num_nodes, "run": t.run,
                  "ordered": [[r.instance_type, r.region, r.use_spot, r.get_cost(3600), r.accelerators] for r in t.resources]}))
"""


def sky_catalog(home, task: dict) -> None:
    """SkyPilot's offline AWS catalog for the task's (instance type, region) pairs, from our catalog
    (specs and prices as ours has them), where SkyPilot's loader looks: ~/.sky/catalogs/v8/aws/vms.csv."""
    from advisor.paths import load_catalog

    cat = load_catalog()
    folder = home / ".sky" / "catalogs" / "v8" / "aws"
    folder.mkdir(parents=True)
    with open(folder / "vms.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(SKY_COLUMNS)
        for name, region in sorted({(e["instance_type"], e["infra"].split("/")[1]) for e in task["resources"]["ordered"]}):
            it, ro = cat.instance_types[name], cat.offers[region]
            price = {m: usd for n, m, usd in zip(ro.instance_type, ro.market, ro.usd_per_hour) if n == name}
            gpu = it.accelerator_kind == "gpu"
            mib = round((it.accelerator_memory_gib or 0) * 1024)
            info = json.dumps({"Gpus": [{"Name": it.accelerator_model, "Manufacturer": "NVIDIA",
                                         "Count": it.accelerator_count, "MemoryInfo": {"SizeInMiB": mib}}],
                               "TotalGpuMemoryInMiB": mib * it.accelerator_count}) if gpu else ""
            w.writerow([name, it.accelerator_model if gpu else "", float(it.accelerator_count) if gpu else "",
                        float(it.vcpus), it.memory_gib, info, price.get("on-demand", ""), price.get("spot", ""),
                        region, f"{region}-az1", it.arch, "", False, "", "", 0])
    # A task that names accelerators also makes SkyPilot read its accelerator names (common/accelerators.csv,
    # common/metadata.csv, columns as its loader reads them: sky/utils/accelerator_registry.py).
    gpus = sorted({cat.instance_types[e["instance_type"]].accelerator_model for e in task["resources"]["ordered"]
                   if "accelerators" in e})
    if gpus:
        common = home / ".sky" / "catalogs" / "v8" / "common"
        common.mkdir(parents=True)
        with open(common / "accelerators.csv", "w", newline="") as f:
            csv.writer(f).writerows([("AcceleratorName", "Clouds"), *((g, "AWS") for g in gpus)])
        with open(common / "metadata.csv", "w", newline="") as f:
            csv.writer(f).writerow(("GPU", "MemoryGB", "Manufacturer"))


def sky_load(tmp_path, text: str) -> subprocess.CompletedProcess:
    path = tmp_path / "task.yaml"
    path.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKYPILOT", "AWS_"))} | {"HOME": str(tmp_path)}
    return subprocess.run([sys.executable, "-c", LOADER, str(path)], check=False, cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("args", [("--market", "any"), ("--objective", "fastest")])
def test_skypilots_own_loader_reads_it(cli, tmp_path, args):
    """SkyPilot's Task.from_yaml and Task.validate (the dev extra installs skypilot) take the task as
    written: every entry of resources.ordered, in order, with its market, and num_nodes; and they
    refuse a task with a misspelt field or an instance type SkyPilot does not know, so their yes means
    something."""
    if importlib.util.find_spec("sky") is None:
        why = "skypilot not installed: pip install -e '.[dev]' installs it, to run SkyPilot's own loader"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"under CI SkyPilot's loader must run: {why}", pytrace=False)
        pytest.skip(why)
    out, task = task_of(cli, *args)
    sky_catalog(tmp_path, task)
    got = sky_load(tmp_path, out)
    assert got.returncode == 0, got.stderr[-2000:]
    loaded = json.loads(got.stdout.strip().splitlines()[-1])
    assert loaded["num_nodes"] == task["num_nodes"]
    entries = task["resources"]["ordered"]
    assert [o[:3] for o in loaded["ordered"]] == [[e["instance_type"], e["infra"].split("/")[1], e["use_spot"]]
                                                  for e in entries]
    # SkyPilot's own price for each entry (an hour of one instance) is within its cost ceiling: none is skipped.
    assert all(o[3] <= e["max_hourly_cost"] for o, e in zip(loaded["ordered"], entries))
    assert loaded["run"] == task["run"]
    first = task["resources"]["ordered"][0]["instance_type"]
    misspelt = out.replace("\n      use_spot:", "\n      use_spots:", 1)
    unknown = out.replace(f'instance_type: "{first}"', 'instance_type: "g5.3xlarge"', 1)  # not sold: not in the catalog
    for bad in (misspelt, unknown):
        assert bad != out
        assert sky_load(tmp_path, bad).returncode != 0


def test_recommend_never_imports_skypilot():
    code = ("import sys; from advisor.cli import main; main(['recommend', '--budget', '500', '--deadline', '2d', "
            "'--samples', '1e8', '--format', 'skypilot']); assert 'sky' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)


# --- a token workload (recommend --model-shape): the top plan's task -------------------------------

TOKENS = ("recommend", "--budget", "5000", "--deadline", "3d", "--region", "us-east-1", "--model-shape", "llama-3-8b",
          "--tokens", "2e9")
TOKEN_ENTRY = {**ENTRY, "required": [*ENTRY["required"], "accelerators"],
               "properties": {**ENTRY["properties"], "accelerators": {"type": "string", "pattern": r"^[A-Za-z0-9-]+:\d+$"}}}
TOKEN_TASK = {**TASK, "properties": {**TASK["properties"], "resources": {
    **TASK["properties"]["resources"],
    "properties": {**TASK["properties"]["resources"]["properties"],
                   "ordered": {"type": "array", "items": TOKEN_ENTRY, "minItems": 1, "maxItems": 1}}}}}


def token_task_and_top(cli, *args):
    code, out, err = cli(*TOKENS, *args, "--format", "skypilot")
    assert code == 0, err
    code, doc, err = cli(*TOKENS, *args, "--format", "json")
    assert code == 0, err
    return out, yaml.safe_load(out), json.loads(doc)["recommendations"][0]


@pytest.mark.parametrize("args", [(), ("--finetune", "lora", "--market", "spot"), ("--family", "g6e", "--strategy", "fsdp")])
def test_a_token_workloads_task_is_its_top_plan(cli, args):
    out, task, top = token_task_and_top(cli, *args)
    jsonschema.validate(task, TOKEN_TASK)
    (entry,) = task["resources"]["ordered"]
    plan = top["plan"]
    assert entry["instance_type"] == top["instance_type"] and entry["infra"] == f"aws/{top['region']}"
    assert entry["accelerators"] == f"{top['accelerator']}:{plan['devices'] // plan['instances']}"
    assert task["num_nodes"] == top["count"] == plan["instances"]
    assert entry["use_spot"] is (top["market"] == "spot")
    assert ("job_recovery" in task["resources"]) is entry["use_spot"]
    assert task["envs"]["STRATEGY"] == plan["strategy"] and task["envs"]["MICRO_BATCH"] == str(plan["micro_batch"])
    assert task["envs"]["ACTIVATION_CHECKPOINTING"] == str(plan["activation_checkpointing"]).lower()
    # the ceiling: the whole budget over the count at the band's low rate
    hours = 2e9 / plan["tokens_per_sec_low"] / 3600
    assert entry["max_hourly_cost"] == pytest.approx(5000 / (top["count"] * hours), rel=1e-3)
    subprocess.run(["bash", "-n"], input=task["run"], text=True, check=True)
    if task["num_nodes"] > 1:
        assert "$SKYPILOT_NUM_NODES" in task["run"]
    assert "sharded step-time model" in out  # where its tokens/s comes from, in the comments


def test_a_token_workload_with_nothing_that_fits_is_a_comment_and_no_task(cli):
    for args, why in ((("--budget", "5"), "nothing meets the budget and the deadline"),
                      (("--family", "g4dn", "--max-instances", "1"), "nothing fits on any priced GPU type")):
        code, out, err = cli(*TOKENS, *args, "--format", "skypilot")
        assert code == 0, err
        assert yaml.safe_load(out) is None and f"# No task: {why}" in out


def test_skypilots_own_loader_reads_a_token_task(cli, tmp_path):
    """SkyPilot's Task.from_yaml and Task.validate take the token task as written: its one entry,
    market, accelerators and num_nodes."""
    if importlib.util.find_spec("sky") is None:
        why = "skypilot not installed: pip install -e '.[dev]' installs it, to run SkyPilot's own loader"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"under CI SkyPilot's loader must run: {why}", pytrace=False)
        pytest.skip(why)
    out, task, top = token_task_and_top(cli)
    sky_catalog(tmp_path, task)
    got = sky_load(tmp_path, out)
    assert got.returncode == 0, got.stderr[-2000:]
    loaded = json.loads(got.stdout.strip().splitlines()[-1])
    assert loaded["num_nodes"] == task["num_nodes"]
    assert [o[:3] for o in loaded["ordered"]] == [[top["instance_type"], top["region"], top["market"] == "spot"]]
    name, count = task["resources"]["ordered"][0]["accelerators"].split(":")
    assert loaded["ordered"][0][4] == {name: int(count)}
    misspelt = out.replace("\n      accelerators:", "\n      accelerator:", 1)
    assert misspelt != out and sky_load(tmp_path, misspelt).returncode != 0
