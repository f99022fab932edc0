"""Rows for people and for pipes from a Plan: ranked candidates, the closest ones when nothing
fits, exclusions and the probe plan. The rows come typed from advisor.recommend.rows; this module only
formats them."""

from __future__ import annotations

import json
import math
import shlex
import sys
from dataclasses import dataclass
from typing import Any

from catalog.models import RESERVATION_NOTE

from ..estimate.throughput import GPU_AND_CPU
from ..output import emit, say
from ..recommend.jobspec import JobSpec
from ..recommend.planner import Plan
from ..recommend.probeplan.commands import ProbeCommand
from ..recommend.probeplan.value import Outlook
from ..recommend.rows import CandidateRow, ProbePlan, ProbeRow, Rows
from ..recommend.spot import bucket_label
from ..records import csv_columns, to_record

# The table for people: units in the headers and short words in the cells, so that no value is
# split across lines down to 80 columns; what a narrow terminal cannot hold is left out in
# DROP_ORDER (and named under the table), never broken. JSON and CSV keep the long words.
TABLE_COLUMNS = ("rank", "instance", "count", "region", "market", "samples/s", "hours", "USD", "samples/$",
                 "note")
MARKET_WORDS = {"on-demand": "od", "spot": "spot", "spot+od-fallback": "spot+od"}
SOURCE_WORDS = {"measured": "meas.", "reference": "ref.", "estimated": "est."}
LEGEND = ("od: on-demand; spot+od: spot, on demand after the first interruption; meas./ref./est.: measured "
          "by a probe, a published reference figure, estimated")
# The CSV: the candidate record's fields declared as columns (advisor/recommend/rows.py CandidateRow).
CSV_COLUMNS = csv_columns(CandidateRow)
NAMED_PAST_BUDGET = 5  # probes past --probe-budget named in the table text; JSON has every one
# Below this a run's time is printed in minutes, and with no --setup-minutes the table says that
# boot, install and data staging are left out: minutes of their own (an instance boots, then
# installs the stack: advisor/userdata.py), so a large share of a run this short.
SHORT_RUN_HOURS = 1.0


# How a variant row names its instances in the table, the page and the plots (CandidateRow.variant).
VARIANT_LABELS = {GPU_AND_CPU: "+ CPU"}


def instance_label(instance_type: str, variant: str | None) -> str:
    """`g5.xlarge`, or `g5.xlarge + CPU` for its GPU + CPU variant."""
    return instance_type if variant is None else f"{instance_type} {VARIANT_LABELS[variant]}"


def notes(r: CandidateRow) -> list[str]:
    """The note column's parts, in order."""
    out = [] if r.obtainable is None else [f"obtainable {r.obtainable}: {r.obtainable_reason}"]
    if r.sold_by_reservation and RESERVATION_NOTE not in (r.obtainable_reason or ""):
        out.append(RESERVATION_NOTE)
    out += r.throughput_notes
    if r.gpu_and_cpu is not None:
        g = r.gpu_and_cpu
        where = ("this row: the host's CPU training beside the GPUs, one instance only (the pair has not run "
                 "across instances)" if r.variant else f"ranked as its own row, {instance_label(r.instance_type, GPU_AND_CPU)}")
        out.append(f"GPU + CPU variant: {g.gain:+.0%} ({g.low:+.0%} to {g.high:+.0%}, {g.source}: "
                   f"{g.basis['from']}; advisor probe --cpu-too): {where}")
    if r.estimate_anchor is not None:
        out.append(f"est. {r.throughput_low:,.0f}-{r.throughput_high:,.0f}/s from {r.estimate_anchor}")
    if r.overall_efficiency is not None:
        out.append(f"scale-out eff {r.overall_efficiency:.0%}")
    if r.network_note:
        out.append(r.network_note)
    if r.market != "on-demand":
        b = r.interruption_bucket
        out.append(f"~{r.expected_interruptions:.2g} interruptions "
                   f"({'bucket unknown: assumed >20%' if b == -1 else bucket_label(b)})")
    if r.od_usd_per_hour is not None:
        out.append(f"od ${r.od_usd_per_hour:.4g}/h after 1st interruption")
    if r.also_counts:
        ks = [str(c.count) for c in r.also_counts]
        out.append(f"same cost with {ks[0] if len(ks) == 1 else ks[0] + '-' + ks[-1]} instances "
                   f"(down to {duration(r.also_counts[-1].hours)})")
    if r.also_regions:
        out.append("same in " + ", ".join(r.also_regions))
    if r.setup_hours and r.setup_hours >= r.hours - r.setup_hours:
        out.append(f"setup is {r.setup_hours / r.hours:.0%} of the time")
    if short_run(r):
        out.append(SHORT_RUN_NOTE)
    return out


SHORT_RUN_NOTE = "start-up not counted (--setup-minutes)"


def short_run(r: CandidateRow) -> bool:
    """Setup is not counted (no --setup-minutes) and the run is so short that it would likely dominate."""
    return not r.setup_hours and r.hours < SHORT_RUN_HOURS


def reason(r: CandidateRow, job: JobSpec) -> str | None:
    """Why a candidate is not feasible; None when it is."""
    if r.feasible:
        return None
    if not r.has_figure:
        return "no throughput figure for this count (network bandwidth unknown)"
    why = []
    at = "pessimistic" if not job.confidence else f"at {job.confidence:.0%} confidence"
    if r.budget_needed_usd is not None:
        why.append(f"cost ${money(r.cost_usd_at_confidence)}{'' if not job.confidence else ' (' + at + ')'} > "
                   f"budget ${money(job.budget_usd)}")
    if r.deadline_needed_hours is not None:
        why.append(f"{duration(r.hours_at_confidence)} ({at}) > deadline {duration(job.deadline_hours)}")
    return "; ".join(why)


def recommendation(r: CandidateRow, job: JobSpec) -> dict[str, Any]:
    """The JSON/CSV record of a row: its record fields, the two worded here filled in."""
    return to_record(r, reason=reason(r, job), notes=notes(r))


def _covers(p: ProbeRow) -> str:
    shown = ", ".join(p.covers[:2])
    return shown + (f" +{len(p.covers) - 2} more" if len(p.covers) > 2 else "")


def _by_basis(probes: list[ProbeRow]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in probes:
        if p.probe_hours_basis:
            out.setdefault(p.probe_hours_basis, []).append(p.instance_type)
    return out


def _known(o: Outlook, now: bool = False) -> str:
    """How far the pick may be from the true best in 90% of outcomes, or how often it misses."""
    if math.isfinite(o.p90_regret):
        return f"{'now ' if now else ''}within {o.p90_regret:.0%}"
    if o.p_miss <= 0.1:  # the pick fits, but the true best costs $0 (capacity already paid for)
        return f"{'now ' if now else ''}not known: the true best may be capacity already paid for"
    return f"{'now ' if now else ''}not known: the pick misses the deadline or the budget in {o.p_miss:.0%} of outcomes"


def probe_lines(s: ProbePlan, probes: list[ProbeRow]) -> list[str]:
    """What the plan expects to learn, in words."""
    out = []
    if probes:
        n = len(probes)
        first = (f"After {'this probe' if n == 1 else f'these {n} probes'} (${s.usd:,.2f}, ~{s.hours * 60:.0f} min"
                 f"{'' if n == 1 else ', in parallel'})")
        a = s.after
        if not s.has_pick:
            out.append(f"{first} the pick fits the budget and the deadline in {a.p_fit:.0%} of outcomes (something "
                       f"fits in {a.p_any:.0%}; nothing does by the estimates now); where something fits, the pick "
                       f"is within {s.within:.0%} of the true best in {a.p_within:.0%} of them.")
        else:
            over = "" if a.p_any >= 0.995 else f" (of the {a.p_any:.0%} of outcomes where something fits in truth)"
            out.append(f"{first} the best option is known {_known(a)} in 90% of outcomes{over} "
                       f"({_known(s.now, True)}): the pick within {s.within:.0%} of the true best in "
                       f"{a.p_within:.0%} of them (now {s.now.p_within:.0%}).")
    elif s.now is not None and s.has_pick:
        out.append(f"None: {s.why_empty}. The best option is known {_known(s.now)} in 90% of outcomes: "
                   f"the pick within {s.within:.0%} of the true best in {s.now.p_within:.0%} of outcomes.")
    else:
        out.append(f"None: {s.why_empty}.")
    # How long each probe was taken to run: its own past probes' time, or the bound where none.
    for basis, names in _by_basis(probes).items():
        out.append(f"Probe time of {', '.join(names)}: {basis}.")
    if s.not_affordable:
        shown, more = s.not_affordable[:NAMED_PAST_BUDGET], len(s.not_affordable) - NAMED_PAST_BUDGET
        out.append(f"Worth probing but past --probe-budget ${s.probe_budget_usd:,.2f}, most valuable first: "
                   f"{', '.join(shown)}{f' (+{more} more; JSON lists them all)' if more > 0 else ''}.")
    return out


def exclusion_rows(plan: Plan) -> list[dict[str, Any]]:
    return [{"instance_type": e.instance_type, "reason": e.reason} for e in plan.exclusions]


@dataclass(frozen=True)
class TimeUnit:
    """The unit of a table's time columns, chosen by its longest run so that no row reads 0.00."""
    header: str  # hours | minutes | seconds
    per_hour: float

    def of(self, h: float) -> str:
        x = h * self.per_hour
        if not x < 1e5:
            return f"{x:,.3g}"
        return f"{x:,.1f}" if x >= 0.995 else (f"{x:.2g}" if x >= 0.001 else "<0.001")


def time_unit(hours: list[float]) -> TimeUnit:
    longest = max(hours, default=1.0)
    if longest >= 0.995:
        return TimeUnit("hours", 1.0)
    return TimeUnit("minutes", 60.0) if longest * 60 >= 0.995 else TimeUnit("seconds", 3600.0)


def _display(r: CandidateRow, job: JobSpec, unit: TimeUnit = TimeUnit("hours", 1.0)) -> dict[str, Any]:
    why = reason(r, job)
    return {
        "rank": r.rank if r.rank is not None else "-",
        "instance": instance_label(r.instance_type, r.variant),
        "count": r.count,
        "region": r.region,
        "market": MARKET_WORDS[r.market],
        "samples/s": f"{number(r.samples_per_sec)} {SOURCE_WORDS[r.throughput_source]}",
        unit.header: unit.of(r.hours),
        "USD": money(r.cost_usd),
        **({} if not job.confidence else {confidence_column(unit.header, job): unit.of(r.hours_at_confidence),
                                          confidence_column("USD", job): money(r.cost_usd_at_confidence)}),
        "samples/$": f"{r.samples_per_dollar:,.0f}" if math.isfinite(r.samples_per_dollar) else "paid for",
        **({} if job.tokens_per_sample is None else {
            "tok/s": number(r.tokens_per_sec),
            "$/Mtok": "-" if r.usd_per_million_tokens is None else f"{r.usd_per_million_tokens:,.3g}",
            "MFU": "-" if r.mfu is None else f"{r.mfu:.0%}"}),
        "note": "; ".join(notes(r) + ([why] if why else [])),
    }


def confidence_column(name: str, job: JobSpec) -> str:
    """The header of a figure at the job's confidence: `hours @90%`."""
    return f"{name} @{job.confidence:.0%}"


def table_columns(job: JobSpec, feasible: bool = True, unit: TimeUnit | None = None, mfu: bool = False) -> list[str]:
    """TABLE_COLUMNS, with the time and cost at the job's confidence after the expected ones. When
    nothing fits, the figures the limits are checked against and what each candidate needs: the
    expected time and cost and samples/$ make way for the 'needs' column (JSON keeps them all).
    A workload whose probe counted tokens: tok/s after samples/s, $/Mtok after samples/$ (where
    that is shown), and MFU where the probe counted FLOPs (`mfu`)."""
    t = unit.header if unit else "hours"
    cols = [t if c == "hours" else c for c in TABLE_COLUMNS]
    if job.tokens_per_sample is not None:
        cols.insert(cols.index("samples/s") + 1, "tok/s")
        cols[cols.index("samples/$") + 1:cols.index("samples/$") + 1] = ["$/Mtok", *(["MFU"] if mfu else [])]
    if job.confidence:
        at = cols.index("USD") + 1
        cols[at:at] = [confidence_column(t, job), confidence_column("USD", job)]
        if not feasible:
            cols = [c for c in cols if c not in (t, "USD", "samples/$", "$/Mtok")]
    return cols + ([] if feasible else ["needs"])


def drop_order(job: JobSpec, feasible: bool = True) -> list[str]:
    """The columns a narrow table leaves out, first to last. Ranked: samples/$ (time and cost say
    it), then the expected time and cost where the figures at the confidence stand beside them,
    then the region. Nothing fits: the region, the throughput, the market (the notes and the
    summary say them), so that the options that would make it fit stay whole. A token workload's
    MFU goes first (a diagnosis, not a pick's figure), samples/$ before $/Mtok, and samples/s's
    figure, which tok/s repeats in tokens, before tok/s."""
    if job.tokens_per_sample is not None:
        if not feasible:
            return ["MFU", "region", "tok/s", "samples/s", "market"]
        return ["MFU", "samples/$", *(["hours", "USD"] if job.confidence else []), "region", "$/Mtok", "tok/s"]
    if not feasible:
        return ["region", "samples/s", "market"]
    return ["samples/$", *(["hours", "USD"] if job.confidence else []), "region"]


def needs(budget_needed_usd: float | None, deadline_needed_hours: float | None) -> str:
    """The options that would make a candidate feasible, as typed: `--budget 42.02 --deadline 55.3h`."""
    need = []
    if budget_needed_usd:
        need.append(f"--budget {budget_needed_usd:.2f}")
    if deadline_needed_hours:
        need.append(f"--deadline {_fmt_hours(deadline_needed_hours)}")
    return " ".join(need)


def summary_line(plan: Plan) -> str:
    j = plan.job
    n = len(plan.candidates)
    pairs = sum(t.variant is not None for t in plan.throughputs)
    types = f"{len(plan.throughputs) - pairs} instance types" + (f" (+{pairs} GPU + CPU)" if pairs else "")
    return (f"{plan.workload_id}: {work_words(j)}, budget ${money(j.budget_usd)}, deadline "
            f"{duration(j.deadline_hours)}, objective {j.objective}, "
            f"{'point estimate' if not j.confidence else f'confidence {j.confidence:.0%}'}, market {j.market}, "
            f"up to {j.max_instances} "
            f"instances; {types} x {len(plan.regions)} regions -> {n:,} candidates, "
            f"{int(plan.candidates.feasible.sum()):,} feasible; {plan.prices or 'list prices'}")


def work_words(j: JobSpec) -> str:
    """The job's work: samples, and for a workload whose probe counted tokens the tokens as well."""
    if j.tokens_per_sample is None:
        return f"{j.samples:,.4g} samples"
    tokens = j.tokens if j.tokens is not None else j.samples * j.tokens_per_sample
    return f"{tokens:,.4g} tokens ({j.samples:,.4g} samples of {j.tokens_per_sample:,.4g} tokens)"


def json_document(plan: Plan, rows: Rows, probe_commands: list[ProbeCommand]) -> dict[str, Any]:
    """The `--format json` document (schema `recommend`: advisor/schemas/recommend.py), validated."""
    from .. import schemas  # pydantic's document models: built only when JSON is asked for

    records = [recommendation(r, plan.job) for r in rows.candidates]
    return schemas.document(
        "recommend",
        workload_id=plan.workload_id,
        job=plan.job.model_dump(),  # validated as the planned job (schemas.recommend.RecommendJob)
        feasible=rows.feasible,
        candidates_evaluated=len(plan.candidates),
        prices=plan.prices,
        catalog=plan.catalog,
        recommendations=records if rows.feasible else [],
        closest=[] if rows.feasible else records,
        probe_next=[to_record(p) for p in rows.probes],
        probe_plan=to_record(rows.probe_plan),
        probe_commands=[{"argv": c.argv, "command": c.command, "purpose": c.purpose} for c in probe_commands],
        would_fit_with=[to_record(a) for a in plan.alternatives],
        excluded=exclusion_rows(plan),
        warnings=plan.warnings,
    )


def json_text(plan: Plan, rows: Rows, probe_commands: list[ProbeCommand]) -> str:
    return json.dumps(json_document(plan, rows, probe_commands), indent=2)


SHORT_RUN_LINE = (f"The rows noted '{SHORT_RUN_NOTE}' run under an hour: booting, installing and staging data are "
                  "not counted, and at this length they can be much of the time and cost; --setup-minutes M bills "
                  "them on every instance.")
NO_CANDIDATES = "No candidates: every instance type the filters leave was excluded or has no price."
PROBE_HEAD = ("Probe next (each expected to save more than it costs, the most valuable first given those above it; "
              "a probe re-anchors the estimates of its device's other sizes, and of other devices less):")
# When a row saves less than it costs (an uncalibrated estimate the ranking rests on is measured first
# whatever it saves: the worlds drawn from its band cannot price it), the header says so.
PROBE_HEAD_FIRST = ("Probe next (the first row is measured first whatever it is expected to save: {why}; each "
                    "after it is expected to save more than it costs, the most valuable first given those above "
                    "it; a probe re-anchors the estimates of its device's other sizes, and of other devices less):")


def probe_head(probes) -> str:
    """The header over the probe rows: what it claims of each row holds for every row."""
    if probes and probes[0].gain_usd <= probes[0].probe_cost_usd:
        return PROBE_HEAD_FIRST.format(why=probes[0].reason)
    return PROBE_HEAD


def head_lines(plan: Plan, rows: Rows) -> list[str]:
    """What is said between the summary and the table: the frontier shown in part, nothing fits."""
    out = []
    if plan.front_size is not None and plan.front_size > len(plan.ranked):
        out.append(f"The Pareto frontier has {plan.front_size} candidates (regions with equal offers merged); "
                   f"showing {len(plan.ranked)}, cheapest first: raise --top to see more.")
    if rows.candidates and not rows.feasible:  # (a filter that leaves a family or region unpriced is a warning)
        out.append("Nothing meets both the budget and the deadline. Closest candidates, with the budget or "
                   "deadline that would make each feasible:")
    return out


def alternatives_line(plan: Plan) -> str:
    """Nothing fits: the other options that would, each alone."""
    return "Would fit instead, each option alone: " + "; ".join(
        f"{a.option}: {a.count} x {instance_label(a.instance_type, a.variant)} {a.market} in {a.region}, {duration(a.hours)} and "
        f"${money(a.cost_usd)} {f'at {a.confidence:.0%} confidence' if a.confidence else '(point estimate)'}"
        for a in plan.alternatives) + "."


def write(plan: Plan, rows: Rows, fmt: str, *, probe_commands: list[ProbeCommand], show_excluded: bool = False,
          stream=None) -> None:
    """The plan's rows for people (table, markdown) or pipes (json, csv); `probe_commands` are the
    command lines that measure the probe rows."""
    stream = stream or sys.stdout
    rs, feasible = rows.candidates, rows.feasible
    if fmt == "csv":
        emit([recommendation(r, plan.job) for r in rs], "csv", CSV_COLUMNS, stream=stream)
        return
    if fmt == "json":
        stream.write(json_text(plan, rows, probe_commands) + "\n")
        return
    say(summary_line(plan), stream)
    for line in head_lines(plan, rows):
        say(line, stream)
    print(file=stream)
    if rs:
        unit = time_unit([r.hours_at_confidence if plan.job.confidence else r.hours for r in rs])
        disp = [_display(r, plan.job, unit) | ({} if feasible else {"needs": needs(r.budget_needed_usd, r.deadline_needed_hours)})
                for r in rs]
        emit(disp, fmt, table_columns(plan.job, feasible, unit, mfu=plan.flops_per_sample is not None),
             stream=stream, notes="note",
             drop=[unit.header if c == "hours" else c for c in drop_order(plan.job, feasible)])
        if fmt == "table":
            print(file=stream)
            say(LEGEND, stream)
        if any(short_run(r) for r in rs):
            print(file=stream)
            say(SHORT_RUN_LINE, stream)
    else:
        say(NO_CANDIDATES, stream)
    if not feasible and plan.alternatives:
        print(file=stream)
        say(alternatives_line(plan), stream)
    pr = rows.probes
    if rows.candidates:
        print(file=stream)
        say(probe_head(pr), stream)
        if pr:
            emit([{"instance": p.instance_type,
                   "samples/s now": f"{number(p.throughput_low)}-{number(p.throughput_high)} "
                                    f"{SOURCE_WORDS[p.throughput_source]}",
                   "region": p.region, "market": MARKET_WORDS[p.market], "$/h": f"{p.usd_per_hour:.4g}",
                   "probe $": f"{p.probe_cost_usd:.2f}", "changes pick": f"{p.p_change:.0%}",
                   "saves then $": f"{p.saving_if_changed_usd:,.2f}",
                   "why": p.reason + (f"; covers {_covers(p)}" if p.covers else "")}
                  for p in pr], fmt, stream=stream, notes="why", drop=["region", "$/h"])
        if pr:
            print(file=stream)
        for line in probe_lines(rows.probe_plan, pr):
            say(line, stream)
        for cmd in probe_commands:  # the why on a line of its own: the command pastes whole
            say(cmd.purpose, stream, indent="  # ")
            print(f"  {shlex.join(cmd.argv)}", file=stream)
    if show_excluded:
        print(f"\nExcluded ({len(plan.exclusions)}):", file=stream)
        emit(exclusion_rows(plan), fmt, ["instance_type", "reason"], stream=stream, notes="reason")
    elif plan.exclusions:
        print(file=stream)
        say(f"{len(plan.exclusions)} instance types excluded (--show-excluded lists them with the reason).", stream)


def number(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def duration(h: float) -> str:
    """Hours for people: minutes below an hour, seconds below a minute."""
    if not h < 1e5:
        return f"{h:,.3g} h"
    if round(h * 60) >= 60:
        return f"{h:,.1f} h"
    if round(h * 3600) >= 60:
        return f"{h * 60:.0f} min"
    return f"{h * 3600:.0f} s" if h * 3600 >= 0.5 else "<1 s"


def money(usd: float) -> str:
    """Dollars to the cent; below a cent, two significant figures rather than 0.00."""
    return f"{usd:,.2f}" if usd >= 0.005 or usd == 0 else f"{usd:.2g}"


def _fmt_hours(h: float) -> str:
    """A --deadline value that is at least h hours."""
    if h >= 48:
        return f"{math.ceil(h / 24 * 10) / 10:g}d"
    if h < 1:
        return f"{math.ceil(round(h * 60, 6)):g}m"
    return f"{math.ceil(round(h * 10, 6)) / 10:g}h"


# The registry's renderers (advisor/render/__init__.py FORMATS): a result (plan, rows, probe
# commands) in each of the formats every command has.
def render_table(result, context) -> None:
    _render(result, context, "table")


def render_markdown(result, context) -> None:
    _render(result, context, "markdown")


def render_csv(result, context) -> None:
    _render(result, context, "csv")


def render_json(result, context) -> None:
    _render(result, context, "json")


def _render(result, context, fmt: str) -> None:
    write(result.plan, result.rows, fmt, probe_commands=result.probe_commands, show_excluded=context.show_excluded,
          stream=context.out)
