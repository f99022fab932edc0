"""The recommend path's shapes: a keyword-only Plan, typed rows built once from it, a report
that only formats them, and command lines built by the command layer."""

from __future__ import annotations

import dataclasses
import io
import json
import shlex

import pytest
from recommend_catalogs import make_catalog

from advisor.recommend.jobspec import JobSpec
from advisor.recommend.planner import Plan, build_plan
from advisor.recommend.probeplan.commands import ProbeCommand, probe_commands
from advisor.recommend.rows import CandidateRow, GpuAndCpuVariant, ProbeRow, SameCost, build
from advisor.render import report


def job(**over) -> JobSpec:
    base = {"samples": 1e8, "budget_usd": 500.0, "deadline_hours": 48.0}
    return JobSpec(**base | over)


ROW = {
    "rank": 1, "index": 0, "instance_type": "g5.2xlarge", "count": 1, "region": "us-east-1", "also_regions": [],
    "also_counts": [], "market": "on-demand", "samples_per_sec": 900.0, "throughput_source": "estimated",
    "throughput_low": 600.0, "throughput_high": 1200.0, "hours": 30.0, "hours_pessimistic": 30.0, "cost_usd": 36.0,
    "hours_at_confidence": 30.0, "cost_usd_at_confidence": 36.0,
    "samples_per_dollar": 2.7e6, "usd_per_hour": 1.212, "od_usd_per_hour": None, "precision": "bf16-mixed",
    "scale_out_efficiency": 1.0, "overall_efficiency": None, "expected_interruptions": 0.0, "interruption_bucket": -2,
    "feasible": True, "has_figure": True, "budget_needed_usd": None, "deadline_needed_hours": None,
    "estimate_anchor": "c7i.2xlarge", "network_note": None, "throughput_notes": [], "basis": {}, "setup_hours": 0.0,
}


def row(**over) -> CandidateRow:
    return CandidateRow(**ROW | over)


def test_plan_takes_keywords_only():
    fields = [f.name for f in dataclasses.fields(Plan)]
    with pytest.raises(TypeError):
        Plan(*range(len(fields)))


def test_rows_are_built_once_from_the_plan_with_typed_fields():
    plan = build_plan(make_catalog(), job(budget_usd=1.0, deadline_hours=1.0), top=3)
    rows = build(plan)
    assert not rows.feasible and rows.candidates
    for r in rows.candidates:
        # The shortfall (what the candidate needs) is typed on the row, rounded up so that typing
        # it back in as the limit makes the candidate feasible.
        assert r.budget_needed_usd is None or r.budget_needed_usd >= r.cost_usd > 1.0
        assert r.deadline_needed_hours is None or r.deadline_needed_hours >= r.hours_pessimistic > 1.0
        assert r.budget_needed_usd or r.deadline_needed_hours
        rec = report.recommendation(r, plan.job)
        assert rec["budget_needed_usd"] == r.budget_needed_usd and rec["reason"]


def test_notes_come_from_typed_fields_not_basis_keys():
    # A row with an empty basis still gets every note: the report never looks into `basis`.
    r = row(estimate_anchor="c7i.2xlarge", count=2, overall_efficiency=0.87, network_note="1/8 of the burst assumed",
            market="spot+od-fallback", interruption_bucket=-1, expected_interruptions=0.01, od_usd_per_hour=1.212,
            also_counts=[SameCost(3, 12.5), SameCost(4, 10.25)], also_regions=["us-west-2"],
            throughput_notes=["measured 40 days ago"])
    assert report.notes(r) == [
        "measured 40 days ago", "est. 600-1,200/s from c7i.2xlarge", "scale-out eff 87%", "1/8 of the burst assumed",
        "~0.01 interruptions (bucket unknown: assumed >20%)", "od $1.212/h after 1st interruption",
        "same cost with 3-4 instances (down to 10.2 h)", "same in us-west-2"]
    assert report.notes(row(estimate_anchor=None, setup_hours=0.25, hours=0.4)) == ["setup is 62% of the time"]
    assert report.notes(row(estimate_anchor=None, setup_hours=0.25, hours=0.6)) == []
    assert report.notes(row(estimate_anchor=None)) == []
    g = GpuAndCpuVariant(gain=0.12, low=0.04, high=0.2, source="measured", basis={"from": "your --cpu-too probe 0123abcd"})
    assert report.notes(row(estimate_anchor=None, gpu_and_cpu=g)) == [
        ("GPU + CPU variant: +12% (+4% to +20%, measured: your --cpu-too probe 0123abcd; advisor probe --cpu-too): "
         "ranked as its own row, g5.2xlarge + CPU")]
    assert report.notes(row(estimate_anchor=None, gpu_and_cpu=g, variant="gpu_and_cpu")) == [
        ("GPU + CPU variant: +12% (+4% to +20%, measured: your --cpu-too probe 0123abcd; advisor probe --cpu-too): "
         "this row: the host's CPU training beside the GPUs, one instance only (the pair has not run across instances)")]


def test_reason_from_the_typed_shortfall():
    j = job(budget_usd=20.0, deadline_hours=12.0)
    assert report.reason(row(), j) is None
    # At confidence 0 the checked figures are the expected cost and the pessimistic hours.
    j = job(budget_usd=20.0, deadline_hours=12.0, confidence=0)
    over = row(feasible=False, cost_usd=29.98, cost_usd_at_confidence=29.98, budget_needed_usd=29.98,
               hours_pessimistic=13.04, hours_at_confidence=13.04, deadline_needed_hours=13.1)
    assert report.reason(over, j) == "cost $29.98 > budget $20.00; 13.0 h (pessimistic) > deadline 12.0 h"
    short = row(feasible=False, hours_pessimistic=0.3, hours_at_confidence=0.3, deadline_needed_hours=0.3)
    assert report.reason(short, job(deadline_hours=0.25, confidence=0)) == "18 min (pessimistic) > deadline 15 min"
    # At a confidence, the quantiles, said as such.
    at = row(feasible=False, cost_usd=25.0, cost_usd_at_confidence=29.98, budget_needed_usd=29.98,
             hours_at_confidence=13.04, deadline_needed_hours=13.1)
    assert report.reason(at, job(budget_usd=20.0, deadline_hours=12.0, confidence=0.9)) == (
        "cost $29.98 (at 90% confidence) > budget $20.00; 13.0 h (at 90% confidence) > deadline 12.0 h")
    assert "network bandwidth unknown" in report.reason(row(feasible=False, has_figure=False), j)


def probe(name, region, market="on-demand") -> ProbeRow:
    return ProbeRow(instance_type=name, throughput_source="estimated", samples_per_sec=100.0, throughput_low=50.0,
                    throughput_high=200.0, region=region, market=market, usd_per_hour=1.0, probe_hours=0.25,
                    probe_cost_usd=0.25, gain_usd=1.0, p_change=0.5, saving_if_changed_usd=2.0, covers=[],
                    reason="could beat the pick")


def test_probe_commands_group_the_probes_by_region_and_market():
    probes = [probe("g5.xlarge", "us-east-1"), probe("g6.xlarge", "us-west-2"), probe("g4dn.xlarge", "us-east-1"),
              probe("g5g.xlarge", "us-east-1", "spot")]
    cmds = probe_commands(job(image_size=160, num_classes=10), probes)
    assert cmds[0].argv == ["advisor", "launch", "--instance-type", "g5.xlarge,g4dn.xlarge", "--region", "us-east-1",
                            "--market", "on-demand", "--workload", "resnet50",
                            "--probe-args=--image-size 160 --num-classes 10", "--s3", "s3://BUCKET/prefix"]
    assert cmds[0].line().startswith("advisor launch --instance-type g5.xlarge,g4dn.xlarge --region us-east-1 "
                                     "--market on-demand --workload resnet50 '--probe-args=--image-size 160 "
                                     "--num-classes 10' --s3 s3://BUCKET/prefix   # probe g5.xlarge, g4dn.xlarge")
    assert str(cmds[0]) == cmds[0].command == shlex.join(cmds[0].argv)  # print() of one is the line to paste
    assert cmds[1].argv[:6] == ["advisor", "launch", "--instance-type", "g6.xlarge", "--region", "us-west-2"]
    assert cmds[2].argv[3:8] == ["g5g.xlarge", "--region", "us-east-1", "--market", "spot"]
    assert cmds[-2].argv == ["advisor", "results", "pull", "s3://BUCKET/prefix"]
    assert cmds[-1].argv == ["advisor", "probe", "--workload", "resnet50", "--image-size", "160", "--num-classes", "10"]
    assert all(c.purpose and not any(a.startswith(("#", "(")) for a in c.argv) for c in cmds)
    assert probe_commands(job(), []) == []


def test_a_type_where_the_cpu_might_add_is_probed_with_cpu_too():
    gain = dataclasses.replace(probe("g6.48xlarge", "us-east-1"), cpu_too=True)
    cmds = probe_commands(job(), [probe("g5.xlarge", "us-east-1"), gain])
    assert cmds[0].argv[:4] == ["advisor", "launch", "--instance-type", "g5.xlarge"]
    assert not any(a.startswith("--probe-args") for a in cmds[0].argv)
    assert cmds[1].argv[:4] == ["advisor", "launch", "--instance-type", "g6.48xlarge"]
    assert "--probe-args=--cpu-too" in cmds[1].argv and "--cpu-too" in cmds[1].purpose
    assert cmds[-1].argv == ["advisor", "probe", "--workload", "resnet50"]
    assert cmds[-1].purpose.endswith("(add --cpu-too on g6.48xlarge)")


def test_the_report_prints_the_command_lines_it_is_given():
    plan = build_plan(make_catalog(), job(), top=3)
    rows = build(plan)
    assert rows.probes
    for fmt in ("table", "json"):
        out = io.StringIO()
        report.write(plan, rows, fmt, probe_commands=[ProbeCommand(["advisor", "launch", "X Y"], "why")], stream=out)
        text = out.getvalue()
        if fmt == "json":
            assert json.loads(text)["probe_commands"] == [{"argv": ["advisor", "launch", "X Y"],
                                                           "command": "advisor launch 'X Y'",
                                                                 "purpose": "why"}]
        else:
            assert text.count("advisor launch") == 1 and "  # why\n  advisor launch 'X Y'\n" in text


def test_the_record_the_csv_and_the_schema_are_the_rows_fields():
    """One row class: the JSON record is CandidateRow's record fields in order (two worded by the
    report), the CSV a declared subset of them, the schema's Candidate derived from the same class."""
    from advisor.records import csv_columns, record_fields
    from advisor.schemas.base import model_of
    from advisor.schemas.recommend import Candidate

    names = [f.name for f in record_fields(CandidateRow)]
    assert list(report.recommendation(row(), job())) == names
    assert report.CSV_COLUMNS == csv_columns(CandidateRow) and set(report.CSV_COLUMNS) < set(names)
    assert Candidate is model_of(CandidateRow) and list(Candidate.model_fields) == names
    assert {"index", "has_figure", "setup_hours", "throughput_notes"}.isdisjoint(names)  # the row's own


def test_every_printed_probe_command_parses_as_the_advisor_reads_it():
    """Pasted, each line is read by the advisor's own parser: a --probe-args value that starts with
    "--" (--cpu-too alone was "expected one argument", exit 2) reaches launch whole."""
    from advisor.cli import build_parser

    gain = dataclasses.replace(probe("g6.48xlarge", "us-east-1"), cpu_too=True)
    j = job(workload="seg.models:UNet", init_args={"width": 64})
    for c in probe_commands(j, [probe("g5.xlarge", "us-east-1"), gain]):
        argv = shlex.split(c.command)
        assert argv == c.argv
        ns = build_parser().parse_args(argv[1:])
        if argv[1] == "launch":
            assert shlex.split(ns.probe_args)[:2] == ["--init-args", '{"width": 64}']
            assert ns.code and ns.workload == "seg.models:UNet"
    assert ns.workload == "seg.models:UNet" and ns.init_args  # the last: advisor probe
    assert shlex.split(build_parser().parse_args(shlex.split(probe_commands(j, [gain])[0].command)[1:]).probe_args)[-1] \
        == "--cpu-too"
