"""The JSON contract (advisor/schemas/): the published schema files are the models', every command's
`--format json` validates against its schema, and `advisor schema` prints them. The EC2 and AWS
documents are checked where their fakes live: launch-plan, launch, launch-status and launch-cancel in
ec2/test_launch.py, results-pull in ec2/test_pull.py, catalog-refresh in catalog/test_catalog_aws.py;
the probe's own in test_probe_cli.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from factories import probe_result
from schema_check import checked

from advisor import schemas
from advisor.store import ResultStore

jsonschema = pytest.importorskip("jsonschema")

SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


@pytest.mark.parametrize("name", list(schemas.SCHEMAS))
def test_the_published_schema_files_are_the_models(name):
    assert schemas.published(name) == schemas.json_schema(name), \
        f"advisor/schemas/json/{name}.schema.json is stale: run scripts/generate_schemas.py"
    jsonschema.Draft202012Validator.check_schema(schemas.published(name))


def test_every_document_is_checked_from_its_command_somewhere():
    """Each schema has a test that runs its command with --format json and validates the output
    (schema_check.checked): here, or beside the command's AWS fakes (see the module's docstring)."""
    tests = Path(__file__).resolve().parents[2]
    text = "\n".join(p.read_text() for p in tests.rglob("test_*.py"))
    assert [n for n in schemas.SCHEMAS if not re.search(rf'checked\(\w+, "{re.escape(n)}"\)', text)] == []


def test_no_stray_schema_file():
    assert {p.name for p in schemas.JSON_DIR.glob("*.json")} == {f"{n}.schema.json" for n in schemas.SCHEMAS}


def _keys(schema: dict):
    """Every property name a schema defines (its $defs included)."""
    for node in [schema, *schema.get("$defs", {}).values()]:
        yield from node.get("properties", {})


@pytest.mark.parametrize("name", list(schemas.SCHEMAS))
def test_keys_are_snake_case(name):
    bad = [k for k in _keys(schemas.published(name)) if not SNAKE.match(k)]
    assert bad == []


def test_counts_are_integers_and_times_iso_8601():
    props = schemas.published("results-list")["$defs"]["ResultRow"]["properties"]
    assert props["batch_size"]["type"] == "integer" and props["finished_at"]["format"] == "date-time"
    assert schemas.published("recommend")["$defs"]["RecommendJob"]["properties"]["samples"]["type"] == "integer"


def _store(tmp_path):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        rs = [probe_result(n=i) for i in range(2)] + [probe_result(None, n=5)]
        for r in rs:
            s.add(r)
    return str(db), rs


def test_results_documents(cli, tmp_path):
    db, rs = _store(tmp_path)
    _, out, _ = cli("results", "list", "--store", db, "--format", "json")
    doc = checked(out, "results-list")
    first = doc["results"][-1]
    assert first["result_id"] == rs[0].result_id and first["instance_type"] == "c7i.2xlarge"
    assert isinstance(first["ci_low"], float) and isinstance(first["batch_size"], int)
    assert first["finished_at"] == rs[0].finished_at.isoformat().replace("+00:00", "Z")
    assert first["speedup_over_baseline"] == pytest.approx(rs[0].samples_per_sec / rs[0].ladder[0].samples_per_sec)
    assert doc["results"][0]["instance_type"] is None  # unknown: null, not ""
    _, out, _ = cli("results", "show", rs[0].result_id[:8], "--store", db, "--format", "json")
    assert checked(out, "result")["result"]["result_id"] == rs[0].result_id
    _, out, _ = cli("results", "export", "--store", db)
    assert [r["result_id"] for r in checked(out, "results-export")["results"]][-1] == rs[0].result_id


def test_what_show_and_export_print_imports_back(cli, tmp_path):
    db, rs = _store(tmp_path)
    _, shown, _ = cli("results", "show", rs[0].result_id, "--store", db, "--format", "json")
    _, exported, _ = cli("results", "export", "--store", db)
    (tmp_path / "one.json").write_text(shown)
    (tmp_path / "all.json").write_text(exported)
    fresh = str(tmp_path / "fresh.db")
    code, out, err = cli("results", "import", str(tmp_path / "one.json"), str(tmp_path / "all.json"), "--store", fresh,
                         "--format", "json")
    assert code == 0 and "imported 3 new result(s), 1 already stored, 0 invalid" in err
    doc = checked(out, "results-import")
    assert doc["imported"][0] == rs[0].result_id and doc["already_stored"] == [rs[0].result_id]
    assert len(doc["imported"]) == 3 and doc["invalid"] == [] and doc["store"] == fresh
    (tmp_path / "bad.json").write_text("{")
    code, out, _ = cli("results", "import", str(tmp_path / "bad.json"), "--store", fresh, "--format", "json")
    doc = checked(out, "results-import")
    assert code == 2 and doc["imported"] == [] and len(doc["invalid"]) == 1 and "bad.json" in doc["invalid"][0]


def test_catalog_documents(cli):
    _, out, _ = cli("catalog", "show", "--family", "g5", "--region", "us-east-1", "--format", "json")
    offers = checked(out, "catalog-show")["offers"]
    assert offers and all(isinstance(o["vcpus"], int) for o in offers)
    assert {o["market"] for o in offers} == {"on-demand", "spot"}
    _, out, _ = cli("catalog", "show", "--family", "c7i", "--region", "us-east-1", "--format", "json")
    assert all(o["accelerator"] is None and o["accelerator_count"] == 0 for o in checked(out, "catalog-show")["offers"])
    _, out, _ = cli("catalog", "info", "--format", "json")
    info = checked(out, "catalog-info")
    assert info["regions"] and info["fetched_at"].endswith("Z")


def test_references_documents(cli):
    _, out, _ = cli("references", "list", "--device", "A10G", "--format", "json")
    refs = checked(out, "references-list")["references"]
    assert refs and all(r["device"] == "A10G" and r["workload_id"] for r in refs)
    for probe in ((), ("--probe",)):
        _, out, _ = cli("references", "check", *probe, "--format", "json")
        doc = checked(out, "references-check")
        assert doc["held_out"] == ("probe" if probe else "device") and doc["rows"]


@pytest.mark.parametrize("argv", [
    ("--budget", "500", "--deadline", "2d", "--samples", "1e8", "--market", "any", "--top", "5"),
    ("--budget", "20", "--deadline", "12h", "--samples", "1e8"),  # nothing fits: the closest
    ("--budget", "500", "--deadline", "2d", "--epochs", "1.5", "--dataset-size", "1000", "--confidence", "0"),
])
def test_recommend_document(cli, argv):
    _, out, _ = cli("recommend", *argv, "--format", "json")
    doc = checked(out, "recommend")
    assert isinstance(doc["job"]["samples"], int)
    assert doc["recommendations"] or doc["closest"]


def test_recommend_probe_commands_are_argument_lists(cli):
    _, out, _ = cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "3e8",
                       "--workload", "resnet50", "--image-size", "160", "--format", "json")
    cmds = checked(out, "recommend")["probe_commands"]
    assert cmds, "the default job has a probe plan"
    for c in cmds:
        assert c["argv"][0] == "advisor" and not any(a.startswith(("#", "(")) for a in c["argv"]) and c["purpose"]
    launch = cmds[0]["argv"]
    assert launch[1] == "launch" and "--probe-args=--image-size 160" in launch
    assert [c["argv"][1:3] for c in cmds[-2:]] == [["results", "pull"], ["probe", "--workload"]]


def test_the_schema_command(cli):
    code, out, _ = cli("schema")
    assert code == 0 and all(name in out for name in schemas.SCHEMAS)
    _, out, _ = cli("schema", "--format", "json")
    assert [r["schema"] for r in checked(out, "schemas")["schemas"]] == list(schemas.SCHEMAS)
    code, out, _ = cli("schema", "recommend")
    assert code == 0 and json.loads(out) == schemas.published("recommend")
    code, out, err = cli("schema", "nope")
    assert code == 2 and out == "" and err.count("\n") == 1 and "advisor schema" in err


def test_a_document_of_the_wrong_shape_is_refused_before_printing():
    with pytest.raises(ValueError, match="batch_size"):
        schemas.document("results-list", results=[{**_row(), "batch_size": 1.5}])
    with pytest.raises(ValueError, match="extra"):
        schemas.document("results-list", results=[{**_row(), "samples/s": 3}])


def _row() -> dict:
    return {"result_id": "x", "workload_id": "w", "instance_type": None, "accelerator": "cpu", "devices": 1,
            "precision": "32-true", "batch_size": 8, "samples_per_sec": 1.0, "ci_low": 0.9, "ci_high": 1.1,
            "speedup_over_baseline": None, "finished_at": "2026-11-24T14:10:00Z"}


def test_the_readme_names_every_recommend_field():
    """The README's field list is the schema's: every row field in the schema's order, and every
    key of the document (it once missed rank, also_regions, also_counts, usd_per_hour; then gpu_and_cpu)."""
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    text = " ".join(readme[readme.index("### JSON for scripts"):].split("\n### ")[0].split())
    row = re.search(r"A `recommend` row carries `([^`]+)`", text).group(1).split(", ")
    schema = schemas.published("recommend")
    assert row == list(schema["$defs"]["Candidate"]["properties"])
    missing = [k for k in schema["properties"] if k not in ("schema", "schema_version") and f"`{k}`" not in text]
    assert missing == []


@pytest.mark.parametrize("page,heading", [("docs/json.md", "### A recommend row"), ("docs/recommend.md", "## JSON output")])
def test_the_docs_name_every_recommend_row_field(page, heading):
    text = (Path(__file__).resolve().parents[3] / page).read_text()
    section = text[text.index(heading):]
    section = section[:section.index("\n#", len(heading))]
    named = set(re.findall(r"[a-z_]+", " ".join(re.findall(r"`([^`]+)`", section))))
    missing = [k for k in schemas.published("recommend")["$defs"]["Candidate"]["properties"] if k not in named]
    assert missing == []
