"""The report's rows, built once from a Plan: one typed row per candidate and per probe.

No text here: report.py formats the fields for people (table, markdown) and for pipes (json,
csv), and the plot labels its points from them. A new fact about a candidate is a field here and
a line where it is formatted, never a key looked up in `basis`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from . import rank as rk
from .planner import Plan

# One probe: boot, install, the optimisation ladder and steady-state timing, for ordering and a
# rough price only. An assumption, bounded by measurement: the full ResNet-50 ladder took 615 s
# on a 2-core CPU (benchmarks/probe_ladder.py), GPUs step far faster, and boot plus install add
# minutes; `advisor launch`'s watchdog (--max-minutes, default 45) caps what a probe can cost.
PROBE_HOURS = 0.5


@dataclass(frozen=True, kw_only=True)
class CandidateRow:
    """One ranked (or closest) candidate."""

    rank: int | None  # None for the closest candidates when nothing is feasible
    index: int  # into plan.candidates
    instance_type: str
    count: int
    region: str
    also_regions: list[str]  # the same offer at the same price elsewhere
    also_counts: list[tuple[int, float]]  # cheapest: (count, hours) of more instances at the same cost
    market: str  # one of rank.MARKET_NAMES
    samples_per_sec: float  # all `count` instances together
    throughput_source: str  # measured | reference | estimated
    throughput_low: float
    throughput_high: float
    hours: float  # expected, interruption losses and setup included
    hours_pessimistic: float  # what the deadline is checked against
    cost_usd: float
    samples_per_dollar: float
    usd_per_hour: float  # per instance (the spot price for spot and the fallback)
    od_usd_per_hour: float | None  # spot+od-fallback: the on-demand price after the first interruption
    precision: str
    scale_out_efficiency: float  # throughput / (count x one instance's)
    # Several devices or instances: the efficiency with the instance's own all-reduce included.
    overall_efficiency: float | None
    expected_interruptions: float
    interruption_bucket: int  # index into INTERRUPTION_LABELS; -1 unknown, -2 on-demand
    feasible: bool
    has_figure: bool  # False: no throughput for this count (the network bandwidth is unknown)
    budget_needed_usd: float | None  # the budget that makes it feasible, up to the cent; None: within
    deadline_needed_hours: float | None  # the deadline that makes it feasible, up to 0.1 h; None: within
    estimate_anchor: str | None  # estimated: the instance type it scales from
    network_note: str | None  # several instances: the assumption made about the network
    throughput_notes: list[str]  # what the throughput model said (measurement age, devices used, caps)
    basis: dict[str, Any]  # where the throughput comes from, for JSON


@dataclass(frozen=True, kw_only=True)
class ProbeRow:
    """One instance type worth probing: its band now and what a probe of it costs."""

    instance_type: str
    throughput_source: str
    samples_per_sec: float
    throughput_low: float
    throughput_high: float
    region: str
    market: str
    usd_per_hour: float
    probe_cost_usd: float
    best_rests_on_it: bool  # the best option's own type (else: its band overlaps the best option)


@dataclass(frozen=True, kw_only=True)
class Rows:
    """What the report shows of a plan."""

    feasible: bool  # candidates are the ranked ones (else the closest, each with what it needs)
    candidates: list[CandidateRow]
    probes: list[ProbeRow]


def build(plan: Plan) -> Rows:
    feasible = bool(len(plan.ranked))
    if feasible:
        cands = [candidate_row(plan, int(i), n + 1) for n, i in enumerate(plan.ranked)]
    else:
        cands = [candidate_row(plan, int(i), None) for i in plan.closest]
    return Rows(feasible=feasible, candidates=cands, probes=probe_rows(plan))


def candidate_row(plan: Plan, i: int, rank_no: int | None) -> CandidateRow:
    c, o = plan.candidates, plan.offers
    off = int(c.offer[i])
    ti = int(c.type_idx[i])
    th = plan.throughputs[ti]
    k = int(c.k[i])
    market = int(o.market[off])
    need_budget, need_deadline = (float(x) for x in rk.shortfall(c.cost[i], c.hours_pess[i], plan.rank_job))
    has_figure = math.isfinite(need_budget) and math.isfinite(need_deadline)
    return CandidateRow(
        rank=rank_no,
        index=i,
        instance_type=plan.types.names[ti],
        count=k,
        region=plan.regions[int(o.region_idx[off])],
        also_regions=[plan.regions[r] for r in plan.also_regions.get(i, [])],
        also_counts=sorted(plan.also_counts.get(i, [])),
        market=rk.MARKET_NAMES[market],
        samples_per_sec=float(c.sps[i]),
        throughput_source=th.source,
        throughput_low=float(c.sps_low[i]),
        throughput_high=float(c.sps_high[i]),
        hours=float(c.hours[i]),
        hours_pessimistic=float(c.hours_pess[i]),
        cost_usd=float(c.cost[i]),
        samples_per_dollar=float(c.samples_per_dollar[i]),
        usd_per_hour=float(o.price[off]),
        od_usd_per_hour=float(o.od_price[off]) if market == rk.FALLBACK else None,
        precision=th.precision,
        scale_out_efficiency=float(c.efficiency[i]),
        overall_efficiency=float(c.efficiency[i]) * th.intra_efficiency if k > 1 or th.devices > 1 else None,
        expected_interruptions=float(c.interruptions[i]),
        interruption_bucket=int(plan.bucket[off]),
        feasible=bool(c.feasible[i]),
        has_figure=has_figure,
        budget_needed_usd=_ceil(need_budget, 2) if has_figure and need_budget > plan.rank_job.budget_usd else None,
        deadline_needed_hours=(_ceil(need_deadline, 1) if has_figure and need_deadline > plan.rank_job.deadline_h
                               else None),
        estimate_anchor=th.anchor,
        network_note=th.network_note if k > 1 else None,
        throughput_notes=list(th.notes),
        basis=th.basis,
    )


def _ceil(x: float, digits: int) -> float:
    """Rounded up, so the figure typed back in as a limit is met."""
    return math.ceil(x * 10**digits) / 10**digits


def probe_rows(plan: Plan) -> list[ProbeRow]:
    best_t = int(plan.candidates.type_idx[plan.ranked[0]]) if len(plan.ranked) else -1
    out = []
    for ti, off in plan.probe:
        th = plan.throughputs[ti]
        price = float(plan.offers.price[off])
        out.append(ProbeRow(
            instance_type=plan.types.names[ti], throughput_source=th.source, samples_per_sec=th.samples_per_sec,
            throughput_low=th.low, throughput_high=th.high, region=plan.regions[int(plan.offers.region_idx[off])],
            market=rk.MARKET_NAMES[int(plan.offers.market[off])], usd_per_hour=price,
            probe_cost_usd=round(price * PROBE_HOURS, 2), best_rests_on_it=ti == best_t,
        ))
    return out

