"""The ranking core: every (instance type, count, region, market) candidate at once, in numpy.

Inputs are column arrays (per instance type, and per offer) and a plain `Job` (its one tie to the
pydantic JobSpec is `Job.of`); nothing here reads the catalog file or the CLI, so the benchmark
can feed it a synthetic 1.2M-candidate problem.

The models it applies live in their own homes: scale-out in advisor.estimate.scaling (all-reduce
time against step time, overlapped with backward), interruptions in advisor.recommend.spot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from lightning_module.contract.options import TARGET_CI

from ..estimate.band import slow_factor, split_normal_sds
from ..estimate.scaling import scale_out
from . import spot
from .jobspec import JobSpec

Market = Literal["on-demand", "spot", "spot+od-fallback"]
MARKET_NAMES: tuple[str, ...] = get_args(Market)
ON_DEMAND, SPOT, FALLBACK = 0, 1, 2
Source = Literal["measured", "reference", "estimated"]  # where a throughput figure comes from
SOURCE_NAMES: tuple[str, ...] = get_args(Source)


def samples_per_dollar(samples_per_sec, usd_per_hour):
    """The articles' formula."""
    return np.asarray(samples_per_sec, dtype=float) * 3600.0 / np.asarray(usd_per_hour, dtype=float)


@dataclass
class TypeTable:
    """Per instance type (index-aligned): one instance's throughput and what scale-out needs."""

    names: list[str]
    samples_per_sec: np.ndarray  # one instance, all its devices
    low: np.ndarray
    high: np.ndarray
    source: np.ndarray  # index into SOURCE_NAMES
    step_s: np.ndarray  # compute seconds per step (per device)
    intra_s: np.ndarray  # all-reduce seconds inside the instance (0 for one device)
    inter_unit_s: np.ndarray  # 2 x gradient bytes / network bytes/s; NaN: network unknown
    multi_node: np.ndarray | None = None  # (T, K) measured samples/s at k nodes, NaN where none

    @property
    def uncertainty(self) -> np.ndarray:
        with np.errstate(divide="ignore"):  # a CI with no lower end (a probe writes 0): unbounded
            return np.log(self.high / self.low)

    @property
    def sd_low(self) -> np.ndarray:
        """The log-sd of the truth below the figure (the band as a distribution: advisor.estimate.band)."""
        return split_normal_sds(self.samples_per_sec, self.low, self.high)[0]


@dataclass
class OfferTable:
    """Per offer (one price of one type in one region and market)."""

    type_idx: np.ndarray
    region_idx: np.ndarray
    market: np.ndarray  # ON_DEMAND | SPOT | FALLBACK
    price: np.ndarray  # $/h per instance (spot price for SPOT and FALLBACK)
    od_price: np.ndarray  # on-demand $/h for FALLBACK, NaN otherwise
    rate_mid: np.ndarray  # interruptions per instance-month (bucket midpoint); 0 for on-demand
    rate_high: np.ndarray  # the bucket's upper end
    free: np.ndarray | None = None  # instances already paid for (reserved on-demand capacity): they cost 0

    def billed(self, k_row: np.ndarray) -> np.ndarray:
        """(offers, counts): instances billed of each count k, those already paid for left out."""
        if self.free is None:
            return np.broadcast_to(k_row, (len(self.price), len(k_row)))
        return np.maximum(k_row[None, :] - self.free[:, None], 0.0)



@dataclass(frozen=True, kw_only=True)
class Job:
    """The job as the arrays see it: its limits and what the spot and setup arithmetic needs."""

    samples: float
    budget_usd: float
    deadline_hours: float
    loss_hours: float  # per interruption (spot.loss_hours)
    max_instances: int
    setup_hours: float = 0.0  # per run, on every instance: boot, install, data staging (billed, not training)
    # 0: rank on the point estimate; else P of the chance constraint (the user default: jobspec.DEFAULT_CONFIDENCE)
    confidence: float = 0.0

    @classmethod
    def of(cls, job: JobSpec) -> Job:
        return cls(samples=job.samples, budget_usd=job.budget_usd, deadline_hours=job.deadline_hours,
                   loss_hours=spot.loss_hours(job.checkpoint_minutes, job.restart_minutes),
                   max_instances=job.max_instances, setup_hours=job.setup_minutes / 60, confidence=job.confidence)


@dataclass
class Candidates:
    """Flattened (offer, k) arrays; index i = offer * K + (k - 1)."""

    offer: np.ndarray
    k: np.ndarray
    type_idx: np.ndarray
    samples_per_sec: np.ndarray
    low: np.ndarray
    high: np.ndarray
    efficiency: np.ndarray
    hours: np.ndarray  # expected interruptions, at the throughput figure
    hours_pess: np.ndarray  # at the figure and the bucket's upper rate (the deadline check at confidence 0)
    cost: np.ndarray  # expected, at the figure
    # What is checked against the deadline and the budget and ranked on: at confidence P, hours and
    # dollars not exceeded together with probability >= P; at confidence 0, hours_pess and cost.
    hours_q: np.ndarray
    cost_q: np.ndarray
    interruptions: np.ndarray  # expected count
    samples_per_dollar: np.ndarray
    feasible: np.ndarray
    uncertainty: np.ndarray
    billed: np.ndarray  # instances billed of k (those already paid for are free)
    confidence: float = 0.0

    def __len__(self) -> int:
        return len(self.k)

    @property
    def rank_hours(self) -> np.ndarray:
        """The hours `fastest` and the frontier rank on: expected at confidence 0, else the quantile."""
        return self.hours if self.confidence == 0 else self.hours_q

    def cost_band(self) -> tuple[np.ndarray, np.ndarray]:
        return self.cost * self.samples_per_sec / self.high, self.cost * self.samples_per_sec / self.low

    def hours_band(self) -> tuple[np.ndarray, np.ndarray]:
        return self.hours * self.samples_per_sec / self.high, self.hours * self.samples_per_sec / self.low


def shortfall(cost, hours_pess, budget_usd: float, deadline_hours: float) -> tuple[np.ndarray, np.ndarray]:
    """The (budget, deadline) each candidate needs: its checked cost and hours (cost_q, hours_q) where they
    exceed the limits, else the limits themselves; NaN where there is no figure (the feasibility
    rule, feasible_mask, is both equal to the limits)."""
    return np.maximum(cost, budget_usd), np.maximum(hours_pess, deadline_hours)


def feasible_mask(cost, hours_pess, budget_usd: float, deadline_hours: float) -> np.ndarray:
    """The feasibility rule: within the budget (cost) and the deadline (pessimistic hours); False
    for NaN/inf. The same as the shortfall being the limits themselves (max(x, limit) <= limit is
    x <= limit, NaN failing both), without building it."""
    return (cost <= budget_usd) & (hours_pess <= deadline_hours)


def evaluate(types: TypeTable, offers: OfferTable, job: Job) -> Candidates:
    K = job.max_instances
    thr_tk, rel_tk = scale_out(types.samples_per_sec, types.step_s, types.intra_s, types.inter_unit_s, types.multi_node, K)
    ti = offers.type_idx
    n_off = len(ti)
    thr = thr_tk[ti].ravel()  # (O*K,), offer-major
    rel = rel_tk[ti].ravel()
    type_idx = np.repeat(ti, K)
    k_row = np.arange(1, K + 1, dtype=float)
    k = np.tile(k_row, n_off)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t0 = job.samples / 3600.0 / thr
        hours = t0.copy()
        hours_pess = t0.copy()
        billed = offers.billed(k_row).ravel()  # of k instances, those not already paid for
        cost = (offers.price[:, None] * offers.billed(k_row)).ravel()  # $/h for k instances
        interruptions = np.zeros_like(t0)
        # Spot arithmetic only where there is spot: an on-demand search pays nothing for it.
        spot_off = np.flatnonzero(offers.market == SPOT)
        if len(spot_off):
            i = (spot_off[:, None] * K + np.arange(K)).ravel()
            hours[i], hours_pess[i], interruptions[i] = spot.pure_spot(
                t0[i], spot.job_rate(np.repeat(offers.rate_mid[spot_off], K), k[i]),
                spot.job_rate(np.repeat(offers.rate_high[spot_off], K), k[i]), job.loss_hours)
        fb_off = np.flatnonzero(offers.market == FALLBACK)
        if len(fb_off):
            fb_i = (fb_off[:, None] * K + np.arange(K)).ravel()
            hours[fb_i], hours_pess[fb_i], interruptions[fb_i], fb_cost = spot.with_fallback(
                t0[fb_i], spot.job_rate(np.repeat(offers.rate_mid[fb_off], K), k[fb_i]), job.loss_hours, k[fb_i],
                np.repeat(offers.price[fb_off], K), np.repeat(offers.od_price[fb_off], K))
        cost *= hours
        if len(fb_off):
            cost[fb_i] = fb_cost
        if job.setup_hours:
            hours += job.setup_hours
            hours_pess += job.setup_hours
            # Setup is billed at the price the run starts on (spot for the fallback).
            cost += job.setup_hours * billed * np.repeat(offers.price, K)
        spd = job.samples / cost
        if job.confidence:
            hours_q, cost_q = at_confidence(t0, types.sd_low, type_idx, k, billed, offers, job)
        else:
            hours_q, cost_q = hours_pess, cost
    feasible = feasible_mask(cost_q, hours_q, job.budget_usd, job.deadline_hours)
    r_low, r_high = types.low / types.samples_per_sec, types.high / types.samples_per_sec
    return Candidates(
        offer=np.repeat(np.arange(n_off), K), k=k.astype(np.int64), type_idx=type_idx,
        samples_per_sec=thr, low=thr * r_low[type_idx], high=thr * r_high[type_idx], efficiency=rel,
        hours=hours, hours_pess=hours_pess, cost=cost, hours_q=hours_q, cost_q=cost_q, interruptions=interruptions,
        billed=billed,
        samples_per_dollar=spd, feasible=feasible, uncertainty=types.uncertainty[type_idx], confidence=job.confidence,
    )


def at_confidence(t0: np.ndarray, sd_low: np.ndarray, type_idx: np.ndarray, k: np.ndarray, billed: np.ndarray,
                  offers: OfferTable, job: Job, cand: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(hours, dollars) each candidate stays within together with probability >= job.confidence,
    over its throughput band (advisor.estimate.band) and its interruptions (advisor.recommend.spot),
    setup included. t0: hours at the figure with no interruption; sd_low: the band's, per type;
    billed: of k instances, those paid for by the hour. Per candidate (offer-major, as evaluate lays
    them out), or only for the candidates `cand`, in its order."""
    K = job.max_instances
    miss = 1.0 - job.confidence
    n = len(t0) if cand is None else len(cand)
    hours_q = np.empty(n)
    cost_q = np.empty(n)
    at = None if cand is None else np.asarray(cand)

    def of_market(m):  # (positions in the output, candidate indices, their offers)
        if at is None:
            off = np.flatnonzero(offers.market == m)
            i = (off[:, None] * K + np.arange(K)).ravel()
            return i, i, np.repeat(off, K)
        pos = np.flatnonzero(offers.market[at // K] == m)
        return pos, at[pos], at[pos] // K

    def t0_at(i):
        # The band's factor per type (a few thousand exps), then gathered per candidate.
        return lambda level: t0[i] * slow_factor(sd_low, level)[type_idx[i]]

    def best_split(pos, i, options):
        # The split leaving the most room under both limits (fits if any split fits); NaN never wins.
        best_room = np.full(len(i), np.inf)
        h_best, c_best = np.full(len(i), np.nan), np.full(len(i), np.nan)
        for h, c in options:
            room = np.maximum(c / job.budget_usd, h / job.deadline_hours)
            better = room < best_room
            best_room = np.where(better, room, best_room)
            h_best, c_best = np.where(better, h, h_best), np.where(better, c, c_best)
        # Where no split has a finite room (never finishes: inf; no figure: NaN), the first split's.
        h0, c0 = options[0]
        none = ~np.isfinite(best_room)
        hours_q[pos], cost_q[pos] = np.where(none, h0, h_best), np.where(none, c0, c_best)

    pos, i, o = of_market(ON_DEMAND)
    hours_q[pos] = t0_at(i)(1.0 - miss) + job.setup_hours
    cost_q[pos] = hours_q[pos] * offers.price[o] * billed[i]
    pos, i, o = of_market(SPOT)
    if len(i):
        usd_h = offers.price[o] * billed[i]
        hs = spot.pure_spot_quantile(t0_at(i), spot.job_rate(offers.rate_high[o], k[i]), job.loss_hours, miss)
        best_split(pos, i, [(h + job.setup_hours, (h + job.setup_hours) * usd_h) for h in hs])
    pos, i, o = of_market(FALLBACK)
    if len(i):
        opts = spot.fallback_quantile(t0_at(i), spot.job_rate(offers.rate_high[o], k[i]), job.loss_hours, k[i],
                                      offers.price[o], offers.od_price[o], miss)
        setup_usd = job.setup_hours * k[i] * offers.price[o]
        best_split(pos, i, [(h + job.setup_hours, c + setup_usd) for h, c in opts])
    return hours_q, cost_q


def _order(primary: np.ndarray, c: Candidates, idx: np.ndarray, secondary: np.ndarray | None = None) -> np.ndarray:
    # Rounded so float noise (k x price x samples / (k x thr)) does not beat the tie rules:
    # lower uncertainty first, then fewer instances, then the other objective (of two equally
    # cheap options the faster one, of two equally fast the cheaper one).
    key = np.round(primary[idx], 6)
    third = secondary[idx] if secondary is not None else np.zeros(len(idx))
    return idx[np.lexsort((third, c.k[idx], np.round(c.uncertainty[idx], 9), key))]


def _top(primary: np.ndarray, c: Candidates, idx: np.ndarray, top: int,
         secondary: np.ndarray | None = None) -> np.ndarray:
    if len(idx) > top:
        # Keep everything that ties with the top-th value, then order that short list exactly.
        kth = np.partition(np.round(primary[idx], 6), top - 1)[top - 1]
        idx = idx[np.round(primary[idx], 6) <= kth]
    return _order(primary, c, idx, secondary)[:top]


# Times this close are a tie for `fastest`: the resolution a probe measures throughput to (its CI
# target); an estimate is coarser still. 905.6 s against 906.0 s says nothing about which is faster.
TIME_RESOLUTION = TARGET_CI


def _fastest(c: Candidates, idx: np.ndarray, top: int) -> np.ndarray:
    """Least time, where times within TIME_RESOLUTION of the fastest of their group are a tie that
    goes to the cheaper (then the narrower band, then fewer instances). Times and costs are the
    figures the ranking reads (rank_hours, cost_q: at the confidence)."""
    hours_of, cost_of = c.rank_hours, c.cost_q
    if len(idx) > top:  # the top-th time and whatever ties with it
        kth = np.partition(hours_of[idx], top - 1)[top - 1]
        idx = idx[hours_of[idx] <= kth * (1 + TIME_RESOLUTION)]
    if len(idx) == 0:
        return idx
    idx = idx[np.argsort(hours_of[idx], kind="stable")]
    hours = hours_of[idx]
    group = np.zeros(len(idx), dtype=np.int64)
    lead = hours[0]
    for i in range(1, len(idx)):  # a group starts where a time is past its leader's resolution
        new = hours[i] > lead * (1 + TIME_RESOLUTION)
        group[i] = group[i - 1] + new
        lead = hours[i] if new else lead
    return idx[np.lexsort((c.k[idx], np.round(c.uncertainty[idx], 9), np.round(cost_of[idx], 6), group))][:top]


def pareto_front(cost: np.ndarray, hours: np.ndarray, idx: np.ndarray,
                 c: Candidates | None = None) -> np.ndarray:
    """Indices (from idx) not dominated on (cost, hours), cheapest first.

    One argsort on cost (a two-key lexsort over ~1M feasible candidates was 3x slower); equal
    costs are grouped, each group's fastest member competes with everything cheaper."""
    if len(idx) == 0:
        return idx
    rc, rh = np.round(cost[idx], 6), np.round(hours[idx], 9)
    # Two O(n) cuts before the sort: anything dearer than the fastest option, or slower than
    # the cheapest, is dominated by it (on 1.2M candidates this leaves a few thousand).
    fastest = rh == rh.min()
    cheapest = rc == rc.min()
    keep = (rc <= rc[fastest].min()) & (rh <= rh[cheapest].min())
    idx, rc, rh = idx[keep], rc[keep], rh[keep]
    order = np.argsort(rc, kind="stable")
    cs, hs = rc[order], rh[order]
    starts = np.flatnonzero(np.concatenate(([True], cs[1:] != cs[:-1])))
    group_min = np.minimum.reduceat(hs, starts)
    best_before = np.concatenate(([np.inf], np.minimum.accumulate(group_min)[:-1]))
    winners = np.flatnonzero(group_min < best_before)
    group_of = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(cs))))
    is_winner = np.zeros(len(starts), dtype=bool)
    is_winner[winners] = True
    hit = np.flatnonzero((hs == group_min[group_of]) & is_winner[group_of])
    if c is not None:
        # Exact (cost, time) duplicates: the tie rules pick the representative.
        cand = idx[order[hit]]
        hit = hit[np.lexsort((c.k[cand], np.round(c.uncertainty[cand], 9), group_of[hit]))]
    g = group_of[hit]  # ascending: the first of each group is its representative
    keep = np.concatenate(([True], g[1:] != g[:-1])) if len(g) else np.zeros(0, dtype=bool)
    return idx[order[hit[keep]]]


def rank(c: Candidates, objective: str, top: int) -> np.ndarray:
    """Feasible candidates in order (at most `top`; pareto returns the whole frontier)."""
    idx = np.flatnonzero(c.feasible)
    if objective == "cheapest":
        return _top(c.cost_q, c, idx, top, c.rank_hours)
    if objective == "fastest":
        return _fastest(c, idx, top)
    if objective == "pareto":
        return pareto_front(c.cost_q, c.rank_hours, idx, c)
    raise ValueError(f"unknown objective {objective!r}")


def closest(c: Candidates, job: Job, top: int) -> np.ndarray:
    """When nothing fits: the candidates needing the smallest relative stretch of budget or deadline."""
    budget_needed, deadline_needed = shortfall(c.cost_q, c.hours_q, job.budget_usd, job.deadline_hours)
    stretch = np.maximum(budget_needed / job.budget_usd, deadline_needed / job.deadline_hours)
    return _top(stretch, c, np.flatnonzero(np.isfinite(stretch)), top)

