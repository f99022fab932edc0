"""`advisor results list|show|import|export` against a store."""

from __future__ import annotations

import csv
import io
import json

from factories import probe_result

from advisor.store import ResultStore


def _store(tmp_path, n=2):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        rs = [probe_result(n=i) for i in range(n)]
        for r in rs:
            s.add(r)
    return str(db), rs


def test_list_shows_results_newest_first(cli, tmp_path):
    db, rs = _store(tmp_path)
    code, out, _ = cli("results", "list", "--store", db)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["id", "workload"]
    assert rs[1].result_id[:12] in lines[2] and rs[0].result_id[:12] in lines[3]
    assert "4" in lines[2].split()  # x baseline: 41 / 10.25


def test_list_json_and_empty_store(cli, tmp_path):
    db, rs = _store(tmp_path)
    code, out, _ = cli("results", "list", "--store", db, "--format", "json")
    assert [row["result_id"] for row in json.loads(out)["results"]] == [rs[1].result_id, rs[0].result_id]
    # Nothing stored yet in the default place: an empty list, and nothing created.
    code, out, err = cli("results", "list")
    assert code == 0 and out == "" and "no results" in err
    assert not (tmp_path / "data").exists()
    # A store named with --store must exist: a mistyped path is an error, not a new empty store.
    code, out, err = cli("results", "list", "--store", str(tmp_path / "typo" / "empty.db"))
    assert code == 2 and "does not exist" in err and not (tmp_path / "typo").exists()


def test_show_by_prefix_prints_ladder_and_json(cli, tmp_path):
    db, rs = _store(tmp_path)
    code, out, _ = cli("results", "show", rs[0].result_id[:6], "--store", db)
    assert code == 0
    assert "channels_last" in out and "baseline" in out and "bf16" in out
    code, out, _ = cli("results", "show", rs[0].result_id[:6], "--store", db, "--format", "json")
    assert json.loads(out)["result"]["result_id"] == rs[0].result_id
    code, _, err = cli("results", "show", "nope", "--store", db)
    assert code == 2 and err.count("\n") == 1 and "no result" in err


def test_import_is_idempotent_and_reports_bad_files_but_keeps_good_ones(cli, tmp_path):
    db = str(tmp_path / "r.db")
    good = tmp_path / "good.json"
    good.write_text(probe_result(n=7).model_dump_json())
    bad = tmp_path / "bad.json"
    bad.write_text('{"workload_id": "x", "samples_per_sec": -1}')
    code, _, err = cli("results", "import", str(good), str(bad), str(tmp_path / "missing.json"), "--store", db)
    assert code == 2
    errors = [l for l in err.splitlines() if l.startswith("advisor: error:")]
    assert len(errors) == 2 and "bad.json" in errors[0] and "missing.json" in errors[1]
    assert "imported 1 new" in err
    code, _, err = cli("results", "import", str(good), "--store", db)
    assert code == 0 and "imported 0 new result(s), 1 already stored" in err
    with ResultStore(db) as s:
        assert s.count() == 1


def test_export_json_round_trips_and_csv_has_a_row_each(cli, tmp_path):
    db, rs = _store(tmp_path, 3)
    code, out, _ = cli("results", "export", "--store", db)
    assert code == 0
    from lightning_module.contract.result import ProbeResult

    assert {ProbeResult.model_validate(d).result_id for d in json.loads(out)["results"]} == {r.result_id for r in rs}
    code, out, _ = cli("results", "export", "--store", db, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 3 and rows[0]["precision"] == "bf16-mixed" and rows[0]["instance_type"] == "c7i.2xlarge"


def test_exported_file_imports_into_another_store(cli, tmp_path):
    db, rs = _store(tmp_path, 2)
    code, out, _ = cli("results", "show", rs[0].result_id, "--store", db, "--format", "json")
    f = tmp_path / "one.json"
    f.write_text(out)
    code, _, err = cli("results", "import", str(f), "--store", str(tmp_path / "other.db"))
    assert code == 0 and "imported 1 new" in err


def test_export_json_imports_back_into_a_fresh_store(cli, tmp_path):
    db, rs = _store(tmp_path, 3)
    code, out, _ = cli("results", "export", "--store", db)
    f = tmp_path / "all.json"
    f.write_text(out)
    other = str(tmp_path / "other.db")
    code, _, err = cli("results", "import", str(f), "--store", other)
    assert code == 0 and "imported 3 new" in err, err
    code, _, err = cli("results", "import", str(f), "--store", other)
    assert code == 0 and "imported 0 new result(s), 3 already stored" in err
    f.write_text(json.dumps([rs[0].model_dump(mode="json"), {"workload_id": "x", "samples_per_sec": 1}]))
    code, _, err = cli("results", "import", str(f), "--store", str(tmp_path / "third.db"))
    assert code == 2 and "all.json[1]" in err
