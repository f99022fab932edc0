"""The report's rows, built once from a Plan: one typed row per candidate and per probe.

No text here: report.py formats the fields for people (table, markdown) and for pipes (json,
csv), and the plot labels its points from them. Each row class is also its output record
(advisor/records.py): a field declared with `fact` is in the JSON document, the CSV (unless
csv=False) and the schema (advisor/schemas/recommend.py derives the models from these classes).
A new fact about a candidate is a field here, and a line where the table formats it, never a
key looked up in `basis`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from catalog.models import Market as OfferMarket

from ..estimate.throughput import Variant
from ..records import JsonForm, fact, finite_or_null, internal, record, worded
from . import rank as rk
from .planner import Plan
from .probeplan.value import RECHECK, Outlook
from .rank import Market, Source
from .spot import bucket_label
from .tokens import mfu


@dataclass(frozen=True)
class SameCost:
    count: int
    hours: float


@dataclass(frozen=True, kw_only=True)
class GpuAndCpuVariant:
    gain: float = fact("expected: together / the GPUs alone - 1")
    low: float = fact()
    high: float = fact()
    source: Literal["measured", "estimated"] = fact()
    basis: dict[str, Any] = fact("how the gain was worked out (advisor/estimate/gpu_and_cpu.py)")


def _bucket_label(b: int, r: CandidateRow) -> str | None:
    return None if r.market == "on-demand" else bucket_label(b)


@record("Candidate")
@dataclass(frozen=True, kw_only=True)
class CandidateRow:
    """One ranked (or closest) candidate."""

    rank: int | None = fact("order under the objective; null for the closest candidates")
    index: int = internal()  # into plan.candidates
    instance_type: str = fact()
    # None: the instances' GPUs alone; "gpu_and_cpu": the variant, its throughput and band the pair's
    variant: Variant | None = fact("null: the GPUs alone; gpu_and_cpu: the host's CPU training beside them (one "
                                   "instance; its throughput, time and cost are the pair's)", default=None)
    count: int = fact("instances running data-parallel")
    region: str = fact()
    also_regions: list[str] = fact("the same offer at the same price in these regions too", csv=False)
    also_counts: list[SameCost] = fact("cheapest: more instances at the same cost, and their time", csv=False)
    market: Market = fact()
    samples_per_sec: float = fact("all `count` instances together")
    throughput_source: Source = fact()
    throughput_low: float = fact()
    throughput_high: float = fact()
    hours: float = fact("expected; interruption losses and --setup-minutes included")
    hours_pessimistic: float = fact()  # at the figure and the interruption bucket's upper rate
    cost_usd: float = fact()
    # What the deadline and the budget are checked against and the ranking reads: not exceeded
    # together with probability >= job.confidence (at confidence 0: hours_pessimistic and cost_usd).
    hours_at_confidence: float = fact("what the deadline is checked against (job.confidence)")
    cost_usd_at_confidence: float = fact("what the budget is checked against")
    samples_per_dollar: float = fact("null for a run that costs nothing", json=JsonForm(float | None, finite_or_null))
    # A workload whose probe counted tokens (job.tokens_per_sample; advisor/recommend/tokens.py): all
    # `count` instances' tokens/s, the dollars a million of them cost (expected cost over the job's
    # tokens), and MFU where the probe counted FLOPs and the GPU's peak is known. None otherwise.
    tokens_per_sec: float | None = fact("all `count` instances together, for a workload whose probe counted tokens "
                                        "(job.tokens_per_sample); null otherwise", default=None)
    usd_per_million_tokens: float | None = fact("cost_usd over the job's tokens, per million; null: the workload's "
                                                "probe counted no tokens", default=None)
    mfu: float | None = fact("model FLOPs utilisation, derived: samples/s x the probe's training FLOPs per sample "
                             "over the instances' GPU peak at the precision; null where either is unknown or the "
                             "workload counted no tokens", default=None)
    feasible: bool = fact()
    reason: str | None = worded("why it is not feasible; null when it is")  # render/report.py reason()
    has_figure: bool = internal()  # False: no throughput for this count (the network bandwidth is unknown)
    budget_needed_usd: float | None = fact("the budget that makes it feasible; null: within")  # up to the cent
    # up to 0.1 h, or the minute below an hour
    deadline_needed_hours: float | None = fact("the deadline that makes it feasible; null: within")
    # per instance (the spot price for spot and the fallback)
    usd_per_hour: float = fact("per instance")
    od_usd_per_hour: float | None = internal()  # spot+od-fallback: the on-demand price after the first interruption
    precision: str = fact()
    scale_out_efficiency: float = fact()  # throughput / (count x one instance's)
    # Several devices or instances: the efficiency with the instance's own all-reduce included.
    overall_efficiency: float | None = internal()
    expected_interruptions: float = fact()
    # index into INTERRUPTION_LABELS; -1 unknown, -2 on-demand
    interruption_bucket: int = fact("spot: the bucket's label; null on demand", json=JsonForm(str | None, _bucket_label))
    # Facts about getting the instances, filled by the command layer (advisor/commands/recommend.py):
    sold_by_reservation: bool = internal(default=False)  # catalog: AWS sells the type mostly by reservation
    obtainable: Literal["yes", "no", "unknown"] | None = fact("--check-account; null: not checked", default=None)
    obtainable_reason: str | None = fact(default=None)
    # The "GPU + CPU" variant (advisor/estimate/gpu_and_cpu.py): the host's CPU training beside the
    # GPUs (`advisor probe --cpu-too`), only where its gain's band is above zero; None: not offered.
    # On the variant's own row and on its GPUs-alone row.
    gpu_and_cpu: GpuAndCpuVariant | None = fact(
        "the host's CPU training beside the GPUs: offered only when its gain's band is above zero (on the variant's "
        "row and its GPUs-alone row)", default=None, csv=False)
    notes: list[str] = worded("the table's note column, part by part", csv=False)  # render/report.py notes()
    basis: dict[str, Any] = fact("what the throughput rests on (docs/recommend.md#json-output)", csv=False)
    setup_hours: float = internal()  # of `hours`: billed setup before training (--setup-minutes)
    estimate_anchor: str | None = internal()  # estimated: the instance type it scales from
    network_note: str | None = internal()  # several instances: the assumption made about the network
    throughput_notes: list[str] = internal()  # what the throughput model said (measurement age, devices used, caps)


@record("ProbeNext")
@dataclass(frozen=True, kw_only=True)
class ProbeRow:
    """One probe of the plan: the type's band now, what the probe costs, what it is expected to change."""

    instance_type: str = fact()
    throughput_source: Source = fact()
    samples_per_sec: float = fact()
    throughput_low: float = fact()
    throughput_high: float = fact()
    region: str = fact()
    market: OfferMarket = fact()  # where the probe runs (the market the user asked for)
    usd_per_hour: float = fact()
    probe_hours: float = fact()
    probe_cost_usd: float = fact()
    gain_usd: float = fact("expected drop of the pick's true cost (after the probes above it)")
    p_change: float = fact("chance it changes the pick")
    saving_if_changed_usd: float = fact()
    covers: list[str] = fact("sizes of the same device whose estimates it re-anchors")
    reason: str = fact()
    # Run with --cpu-too: a "GPU + CPU" gain is possible on this type, or offered on an estimate (gpu_and_cpu.py)
    cpu_too: bool = fact("probe it with --cpu-too: the host's CPU beside the GPU might add, or its GPU + CPU "
                         "variant rests on an estimate", default=False)
    probe_hours_basis: str = fact("what probe_hours rests on: the store's past probes of the workload on its device "
                                  "class, or the ladder's bound where there are none", default="")


@dataclass(frozen=True, kw_only=True)
class ProbePlan:
    """The probe plan in names: what it costs and how close the pick is to the true best, now and after it."""

    has_pick: bool = fact()  # something fits by the estimates (else the plan is valued against no pick)
    usd: float = fact("the plan's probes together")
    hours: float = fact("wall time: the probes run in parallel")
    now: Outlook | None = fact()
    after: Outlook | None = fact()
    within: float = fact("the share 'within' means")
    why_empty: str | None = fact()
    not_affordable: list[str] = fact("worth probing, but past --probe-budget")
    probe_budget_usd: float | None = fact()


@dataclass(frozen=True, kw_only=True)
class Rows:
    """What the report shows of a plan."""

    feasible: bool  # candidates are the ranked ones (else the closest, each with what it needs)
    candidates: list[CandidateRow]
    probes: list[ProbeRow]
    probe_plan: ProbePlan


def build(plan: Plan) -> Rows:
    feasible = bool(len(plan.ranked))
    if feasible:
        cands = [candidate_row(plan, int(i), n + 1) for n, i in enumerate(plan.ranked)]
    else:
        cands = [candidate_row(plan, int(i), None) for i in plan.closest]
    return Rows(feasible=feasible, candidates=cands, probes=probe_rows(plan), probe_plan=probe_plan(plan))


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
        also_counts=[SameCost(kk, h) for kk, h in sorted(plan.also_counts.get(i, []))],
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


def _variant(g) -> GpuAndCpuVariant | None:
    """The "GPU + CPU" variant's record, where one is offered."""
    if g is None or not g.variant:
        return None
    return GpuAndCpuVariant(gain=g.gain, low=g.low, high=g.high, source=g.source, basis=g.basis)


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


def probe_plan(plan: Plan) -> ProbePlan:
    pp = plan.probe
    return ProbePlan(has_pick=bool(len(plan.ranked)), usd=pp.usd, hours=pp.hours, now=pp.now,
                        after=pp.after, within=RECHECK,
                        why_empty=pp.why_empty, not_affordable=[plan.types.names[t] for t in pp.limited_by_budget],
                        probe_budget_usd=plan.job.probe_budget_usd)
