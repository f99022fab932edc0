"""`advisor recommend --format skypilot`: a SkyPilot task for the ranked candidates. Checked against
SkyPilot's documented task schema (https://docs.skypilot.co/en/latest/reference/yaml-spec.html: the
fields written here, as sky/utils/schemas.py of skypilot 0.14.1 types them), and by SkyPilot's own
loader where skypilot is installed (it is not a dependency: `recommend` never imports it)."""

from __future__ import annotations

import json
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


def test_skypilots_own_loader_reads_it(cli, tmp_path):
    """Where skypilot is installed (a test-only extra: not in this project's venv by default)."""
    sky = pytest.importorskip("sky", reason="skypilot not installed: pip install skypilot to run SkyPilot's loader")
    out, _ = task_of(cli, "--market", "any")
    path = tmp_path / "task.yaml"
    path.write_text(out)
    task = sky.Task.from_yaml(str(path))
    assert task.num_nodes == 1 and len(task.resources) >= 2


def test_recommend_never_imports_skypilot():
    code = ("import sys; from advisor.cli import main; main(['recommend', '--budget', '500', '--deadline', '2d', "
            "'--samples', '1e8', '--format', 'skypilot']); assert 'sky' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True)
