"""Output people read: wrapped notes in tables (whole in JSON/CSV), minutes for short runs, the
setup-dominates note, and the plot (its path checked first, SVG/PDF, a real Pareto frontier,
labels that do not overlap)."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from recommend_catalogs import make_catalog, write_catalog

from advisor.recommend import rank as rk
from advisor.recommend.jobspec import JobSpec
from advisor.recommend.planner import build_plan
from advisor.recommend.rows import build
from advisor.render.report import duration, money

SNAPSHOT_JOB = ["--budget", "500", "--deadline", "2d", "--samples", "1e8"]


def table_rows(out: str) -> list[list[str]]:
    """The ranking table's lines after the dashes, up to the first blank line."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("----  ")) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end], lines[start - 1]


def test_notes_wrap_in_tables_and_stay_whole_in_json_and_csv(cli, monkeypatch):
    """Wide enough, the notes wrap in their own column between their parts; at 100 columns they go
    under the table, marked [n]; json and markdown keep them whole."""
    monkeypatch.setenv("COLUMNS", "160")
    code, out, _ = cli("recommend", *SNAPSHOT_JOB)
    assert code == 0
    body, dashes = table_rows(out)
    note_at = dashes.rindex(" ") + 1  # the note column is the last one
    note_width = len(dashes) - note_at
    notes_col = [line[note_at:] for line in body]
    assert max(len(line) for line in out.splitlines() if not line.startswith("  ")) <= 160
    code, js, _ = cli("recommend", *SNAPSHOT_JOB, "--format", "json")
    rec = json.loads(js)["recommendations"]
    whole = ["; ".join(r["notes"]) for r in rec]
    assert max(len(w) for w in whole) > note_width  # there was something to wrap
    assert len(body) > len(rec)  # at least one row took more than one line
    # Every note part of every row is in the table whole, on one line.
    table_text = "\n".join(notes_col)
    for r in rec:
        for part in r["notes"]:
            assert any(part in line for line in notes_col), (part, table_text)
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = cli("recommend", *SNAPSHOT_JOB)
    assert max(len(line) for line in out.splitlines() if not line.startswith("  ")) <= 100  # commands stay whole
    body, _ = table_rows(out)
    marks = [line.rsplit(None, 1)[-1] for line in body if line[:1].isdigit()]
    marks = [m for m in marks if m.startswith("[")]  # a row without notes has no marker
    assert marks[:3] == ["[1]", "[2]", "[3]"]
    under = out[out.index("\n[1] "):]
    noted = [w for w in whole if w]  # a row without notes has no marker
    for n, w in enumerate(noted, 1):
        shown = under[under.index(f"[{n}] ") + len(f"[{n}] "):].split("\n[")[0].split("\n\n")[0]
        assert " ".join(shown.split()) == " ".join(w.split())
    # JSON notes have no line breaks; markdown cells cannot hold them: whole there too.
    assert not any("\n" in p for r in rec for p in r["notes"])
    code, md, _ = cli("recommend", *SNAPSHOT_JOB, "--format", "markdown")
    assert any(w in md for w in whole)


def test_reasons_are_whole_in_csv(cli):
    code, out, _ = cli("recommend", "--budget", "20", "--deadline", "12h", "--samples", "1e8", "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows and all(r["reason"].startswith("cost $") for r in rows)


@pytest.mark.parametrize("hours,text", [
    (30.0, "30.0 h"), (1.0, "1.0 h"), (0.9999, "1.0 h"), (0.5, "30 min"), (59.4 / 60, "59 min"),
    (1 / 60, "1 min"), (17 / 3600, "17 s"), (0.4 / 3600, "<1 s"), (2.5e5, "2.5e+05 h"),
])
def test_duration(hours, text):
    assert duration(hours) == text


def test_money_below_a_cent_keeps_two_figures():
    assert (money(29.982), money(0.0031), money(0.0), money(1234.5)) == ("29.98", "0.0031", "0.00", "1,234.50")


def test_a_run_of_seconds_reads_in_seconds_not_zero_hours(cli):
    code, out, _ = cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1000")
    assert code == 0
    table_rows(out)  # raises if the table is missing
    assert " 0.0 h" not in out and " 0.00 " not in out and "down to 0.0 h" not in out
    assert "seconds" in out.split("\n---")[0]  # the time column's unit, chosen by its longest run
    # Setup is not counted by default, and at this length that matters: the table says so.
    assert "--setup-minutes M bills them" in out
    code, out, _ = cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e10", "--max-instances", "1")
    assert "--setup-minutes M bills them" not in out  # a run of days: no such remark


def test_setup_that_dominates_is_named_on_the_row(cli):
    doc = json.loads(cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e5", "--setup-minutes",
                         "10", "--format", "json")[1])
    for r in doc["recommendations"]:
        share = 10 / 60 / r["hours"]
        named = [n for n in r["notes"] if n.startswith("setup is ")]
        assert bool(named) == (share >= 0.5), (r["hours"], named)
        if named:
            assert named[0] == f"setup is {share:.0%} of the time"
    assert any(n.startswith("setup is ") for r in doc["recommendations"] for n in r["notes"])
    doc = json.loads(cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--setup-minutes",
                         "10", "--format", "json", "--max-instances", "1", "--family", "g5")[1])
    assert not any(n.startswith("setup is ") for r in doc["recommendations"] for n in r["notes"])


def test_a_deadline_under_an_hour_is_suggested_in_minutes(cli):
    args = ["--budget", "100", "--samples", "1e6", "--family", "g5", "--max-instances", "1"]
    code, out, _ = cli("recommend", *args, "--deadline", "1m")
    assert code == 0 and "Nothing meets" in out
    doc = json.loads(cli("recommend", *args, "--deadline", "1m", "--format", "json")[1])
    r = doc["closest"][0]
    assert r["deadline_needed_hours"] < 1 and r["budget_needed_usd"] is None
    minutes = round(r["deadline_needed_hours"] * 60)
    assert f"--deadline {minutes}m" in out
    # Taking the suggestion makes it feasible.
    doc = json.loads(cli("recommend", *args, "--deadline", f"{minutes}m", "--format", "json", "--top", "50")[1])
    assert any((x["instance_type"], x["count"], x["region"]) == (r["instance_type"], r["count"], r["region"])
               for x in doc["recommendations"])


# --- the plot -----------------------------------------------------------------------------------

def assert_refused_first(cli, plot_arg, words):
    # --catalog points nowhere: were anything loaded or computed first, that would be the error.
    code, out, err = cli("recommend", *SNAPSHOT_JOB, "--catalog", "/nonexistent/catalog.json", "--plot", plot_arg)
    assert code == 2 and out == "", (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--plot" in lines[0] and words in lines[0], err


def test_plot_path_is_checked_before_anything_is_done(cli, tmp_path):
    assert_refused_first(cli, str(tmp_path), "is a folder")
    (tmp_path / "x.png").mkdir()
    assert_refused_first(cli, str(tmp_path / "x.png"), "is a folder")
    assert_refused_first(cli, str(tmp_path / "out.jpg"), ".png, .svg or .pdf")
    assert_refused_first(cli, str(tmp_path / "missing" / "out.png"), "does not exist")


def test_plot_into_a_read_only_folder_is_refused_first(cli, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.access(ro, os.W_OK):  # root writes anyway; /sys refuses even root
            ro = Path("/sys")
            if not ro.is_dir() or os.access(ro / "kernel", os.W_OK) and _can_create(ro):
                pytest.skip("no folder here that this user cannot write")
        assert_refused_first(cli, str(ro / "plot.png"), "cannot write in folder")
    finally:
        (tmp_path / "ro").chmod(0o755)


def _can_create(folder: Path) -> bool:
    try:
        (folder / ".advisor-test").touch()
    except OSError:
        return False
    (folder / ".advisor-test").unlink()
    return True


@pytest.mark.parametrize("name,magic", [("plot.svg", b"<?xml"), ("plot.PDF", b"%PDF"), ("plot.png", b"\x89PNG")])
def test_plot_writes_svg_pdf_and_png(cli, tmp_path, name, magic):
    catalog = write_catalog(tmp_path / "cat.json")
    target = tmp_path / name
    code, out, err = cli("recommend", *SNAPSHOT_JOB, "--catalog", catalog, "--plot", str(target))
    assert code == 0, err
    assert target.read_bytes().startswith(magic)
    assert f"plot written to {target}" in out
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(name + ".")] == []  # no temp file left


def plans():
    """Plans whose frontiers differ: the snapshot's (2 options), any market (several), nothing feasible;
    at the default confidence and on the point estimate."""
    from catalog.io import SNAPSHOT_PATH, load

    snap = load(SNAPSHOT_PATH)
    yield build_plan(snap, JobSpec(samples=1e8, budget_usd=500, deadline_hours=48), top=10)
    yield build_plan(snap, JobSpec(samples=1e8, budget_usd=500, deadline_hours=48, confidence=0), top=10)
    yield build_plan(snap, JobSpec(samples=1e8, budget_usd=100, deadline_hours=72, market="any",
                                   objective="pareto"), top=10)
    yield build_plan(snap, JobSpec(samples=1e8, budget_usd=20, deadline_hours=12), top=10)
    yield build_plan(make_catalog(), JobSpec(samples=1e7, budget_usd=1000, deadline_hours=48, market="any"), top=10)


def non_dominated(h: np.ndarray, c: np.ndarray) -> set[tuple[float, float]]:
    """Brute force: points no other point beats on both (<= on both, < on one)."""
    pts = set(zip(np.round(h, 9).tolist(), np.round(c, 6).tolist()))
    return {p for p in pts if not any(q[0] <= p[0] and q[1] <= p[1] and q != p for q in pts)}


def test_the_frontier_drawn_is_the_pareto_set_of_the_points_drawn():
    from advisor.render.plot import figures, plot_points

    for plan in plans():
        rows = build(plan)
        pts = plot_points(plan, rows)
        c = plan.candidates
        hours, cost = figures(c)  # what the ranking reads: expected at confidence 0, else the quantiles
        assert set(pts.frontier.tolist()) <= set(pts.drawn.tolist())
        pool = pts.drawn[c.feasible[pts.drawn]] if pts.frontier_within_limits else pts.drawn
        assert pts.frontier_within_limits == bool(c.feasible.any())
        front = set(zip(np.round(hours[pts.frontier], 9).tolist(), np.round(cost[pts.frontier], 6).tolist()))
        assert front == non_dominated(hours[pool], cost[pool])
        assert len(front) == len(pts.frontier)  # one point per (time, cost)
        assert np.all(np.diff(hours[pts.frontier]) > 0) and np.all(np.diff(cost[pts.frontier]) < 0)
        # The sample drawn loses nothing of the frontier of all candidates.
        all_pool = np.flatnonzero(c.feasible if pts.frontier_within_limits else np.isfinite(cost))
        assert front == non_dominated(hours[all_pool], cost[all_pool])
        if plan.job.objective == "pareto":  # the rows the report shows are the frontier's
            assert {r.index for r in rows.candidates} <= set(pts.frontier.tolist())


def test_rank_labels_do_not_overlap_each_other_or_the_labelled_points():
    import matplotlib.pyplot as plt
    from matplotlib.text import Annotation

    from advisor.render.plot import draw, figures

    for plan in plans():
        hours, cost = figures(plan.candidates)
        rows = build(plan)
        fig = draw(plan, rows)
        try:
            fig.canvas.draw()
            renderer = fig.canvas.get_renderer()
            ax = fig.axes[0]
            labels = [t for t in ax.texts if isinstance(t, Annotation)]
            assert len(labels) == min(5, len(rows.candidates))
            # The text and its white box, without the leader line (Annotation's extent includes it).
            boxes = [t.get_bbox_patch().get_window_extent(renderer) for t in labels]
            for i, a in enumerate(boxes):
                for b in boxes[i + 1:]:
                    assert not a.overlaps(b), (plan.job, a, b)
            points = ax.transData.transform([[hours[r.index], cost[r.index]] for r in rows.candidates[:5]])
            for a in boxes:
                for x, y in points:
                    assert not a.contains(x, y)
        finally:
            plt.close(fig)


def test_plot_of_a_hand_made_plan_has_its_options_ringed():
    from advisor.render.plot import figures, plot_points

    for confidence in (0, 0.9):
        plan = build_plan(make_catalog(), JobSpec(samples=1e7, budget_usd=1000, deadline_hours=48, objective="pareto",
                                                  confidence=confidence), top=50)
        pts = plot_points(plan, build(plan))
        hours, cost = figures(plan.candidates)
        # With --objective pareto the planner's frontier and the plot's are the same set.
        ranked = set(zip(np.round(hours[plan.ranked], 9), np.round(cost[plan.ranked], 6)))
        drawn = set(zip(np.round(hours[pts.frontier], 9), np.round(cost[pts.frontier], 6)))
        assert ranked == drawn
        assert len(rk.pareto_front(cost, hours, np.flatnonzero(plan.candidates.feasible),
                                   plan.candidates)) == len(pts.frontier)
