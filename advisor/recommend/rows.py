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
from .probeplan.value import RECHECK
from .tokens import mfu


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
    hours_pessimistic: float  # at the figure and the interruption bucket's upper rate
    cost_usd: float
    # What the deadline and the budget are checked against and the ranking reads: not exceeded
    # together with probability >= job.confidence (at confidence 0: hours_pessimistic and cost_usd).
    hours_at_confidence: float
    cost_usd_at_confidence: float
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
    deadline_needed_hours: float | None  # the deadline that makes it feasible (up to 0.1 h, or the minute
    # below an hour); None: within
    setup_hours: float  # of `hours`: billed setup before training (--setup-minutes)
    estimate_anchor: str | None  # estimated: the instance type it scales from
    network_note: str | None  # several instances: the assumption made about the network
    throughput_notes: list[str]  # what the throughput model said (measurement age, devices used, caps)
    # The "GPU + CPU" variant (advisor/estimate/gpu_and_cpu.py): the host's CPU training beside the
    # GPUs (`advisor probe --cpu-too`), only where its gain's band is above zero; None: not offered.
    # On the variant's own row and on its GPUs-alone row.
    gpu_and_cpu: dict[str, Any] | None = None
    # None: the instances' GPUs alone; "gpu_and_cpu": the variant, its throughput and band the pair's
    variant: str | None = None
    basis: dict[str, Any]  # where the throughput comes from, for JSON
    # A workload whose probe counted tokens (job.tokens_per_sample; advisor/recommend/tokens.py): all
    # `count` instances' tokens/s, the dollars a million of them cost (expected cost over the job's
    # tokens), and MFU where the probe counted FLOPs and the GPU's peak is known. None otherwise.
    tokens_per_sec: float | None = None
    usd_per_million_tokens: float | None = None
    mfu: float | None = None
    # Facts about getting the instances, filled by the command layer (advisor/commands/recommend.py):
    sold_by_reservation: bool = False  # catalog: AWS sells the type mostly by Capacity Block / reservation
    obtainable: str | None = None  # --check-account: yes | no | unknown; None: not checked
    obtainable_reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class ProbeRow:
    """One probe of the plan: the type's band now, what the probe costs, what it is expected to change."""

    instance_type: str
    throughput_source: str
    samples_per_sec: float
    throughput_low: float
    throughput_high: float
    region: str
    market: str  # on-demand | spot: where the probe runs (the market the user asked for)
    usd_per_hour: float
    probe_hours: float
    probe_cost_usd: float
    gain_usd: float  # expected drop of the pick's true cost (after the probes above it)
    p_change: float  # chance it changes the pick
    saving_if_changed_usd: float
    covers: list[str]  # siblings (the same device in other sizes) whose estimates it re-anchors
    reason: str
    # Run with --cpu-too: a "GPU + CPU" gain is possible on this type, or offered on an estimate (gpu_and_cpu.py)
    cpu_too: bool = False
    probe_hours_basis: str = ""  # what probe_hours rests on: the store's past probes, or the ladder's bound


@dataclass(frozen=True, kw_only=True)
class Outlook:
    """How close the pick is to the true best, over the outcomes the bands allow."""

    p_within: float  # chance the pick is feasible and within WITHIN of the true best
    p90_regret: float  # the pick's excess over the true best, 90th percentile (inf: misses > 10%)
    p_miss: float  # chance the pick misses the deadline or the budget in truth, where something fits
    p_any: float = 1.0  # chance that something fits in truth, over all outcomes (the others are over these)
    p_fit: float = 1.0  # chance the pick fits in truth, over all outcomes


@dataclass(frozen=True, kw_only=True)
class ProbeSummary:
    has_pick: bool  # something fits by the estimates (else the plan is valued against no pick)
    usd: float  # the plan's probes together
    hours: float  # wall time: they run in parallel
    now: Outlook | None
    after: Outlook | None
    within: float  # the share "within" means
    why_empty: str | None
    not_affordable: list[str]  # worth probing, but past --probe-budget
    probe_budget_usd: float | None


@dataclass(frozen=True, kw_only=True)
class Rows:
    """What the report shows of a plan."""

    feasible: bool  # candidates are the ranked ones (else the closest, each with what it needs)
    candidates: list[CandidateRow]
    probes: list[ProbeRow]
    probe_summary: ProbeSummary


def build(plan: Plan) -> Rows:
    feasible = bool(len(plan.ranked))
    if feasible:
        cands = [candidate_row(plan, int(i), n + 1) for n, i in enumerate(plan.ranked)]
    else:
        cands = [candidate_row(plan, int(i), None) for i in plan.closest]
    return Rows(feasible=feasible, candidates=cands, probes=probe_rows(plan), probe_summary=probe_summary(plan))


def candidate_row(plan: Plan, i: int, rank_no: int | None) -> CandidateRow:
    c, o = plan.candidates, plan.offers
    off = int(c.offer[i])
    ti = int(c.type_idx[i])
    th = plan.throughputs[ti]
    k = int(c.k[i])
    market = int(o.market[off])
    job = plan.job
    budget_needed, deadline_needed = (float(x) for x in rk.shortfall(c.cost_q[i], c.hours_q[i], job.budget_usd,
                                                                     job.deadline_hours))
    has_figure = math.isfinite(budget_needed) and math.isfinite(deadline_needed)
    return CandidateRow(
        rank=rank_no,
        index=i,
        instance_type=plan.types.names[ti],
        count=k,
        region=plan.regions[int(o.region_idx[off])],
        also_regions=[plan.regions[r] for r in plan.also_regions.get(i, [])],
        also_counts=sorted(plan.also_counts.get(i, [])),
        market=rk.MARKET_NAMES[market],
        samples_per_sec=float(c.samples_per_sec[i]),
        throughput_source=th.source,
        throughput_low=float(c.low[i]),
        throughput_high=float(c.high[i]),
        hours=float(c.hours[i]),
        hours_pessimistic=float(c.hours_pess[i]),
        cost_usd=float(c.cost[i]),
        hours_at_confidence=float(c.hours_q[i]),
        cost_usd_at_confidence=float(c.cost_q[i]),
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
        budget_needed_usd=_ceil(budget_needed, 2) if has_figure and budget_needed > job.budget_usd else None,
        deadline_needed_hours=(_up_to_a_deadline(deadline_needed)
                               if has_figure and deadline_needed > job.deadline_hours else None),
        setup_hours=job.setup_minutes / 60,
        estimate_anchor=th.anchor,
        network_note=th.network_note if k > 1 else None,
        throughput_notes=list(th.notes),
        gpu_and_cpu=_variant(th.gpu_and_cpu),
        variant=th.variant,
        basis=th.basis,
        **_per_token(plan, ti, k, float(c.samples_per_sec[i]), float(c.samples_per_dollar[i])),
    )


def _per_token(plan: Plan, ti: int, k: int, samples_per_sec: float, samples_per_dollar: float) -> dict[str, Any]:
    per = plan.job.tokens_per_sample
    if per is None:
        return {}
    return {"tokens_per_sec": samples_per_sec * per,
            # capacity already paid for spends nothing: 0 per million tokens
            "usd_per_million_tokens": 1e6 / (samples_per_dollar * per) if samples_per_dollar > 0 else None,
            "mfu": mfu(samples_per_sec, plan.flops_per_sample, k, plan.peak_tflops[ti])}


def _variant(g) -> dict[str, Any] | None:
    """The "GPU + CPU" variant's record, where one is offered."""
    if g is None or not g.variant:
        return None
    return {"gain": g.gain, "low": g.low, "high": g.high, "source": g.source, "basis": g.basis}


def _ceil(x: float, digits: int) -> float:
    """Rounded up, so the figure typed back in as a limit is met."""
    return math.ceil(x * 10**digits) / 10**digits


def _up_to_a_deadline(h: float) -> float:
    """Hours rounded up to what a --deadline would say: 0.1 h, or the minute below an hour."""
    return math.ceil(h * 60) / 60 if h < 1 else _ceil(h, 1)


def probe_rows(plan: Plan) -> list[ProbeRow]:
    out = []
    for p in plan.probe.probes:
        ti = p.type_idx
        th, where = plan.throughputs[ti], plan.probe_offers[ti]
        out.append(ProbeRow(
            instance_type=plan.types.names[ti], throughput_source=th.source, samples_per_sec=th.samples_per_sec,
            throughput_low=th.low, throughput_high=th.high,
            region=plan.regions[int(plan.offers.region_idx[where.offer])],
            market=rk.MARKET_NAMES[int(plan.offers.market[where.offer])], usd_per_hour=where.usd_per_hour,
            probe_hours=where.hours, probe_cost_usd=p.usd, gain_usd=p.gain_usd, p_change=p.p_change,
            saving_if_changed_usd=p.saving_if_changed, covers=sorted({plan.types.names[u] for u in p.covers}),
            reason=p.reason, cpu_too=th.gpu_and_cpu is not None and th.gpu_and_cpu.worth_probing,
            probe_hours_basis=where.hours_basis,
        ))
    return out


def probe_summary(plan: Plan) -> ProbeSummary:
    pp = plan.probe

    def outlook(o):
        return None if o is None else Outlook(p_within=o.p_within, p90_regret=o.p90_regret, p_miss=o.p_miss,
                                                  p_any=o.p_any, p_fit=o.p_fit)

    return ProbeSummary(has_pick=bool(len(plan.ranked)), usd=pp.usd, hours=pp.hours, now=outlook(pp.now),
                        after=outlook(pp.after), within=RECHECK,
                        why_empty=pp.why_empty, not_affordable=[plan.types.names[t] for t in pp.limited_by_budget],
                        probe_budget_usd=plan.job.probe_budget_usd)
