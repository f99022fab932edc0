"""Rows for people and for pipes from a Plan: ranked candidates, the closest ones when nothing
fits, exclusions and the probe plan."""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from . import rank as rk
from .output import emit
from .planner import Plan, bucket_label

TABLE_COLUMNS = ("rank", "instance", "count", "region", "market", "samples/s (source)", "hours",
                 "cost USD", "samples/$", "note")
CSV_COLUMNS = ("rank", "instance_type", "count", "region", "market", "samples_per_sec", "throughput_source",
               "throughput_low", "throughput_high", "hours", "hours_pessimistic", "cost_usd",
               "samples_per_dollar", "feasible", "reason", "budget_needed_usd", "deadline_needed_hours",
               "usd_per_hour", "precision", "scale_out_efficiency", "expected_interruptions", "interruption_bucket")
# One probe: boot, install, the optimisation ladder and steady-state timing, for ordering and a
# rough price only. An assumption, bounded by measurement: the full ResNet-50 ladder took 615 s
# on a 2-core CPU (benchmarks/probe_ladder.py), GPUs step far faster, and boot plus install add
# minutes; `advisor launch`'s watchdog (--max-minutes, default 45) caps what a probe can cost.
PROBE_HOURS = 0.5


class Recommendation(BaseModel):
    """One ranked (or closest) candidate as the JSON/CSV output carries it."""

    model_config = ConfigDict(extra="forbid")

    rank: int | None  # None for the closest candidates when nothing is feasible
    instance_type: str
    count: int
    region: str
    also_regions: list[str] = []  # the same offer at the same price
    also_counts: list[dict[str, float]] = []  # cheapest: more instances at the same cost (faster)
    market: Literal["on-demand", "spot", "spot+od-fallback"]
    samples_per_sec: float  # all `count` instances together
    throughput_source: Literal["measured", "reference", "estimated"]
    throughput_low: float
    throughput_high: float
    hours: float  # expected, interruption losses included
    hours_pessimistic: float  # what the deadline is checked against
    cost_usd: float
    samples_per_dollar: float
    feasible: bool
    reason: str | None = None  # why not, when infeasible
    budget_needed_usd: float | None = None  # the budget that would make it feasible
    deadline_needed_hours: float | None = None  # the deadline that would make it feasible
    usd_per_hour: float  # per instance (the spot price for spot and the fallback)
    precision: str
    scale_out_efficiency: float  # throughput / (count x one instance's)
    expected_interruptions: float
    interruption_bucket: str | None = None
    notes: list[str] = []
    basis: dict[str, Any] = {}  # where the throughput comes from (anchor, ratios, provenance, result id)


def candidate_row(plan: Plan, i: int, rank_no: int | None) -> dict[str, Any]:
    c, o, t = plan.candidates, plan.offers, plan.types
    off = int(c.offer[i])
    ti = int(c.type_idx[i])
    th = plan.throughputs[ti]
    market = rk.MARKET_NAMES[int(o.market[off])]
    b = int(plan.bucket[off])
    k = int(c.k[i])
    notes = list(th.notes)
    if th.source == "estimated":
        notes.append(f"est. {c.sps_low[i]:,.0f}-{c.sps_high[i]:,.0f}/s from {th.basis.get('anchor')}")
    if k > 1 or th.devices > 1:
        eff = float(c.efficiency[i]) * (th.basis.get("intra_instance_efficiency") if isinstance(
            th.basis.get("intra_instance_efficiency"), float) else 1.0)
        notes.append(f"scale-out eff {eff:.0%}")
    if k > 1 and th.basis.get("network_note"):
        notes.append(th.basis["network_note"])
    if market != "on-demand":
        notes.append(f"~{c.interruptions[i]:.2g} interruptions ({'bucket unknown: assumed >20%' if b == -1 else bucket_label(b)})")
    if market == "spot+od-fallback":
        notes.append(f"od ${o.od_price[off]:.4g}/h after 1st interruption")
    if i in plan.also_counts:
        more = sorted(plan.also_counts[i])
        ks = [str(kk) for kk, _ in more]
        notes.append(f"same cost with {ks[0] if len(ks) == 1 else ks[0] + '-' + ks[-1]} instances "
                     f"(down to {more[-1][1]:,.1f} h)")
    if i in plan.also_regions:
        notes.append("same in " + ", ".join(plan.regions[r] for r in plan.also_regions[i]))
    reason = None
    if not c.feasible[i]:
        why = []
        if not math.isfinite(c.cost[i]):
            why.append("no throughput figure for this count (network bandwidth unknown)")
        else:
            if c.cost[i] > plan.job.budget_usd:
                why.append(f"cost ${c.cost[i]:,.2f} > budget ${plan.job.budget_usd:,.2f}")
            if c.hours_pess[i] > plan.job.deadline_hours:
                why.append(f"{c.hours_pess[i]:,.1f} h (pessimistic) > deadline {plan.job.deadline_hours:,.1f} h")
        reason = "; ".join(why)
    need_budget = need_deadline = None
    if not c.feasible[i] and math.isfinite(c.cost[i]):
        need_budget = _ceil_cents(c.cost[i]) if c.cost[i] > plan.job.budget_usd else None
        need_deadline = (math.ceil(c.hours_pess[i] * 10) / 10 if c.hours_pess[i] > plan.job.deadline_hours else None)
    return Recommendation(
        rank=rank_no,
        instance_type=t.names[ti],
        count=k,
        region=plan.regions[int(o.region_idx[off])],
        also_regions=[plan.regions[r] for r in plan.also_regions.get(i, [])],
        also_counts=[{"count": kk, "hours": h} for kk, h in sorted(plan.also_counts.get(i, []))],
        market=market,
        samples_per_sec=float(c.sps[i]),
        throughput_source=th.source,
        throughput_low=float(c.sps_low[i]),
        throughput_high=float(c.sps_high[i]),
        hours=float(c.hours[i]),
        hours_pessimistic=float(c.hours_pess[i]),
        cost_usd=float(c.cost[i]),
        samples_per_dollar=float(c.samples_per_dollar[i]),
        feasible=bool(c.feasible[i]),
        reason=reason,
        budget_needed_usd=need_budget,
        deadline_needed_hours=need_deadline,
        usd_per_hour=float(o.price[off]),
        precision=th.precision,
        scale_out_efficiency=float(c.efficiency[i]),
        expected_interruptions=float(c.interruptions[i]),
        interruption_bucket=None if market == "on-demand" else bucket_label(b),
        notes=notes,
        basis=th.basis,
    ).model_dump()


def _ceil_cents(x: float) -> float:
    return math.ceil(x * 100) / 100


def rows(plan: Plan) -> list[dict[str, Any]]:
    if len(plan.ranked):
        return [candidate_row(plan, int(i), n + 1) for n, i in enumerate(plan.ranked)]
    return [candidate_row(plan, int(i), None) for i in plan.closest]


def probe_rows(plan: Plan) -> list[dict[str, Any]]:
    out = []
    best_t = int(plan.candidates.type_idx[plan.ranked[0]]) if len(plan.ranked) else -1
    for ti, off in plan.probe:
        th = plan.throughputs[ti]
        name = plan.types.names[ti]
        region = plan.regions[int(plan.offers.region_idx[off])]
        price = float(plan.offers.price[off])
        out.append({
            "instance_type": name,
            "throughput_source": th.source,
            "samples_per_sec": th.samples_per_sec,
            "throughput_low": th.low,
            "throughput_high": th.high,
            "region": region,
            "market": rk.MARKET_NAMES[int(plan.offers.market[off])],
            "usd_per_hour": price,
            "probe_cost_usd": round(price * PROBE_HOURS, 2),
            "why": "the best option rests on this estimate" if ti == best_t else "band overlaps the best option",
        })
    return out


def probe_commands(plan: Plan, workload: str) -> list[str]:
    if not plan.probe:
        return []
    by_region: dict[str, list[str]] = {}
    for ti, off in plan.probe:
        by_region.setdefault(plan.regions[int(plan.offers.region_idx[off])], []).append(plan.types.names[ti])
    j = plan.job
    shape = []
    if j.datamodule:
        shape.append(f"--datamodule {j.datamodule}")
    if j.image_size != 224:
        shape.append(f"--image-size {j.image_size}")
    if j.num_classes != 1000:
        shape.append(f"--num-classes {j.num_classes}")
    extra = f" --probe-args '{' '.join(shape)}'" if shape else ""
    cmds = [f"advisor launch --instance-types {','.join(names)} --region {region} --workload {workload}{extra} "
            f"--s3 s3://BUCKET/prefix" for region, names in by_region.items()]
    cmds.append("advisor results pull s3://BUCKET/prefix   # then run this recommend again")
    cmds.append(f"(or on a machine of that type: advisor probe --workload {workload}{' ' + ' '.join(shape) if shape else ''})")
    return cmds


def exclusion_rows(plan: Plan) -> list[dict[str, Any]]:
    return [{"instance_type": e.instance_type, "reason": e.reason} for e in plan.exclusions]


def _display(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "rank": r["rank"] if r["rank"] is not None else "-",
        "instance": r["instance_type"],
        "count": r["count"],
        "region": r["region"],
        "market": r["market"],
        "samples/s (source)": f"{_num(r['samples_per_sec'])} ({r['throughput_source']})",
        "hours": f"{r['hours']:,.1f}" if r["hours"] < 1e5 else f"{r['hours']:,.3g}",
        "cost USD": f"{r['cost_usd']:,.2f}",
        "samples/$": f"{r['samples_per_dollar']:,.0f}",
        "note": "; ".join(r["notes"] + ([r["reason"]] if r["reason"] else [])),
    }


def summary_line(plan: Plan) -> str:
    j = plan.job
    n = len(plan.candidates)
    return (f"{plan.workload_id}: {j.samples:,.4g} samples, budget ${j.budget_usd:,.2f}, deadline "
            f"{j.deadline_hours:,.1f} h, objective {j.objective}, market {j.market}, up to {j.max_instances} "
            f"instances; {len(plan.throughputs)} instance types x {len(plan.regions)} regions -> {n:,} candidates, "
            f"{int(plan.candidates.feasible.sum()):,} feasible")


def write(plan: Plan, fmt: str, show_excluded: bool = False, stream=None) -> None:
    stream = stream or sys.stdout
    rs = rows(plan)
    feasible = bool(len(plan.ranked))
    if fmt == "json":
        doc = {
            "workload_id": plan.workload_id,
            "job": plan.job.model_dump(),
            "feasible": feasible,
            "candidates_evaluated": len(plan.candidates),
            "recommendations": rs if feasible else [],
            "closest": [] if feasible else rs,
            "probe_next": probe_rows(plan),
            "probe_commands": probe_commands(plan, plan.job.workload),
            "excluded": exclusion_rows(plan),
            "warnings": plan.warnings,
        }
        json.dump(doc, stream, indent=2, default=_json_default)
        stream.write("\n")
        return
    if fmt == "csv":
        emit(rs, "csv", CSV_COLUMNS, stream=stream)
        return
    print(summary_line(plan), file=stream)
    if plan.front_size is not None and plan.front_size > len(plan.ranked):
        print(f"The Pareto frontier has {plan.front_size} candidates (regions with equal offers merged); "
              f"showing {len(plan.ranked)}, cheapest first: raise --top to see more.", file=stream)
    if not feasible:
        print("Nothing meets both the budget and the deadline. Closest candidates, with the budget or "
              "deadline that would make each feasible:", file=stream)
    print(file=stream)
    if rs:
        disp = [_display(r) for r in rs]
        if not feasible:
            for d, r in zip(disp, rs):
                need = []
                if r.get("budget_needed_usd"):
                    need.append(f"--budget {r['budget_needed_usd']:.2f}")
                if r.get("deadline_needed_hours"):
                    need.append(f"--deadline {_fmt_hours(r['deadline_needed_hours'])}")
                d["needs"] = " ".join(need)
        emit(disp, fmt, list(TABLE_COLUMNS) + ([] if feasible else ["needs"]), stream=stream)
    else:
        print("(no candidates: every instance type was excluded or has no price; see --show-excluded)", file=stream)
    pr = probe_rows(plan)
    if pr:
        print(f"\nProbe next (unmeasured types whose band overlaps the best option; cheapest probe first, "
              f"~{PROBE_HOURS:g} h each):", file=stream)
        emit([{"instance": p["instance_type"], "source": p["throughput_source"],
               "samples/s band": f"{_num(p['throughput_low'])}-{_num(p['throughput_high'])}",
               "region": p["region"], "$/h": f"{p['usd_per_hour']:.4g}", "probe ~$": f"{p['probe_cost_usd']:.2f}",
               "why": p["why"]}
              for p in pr], fmt, stream=stream)
        for cmd in probe_commands(plan, plan.job.workload):
            print(f"  {cmd}", file=stream)
    if show_excluded:
        print(f"\nExcluded ({len(plan.exclusions)}):", file=stream)
        emit(exclusion_rows(plan), fmt, ["instance_type", "reason"], stream=stream)
    elif plan.exclusions:
        print(f"\n{len(plan.exclusions)} instance types excluded (--show-excluded lists them with the reason).",
              file=stream)


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _fmt_hours(h: float) -> str:
    if h >= 48:
        return f"{math.ceil(h / 24 * 10) / 10:g}d"
    return f"{math.ceil(h * 10) / 10:g}h"


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    return str(o)
