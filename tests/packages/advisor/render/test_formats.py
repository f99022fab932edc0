"""The registry of formats (advisor/render/__init__.py): every --format the CLI lists is served by
it, Advice.show prints what the CLI prints, and a format added to the registry is a choice of the
CLI with no other edit."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest

import advisor
from advisor import render
from advisor.cli import build_parser, main
from advisor.errors import AdvisorError
from advisor.output import FORMATS as COMMON

JOB = ["--budget", "500", "--deadline", "2d", "--samples", "1e8"]


def recommend_choices() -> list[str]:
    sub = next(a for a in build_parser()._subparsers._group_actions if a.choices)
    fmt = next(a for a in sub.choices["recommend"]._actions if a.dest == "format")
    return list(fmt.choices)


@pytest.fixture(scope="module")
def advice():
    return advisor.advise(advisor.JobSpec(samples=1e8, budget_usd=500, deadline_hours=48))


def test_every_format_the_cli_lists_is_served_by_the_registry():
    choices = recommend_choices()
    assert choices == list(render.FORMATS)  # the CLI's choices are the registry, in its order
    assert set(COMMON) <= set(choices) and {"html", "skypilot"} <= set(choices)
    for name, fmt in render.FORMATS.items():
        assert callable(fmt.renderer()), name
        assert (fmt.help == "") == (name in COMMON), name  # --help says what each extra format is


@pytest.mark.parametrize("name", [n for n, f in render.FORMATS.items() if not f.to_file])
def test_advice_show_prints_what_the_cli_prints(name, advice, capsys):
    assert main(["recommend", *JOB, "--format", name]) == 0
    cli = capsys.readouterr().out
    buf = io.StringIO()
    advice.show(name, stream=buf)
    assert buf.getvalue() == cli and cli


def test_a_format_that_writes_a_file_needs_one_and_the_others_take_none(advice, tmp_path):
    with pytest.raises(AdvisorError, match=r"--format html writes a page to a file"):
        advice.show("html")
    with pytest.raises(AdvisorError, match=r"only --format html takes a file name"):
        advice.show("csv", target=tmp_path / "x.csv")
    with pytest.raises(AdvisorError, match=r"unknown format 'nope'"):
        advice.show("nope")
    out = io.StringIO()
    advice.show("html", target=tmp_path / "a.html", stream=out)
    assert (tmp_path / "a.html").read_text().startswith("<!DOCTYPE html>")
    assert out.getvalue() == f"page written to {tmp_path / 'a.html'} (open it in a browser; it fetches nothing)\n"


def test_a_format_added_to_the_registry_is_a_choice_and_is_dispatched(monkeypatch, capsys):
    # One line in FORMATS: here a second name for the csv renderer, said in --help.
    monkeypatch.setitem(render.FORMATS, "tsvish", replace(render.FORMATS["csv"], help="tsvish: a test's format"))
    assert "tsvish" in recommend_choices()
    assert main(["recommend", *JOB, "--format", "tsvish"]) == 0
    tsvish = capsys.readouterr().out
    assert main(["recommend", *JOB, "--format", "csv"]) == 0
    assert capsys.readouterr().out == tsvish
