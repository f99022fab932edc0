"""`advisor recommend --format html FILE`, read without a browser: the page carries the --format
json document whole, every candidate row with the JSON's figures, one plot point per row at the
figures the ranking reads, the summary, the probe plan and its command lines, the assumptions and
the command line; it can fetch nothing; its file is written whole or not at all; a bad path is one
line, exit 2, before any work. (tests/packages/advisor/recommend/test_page_browser.py opens it in
Chromium.)"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shlex
from pathlib import Path

import pytest
from html_dom import parse

from advisor.render import page as page_mod
from advisor.render import svgplot

JOB = ("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8")


def make_page(cli, tmp_path, *args, name="advice.html"):
    path = tmp_path / name
    code, out, err = cli(*JOB, *args, "--format", "html", str(path))
    assert code == 0, err
    assert out == f"page written to {path} (open it in a browser; it fetches nothing)\n"
    text = path.read_text()
    return text, parse(text)


def json_doc(cli, *args):
    code, out, err = cli(*JOB, *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def row_figures(tr) -> dict[str, str]:
    """data-key -> data-v of every figure in a table row."""
    return {e.attrs["data-key"]: e.attrs["data-v"] for e in tr.iter() if "data-key" in e.attrs}


def same(v: str, want) -> bool:
    """A data-v against the JSON's value: exactly the number (repr round-trips), or the text."""
    if want is None:
        return v == ""
    if isinstance(want, bool):
        return v == str(want).lower()
    if isinstance(want, (int, float)):
        return float(v) == want
    return v == want


@pytest.mark.parametrize("args", [("--market", "any"), ("--confidence", "0", "--objective", "fastest")])
def test_every_row_and_figure_is_the_jsons(cli, tmp_path, args):
    _, dom = make_page(cli, tmp_path, *args)
    doc = json_doc(cli, *args)
    # The JSON document, whole, inside the page.
    assert json.loads(dom.by_id("advice").text) == doc
    recs = doc["recommendations"]
    assert doc["feasible"] and len(recs) == 10
    trs = dom.by_id("candidates").find_all("tbody")[0].find_all("tr")
    assert len(trs) == len(recs)
    for tr, rec in zip(trs, recs):
        figs = row_figures(tr)
        want = {"rank", "instance_type", "count", "region", "market", "samples_per_sec", "throughput_low",
                "throughput_high", "throughput_source", "hours", "cost_usd", "usd_per_hour", "samples_per_dollar"}
        if doc["job"]["confidence"]:
            want |= {"hours_at_confidence", "cost_usd_at_confidence"}
        assert set(figs) == want
        for k, v in figs.items():
            assert same(v, rec[k]), (k, v, rec[k])
        shown = tr.all_text()
        for note in rec["notes"]:
            assert note in shown
        for v in rec["basis"].values():  # where the figure comes from, every field
            assert (v if isinstance(v, str) else json.dumps(v)) in shown
    # One plot point per row, at the figures the ranking reads: at a confidence its quantiles, at
    # confidence 0 the expected time (and cost_usd_at_confidence is then the expected cost).
    points = dom.find_all("g", cls="row-point")
    assert [p.attrs["data-i"] for p in points] == [str(i) for i in range(len(recs))]
    hours_key = "hours_at_confidence" if doc["job"]["confidence"] else "hours"
    for p, rec in zip(points, recs):
        assert p.attrs["data-rank"] == str(rec["rank"])
        assert float(p.attrs["data-hours"]) == rec[hours_key]
        assert float(p.attrs["data-cost"]) == rec["cost_usd_at_confidence"]
    # The cloud of the other candidates, the frontier and the two limits are drawn.
    assert len(dom.find_all("g", cls="cloud")[0].children) > 100
    assert dom.find_all("g", cls="frontier") and dom.find_all("path", cls="budget")
    assert dom.find_all("path", cls="deadline")


def test_the_summary_probe_plan_assumptions_and_command_line(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "10000")
    text, dom = make_page(cli, tmp_path, "--market", "any")
    _, table, _ = cli(*JOB, "--market", "any")
    summary = dom.by_id("summary").text
    assert table.splitlines()[0] == summary
    assert "confidence 90%" in summary and summary.endswith("list prices")
    doc = json_doc(cli, "--market", "any")
    # The probe plan: each probe's row with the JSON's figures, the plan in words, the launch lines.
    assert doc["probe_next"]
    trs = dom.by_id("probes").find_all("tbody")[0].find_all("tr")
    assert [row_figures(tr)["instance_type"] for tr in trs] == [p["instance_type"] for p in doc["probe_next"]]
    for tr, p in zip(trs, doc["probe_next"]):
        for k, v in row_figures(tr).items():
            assert same(v, p[k]), k
    assert dom.by_id("probe-commands").text.splitlines() == [
        f"{shlex.join(c['argv'])}   # {c['purpose']}" for c in doc["probe_commands"]]
    assert re.search(r"After (this probe|these \d+ probes)", text)
    # The assumptions: confidence, prices, the catalog and its age.
    assert "list prices from the catalog (snapshot)" in text
    assert re.search(r"snapshot, fetched 2025-12-01 00:00 UTC: \d+ days before this page was made", text)
    assert doc["catalog"]["source"] == "snapshot" and doc["catalog"]["fetched_at"].startswith("2025-12-01")
    # The command line that made it, as typed.
    assert dom.by_id("command-line").text.endswith(
        "recommend --budget 500 --deadline 2d --samples 1e8 --market any --format html " + str(tmp_path / "advice.html"))


def test_own_prices_are_said_and_text_from_outside_is_escaped(cli, tmp_path):
    prices = tmp_path / "<b>team<i>.json"
    prices.write_text('{"discounts": [{"percent": 20}]}')
    _, dom = make_page(cli, tmp_path, "--prices", str(prices))
    assert not dom.find_all("b") and not dom.find_all("i")  # the file name is text, not markup
    assert f"prices from {prices}" in dom.by_id("summary").text
    data = dom.by_id("advice").text
    assert "<" not in data and json.loads(data)["prices"].startswith(f"prices from {prices}")


def test_nothing_fits_shows_the_closest_what_each_needs_and_the_other_options(cli, tmp_path):
    tight = ("--budget", "40", "--deadline", "40h", "--max-instances", "2")  # the later --budget wins
    text, dom = make_page(cli, tmp_path, *tight)
    doc = json_doc(cli, *tight)
    assert not doc["feasible"] and doc["closest"] and doc["would_fit_with"]
    trs = dom.by_id("candidates").find_all("tbody")[0].find_all("tr")
    assert len(trs) == len(doc["closest"])
    for tr, rec in zip(trs, doc["closest"]):
        figs = row_figures(tr)
        assert same(figs["budget_needed_usd"], rec["budget_needed_usd"])
        assert rec["reason"] in tr.all_text()
        # What it needs, as options to type again (the terminal's 'needs' column).
        assert f"--budget {rec['budget_needed_usd']:.2f}" in tr.all_text()
        assert not rec["deadline_needed_hours"] or re.search(r"--deadline [\d.]+[dhm]\b", tr.all_text())
    assert "Nothing meets both the budget and the deadline" in text
    alt = dom.by_id("alternatives").text
    assert all(a["option"] in alt for a in doc["would_fit_with"])


def test_no_candidates_at_all_is_said_and_nothing_is_drawn(cli, tmp_path):
    text, dom = make_page(cli, tmp_path, "--min-accelerator-memory", "4000")
    assert "No candidates: every instance type the filters leave was excluded or has no price." in text
    assert not dom.find_all("svg") and not dom.find_all("table", id="candidates")
    assert re.search(r"<h2>Excluded \(\d+\)</h2>", text)


def test_it_can_fetch_nothing(cli, tmp_path):
    """No element loads anything (no src, href, url()), and the page's own policy forbids any fetch:
    only its own style and script run, by their hashes."""
    text, dom = make_page(cli, tmp_path)
    for el in dom.iter():
        assert not {"src", "href", "xlink:href", "action", "srcset", "background"} & set(el.attrs), el.tag
    assert "url(" not in text and "@import" not in text
    (meta,) = dom.find_all("meta", http_equiv="Content-Security-Policy")
    csp = meta.attrs["content"]
    assert "default-src 'none'" in csp

    def sha(s: str) -> str:
        return "sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()

    (style,) = dom.find_all("style")
    scripts = [s for s in dom.find_all("script") if s.attrs.get("type") != "application/json"]
    assert len(scripts) == 1
    assert f"style-src '{sha(style.text)}'" in csp and f"script-src '{sha(scripts[0].text)}'" in csp


def test_a_row_a_log_axis_cannot_show_is_said_not_drawn(cli, tmp_path):
    """Capacity already paid for costs $0: no point on a log axis, and the caption says so."""
    prices = tmp_path / "p.json"
    # Four paid for: every count of it the ranking tries is free, whichever it ranks.
    prices.write_text('{"reserved": [{"instance_type": "g5.2xlarge", "region": "us-east-1", "count": 4}]}')
    text, dom = make_page(cli, tmp_path, "--prices", str(prices))
    doc = json_doc(cli, "--prices", str(prices))
    free = [i for i, r in enumerate(doc["recommendations"]) if r["cost_usd_at_confidence"] == 0]
    assert free
    drawn = {int(p.attrs["data-i"]) for p in dom.find_all("g", cls="row-point")}
    assert drawn == set(range(len(doc["recommendations"]))) - set(free)
    assert re.search(rf"Not drawn: {len(free)} rows? \(\d x g5\.2xlarge", text)


@pytest.mark.parametrize("target,said", [
    ("{tmp}", "--format html: cannot write {tmp}: that is a directory; give a file name"),
    ("{tmp}/missing/advice.html", "--format html: folder {tmp}/missing does not exist; create it or choose another place"),
    ("{tmp}/file.txt/advice.html", "--format html: cannot write {tmp}/file.txt/advice.html: {tmp}/file.txt is not a folder"),
])
def test_a_bad_path_is_one_line_before_any_work(cli, tmp_path, target, said):
    (tmp_path / "file.txt").write_text("x")
    code, out, err = cli(*JOB, "--format", "html", target.format(tmp=tmp_path))
    assert code == 2 and out == ""
    assert err.splitlines() == [f"advisor: error: {said.format(tmp=tmp_path)}"]


def test_the_file_goes_with_html_only(cli, tmp_path):
    code, out, err = cli(*JOB, "--format", "html")
    assert code == 2 and out == ""
    assert err == ("advisor: error: --format html writes a page to a file: give its name after html "
                   "(--format html advice.html)\n")
    code, out, err = cli(*JOB, "--format", "json", str(tmp_path / "x.html"))
    assert code == 2 and out == "" and "only --format html takes a file name" in err
    assert not (tmp_path / "x.html").exists()


def test_written_whole_or_not_at_all(cli, tmp_path, monkeypatch):
    """A failure while the page is made or written leaves the older page as it was and no
    temporary file; the new page is an ordinary file (the umask's mode, not mkstemp's 0600)."""
    out = tmp_path / "out"
    out.mkdir()
    path = out / "advice.html"
    path.write_text("the older page")

    def broken(*a, **k):
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(svgplot, "svg", broken)
    monkeypatch.setattr(page_mod, "svg", broken)
    code, _, err = cli(*JOB, "--format", "html", str(path))
    assert code == 70 and err.splitlines()[-1].startswith("advisor: error: internal error (RuntimeError: drawing")
    assert path.read_text() == "the older page" and os.listdir(out) == ["advice.html"]
    monkeypatch.undo()

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    code, _, err = cli(*JOB, "--format", "html", str(path))
    assert code == 2 and err.splitlines()[-1] == f"advisor: error: cannot write {path}: No space left on device"
    assert path.read_text() == "the older page" and os.listdir(out) == ["advice.html"]
    monkeypatch.undo()
    old = os.umask(0o022)
    try:
        make_page(cli, out)
    finally:
        os.umask(old)
    assert Path(path).stat().st_mode & 0o777 == 0o644
