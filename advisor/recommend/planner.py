"""From a catalog, a job and the user's measurements to a ranked plan.

Turns the catalog's columnar offers and the per-type throughputs into the arrays advisor.recommend.rank
works on, runs it, and keeps what the report needs (names, notes, bases, exclusions).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from catalog.hardware import sustained_network_gbps
from catalog.models import Catalog
from lightning_module.contract.result import BUILTIN_MODELS, WorkloadSpec, canonical_json, misfit_patch
from lightning_module.contract.workload_facts import facts_for, facts_from_probes

from ..errors import AdvisorError
from ..estimate.predict import UNCALIBRATED
from ..estimate.throughput import Exclusion, Throughput, ThroughputModel, Variant, cpu_variant
from ..options import DEFAULT_TOP
from ..records import fact
from . import rank as rk
from . import spot
from .jobspec import JobSpec, catalog_markets
from .prices import Prices
from .probeplan.inputs import ProbeOffer, plan_probes
from .probeplan.probetime import PastProbes
from .probeplan.value import ProbeChoice
from .tokens import instance_peak_tflops, resolve_work

# Counts of one offer whose costs differ by less than this share are one row (cheapest): a spot
# run's expected interruption loss grows with the count by fractions of a cent.
SAME_COST = 0.005


@dataclass(kw_only=True)
class Plan:
    job: JobSpec
    workload_id: str
    types: rk.TypeTable
    offers: rk.OfferTable
    candidates: rk.Candidates
    ranked: np.ndarray
    closest: np.ndarray  # filled when nothing is feasible
    probe: ProbeChoice  # what to measure next (advisor.recommend.probeplan)
    probe_offers: list[ProbeOffer | None]  # per type: where and at what price one probe of it runs
    throughputs: list[Throughput]  # index-aligned with types.names
    exclusions: list[Exclusion]
    regions: list[str]
    bucket: np.ndarray  # per offer: the catalog's interruption bucket, or spot.UNKNOWN_BUCKET / ON_DEMAND_BUCKET
    warnings: list[str] = field(default_factory=list)
    pareto: np.ndarray | None = None  # the frontier when the objective is pareto (else the plot computes it)
    also_regions: dict[int, list[int]] = field(default_factory=dict)  # candidate -> same offer elsewhere
    front_size: int | None = None  # pareto: candidates on the frontier (rows show at most --top)
    also_counts: dict[int, list[tuple[int, float]]] = field(default_factory=dict)  # same cost, more instances
    no_offer: list[str] = field(default_factory=list)  # a named family or region the filters leave unpriced
    prices: str | None = None  # the price file that applied (Prices.describe), None: list prices
    alternatives: list[Alternative] = field(default_factory=list)  # nothing fits: other options that would
    catalog: dict[str, str] = field(default_factory=dict)  # where the specs and list prices come from (catalog_record)
    # A token-counting workload (job.tokens_per_sample set): per type, the instance's GPU peak at its
    # precision (TFLOP/s, tokens.instance_peak_tflops), and the probe's training FLOPs per sample: MFU.
    peak_tflops: list[float | None] = field(default_factory=list)
    flops_per_sample: float | None = None


def catalog_record(catalog: Catalog) -> dict[str, str]:
    """The catalog a plan was priced from, as the JSON and the page say it: its source, when it was
    fetched (UTC, ISO 8601) and its provenance in prose."""
    return {"source": catalog.source, "fetched_at": catalog.fetched_at.isoformat(), "provenance": catalog.provenance}


def check_filters(catalog: Catalog, job: JobSpec) -> None:
    if not any(len(ro) for ro in catalog.offers.values()):
        raise AdvisorError("the catalog has no offers (no prices); refresh it or pass another --catalog")
    job.type_filter().check(catalog, job.regions)


def missing_offers(catalog: Catalog, job: JobSpec, regions: list[str], markets: set[str]) -> list[str]:
    """A family named by --family, or a region named by --region, that the filters leave with no
    offer in the market asked for: said by name, with the refresh that fetches what AWS sells there
    now (a snapshot may lack it, or AWS may not sell it there)."""
    wanted = job.type_filter()
    offered: set[tuple[str, str]] = set()  # (region, family) with an offer that passes the filters
    for r in regions:
        ro = catalog.offers.get(r)
        for name, m in zip(ro.instance_type, ro.market) if ro is not None else ():
            it = catalog.instance_types.get(name)
            if m in markets and it is not None and wanted(it) and (job.include_cpu or it.accelerator_kind != "none"):
                offered.add((r, it.family.lower()))
    market = " or ".join(sorted(markets))
    where = f"the catalog ({catalog.source}, fetched {catalog.fetched_at:%Y-%m-%d})"
    out = []
    for f in job.families:
        missing = [r for r in regions if (r, f.lower()) not in offered]
        if missing:
            out.append(f"{where} has no {market} offer of family {f} in {', '.join(missing)}: AWS may not sell it "
                       f"there, or the catalog predates it; 'advisor catalog refresh --region {','.join(missing)} "
                       f"--family {f}' fetches what is sold there now (needs AWS credentials)")
    for r in job.regions:
        if not any(region == r for region, _ in offered) and not any(r in line for line in out):
            out.append(f"{where} has no {market} offer in {r} that passes the filters; 'advisor catalog refresh "
                       f"--region {r}' fetches what is sold there now (needs AWS credentials)")
    return out


def workload_spec(job: JobSpec) -> WorkloadSpec:
    if (patch := misfit_patch(job.workload, job.image_size)) is not None:
        raise AdvisorError(f"{job.workload} needs --image-size divisible by {patch} (its patch size), got {job.image_size}")
    try:
        return WorkloadSpec(model=job.workload, datamodule=job.datamodule, image_size=job.image_size,
                            init_args=job.init_args, data_init_args=job.data_init_args,
                            optimizer=job.optimizer, lr_scheduler=job.lr_scheduler,
                            num_classes=job.num_classes)
    except ValueError as e:
        from pydantic import ValidationError

        from safeio import first_error

        if isinstance(e, ValidationError) and first_error(e).loc[:1] != ("model",):
            raise AdvisorError(first_error(e).msg) from None  # the optimizer, its scheduler, the arguments
        raise AdvisorError(f"unknown workload {job.workload!r}: use {', '.join(BUILTIN_MODELS)}, or your "
                        "probed 'package.module:LightningModuleClass'") from None


def probed_workload(spec: WorkloadSpec, measurements: list) -> tuple[WorkloadSpec, list]:
    """The user's workload resolved against the stored results of its class (newest first), and the
    results it names: each result's recorded constructor defaults fill in the arguments the user did
    not give, so no module is imported; the first whose id then matches decides."""
    for r in measurements:
        if r.workload.model == spec.model and (s := spec.resolved_against(r.workload)).workload_id == r.workload_id:
            return s, [m for m in measurements if m.workload_id == s.workload_id]
    return spec, [m for m in measurements if m.workload_id == spec.workload_id]


def _probed_arguments(spec: WorkloadSpec, measurements: list) -> str:
    """What the stored results of the class were probed with, one entry per workload id."""
    seen: dict[str, str] = {}
    for r in measurements:
        w = r.workload
        if w.model == spec.model and r.workload_id not in seen:
            given, data = w.resolved_args()
            seen[r.workload_id] = (f"{r.workload_id}: {canonical_json(given)}"
                                   + (f" data {canonical_json(data)}" if data else "")
                                   + f", {w.image_size}px, {w.num_classes} classes")
    return "; ".join(list(seen.values())[:5])


def workload_facts(spec: WorkloadSpec, measurements: list, stored: list | None = None):
    """A builtin's measured table, or for a user's own module what its probes say. `stored`: every
    result of the class, for a message that lists what was probed when none matches."""
    facts = facts_for(spec.model)
    if facts is not None:
        return facts
    if not measurements:
        others = _probed_arguments(spec, stored or [])
        raise AdvisorError(f"no probe results for workload {spec.model!r} (id {spec.workload_id}) in the results "
                        + (f"store with these arguments; it was probed with: {others} (arguments as built, defaults "
                           "filled in): give those with --init-args / --config, or " if others else
                           "store: ")
                        + f"run 'advisor probe --workload {spec.model}' (same --datamodule, --init-args, --config, --image-size, "
                        "--num-classes) on at least one machine first")
    return facts_from_probes(spec.model, spec.image_size, measurements)


def build_plan(catalog: Catalog, job: JobSpec, measurements: list | None = None, top: int = DEFAULT_TOP,
               references: str = "builtin", prices: Prices | None = None, spec: WorkloadSpec | None = None) -> Plan:
    """`references`: builtin (the shipped dataset), none (your probes only) or a reference file;
    `prices`: the team's own (advisor.recommend.prices), else list prices; `spec`: the job's
    workload_spec where the caller has it already (advise: it picked the measurements by it)."""
    check_filters(catalog, job)
    if prices is not None:
        prices.check(catalog)
    spec, matched = probed_workload(spec or workload_spec(job), measurements or [])
    facts = workload_facts(spec, matched, measurements)
    measurements = matched
    job = resolve_work(job, spec.model, spec.workload_id, matched)  # --tokens -> samples; tokens per sample
    model = ThroughputModel(catalog, facts, spec.workload_id, job.image_size, measurements, references=references)
    model.max_instances = job.max_instances
    regions = job.regions or list(catalog.offers)
    wanted = job.type_filter()

    # Which types have a price in the chosen regions/markets at all.
    want_markets = catalog_markets(job.market)
    priced: set[str] = set()
    for r in regions:
        ro = catalog.offers.get(r)
        if ro is None:
            continue
        for name, m in zip(ro.instance_type, ro.market):
            if m in want_markets:
                priced.add(name)

    no_offer = missing_offers(catalog, job, regions, want_markets)
    throughputs: list[Throughput] = []
    exclusions: list[Exclusion] = []
    for name, it in catalog.instance_types.items():
        if not wanted(it):
            continue
        if not job.include_cpu and it.accelerator_kind == "none":
            continue
        if name not in priced:
            exclusions.append(Exclusion(name, f"no {job.market} price in {', '.join(regions)}"))
            continue
        res = model.evaluate(it, job.min_accelerator_memory_gib, job.require_dtype)
        (exclusions if isinstance(res, Exclusion) else throughputs).append(res)
    # A type's "GPU + CPU" variant is a candidate of its own, on the same offers (Throughput.variant says which).
    throughputs += [v for t in list(throughputs) if (v := cpu_variant(t)) is not None]

    K = job.max_instances
    types = _type_table(catalog, throughputs, facts.gradient_bytes(), K)
    offers, bucket = _offer_table(catalog, job, regions, _type_index(throughputs), prices)
    rjob = rk.Job.of(job)
    cands = rk.evaluate(types, offers, rjob)
    # Ask for more than `top`: equal offers in several regions (and, for cheapest, several
    # counts at the same cost) become one row each.
    merge_counts = job.objective == "cheapest"
    ordered = rk.rank(cands, job.objective, top * max(1, len(regions)) * (K if merge_counts else 1))
    ranked, also, counts = collapse(cands, offers, ordered, top, merge_counts)
    front_size = len(ordered) if job.objective == "pareto" else None
    closest = np.empty(0, dtype=np.int64)
    alternatives: list[Alternative] = []
    if len(ranked) == 0:
        n_close = min(top, 5)
        # A count that already meets the deadline stands for the larger counts at its cost: they
        # need the same budget and add nothing.
        _, deadline_needed = rk.shortfall(cands.cost_q, cands.hours_q, job.budget_usd, job.deadline_hours)
        closest, also, close_counts = collapse(
            cands, offers, rk.closest(cands, rjob, n_close * max(1, len(regions)) * K), n_close, True,
            deadline_needed <= job.deadline_hours)
        counts.update(close_counts)
        alternatives = other_options(catalog, job, rjob, throughputs, types, offers, regions, facts.gradient_bytes(),
                                     prices)
    # Types whose band no held-out case calibrates, the ranked ones first: a probe of one leads the plan.
    loose = [i for i, t in enumerate(throughputs) if t.basis.get("band", {}).get("calibrated") == UNCALIBRATED]
    order = list(dict.fromkeys(int(cands.type_idx[i]) for i in ranked))
    uncalibrated = [t for t in order if t in loose] + [t for t in loose if t not in order]
    probe, probe_offers = plan_probes(
        types=types, offers=offers, candidates=cands, job=rjob, objective=job.objective,
        pick=int(ranked[0]) if len(ranked) else None, instance_types=[catalog.instance_types[n] for n in types.names],
        precisions=[t.precision for t in throughputs], estimator=model, probe_budget_usd=job.probe_budget_usd,
        uncalibrated=uncalibrated, base=_bases(throughputs), past=PastProbes(measurements, catalog.instance_types))
    return Plan(job=job, workload_id=spec.workload_id, types=types, offers=offers, candidates=cands,
                ranked=ranked, closest=closest, probe=probe, probe_offers=probe_offers, throughputs=throughputs,
                exclusions=exclusions,
                regions=regions, bucket=bucket, warnings=no_offer + model.warnings, no_offer=no_offer,
                prices=prices.describe() if prices else None, alternatives=alternatives,
                pareto=ordered if job.objective == "pareto" else None, also_regions=also, front_size=front_size,
                also_counts=counts, catalog=catalog_record(catalog),
                **(_token_figures(catalog, throughputs, facts, job) if job.tokens_per_sample else {}))


def _token_figures(catalog: Catalog, throughputs: list[Throughput], facts, job: JobSpec) -> dict:
    """What MFU needs: per type its instance's peak (none for a GPU + CPU pair: the CPU adds FLOPs no
    GPU peak counts), and the FLOPs per sample where the probe counted them."""
    flops = facts.flops_per_sample(job.image_size)
    return {"peak_tflops": [None if t.variant else instance_peak_tflops(catalog.instance_types[t.instance_type],
                                                                         t.precision) for t in throughputs],
            "flops_per_sample": flops if math.isfinite(flops) and flops > 0 else None}


# When nothing fits, the other options tried (each alone, everything else as asked): a lower
# confidence, another market, more instances.
LOWER_CONFIDENCES = (0.8, 0.5, 0.0)
MORE_INSTANCES = 16


@dataclass(frozen=True)
class Alternative:
    """An option that would make the job fit, and the best candidate under it."""

    option: str = fact("the option, as typed (--market any)")
    instance_type: str = fact()
    variant: Variant | None = fact("as a recommend row's")  # as CandidateRow.variant
    count: int = fact()
    region: str = fact()
    market: rk.Market = fact()
    hours: float = fact()  # checked against the deadline under that option (hours_q)
    cost_usd: float = fact()  # checked against the budget (cost_q)
    confidence: float = fact()  # what those figures are at (0: the point estimate)


def other_options(catalog: Catalog, job: JobSpec, rjob: rk.Job, throughputs: list[Throughput], types: rk.TypeTable,
                  offers: rk.OfferTable, regions: list[str], grad_bytes: float, prices) -> list[Alternative]:
    """Nothing fits: for each option alone (the lowest-confidence step down that fits, the market
    any, more instances), the best candidate it would give, by the job's objective. The types are
    those already evaluated (a type with no price in the market asked for is not among them)."""
    out: list[Alternative] = []

    def first(option: str, t: rk.TypeTable, o: rk.OfferTable, j: rk.Job) -> bool:
        c = rk.evaluate(t, o, j)
        top = rk.rank(c, job.objective, 1)
        if not len(top):
            return False
        i = int(top[0])
        off = int(c.offer[i])
        out.append(Alternative(option=option, instance_type=t.names[int(c.type_idx[i])],
                               variant=throughputs[int(c.type_idx[i])].variant, count=int(c.k[i]),
                               region=regions[int(o.region_idx[off])], market=rk.MARKET_NAMES[int(o.market[off])],
                               hours=float(c.hours_q[i]), cost_usd=float(c.cost_q[i]), confidence=j.confidence))
        return True

    for p in (p for p in LOWER_CONFIDENCES if p < job.confidence):
        if first(f"--confidence {p:g}", types, offers, dataclasses.replace(rjob, confidence=p)):
            break
    if job.market != "any":
        wider = job.model_copy(update={"market": "any"})
        any_offers, _ = _offer_table(catalog, wider, regions, _type_index(throughputs), prices)
        first("--market any", types, any_offers, rjob)
    if job.max_instances < MORE_INSTANCES:
        first(f"--max-instances {MORE_INSTANCES}", _type_table(catalog, throughputs, grad_bytes, MORE_INSTANCES), offers,
              dataclasses.replace(rjob, max_instances=MORE_INSTANCES))
    return out


def collapse(c: rk.Candidates, offers: rk.OfferTable, idx: np.ndarray, top: int, merge_counts: bool = False,
             can_stand_for: np.ndarray | None = None):
    """Keep the first of candidates that differ only by region (same type, count, market, cost
    and time), and with merge_counts (objective cheapest) also those that differ only by count at
    about the same cost (SAME_COST): the fewer-instances one stands for them. Returns (kept indices,
    {kept: other regions}, {kept: [(count, hours)] of the merged counts})."""
    kept: list[int] = []
    also_regions: dict[int, list[int]] = {}
    also_counts: dict[int, list[tuple[int, float]]] = {}
    by_offer: dict[tuple, int] = {}
    by_cost: dict[tuple, int] = {}
    for i in idx:
        i = int(i)
        o = int(c.offer[i])
        t, k, m, region = int(c.type_idx[i]), int(c.k[i]), int(offers.market[o]), int(offers.region_idx[o])
        okey = (t, k, m, round(float(c.cost_q[i]), 4), round(float(c.rank_hours[i]), 6))
        if okey in by_offer:
            rep = by_offer[okey]
            if rep >= 0 and region not in also_regions.setdefault(rep, []):
                also_regions[rep].append(region)
            continue
        ckey = (t, m, region)
        rep = by_cost.get(ckey)
        if (merge_counts and rep is not None and abs(c.cost_q[i] - c.cost_q[rep]) <= SAME_COST * c.cost_q[rep]
                and (can_stand_for is None or can_stand_for[rep])):
            also_counts.setdefault(rep, []).append((k, float(c.hours[i])))
            by_offer[okey] = -1  # its twins in other regions are covered by the same note
            continue
        if len(kept) == top:
            continue
        by_offer[okey] = i
        by_cost.setdefault(ckey, i)
        kept.append(i)
    also_regions = {k: v for k, v in also_regions.items() if v}
    return np.array(kept, dtype=np.int64), also_regions, also_counts


def _type_table(catalog: Catalog, ths: list[Throughput], grad_bytes: float, K: int) -> rk.TypeTable:
    n = len(ths)
    # A "GPU + CPU" variant has no network figure: it has only run on one instance (k > 1 never ranked).
    net = np.array([math.nan if t.variant else sustained_network_gbps(catalog.instance_types[t.instance_type])[0] or math.nan
                    for t in ths], dtype=float)
    multi = np.full((n, K), np.nan)
    for i, t in enumerate(ths):
        for k, v in t.multi_node.items():
            if 1 <= k <= K:
                multi[i, k - 1] = v
    return rk.TypeTable(
        names=[t.instance_type for t in ths],
        samples_per_sec=np.array([t.samples_per_sec for t in ths], dtype=float),
        low=np.array([t.low for t in ths], dtype=float),
        high=np.array([t.high for t in ths], dtype=float),
        source=np.array([rk.SOURCE_NAMES.index(t.source) for t in ths], dtype=np.int64),
        step_s=np.array([t.step_seconds for t in ths], dtype=float),
        intra_s=np.array([t.intra_comm_seconds for t in ths], dtype=float),
        # Gbit/s -> bytes/s; unknown network: NaN, so k > 1 comes out NaN and is never ranked.
        inter_unit_s=2.0 * grad_bytes / (net * 1e9 / 8.0),
        multi_node=multi if np.isfinite(multi).any() else None,
    )


def _type_index(ths: list[Throughput]) -> dict[str, list[int]]:
    """Instance type -> its rows of the type table: the GPUs alone, then its variants."""
    out: dict[str, list[int]] = {}
    for i, t in enumerate(ths):
        out.setdefault(t.instance_type, []).append(i)
    return out


def _bases(ths: list[Throughput]) -> list[int]:
    """Per row of the type table, the row of its GPUs alone (itself where it is not a variant)."""
    alone = {t.instance_type: i for i, t in enumerate(ths) if t.variant is None}
    return [i if t.variant is None else alone[t.instance_type] for i, t in enumerate(ths)]


def _offer_table(catalog: Catalog, job: JobSpec, regions: list[str], type_index: dict[str, list[int]],
                 prices: Prices | None = None):
    cols: dict[str, list] = {k: [] for k in ("t", "r", "m", "p", "od", "b", "free")}
    # Each price once per row of its type: a type's variant is sold on the same offers.
    layers = max((len(v) for v in type_index.values()), default=1)
    for ri, region, layer in ((ri, r, la) for ri, r in enumerate(regions) for la in range(layers)):
        ro = catalog.offers.get(region)
        if ro is None:
            continue
        t_idx = np.array([type_index[n][layer] if len(type_index.get(n, ())) > layer else -1 for n in ro.instance_type],
                         dtype=np.int64)
        market = np.array([rk.SPOT if m == "spot" else rk.ON_DEMAND for m in ro.market], dtype=np.int64)
        price = np.array(ro.usd_per_hour, dtype=float)
        free = np.zeros(len(price), dtype=np.int64)
        if prices is not None:
            its = catalog.instance_types
            fams = [its[n].family if n in its else "" for n in ro.instance_type]
            price, free = prices.apply(fams, ro.instance_type, region, ro.market, price)
        bucket = np.array([spot.UNKNOWN_BUCKET if b is None else b for b in ro.interruption_bucket], dtype=np.int64)
        keep = t_idx >= 0
        od_of = {int(t): p for t, p, m in zip(t_idx, price, market) if m == rk.ON_DEMAND and t >= 0}
        sel = []
        if job.market in ("on-demand", "any"):
            sel.append((keep & (market == rk.ON_DEMAND), rk.ON_DEMAND))
        if job.market in ("spot", "any"):
            sel.append((keep & (market == rk.SPOT), rk.SPOT))
        if job.market == "any":
            has_od = np.array([int(t) in od_of for t in t_idx], dtype=bool)
            sel.append((keep & (market == rk.SPOT) & has_od, rk.FALLBACK))
        for mask, mk in sel:
            n = int(mask.sum())
            cols["t"].append(t_idx[mask])
            cols["r"].append(np.full(n, ri))
            cols["m"].append(np.full(n, mk))
            cols["p"].append(price[mask])
            cols["od"].append(np.array([od_of.get(int(t), np.nan) for t in t_idx[mask]], dtype=float) if mk == rk.FALLBACK
                              else np.full(n, np.nan))
            cols["b"].append(np.where(mk == rk.ON_DEMAND, spot.ON_DEMAND_BUCKET, bucket[mask]))
            cols["free"].append(free[mask] if mk == rk.ON_DEMAND else np.zeros(n, dtype=np.int64))
    cat = {k: (np.concatenate(v) if v else np.empty(0)) for k, v in cols.items()}
    b = cat["b"].astype(np.int64)
    rate_mid, rate_high = spot.bucket_rates(b)
    offers = rk.OfferTable(
        type_idx=cat["t"].astype(np.int64), region_idx=cat["r"].astype(np.int64),
        market=cat["m"].astype(np.int64), price=cat["p"].astype(float), od_price=cat["od"].astype(float),
        rate_mid=rate_mid, rate_high=rate_high,
        free=cat["free"].astype(np.int64) if prices is not None else None,
    )
    return offers, b
