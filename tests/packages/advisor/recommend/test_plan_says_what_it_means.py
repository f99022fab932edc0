"""The probe plan says what it means: a row under the header "each expected to save more than it
costs" does; and every objective's plan probes only types that could be picked at some figure in
their band (a CPU type that cannot meet the deadline even at the top of its band is never proposed,
however much its probe would re-anchor others)."""

from __future__ import annotations

import json

import pytest
from factories import probe_result

from advisor.recommend.rows import ProbeRow
from advisor.render import report
from advisor.store import ResultStore

DEADLINE_H = 72.0
SAMPLES = 1e8


MODEL = "gan.models:TinyGAN"  # a user's own: no parameter count, so single instances only


@pytest.mark.parametrize(("objective", "measured"), [(o, m) for o in ("cheapest", "fastest", "pareto")
                                                      for m in (300.0, 1000.0)])
def test_every_probe_row_could_be_picked_at_the_top_of_its_band(cli, tmp_path, objective, measured):
    db = tmp_path / "r.db"
    with ResultStore(db) as s:  # the user's CPU figure: the small sizes' bands reach nowhere near the deadline
        s.add(probe_result("c7i.2xlarge", measured, model=MODEL, flops_per_sample=1e9))
    code, out, err = cli("recommend", "--samples", f"{SAMPLES:g}", "--deadline", "3d", "--budget", "500",
                         "--objective", objective, "--workload", MODEL, "--family", "m6i,c7i,c7a",
                         "--store", str(db), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert {r["count"] for r in doc["recommendations"] + doc["closest"]} == {1}
    assert doc["probe_next"], "the scenario has a plan"
    for p in doc["probe_next"]:
        best_hours = SAMPLES / p["throughput_high"] / 3600  # one instance at the top of its band
        assert best_hours <= DEADLINE_H, (objective, p["instance_type"], best_hours)


def _row(gain: float, cost: float, reason: str) -> ProbeRow:
    return ProbeRow(instance_type="g5.xlarge", throughput_source="estimated", samples_per_sec=1.0, throughput_low=0.5,
                    throughput_high=2.0, region="us-east-1", market="on-demand", usd_per_hour=1.0, probe_hours=0.1,
                    probe_cost_usd=cost, gain_usd=gain, p_change=0.0, saving_if_changed_usd=0.0, covers=[],
                    reason=reason)


def test_a_row_that_saves_less_than_it_costs_is_not_under_a_header_that_says_otherwise():
    assert report.probe_head([_row(1.0, 0.1, "could beat the pick")]) == report.PROBE_HEAD
    forced = report.probe_head([_row(0.0, 0.1, "uncalibrated: measure it first"), _row(1.0, 0.1, "x")])
    assert "save more than it costs" not in forced.split(";")[0] and "uncalibrated: measure it first" in forced
    assert "whatever it is expected to save" in forced
