"""Every JSON file the advisor reads goes through one reader (safeio.parse_json): deep nesting,
integers of thousands of digits, bad UTF-8, NaN and oversize files become one line and exit 2,
never a RecursionError or ValueError traceback, whichever command reads the file."""

from __future__ import annotations

import json
import tempfile
import uuid
from pathlib import Path

import pytest
from checkout import ROOT
from factories import probe_result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schema_check import checked

from catalog.io import CatalogError
from lightning_module.contract.result import ResultError, parse_result, parse_results
from safeio import FileError, parse_json, read_json_file

_DIR = Path(tempfile.mkdtemp(prefix="json-readers-"))
GOOD_RESULT = json.loads(probe_result(n=0).model_dump_json())
SNAPSHOT = json.loads((ROOT / "catalog" / "data" / "snapshot.json").read_text())


def deep(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


def hostile_docs(base: dict, depth: int, digits: int) -> dict[str, str]:
    """Each kind of poison, alone in a document the reader would otherwise accept."""
    def with_(value: str) -> str:
        return json.dumps({**base, "poison": "__P__"}).replace('"__P__"', value)

    return {
        "deep list": with_(deep(depth)),
        "deep object": with_('{"a":' * depth + "1" + "}" * depth),
        "huge int": with_("9" * digits),
        "huge negative int": with_("-" + "1" * digits),
    }


def assert_one_line(code: int, err: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert lines and lines[0].startswith("advisor: error:"), err
    assert "Traceback" not in err and "RecursionError" not in err and "set_int_max_str_digits" not in err
    assert all(len(line) < 1200 for line in lines)


# --- the reader itself -------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(depth=st.integers(1_000, 200_000), digits=st.integers(101, 60_000),
       error=st.sampled_from([FileError, CatalogError, ResultError]))
def test_parse_json_refuses_deep_nesting_and_huge_integers_in_one_line(depth, digits, error):
    for text in (deep(depth), deep(depth, "{\"k\":", "}").replace("}", "1}", 1), "9" * digits, f'[1, -{"7" * digits}]'):
        with pytest.raises(error) as e:
            parse_json(text, "f.json", error)
        assert "\n" not in str(e.value) and str(e.value).startswith("f.json")


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=300))
def test_parse_json_on_any_bytes_returns_or_raises_the_callers_error(data):
    try:
        parse_json(data, "x", ResultError)
    except ResultError as e:
        assert "\n" not in str(e)


def test_small_nesting_and_numbers_are_read():
    assert parse_json('{"a": [[[1]]], "n": 12345678901234567890}', "x") == {"a": [[[1]]], "n": 12345678901234567890}
    assert parse_json(b'{"f": NaN}', "x")["f"] != 0  # read; the models refuse non-finite numbers field by field


def test_read_json_file_one_line_errors(tmp_path):
    with pytest.raises(FileError, match="does not exist"):
        read_json_file(tmp_path / "nope.json", "thing", 100)
    with pytest.raises(FileError, match="is a directory"):
        read_json_file(tmp_path, "thing", 100)
    big = tmp_path / "big.json"
    big.write_text("[" + "0," * 100 + "0]")
    with pytest.raises(FileError, match="larger than"):
        read_json_file(big, "thing", 50)
    bad = tmp_path / "latin1.json"
    bad.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(FileError, match="not UTF-8"):
        read_json_file(bad, "thing", 100)


@settings(max_examples=40, deadline=None)
@given(depth=st.integers(1_000, 100_000), digits=st.integers(4_301, 30_000))
def test_result_parsers_refuse_hostile_documents(depth, digits):
    for name, text in hostile_docs(GOOD_RESULT, depth, digits).items():
        for parse in (parse_result, parse_results):
            with pytest.raises(ResultError) as e:
                parse(text, where=name)
            assert "\n" not in str(e.value)


def test_a_list_with_one_bad_entry_keeps_the_good_ones():
    text = json.dumps([GOOD_RESULT, {"workload_id": "x", "samples_per_sec": 1}, "nope"])
    errors: list = []
    got = parse_results(text, "f.json", errors=errors)
    assert [r.result_id for r in got] == [GOOD_RESULT["result_id"]]
    assert [str(e).split(":")[0] for e in errors] == ["f.json[1]", "f.json[2]"]


# --- every command that reads a JSON file ------------------------------------------------------


def _write(name: str, text: str) -> str:
    p = _DIR / name
    p.write_text(text)
    return str(p)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(65, 100_000), digits=st.integers(4_301, 30_000), kind=st.sampled_from(
    ["deep list", "deep object", "huge int", "huge negative int"]))
def test_every_command_reading_json_answers_one_line(cli, depth, digits, kind):
    # the catalog (--catalog, and the cache: the same reader)
    f = _write("hostile-catalog.json", hostile_docs(SNAPSHOT, depth, digits)[kind])
    assert_one_line(*cli("catalog", "info", "--catalog", f)[::2])
    assert_one_line(*cli("recommend", "--budget", "100", "--deadline", "2d", "--samples", "1e6", "--catalog", f)[::2])
    # results import: the bad file is reported, a good file beside it is imported
    f = _write("hostile-result.json", hostile_docs(GOOD_RESULT, depth, digits)[kind])
    good = _write("good.json", json.dumps(GOOD_RESULT))
    store = str(_DIR / f"{uuid.uuid4().hex}.db")
    code, _, err = cli("results", "import", f, good, "--store", store)
    assert code == 2 and "imported 1 new result(s)" in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith("advisor: error:")]) == 1


@pytest.mark.parametrize("kind", ["deep list", "deep object", "huge int", "huge negative int"])
def test_a_spot_advisor_file_that_is_poison_is_one_line(cli, kind):
    # Read before any AWS call (fixed cases: each refresh builds a boto3 session, ~1 s).
    f = _write("hostile-advisor.json", hostile_docs({"spot_advisor": {}}, 50_000, 10_000)[kind])
    assert_one_line(*cli("catalog", "refresh", "--spot-advisor", f, "--regions", "us-east-1")[::2])


def test_a_run_manifest_that_is_poison_is_one_line(cli, isolated_dirs):
    runs = isolated_dirs / "data" / "runs"
    runs.mkdir(parents=True)
    base = {"manifest_version": 1, "run_id": "r"}
    for i, text in enumerate(hostile_docs(base, 50_000, 10_000).values()):
        run_id = f"20261121-070000-00000{i}"
        (runs / f"{run_id}.json").write_text(text)
        assert_one_line(*cli("launch", "status", run_id)[::2])


def test_a_catalog_cache_that_is_poison_is_one_line(cli, isolated_dirs):
    cache = isolated_dirs / "cache" / "instance-advisor"
    cache.mkdir(parents=True, exist_ok=True)
    from advisor.paths import catalog_cache_path

    catalog_cache_path().parent.mkdir(parents=True, exist_ok=True)
    catalog_cache_path().write_text(deep(100_000))
    assert_one_line(*cli("catalog", "info")[::2])
    assert_one_line(*cli("catalog", "show")[::2])


def test_a_catalog_with_nan_or_overflowing_numbers_names_the_field(cli):
    for bad in ("NaN", "Infinity", "1e400", "-1e400"):
        d = json.loads(json.dumps(SNAPSHOT))
        text = json.dumps(d).replace('"memory_gib": 16.0', f'"memory_gib": {bad}', 1)
        code, _, err = cli("catalog", "info", "--catalog", _write("nan.json", text))
        assert_one_line(code, err)
        assert "memory_gib" in err


# --- results pull: one bad object or odd key is reported, the rest imported ---------------------


def test_pull_reports_poison_objects_and_odd_keys_and_imports_the_rest(cli, tmp_path):
    pytest.importorskip("moto")
    import boto3
    from moto import mock_aws

    from advisor.store import ResultStore

    bucket, run = "hostile-bucket", "20261121-070000-abcdef"
    good = probe_result(n=1, instance_type="g5.xlarge")
    poison = hostile_docs(GOOD_RESULT, 100_000, 20_000)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=bucket)

        def put(key: str, body: str) -> None:
            s3.put_object(Bucket=bucket, Key=f"probes/{key}", Body=body.encode())

        put(f"{run}/g5.xlarge/result.json", good.model_dump_json())
        for i, text in enumerate(poison.values()):
            put(f"{run}/c7i.{i}xlarge/result.json", text)
        put(f"{run}/g6.xlarge/result.json", '{"workload_id": "x", "samples_per_sec": Infinity}')
        put(f"{run}/p5.48xlarge/run.json", "{}")  # not a layout key: ignored silently
        for odd in ("..", ".hidden"):
            put(f"{odd}/g5.xlarge/result.json", good.model_dump_json())
        put(f"{run}/..%2F/result.json", good.model_dump_json())
        put("20261121-080000-000000/run.json", poison["deep object"])  # a run.json that is poison
        put("20261121-080000-000000/g6e.xlarge/result.json",
            probe_result(n=2, instance_type="g6e.xlarge").model_dump_json())

        store = tmp_path / "r.db"
        code, out, err = cli("results", "pull", f"s3://{bucket}/probes", "--store", str(store), "--format", "json")
    assert code == 1 and "Traceback" not in err, err
    rows = checked(out, "results-pull")["runs"]
    status = {(r["run_id"], r["instance_type"]): r["status"] for r in rows}
    assert status[(run, "g5.xlarge")] == "imported"
    assert status[("20261121-080000-000000", "g6e.xlarge")] == "imported"  # beside a poisoned run.json
    assert [status[(run, f"c7i.{i}xlarge")] for i in range(len(poison))] == ["corrupt"] * len(poison)
    assert status[(run, "g6.xlarge")] == "corrupt"
    assert status[("..", None)] == "ignored" and status[(".hidden", None)] == "ignored"  # no type: null
    assert status[(run, "..%2F")] == "ignored"
    assert all("\n" not in (r["detail"] or "") and len(r["detail"] or "") < 1200 for r in rows)
    with ResultStore(store, readonly=True) as s:
        assert sorted(r.instance_type for r in s.results()) == ["g5.xlarge", "g6e.xlarge"]
