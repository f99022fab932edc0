"""The ranking core: every (instance type, count, region, market) candidate at once, in numpy.

Inputs are column arrays (per instance type, and per offer); nothing here knows about pydantic,
the catalog file or the CLI, so the benchmark can feed it a synthetic 1.2M-candidate problem.

The models it applies live in their own homes: scale-out in advisor.estimate.scaling (all-reduce
time against step time, overlapped with backward), interruptions in advisor.recommend.spot.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lightning_module.contract.options import TARGET_CI

from ..estimate.scaling import scale_out
from . import spot
from .jobspec import JobSpec

MARKET_NAMES = ("on-demand", "spot", "spot+od-fallback")
ON_DEMAND, SPOT, FALLBACK = 0, 1, 2
SOURCE_NAMES = ("measured", "reference", "estimated")


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


@dataclass(frozen=True, kw_only=True)
class Job:
    """The job as the arrays see it: its limits and what the spot and setup arithmetic needs."""

    samples: float
    budget_usd: float
    deadline_hours: float
    loss_hours: float  # per interruption (spot.loss_hours)
    max_instances: int
    setup_hours: float = 0.0  # per run, on every instance: boot, install, data staging (billed, not training)

    @classmethod
    def of(cls, job: JobSpec) -> Job:
        return cls(samples=job.samples, budget_usd=job.budget_usd, deadline_hours=job.deadline_hours,
                   loss_hours=spot.loss_hours(job.checkpoint_minutes, job.restart_minutes),
                   max_instances=job.max_instances, setup_hours=job.setup_minutes / 60)


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
    hours: np.ndarray  # expected
    hours_pess: np.ndarray  # for the deadline check
    cost: np.ndarray
    interruptions: np.ndarray  # expected count
    samples_per_dollar: np.ndarray
    feasible: np.ndarray
    uncertainty: np.ndarray

    def __len__(self) -> int:
        return len(self.k)

    def cost_band(self) -> tuple[np.ndarray, np.ndarray]:
        return self.cost * self.samples_per_sec / self.high, self.cost * self.samples_per_sec / self.low

    def hours_band(self) -> tuple[np.ndarray, np.ndarray]:
        return self.hours * self.samples_per_sec / self.high, self.hours * self.samples_per_sec / self.low


def shortfall(cost, hours_pess, budget_usd: float, deadline_hours: float) -> tuple[np.ndarray, np.ndarray]:
    """The (budget, deadline) each candidate needs: its cost and pessimistic hours where they
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
        cost = (offers.price[:, None] * k_row).ravel()  # $/h for k instances
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
            cost += job.setup_hours * k * np.repeat(offers.price, K)
        spd = job.samples / cost
    feasible = feasible_mask(cost, hours_pess, job.budget_usd, job.deadline_hours)
    r_low, r_high = types.low / types.samples_per_sec, types.high / types.samples_per_sec
    return Candidates(
        offer=np.repeat(np.arange(n_off), K), k=k.astype(np.int64), type_idx=type_idx,
        samples_per_sec=thr, low=thr * r_low[type_idx], high=thr * r_high[type_idx], efficiency=rel,
        hours=hours, hours_pess=hours_pess, cost=cost, interruptions=interruptions,
        samples_per_dollar=spd, feasible=feasible, uncertainty=types.uncertainty[type_idx],
    )


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
    goes to the cheaper (then the narrower band, then fewer instances)."""
    if len(idx) > top:  # the top-th time and whatever ties with it
        kth = np.partition(c.hours[idx], top - 1)[top - 1]
        idx = idx[c.hours[idx] <= kth * (1 + TIME_RESOLUTION)]
    if len(idx) == 0:
        return idx
    idx = idx[np.argsort(c.hours[idx], kind="stable")]
    hours = c.hours[idx]
    group = np.zeros(len(idx), dtype=np.int64)
    lead = hours[0]
    for i in range(1, len(idx)):  # a group starts where a time is past its leader's resolution
        new = hours[i] > lead * (1 + TIME_RESOLUTION)
        group[i] = group[i - 1] + new
        lead = hours[i] if new else lead
    return idx[np.lexsort((c.k[idx], np.round(c.uncertainty[idx], 9), np.round(c.cost[idx], 6), group))][:top]


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
        return _top(c.cost, c, idx, top, c.hours)
    if objective == "fastest":
        return _fastest(c, idx, top)
    if objective == "pareto":
        return pareto_front(c.cost, c.hours, idx, c)
    raise ValueError(f"unknown objective {objective!r}")


def closest(c: Candidates, job: Job, top: int) -> np.ndarray:
    """When nothing fits: the candidates needing the smallest relative stretch of budget or deadline."""
    budget_needed, deadline_needed = shortfall(c.cost, c.hours_pess, job.budget_usd, job.deadline_hours)
    stretch = np.maximum(budget_needed / job.budget_usd, deadline_needed / job.deadline_hours)
    return _top(stretch, c, np.flatnonzero(np.isfinite(stretch)), top)

