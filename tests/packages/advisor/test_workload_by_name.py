"""A user's own workload found by its name: `results list --workload module:Class` lists every result
of the class with the arguments it was built with, and recommend matches a user's arguments against
the defaults the probe recorded (torch-free: the module is never imported)."""

from __future__ import annotations

import json

import pytest
from factories import probe_result
from recommend_catalogs import write_catalog

from advisor.store import ResultStore
from lightning_module.contract.result import WorkloadSpec

MODEL = "seg.models:UNet"  # never importable here: matching must not import it
DEFAULTS = {"num_classes": 4, "width": 32}


def _spec(**given) -> WorkloadSpec:
    return WorkloadSpec(model=MODEL, init_args=given, init_arg_defaults=DEFAULTS)


def test_a_default_spelled_out_is_the_same_workload():
    assert _spec().workload_id == _spec(num_classes=4).workload_id == _spec(num_classes=4, width=32).workload_id
    assert _spec(num_classes=5).workload_id != _spec().workload_id
    # No defaults recorded (schema 5 and before): the id of the arguments given, as it was.
    old = WorkloadSpec(model=MODEL, init_args={"num_classes": 4})
    assert old.workload_id != _spec().workload_id
    assert WorkloadSpec(model=MODEL).resolved_against(_spec()).workload_id == _spec().workload_id


@pytest.fixture
def store(tmp_path):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(probe_result("c7i.2xlarge", 80.0, spec=_spec(), flops_per_sample=12e9))
        s.add(probe_result("c7i.2xlarge", 60.0, n=1, spec=_spec(width=64), flops_per_sample=12e9))
        s.add(probe_result("c7i.2xlarge", 40.0, n=2))  # a builtin's
    return str(db)


def test_results_list_finds_every_result_of_the_class_with_its_arguments(cli, store):
    code, out, _ = cli("results", "list", "--store", store, "--workload", MODEL, "--format", "json")
    rows = json.loads(out)["results"]
    assert code == 0 and len(rows) == 2 and {r["workload"] for r in rows} == {MODEL}
    assert sorted(r["init_args"]["width"] for r in rows) == [32, 64]
    assert all(r["init_args"]["num_classes"] == 4 for r in rows)
    code, out, _ = cli("results", "list", "--store", store, "--workload", MODEL)
    assert code == 0 and out.count("width=64") == 1 and out.count(MODEL) == 2
    # Filters that keep nothing say so, not that nothing is stored.
    code, out, err = cli("results", "list", "--store", store, "--workload", "other.mod:Net")
    assert code == 0 and "no stored result matches --workload other.mod:Net" in err
    code, out, _ = cli("results", "list", "--store", store, "--workload", "resnet50", "--format", "json")
    assert [r["workload"] for r in json.loads(out)["results"]] == ["resnet50"]


def test_results_show_names_the_arguments_as_built(cli, store):
    with ResultStore(store, readonly=True) as s:
        rid = next(r.result_id for r in s.results() if r.workload.init_args)
    code, out, _ = cli("results", "show", rid[:12], "--store", store)
    assert code == 0 and '"width":64' in out and '"num_classes":4' in out


def _recommend(cli, tmp_path, store, *more):
    return cli("recommend", "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--workload", MODEL,
               "--catalog", write_catalog(tmp_path / "cat.json"), "--store", store, "--top", "20", *more)


@pytest.mark.parametrize(("init_args", "figure"), [
    ("{}", 80.0), ('{"num_classes": 4}', 80.0), ('{"width": 64}', 60.0), ('{"width": 64, "num_classes": 4}', 60.0),
])
def test_recommend_resolves_the_users_arguments_against_the_recorded_defaults(cli, tmp_path, store, init_args, figure):
    code, out, err = _recommend(cli, tmp_path, store, "--init-args", init_args, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    row = next(r for r in doc["recommendations"] if r["instance_type"] == "c7i.2xlarge" and r["count"] == 1)
    assert row["throughput_source"] == "measured" and row["samples_per_sec"] == pytest.approx(figure, rel=0.05)


def test_no_match_lists_the_arguments_that_were_probed(cli, tmp_path, store):
    code, _, err = _recommend(cli, tmp_path, store, "--init-args", '{"width": 16}')
    assert code == 2 and "no probe results" in err and err.count("\n") == 1
    assert '"width":32' in err and '"width":64' in err and "probed with" in err
