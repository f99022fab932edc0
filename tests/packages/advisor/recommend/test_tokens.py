"""`advisor recommend --model-shape`: token workloads from the command line: --tokens parsing, the
tokens/s and $ per million tokens columns, the JSON document, the what-would-fit wording."""

from __future__ import annotations

import json

import pytest

from advisor.errors import AdvisorError
from advisor.recommend.jobspec import work_tokens
from tests.schema_check import checked

BASE = ("recommend", "--budget", "5000", "--deadline", "3d", "--region", "us-east-1")


@pytest.mark.parametrize("tokens, samples, seq, want", [
    ("2e9", None, None, 2e9), ("2B", None, None, 2e9), ("1.5M", None, 4096, 1.5e6), (None, "1000", 4096, 4_096_000),
])
def test_work_in_tokens(tokens, samples, seq, want):
    assert work_tokens(tokens, samples, seq) == want


@pytest.mark.parametrize("tokens, samples, seq", [("2e9", "10", 4096), (None, None, 4096), (None, "10", None), ("-5", None, None),
                                                   ("lots", None, None), ("1e20", None, None)])
def test_bad_work_in_tokens_is_refused(tokens, samples, seq):
    with pytest.raises(AdvisorError):
        work_tokens(tokens, samples, seq)


def test_tokens_for_a_builtin_image_model_is_one_line_and_exit_2(cli):
    code, out, err = cli(*BASE, "--tokens", "2e9")  # resnet50 (tokens for a probed workload: test_probed_tokens.py)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--model-shape" in err


def test_bad_model_shape_is_one_line_and_exit_2(cli):
    code, out, err = cli(*BASE, "--model-shape", "llama-9", "--tokens", "2e9")
    assert code == 2 and out == "" and "unknown model shape 'llama-9'" in err


def test_an_8b_full_fine_tune_at_4k_comes_out_as_types_counts_and_strategies(cli):
    code, out, err = cli(*BASE, "--model-shape", "llama-3-8b", "--tokens", "2e9", "--seq-len", "4096", "--show-excluded",
                         "--wide")
    assert code == 0, err
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("rank "))
    assert "tok/s/GPU" in lines[head] and "$/M tok" in lines[head] and "strategy" in lines[head]
    ranked = [ln for ln in lines[head + 2:] if ln[:4].strip().isdigit()]
    assert ranked, out  # never "nothing fits" when something does
    assert any(s in ranked[0] for s in ("DDP", "ZeRO", "FSDP"))
    excluded = out.split("Excluded (")[1]
    assert any(ln.startswith("g4dn.xlarge ") and "16 GiB per device" in ln for ln in excluded.splitlines())
    assert "instances with" in excluded


def test_json_document_carries_tokens_per_second_and_dollars_per_million_tokens(cli):
    code, out, err = cli(*BASE, "--model-shape", "llama-3-8b", "--finetune", "lora", "--samples", "500000",
                         "--seq-len", "4096", "--format", "json", "--top", "3")
    assert code == 0, err
    doc = checked(out, "recommend-tokens")
    assert doc["tokens"] == 500000 * 4096 and doc["training"]["method"] == "lora"
    for r in doc["recommendations"]:
        assert r["usd_per_million_tokens"] == pytest.approx(
            r["usd_per_hour"] * r["count"] / (r["tokens_per_sec"] * 3600) * 1e6, rel=1e-3)
        assert r["tokens_per_sec_per_gpu"] == pytest.approx(r["tokens_per_sec"] / r["plan"]["devices"], rel=1e-3)
        assert r["hours"] == pytest.approx(doc["tokens"] / r["tokens_per_sec"] / 3600, rel=1e-3)
        assert r["plan"]["memory"]["device_gib"] > r["plan"]["memory"]["peak_gib"]


def test_a_pinned_strategy_is_what_every_row_runs(cli):
    code, out, err = cli(*BASE, "--model-shape", "llama-3-8b", "--tokens", "2e9", "--strategy", "zero3", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["strategy"] == "fsdp"
    assert {r["plan"]["strategy"] for r in doc["recommendations"]} == {"fsdp"}


def test_presets_are_listed(cli):
    code, out, _ = cli("recommend", "--budget", "1", "--deadline", "1d", "--model-shape", "list")
    assert code == 0 and "llama-3-8b" in out and "litgpt/config.py @" in out


def test_type_filters_apply_and_unsupported_options_are_refused(cli):
    code, out, err = cli(*BASE, "--model-shape", "llama-3-8b", "--tokens", "2e9", "--family", "p5", "--format", "json")
    assert code == 0, err
    assert {r["instance_type"].split(".")[0] for r in json.loads(out)["recommendations"]} == {"p5"}
    code, out, err = cli(*BASE, "--model-shape", "llama-3-8b", "--tokens", "2e9", "--check-account")
    assert code == 2 and out == "" and "--check-account not offered for token workloads" in err


def test_csv_and_markdown_carry_the_same_rows_as_json(cli):
    import csv
    import io

    args = (*BASE, "--model-shape", "llama-3-8b", "--finetune", "lora", "--tokens", "2e9", "--top", "3")
    code, out, err = cli(*args, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)["recommendations"]
    code, out, err = cli(*args, "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["instance_type"] for r in rows] == [r["instance_type"] for r in doc]
    assert [float(r["usd_per_million_tokens"]) for r in rows] == [r["usd_per_million_tokens"] for r in doc]
    assert [float(r["tokens_per_sec_high"]) for r in rows] == [r["plan"]["tokens_per_sec_high"] for r in doc]
    assert rows[0]["strategy"] == doc[0]["plan"]["strategy"]
    code, out, err = cli(*args, "--format", "markdown")
    assert code == 0, err
    table = [ln for ln in out.splitlines() if ln.startswith("|")]
    assert len(table) == 2 + len(doc)  # header, rule, a line a row
    assert "$/M tok" in table[0] and all(r["instance_type"] in out for r in doc)


def test_a_format_not_offered_for_tokens_names_those_that_are(cli, monkeypatch):
    from advisor import render

    assert render.token_formats() == ("json", "table", "csv", "markdown", "skypilot", "html")  # every format now
    monkeypatch.setitem(render.FORMATS, "skypilot", render.Format("skypilot", "render"))  # one without a token renderer
    code, out, err = cli(*BASE, "--model-shape", "llama-3-8b", "--tokens", "2e9", "--format", "skypilot")
    assert code == 2 and out == ""
    assert "--format skypilot is not offered for token workloads yet: use json, table, csv, markdown, html" in err


def test_the_html_page_holds_the_rows_and_the_document(cli, tmp_path):
    import re

    target = tmp_path / "tokens.html"
    args = (*BASE, "--model-shape", "llama-3-8b", "--finetune", "lora", "--tokens", "2e9", "--top", "3")
    code, out, err = cli(*args, "--format", "html", str(target), "--show-excluded")
    assert code == 0, err
    assert f"page written to {target}" in out
    page = target.read_text()
    doc = json.loads(re.search(r'<script type="application/json" id="advice">(.*?)</script>', page, re.DOTALL).group(1))
    assert doc["schema"] == "recommend-tokens" and len(doc["recommendations"]) == page.count("<tr data-i=")
    for r in doc["recommendations"]:
        assert f'data-key="usd_per_million_tokens" data-v="{r["usd_per_million_tokens"]!r}"' in page
    assert "Content-Security-Policy" in page and "http://" not in page.replace("http-equiv", "")
    # no file: one line, exit 2, nothing written
    code, out, err = cli(*args, "--format", "html")
    assert code == 2 and out == "" and "--format html writes a page to a file" in err


def test_fsdp_no_sync_is_said_and_its_gradient_is_in_the_ledger(cli):
    args = (*BASE, "--model-shape", "llama-3-8b", "--tokens", "2e9", "--strategy", "fsdp", "--top", "2")
    code, out, err = cli(*args, "--fsdp-no-sync")
    assert code == 0, err
    assert "FSDP accumulating under no_sync" in out
    code, out, err = cli(*args, "--fsdp-no-sync", "--format", "json")
    assert code == 0, err
    terms = {t["name"] for r in json.loads(out)["recommendations"] for t in r["plan"]["memory"]["terms"]}
    assert "gradients: unsharded, held across the accumulation (no_sync)" in terms


def test_the_document_records_fsdp_no_sync(cli):
    """The job's --fsdp-no-sync is in the recommend-tokens document (schema 2), false without it."""
    args = (*BASE, "--model-shape", "llama-3-8b", "--tokens", "2e9", "--strategy", "fsdp", "--top", "2", "--format", "json")
    docs = {}
    for flag in ((), ("--fsdp-no-sync",)):
        code, out, err = cli(*args, *flag)
        assert code == 0, err
        docs[bool(flag)] = checked(out, "recommend-tokens")
    assert docs[True]["schema_version"] == 2
    assert docs[True]["training"]["no_sync_accumulation"] is True
    assert docs[False]["training"]["no_sync_accumulation"] is False
