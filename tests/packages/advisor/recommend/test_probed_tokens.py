"""`advisor recommend --workload X --tokens N` for a workload whose probe counted tokens: the tokens
become samples through the result's tokens per sample, the rows gain tokens/s, $ per million tokens
and MFU; a workload whose results counted no tokens is refused in one line (exit 2)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from factories import probe_result
from recommend_catalogs import write_catalog

from advisor.store import ResultStore
from lightning_module.contract.result import WorkloadShape

MODEL = "mypkg.lm:TinyGPT"
TOKENS_PER_SAMPLE = 512.0
FLOPS_PER_SAMPLE = 6.0 * 124e6 * TOKENS_PER_SAMPLE  # 6 x parameters x tokens: a 124M model's step


def token_result(sps: float = 40.0, instance: str = "g5.2xlarge", **kw):
    """A probe of a sequence workload that counted its tokens per sample (result schema 8)."""
    r = probe_result(instance, sps, accelerator="gpu", model=MODEL, flops_per_sample=FLOPS_PER_SAMPLE, **kw)
    shape = WorkloadShape(parameters=124_000_000, trainable_parameters=124_000_000, parameter_bytes=4 * 124e6,
                          data_source="module", tokens_per_sample=TOKENS_PER_SAMPLE, tokens_counted_by="batch")
    return r.model_copy(update={"shape": shape, "tokens_per_sec": r.samples_per_sec * TOKENS_PER_SAMPLE})


@pytest.fixture
def store(tmp_path):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(token_result())
    return str(db)


@pytest.fixture
def catalog_file(tmp_path):
    return write_catalog(tmp_path / "cat.json")


def args(catalog_file, store, *more):
    return ("recommend", "--budget", "1000", "--deadline", "30d", "--workload", MODEL, "--catalog", catalog_file,
            "--store", store, "--top", "20", *more)


def test_tokens_become_samples_through_the_probes_tokens_per_sample(cli, catalog_file, store):
    code, out, err = cli(*args(catalog_file, store, "--tokens", "1e9", "--format", "json"))
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema_version"] == 2
    job = doc["job"]
    assert job["tokens"] == 1_000_000_000 and job["tokens_per_sample"] == TOKENS_PER_SAMPLE
    assert job["samples"] == 1_953_125  # 1e9 / 512, whole
    # the same job given in samples ranks the same candidates at the same cost
    code, out2, _ = cli(*args(catalog_file, store, "--samples", "1953125", "--format", "json"))
    same = json.loads(out2)
    assert [(r["instance_type"], r["count"], r["cost_usd"]) for r in same["recommendations"]] == \
        [(r["instance_type"], r["count"], r["cost_usd"]) for r in doc["recommendations"]]
    row = next(r for r in doc["recommendations"] if r["instance_type"] == "g5.2xlarge" and r["count"] == 1)
    assert row["tokens_per_sec"] == pytest.approx(row["samples_per_sec"] * TOKENS_PER_SAMPLE)
    assert row["usd_per_million_tokens"] == pytest.approx(row["cost_usd"] / 1000.0)  # 1e9 tokens = 1000 M
    # MFU: samples/s x FLOPs per sample over one A10G's bf16 dense peak (catalog/data: 125 TFLOP/s... read it)
    from catalog import accelerators as acc

    peak = acc.peak_tflops(acc.lookup("NVIDIA A10G", 24.0), "bf16")
    assert row["mfu"] == pytest.approx(row["samples_per_sec"] * FLOPS_PER_SAMPLE / (peak * 1e12))
    assert 0 < row["mfu"] < 1


def test_the_summary_and_the_table_say_tokens(cli, catalog_file, store, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = cli(*args(catalog_file, store, "--tokens", "1e9"))
    assert code == 0, err
    assert "1e+09 tokens (1.953e+06 samples of 512 tokens)" in out.splitlines()[0]
    header = next(ln for ln in out.splitlines() if ln.lstrip().startswith("rank"))
    for col in ("tok/s", "$/Mtok", "MFU"):
        assert col in header


@pytest.mark.parametrize("columns", ["80", "100"])
def test_a_narrow_table_drops_columns_never_splits_a_value(cli, catalog_file, store, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    code, out, err = cli(*args(catalog_file, store, "--tokens", "1e9"))
    assert code == 0, err
    table = out.split("\n\n")[1]
    assert max(len(ln) for ln in table.splitlines()) <= int(columns)
    assert "g5.2xlarge" in table  # whole, on its row


def test_csv_has_the_token_columns(cli, catalog_file, store):
    code, out, err = cli(*args(catalog_file, store, "--tokens", "1e9", "--format", "csv"))
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows and all(float(r["tokens_per_sec"]) == pytest.approx(float(r["samples_per_sec"]) * TOKENS_PER_SAMPLE)
                        for r in rows)
    assert all(r["usd_per_million_tokens"] for r in rows)


def test_tokens_for_a_workload_that_counted_none_is_refused_in_one_line(cli, catalog_file, tmp_path):
    db = tmp_path / "plain.db"
    with ResultStore(db) as s:
        s.add(probe_result("g5.2xlarge", 40.0, accelerator="gpu", model=MODEL))
    code, out, err = cli(*args(catalog_file, str(db), "--tokens", "1e9"))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "did not" in err and "--samples" in err and "tokens_in_batch()" in err
    code, _, err = cli("recommend", "--budget", "1000", "--deadline", "30d", "--tokens", "1e9",
                       "--catalog", catalog_file)  # resnet50: never counts tokens
    assert code == 2 and "image model" in err and len(err.strip().splitlines()) == 1


def test_tokens_and_samples_together_are_refused(cli, catalog_file, store):
    code, out, err = cli(*args(catalog_file, store, "--tokens", "1e9", "--samples", "10"))
    assert code == 2 and out == "" and "not both" in err


def test_a_workload_without_tokens_has_null_token_fields(cli, catalog_file, tmp_path):
    code, out, err = cli("recommend", "--budget", "1000", "--deadline", "30d", "--samples", "1e6", "--catalog",
                         catalog_file, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["job"]["tokens"] is None and doc["job"]["tokens_per_sample"] is None
    assert all(r["tokens_per_sec"] is None and r["usd_per_million_tokens"] is None and r["mfu"] is None
               for r in doc["recommendations"])
    code, out, _ = cli("recommend", "--budget", "1000", "--deadline", "30d", "--samples", "1e6", "--catalog",
                       catalog_file)
    assert "tok/s" not in out and "$/Mtok" not in out


def test_the_page_shows_the_token_figures(cli, catalog_file, store, tmp_path):
    page = tmp_path / "p.html"
    code, _, err = cli(*args(catalog_file, store, "--tokens", "1e9", "--format", "html", str(page)))
    assert code == 0, err
    text = page.read_text()
    for key, head in (("tokens_per_sec", "tokens/s"), ("usd_per_million_tokens", "$/M tokens"), ("mfu", "MFU")):
        assert f'data-key="{key}"' in text and f"<th>{head}</th>" in text
