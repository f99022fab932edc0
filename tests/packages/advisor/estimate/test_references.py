"""The reference dataset: the shipped file meets the issue's minimums, bad files are one line,
and `advisor references list` filters and formats it."""

from __future__ import annotations

import csv
import io
import json

import pytest
from checkout import ROOT

from advisor.cli import main
from advisor.estimate.references import REFERENCE_PATH, ReferenceFileError, load_references, loads


@pytest.fixture(scope="module")
def refs():
    return load_references()


def raw() -> dict:
    return json.loads(REFERENCE_PATH.read_text())


# -- the shipped dataset -------------------------------------------------------------------------

def test_shipped_dataset_meets_the_minimums(refs):
    rows = refs.measurements
    assert len(rows) >= 30
    gpu_models = {m.device for m in rows if m.device != "cpu"}
    assert len(gpu_models) >= 8
    assert {"V100", "A100", "H100", "H200", "L40S", "A10G", "Gaudi2", "Trainium"} <= gpu_models
    assert len({m.model for m in rows}) >= 2
    assert {m.stack for m in rows} == {"tuned", "default"}
    # both stacks on the same GPU model, for the same workload
    by = {(m.device, m.workload_id, m.stack) for m in rows}
    assert any((d, w, "default") in by for d, w, s in by if s == "tuned" and d != "cpu")


def test_every_row_names_its_source(refs):
    for m in refs.measurements:
        s = m.source
        assert s.where.strip(), m.id
        assert s.url or (s.repo and s.path and (s.commit or s.revision)) or s.document, m.id
        if m.source_date is None:
            assert m.notes and ("undated" in m.notes.lower() or "not dated" in m.notes.lower()), m.id


def test_derived_rows_say_how(refs):
    derived = [m for m in refs.measurements if m.derived]
    assert any(m.instance_type == "g5.2xlarge" and m.samples_per_sec == 926.0 for m in derived)
    assert all(len(m.derived) > 20 for m in derived)


def test_seed_ladder_rows_are_kept(refs):
    c7i = {m.rung: m.samples_per_sec for m in refs.measurements if m.instance_type == "c7i.2xlarge"}
    assert c7i == {"naive": 9.12, "bf16": 24.34, "channels_last": 37.93, "run_cpu": 39.05, "ipex": 40.73}
    g5 = {m.rung: m.samples_per_sec for m in refs.measurements if m.instance_type == "g5.2xlarge" and m.rung}
    assert g5 == {"naive": 340.0, "tuned": 926.0}


def test_multi_gpu_rows_have_a_one_gpu_partner(refs):
    """The estimator calibrates in-instance scaling on 8-GPU vs 1-GPU pairs from one source and stack."""
    def key(m):
        return (m.device, m.device_memory_gib, m.device_variant, m.workload_id, m.precision, m.framework,
                m.source.repo, m.source.path, m.source.commit, m.source.url)
    ones = {key(m) for m in refs.measurements if m.devices == 1}
    pairs = [m for m in refs.measurements if m.devices == 8 and key(m) in ones]
    assert len(pairs) >= 10
    assert {m.device for m in pairs} >= {"V100", "A100", "H100"}


def test_ids_unique_and_builtin_workload_ids(refs):
    ids = [m.id for m in refs.measurements]
    assert len(ids) == len(set(ids))
    rn50 = [m for m in refs.measurements if m.model == "resnet50" and m.image_size == 224 and m.num_classes == 1000]
    assert rn50 and {m.workload_id for m in rn50} == {"resnet50-224px-1000c"}


# -- bad files -------------------------------------------------------------------------------------

def _bad(text: str | bytes) -> str:
    with pytest.raises(ReferenceFileError) as e:
        loads(text, where="refs.json")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("refs.json")
    return msg


def _with_row(**change) -> str:
    data = raw()
    data["measurements"][0] = {**data["measurements"][0], **change}
    return json.dumps(data)


def test_bad_files_are_one_line():
    assert "not valid JSON" in _bad("{not json")
    assert "not UTF-8" in _bad(b'{"about": "\xff"}')
    assert "5,000 digits" in _bad('{"measurements": [' + "1" * 5000 + "]}")
    assert "nested more than 64 levels" in _bad("[" * 100_000 + "]" * 100_000)
    assert "no 'measurements'" in _bad("[1, 2]")
    assert "schema_version 1" in _bad(json.dumps({"schema_version": 1, "measurements": []}))


@pytest.mark.parametrize("change, words", [
    ({"samples_per_sec": -3.0}, "samples_per_sec"),
    ({"samples_per_sec": 0}, "below the floor of 1e-06 (one sample in 11.6 days"),
    ({"samples_per_sec": "fast"}, "samples_per_sec"),
    ({"gpus": 0}, "gpus"),
    ({"precision": "fp64"}, "precision"),
    ({"stack": "fancy"}, "stack"),
    ({"source_date": "last year"}, "YYYY-MM"),
    ({"source_date": "2024-13"}, "source_date"),
    ({"id": "Has Spaces"}, "slug"),
    ({"model": "ResNet50"}, "lower-case"),
    ({"colour": "blue"}, "colour"),
    ({"source": {"where": "somewhere"}}, "url, a repo"),
    ({"source": {"repo": "a/b", "path": "x.md", "where": "t"}}, "commit or a revision"),
    ({"source": {"repo": "a/b", "path": "x.md", "commit": "abc", "where": "t"}}, "40 hex"),
    ({"derived": "  "}, "derived"),
])
def test_bad_rows_are_one_line_naming_the_row(change, words):
    msg = _bad(_with_row(**change))
    assert words in msg
    assert f"measurements[0] ({change.get('id', 'article-a-c7i.2xlarge-naive')})" in msg


def test_infinite_and_nan_throughputs_are_refused():
    for bad in ("Infinity", "NaN"):
        text = _with_row(samples_per_sec=1.0).replace('"samples_per_sec": 1.0', f'"samples_per_sec": {bad}', 1)
        assert "samples_per_sec" in _bad(text)


def test_duplicate_ids_are_refused():
    data = raw()
    data["measurements"].append(dict(data["measurements"][0]))
    assert "more than once" in _bad(json.dumps(data))


def test_missing_directory_and_oversize_files(tmp_path, monkeypatch):
    with pytest.raises(ReferenceFileError, match="does not exist"):
        load_references(tmp_path / "nope.json")
    with pytest.raises(ReferenceFileError, match="is a directory"):
        load_references(tmp_path)
    from advisor.estimate import references

    monkeypatch.setattr(references, "MAX_BYTES", 1000)
    big = tmp_path / "big.json"
    big.write_text(REFERENCE_PATH.read_text())
    with pytest.raises(ReferenceFileError, match="larger than"):
        load_references(big)


# -- the CLI -------------------------------------------------------------------------------------

def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_filters_case_insensitive(capsys):
    code, out, _ = run(capsys, "references", "list", "--device", "a10g,CPU", "--format", "json")
    rows = json.loads(out)["references"]
    assert code == 0 and rows
    assert {r["device"] for r in rows} == {"A10G", "cpu"}
    assert all(r["workload_id"] == "resnet50-224px-1000c" for r in rows)
    code, out, _ = run(capsys, "references", "list", "--model", "BERT-large", "--device", "h100", "--format", "json")
    assert {(r["device"], r["model"]) for r in json.loads(out)["references"]} == {("H100", "bert-large")}


def test_list_formats(capsys, refs):
    code, out, _ = run(capsys, "references", "list", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and len(rows) == len(refs.measurements)
    assert {"source_repo", "source_commit", "source_where", "workload_id"} <= set(rows[0])
    code, out, _ = run(capsys, "references", "list", "--device", "cpu")
    assert code == 0 and "article-a-c7i.2xlarge-ipex" in out and "40.73" in out
    code, out, _ = run(capsys, "references", "list", "--device", "cpu", "--format", "markdown")
    assert out.startswith("| id")


def test_list_unknown_filter_is_a_user_error(capsys):
    code, out, err = run(capsys, "references", "list", "--device", "Z9000")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "no reference rows for device 'Z9000'" in err


def test_list_own_file_and_bad_file(capsys, tmp_path):
    data = raw()
    data["measurements"] = data["measurements"][:2]
    own = tmp_path / "team.json"
    own.write_text(json.dumps(data))
    code, out, _ = run(capsys, "references", "list", "--references", str(own), "--format", "json")
    assert code == 0 and len(json.loads(out)["references"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text(_with_row(samples_per_sec=-1))
    code, out, err = run(capsys, "references", "list", "--references", str(bad))
    assert code == 2 and out == ""
    assert err.startswith("advisor: error: reference file") and err.count("\n") == 1


def test_estimates_page_states_the_row_count(refs):

    page = (ROOT / "docs" / "estimates.md").read_text()
    assert f"{len(refs.measurements)} rows from" in page, "update docs/estimates.md 'Reference dataset' counts"
