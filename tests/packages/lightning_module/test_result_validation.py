"""Data that gets in must be valid, and a bad row must not take the store down.

ProbeResult refuses non-finite and negative numbers, odd ids and dates, and a workload_id that
does not match its workload; whatever an import or a pull offers, the store stays readable by
every read command; a row that went bad in the store is skipped, named, and deletable."""

from __future__ import annotations

import copy
import json
import math
import sqlite3
import tempfile
import uuid
from pathlib import Path

import pytest
from factories import probe_result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_paths import leaves, set_path
from recommend_catalogs import write_catalog

from advisor.store import ResultStore
from lightning_module.contract.result import ResultError, parse_result

BASE = json.loads(probe_result(n=0).model_dump_json())
_DIR = Path(tempfile.mkdtemp(prefix="result-validation-"))
CATALOG = write_catalog(_DIR / "cat.json")


LEAVES = list(leaves(BASE))


def refused(doc: dict, match: str | None = None) -> str:
    with pytest.raises(ResultError) as e:
        parse_result(json.dumps(doc), where="r.json")
    msg = str(e.value)
    assert "\n" not in msg
    if match:
        assert match in msg, msg
    return msg


# --- the door: every example of the issue ------------------------------------------------------


@pytest.mark.parametrize("path, value", [
    (("samples_per_sec",), math.inf), (("samples_per_sec",), math.nan), (("samples_per_sec",), -5.0),
    (("samples_per_sec",), 1e300), (("ladder", 0, "samples_per_sec"), 1e13),
    (("samples_per_sec_ci",), [math.nan, math.nan]), (("samples_per_sec_ci",), [math.inf, math.inf]),
    (("samples_per_sec_ci",), [50.0, 10.0]), (("samples_per_sec_ci",), [-1.0, 10.0]),
    (("step_time", "mean_s"), math.nan), (("step_time", "p90_s"), math.inf), (("step_time", "mean_s"), -0.8),
    (("step_time", "mean_s"), 0.0), (("step_time", "n_steps"), -3),
    (("config", "devices"), -1), (("config", "devices"), 0), (("config", "num_nodes"), -2),
    (("ladder", 0, "samples_per_sec"), -1.0), (("ladder", 0, "ci_high"), math.inf),
    (("ladder", 1, "samples_per_sec"), 0.0),  # an "ok" rung that measured nothing
    (("flops_per_sample",), -1e9), (("achieved_tflops",), math.nan), (("peak_memory_gib",), -1.0),
    (("hardware", "ram_gib"), -4.0), (("hardware", "cpu_clock_ghz"), math.inf),
    (("result_id",), ""), (("result_id",), "x" * 1_000_000), (("result_id",), "../../etc"),
    (("result_id",), "a\x1b[2Jb"), (("result_id",), " lead"),
    (("finished_at",), "2999-01-01T00:00:00Z"), (("finished_at",), "9999-12-31T23:59:59-23:59"),
    (("started_at",), "0001-01-01T00:00:00+01:00"), (("finished_at",), "1970-01-01T00:00:00Z"),
    (("started_at",), "2026-11-01T00:05:00Z"),  # after finished_at (factories.T0 + 30 s)
    (("instance_type",), "g5.xlarge; rm -rf /"), (("hardware", "cpu_model"), "Xeon\x1b]0;pwned\x07"),
    (("workload", "image_size"), 0), (("workload", "batch_size"), 10**12),
])
def test_the_door_refuses(path, value):
    refused(set_path(BASE, path, value))


def test_json_nan_and_infinity_tokens_are_refused_with_the_field():
    text = json.dumps(BASE).replace('"samples_per_sec": 40.0', '"samples_per_sec": Infinity')
    with pytest.raises(ResultError, match="samples_per_sec"):
        parse_result(text)
    text = json.dumps(set_path(BASE, ("samples_per_sec_ci",), [1, 2])).replace("[1, 2]", "[NaN, NaN]")
    with pytest.raises(ResultError, match="samples_per_sec_ci"):
        parse_result(text)


def test_a_workload_id_that_does_not_match_its_workload_is_refused():
    mlp = json.loads(probe_result(n=0, model="mlp").model_dump_json())
    msg = refused({**mlp, "workload_id": "resnet50-224px-1000c"}, "does not match")
    assert "mlp-224px-1000c" in msg  # says what the workload really is
    refused({**BASE, "workload_id": "resnet50-32px-1000c"}, "does not match")
    assert parse_result(json.dumps(mlp)).workload_id == "mlp-224px-1000c"


def test_a_naive_or_offset_time_is_read_and_compared_as_utc():
    r = parse_result(json.dumps({**BASE, "started_at": "2026-01-01T01:00:00+02:00",
                                 "finished_at": "2026-01-01T00:00:30"}))
    assert r.started_at < r.finished_at


# --- the store stays readable after any import -------------------------------------------------

_value = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**30), 10**30), st.none(), st.booleans(),
    st.text(max_size=40), st.sampled_from(["", "x" * 70_000, "\x1b[2J", "2999-01-01T00:00:00Z",
                                           "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+14:00", "resnet50",
                                           "mlp", "gpu", "ok", "failed", "32-true"]),
    st.lists(st.floats(allow_nan=True), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


@st.composite
def mutated(draw) -> str:
    doc = copy.deepcopy(BASE)
    doc["result_id"] = uuid.uuid4().hex
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(LEAVES))
        try:
            doc = set_path(doc, path, draw(_value))
        except (KeyError, IndexError, TypeError):  # an earlier mutation replaced a parent
            pass
    return json.dumps(doc)  # allow_nan: NaN/Infinity tokens, as a foreign writer might produce


def _all_read_commands_work(cli, store: str) -> list[dict]:
    code, out, err = cli("results", "list", "--store", store, "--format", "json")
    assert code == 0 and "Traceback" not in err, err
    code, out, err = cli("results", "export", "--store", store)
    assert code == 0 and "Traceback" not in err, err
    exported = json.loads(out)["results"]
    for r in exported:
        code, _, err = cli("results", "show", r["result_id"], "--store", store)
        assert code == 0, err
        code, _, err = cli("results", "show", r["result_id"], "--store", store, "--format", "csv")
        assert code == 0, err
    code, out, err = cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--catalog", CATALOG,
                         "--store", store, "--format", "json", "--max-age", "100000")
    assert code == 0 and "Traceback" not in err, err
    return exported


def _finite(node) -> bool:
    if isinstance(node, float):
        return math.isfinite(node)
    if isinstance(node, dict):
        return all(_finite(v) for v in node.values())
    if isinstance(node, list):
        return all(_finite(v) for v in node)
    return True


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(mutated(), min_size=1, max_size=4))
def test_the_store_stays_readable_after_any_import(cli, docs):
    store = str(_DIR / f"{uuid.uuid4().hex}.db")
    files = []
    for i, text in enumerate(docs):
        f = _DIR / f"{uuid.uuid4().hex}-{i}.json"
        f.write_text(text)
        files.append(str(f))
    good = _DIR / f"{uuid.uuid4().hex}-good.json"
    good.write_text(json.dumps({**BASE, "result_id": uuid.uuid4().hex}))
    code, _, err = cli("results", "import", *files, str(good), "--store", store)
    assert code in (0, 2) and "Traceback" not in err, err
    assert all(len(line) < 1200 for line in err.splitlines())
    exported = _all_read_commands_work(cli, store)
    assert exported and all(_finite(r) for r in exported)
    with sqlite3.connect(store) as db:  # every stored row validates again, with nothing lost
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        for (text,) in db.execute("SELECT json FROM results"):
            parse_result(text)


# --- a row that went bad is skipped, named and deletable ---------------------------------------


def _poison_row(store: Path, rid: str, text) -> None:
    with sqlite3.connect(store) as db:  # as a hand, another version or a bug might have
        db.execute("INSERT INTO results VALUES (?, 'resnet50-224px-1000c', 'c7i.2xlarge', 'cpu', 1, "
                   "'2026-01-01T00:00:00', NULL, ?)", (rid, text))


@pytest.mark.parametrize("bad_json", [
    json.dumps({**BASE, "samples_per_sec": None}), "{not json", b"\xff\xfe", 42,
    json.dumps(BASE).replace('"samples_per_sec": 40.0', '"samples_per_sec": Infinity'), "[" * 50_000,
])
def test_a_bad_row_is_skipped_named_and_deleted(cli, tmp_path, bad_json):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(probe_result(n=1))
        s.add(probe_result(n=2))
    _poison_row(db, "badrow0001", bad_json)
    code, out, err = cli("results", "list", "--store", str(db), "--format", "json")
    assert code == 0 and len(json.loads(out)["results"]) == 2
    assert "skipped invalid row badrow0001" in err and "advisor results delete badrow0001" in err
    assert len(err.strip().splitlines()) == 1
    code, out, err = cli("results", "export", "--store", str(db))
    assert code == 0 and len(json.loads(out)["results"]) == 2
    code, _, err = cli("results", "show", "badrow", "--store", str(db))
    assert code == 2 and "advisor results delete badrow0001" in err and len(err.strip().splitlines()) == 1
    code, out, err = cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--catalog", CATALOG,
                         "--store", str(db), "--format", "json")
    assert code == 0, err
    code, _, err = cli("results", "delete", "badrow0001", "--store", str(db))
    assert code == 0 and "deleted 1 result(s)" in err
    code, out, err = cli("results", "list", "--store", str(db), "--format", "json")
    assert code == 0 and len(json.loads(out)["results"]) == 2 and err == ""


def test_many_bad_rows_are_counted_not_listed(cli, tmp_path):
    db = tmp_path / "r.db"
    ResultStore(db).close()
    for i in range(40):
        _poison_row(db, f"bad{i:04d}", "{}")
    code, _out, err = cli("results", "list", "--store", str(db))
    assert code == 0 and len(err.strip().splitlines()) == 7 and "35 more invalid rows" in err
    assert "no valid results (40 invalid skipped)" in err


def test_delete_is_all_or_nothing_and_by_unique_prefix(cli, tmp_path):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        for i, rid in enumerate(("aa01", "aa02", "bb01")):
            s.add(probe_result(n=i, result_id=rid))
    code, _, err = cli("results", "delete", "bb", "zz", "--store", str(db))
    assert code == 2 and "no result with id 'zz'" in err
    code, _, err = cli("results", "delete", "aa", "--store", str(db))
    assert code == 2 and "ambiguous" in err
    with ResultStore(db, readonly=True) as s:
        assert s.count() == 3  # nothing deleted by either
    code, _, err = cli("results", "delete", "bb", "aa01", "aa01", "--store", str(db))
    assert code == 0 and "deleted 2 result(s)" in err
    with ResultStore(db, readonly=True) as s:
        assert [r.result_id for r in s.results()] == ["aa02"]
    code, _, err = cli("results", "delete", "aa02", "--store", str(tmp_path / "missing.db"))
    assert code == 2 and "does not exist" in err and not (tmp_path / "missing.db").exists()


def test_show_handles_a_rung_that_measured_nothing(cli, tmp_path):
    r = probe_result(n=0)
    failed = r.ladder[1].model_copy(update={"status": "failed", "samples_per_sec": 0.0, "ci_low": 0.0, "ci_high": 0.0,
                                            "error": "RuntimeError: boom"})
    zero_base = r.ladder[0].model_copy(update={"status": "failed", "samples_per_sec": 0.0})
    r = r.model_copy(update={"ladder": [zero_base, failed]})
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(parse_result(r.model_dump_json()))
    for fmt in ("table", "json", "csv", "markdown"):
        code, _out, err = cli("results", "show", r.result_id, "--store", str(db), "--format", fmt)
        assert code == 0 and "Traceback" not in err, err
    code, _out, err = cli("results", "list", "--store", str(db))
    assert code == 0, err
