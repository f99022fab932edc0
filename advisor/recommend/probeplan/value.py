"""The value of measuring: which probes are expected to change the pick by more than they cost.

Pure numpy over arrays (per candidate: its cost and time split into what scales with 1/throughput
and what does not; per instance type: its band, its sibling group, one probe's cost and duration),
so tests and the decision benchmark feed it hand-made or simulated inputs.

The model, in one place:
- Belief. The truth of type t is its estimate x f_t, log f_t split-normal: the band's ends are its
  `coverage` central interval (below the estimate sd_low, above it sd_high). The draws hang
  together through two shared factors: one common to every type (the software stack, the
  workload's level) and one per device (all sizes of one accelerator); the rest is the type's own.
  The adapter (inputs.py) sets each type's shares from what the estimator says a probe leaves
  unknown about a sibling and about another device.
- Probing t reveals f_t x probe noise (`noise_sd`, the probe's CI). Recommend then re-anchors every
  estimate the way the estimator does: an estimated u moves by the weighted mean of the probes' log
  ratios, weight[p, u] per probe p, the measurements already made keeping their weight at ratio 1;
  a measured type and a published figure on that very type stay where they are.
- Decision. After a set S of probes, recommend picks the best candidate by its estimates: the
  cheapest (fastest for objective fastest) that fits recommend's own feasibility rule, the
  deadline less the probes' time (they run in parallel, `probe_hours` each), on its figures at the
  job's confidence (Economics.decide): with a probed type's band narrowed to the probe's, and its
  device's other sizes' to the estimator's band after a probe.
- Loss. In truth the pick costs what it costs; a pick that misses the deadline or overruns the
  budget in truth costs its run plus a re-run on the true best (found too late, started over), and
  no pick counts the same. Objective fastest counts hours, priced at the pick's dollars per hour.
- value(S) = E[loss(pick now)] - E[loss(pick after S)], over `draws` worlds drawn with a fixed
  seed (the same inputs give the same plan), common to every S compared.
The plan is greedy: it adds the probe that gains the most value beyond its own cost, while that
gain is positive, the probe budget allows and `max_probes` is not reached. A second size of a
device adds only what the first left unknown, so a device is probed once unless its size itself
is in question.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import get_args

import numpy as np

from ...estimate.band import band_z, split_normal_sds
from ...records import JsonForm, fact, finite_or_null
from .. import rank as rk
from ..jobspec import Objective
from .picks import Picks

OBJECTIVES = get_args(Objective)  # pareto is planned as cheapest: the frontier's cheap end
# Band states of a type in Economics.decide: as it stands, measured by a probe, re-anchored by a
# probe of its device in another size (its sibling group).
AS_IS, MEASURED, SIBLING = 0, 1, 2
RECHECK = 0.10  # "within 10%": the share of worlds where the pick is within this of the true best


@dataclass
class Economics:
    """Per candidate (index-aligned): cost and hours = fix + var / f, f = truth / estimate.

    The truth's parts (cost, hours, the deadline's hours) score a pick; recommend decides on its
    figures at the job's confidence (advisor.recommend.rank: cost_q, hours_q, rank_hours), whose
    var parts are `decide`, each (states, n), one row per band state (AS_IS, MEASURED, SIBLING).
    None: recommend decides on the truth's parts in every state (confidence 0)."""

    type_idx: np.ndarray
    cost_fix: np.ndarray
    cost_var: np.ndarray
    hours_fix: np.ndarray
    hours_var: np.ndarray
    pess_fix: np.ndarray  # the hours the deadline is checked against in truth
    pess_var: np.ndarray
    budget_usd: float
    deadline_hours: float
    objective: str = "cheapest"
    decide: dict[str, np.ndarray] | None = None  # cost, pess, hours: (states, n) var parts recommend decides on
    # The states after probes, given candidate indices (states - 1, len(idx)) each: computed by subset()
    # for the candidates the plan keeps, not for every candidate. None: decide has every state.
    decide_more: Callable[[np.ndarray], dict[str, np.ndarray]] | None = None

    def __post_init__(self):
        if self.decide is None:
            both = lambda a: a[None, :]
            self.decide = {"cost": both(self.cost_var), "pess": both(self.pess_var), "hours": both(self.hours_var)}

    def __len__(self) -> int:
        return len(self.type_idx)

    def subset(self, idx: np.ndarray) -> Economics:
        pick = lambda a: a[idx]
        decide = {k: v[:, idx] for k, v in self.decide.items()}
        if self.decide_more is not None:
            more = self.decide_more(np.asarray(idx))
            decide = {k: np.concatenate([v, more[k]]) for k, v in decide.items()}
        return Economics(pick(self.type_idx), pick(self.cost_fix), pick(self.cost_var), pick(self.hours_fix),
                         pick(self.hours_var), pick(self.pess_fix), pick(self.pess_var), self.budget_usd,
                         self.deadline_hours, self.objective, decide)

    def fits(self, cost, pess, wait_h: float = 0.0) -> np.ndarray:
        """recommend's feasibility rule (advisor.recommend.rank.feasible_mask), the deadline less `wait_h`."""
        return rk.feasible_mask(cost, pess, self.budget_usd, self.deadline_hours - wait_h)

    def at(self, idx, f) -> tuple[np.ndarray, np.ndarray]:
        """(cost, pessimistic hours) of candidates idx at throughput factors f, in truth."""
        return self.cost_fix[idx] + self.cost_var[idx] / f, self.pess_fix[idx] + self.pess_var[idx] / f

    def decided_at(self, idx, f, row: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(cost, deadline hours, objective) recommend decides on, of candidates idx at factors f."""
        d = self.decide
        obj_fix = self.hours_fix if self.objective == "fastest" else self.cost_fix
        obj_var = d["hours"] if self.objective == "fastest" else d["cost"]
        return (self.cost_fix[idx] + d["cost"][row, idx] / f, self.pess_fix[idx] + d["pess"][row, idx] / f,
                obj_fix[idx] + obj_var[row, idx] / f)

    def decision_obj_var(self) -> np.ndarray:
        """(states, n): the var part of the objective recommend ranks on."""
        return self.decide["hours"] if self.objective == "fastest" else self.decide["cost"]

    def objective_fix_var(self) -> tuple[np.ndarray, np.ndarray]:
        """The objective's parts in truth."""
        if self.objective == "fastest":
            return self.hours_fix, self.hours_var
        return self.cost_fix, self.cost_var


@dataclass
class Beliefs:
    """Per instance type (index-aligned with the type table)."""

    sd_low: np.ndarray  # log-sd of truth/estimate below the estimate
    sd_high: np.ndarray  # and above it
    common_share: np.ndarray  # share of the variance every type shares
    device: np.ndarray  # device id: types of one device share a factor
    device_share: np.ndarray  # share of the variance the device's types share
    weight: np.ndarray  # (T, T) weight[p, u]: a probe of p's say in u's re-anchored estimate
    measured: np.ndarray  # bool: measured already (its weight stays, at ratio 1)
    moves: np.ndarray  # bool: re-anchored by probes (an estimate; not a measurement or a published figure)
    group: np.ndarray  # sibling group (one device in one family's sizes): what a probe "covers"
    probe_usd: np.ndarray  # what one probe costs; inf where the type cannot (or need not) be probed
    probe_hours: np.ndarray  # how long it runs
    noise_sd: float  # log-sd of one probe's result
    # The type each row of the type table is (a "GPU + CPU" variant: its GPUs-alone row); None: itself
    base: np.ndarray | None = None

    @staticmethod
    def siblings(samples_per_sec, low, high, coverage: float, group, sibling_share: float = 0.95, **kw) -> Beliefs:
        """Devices independent of each other; a device's sizes (one group) share `sibling_share`
        of their variance and are re-anchored only by their own device's probes."""
        sd_low, sd_high = split_normal_sds(samples_per_sec, low, high, coverage)
        g = np.asarray(group)
        n = len(g)
        return Beliefs(sd_low=sd_low, sd_high=sd_high, common_share=np.zeros(n), device=g,
                       device_share=np.full(n, sibling_share), weight=(g[:, None] == g[None, :]).astype(float),
                       measured=np.zeros(n, dtype=bool), moves=np.ones(n, dtype=bool), group=g, **kw)


@dataclass
class Outlook:
    """How good the pick is, over the worlds: regret = true objective / true best - 1. A record of
    `--format json`'s probe_plan (now and after), where a figure that is not finite is null."""

    # share of worlds with the pick feasible and within RECHECK of the best
    p_within: float = fact("null: nothing fits in any outcome", json=JsonForm(float | None, finite_or_null))
    # inf when the pick misses in over 10% of worlds
    p90_regret: float = fact("null: unbounded (the pick misses in more than 10% of outcomes)",
                             json=JsonForm(float | None, finite_or_null))
    # share of worlds where the pick misses the deadline or the budget in truth
    p_miss: float = fact("over the outcomes where something fits; null: there are none",
                         json=JsonForm(float | None, finite_or_null))
    # The three above are over the worlds where something fits in truth; these two over all worlds.
    p_any: float = fact("something fits, over all outcomes", default=1.0)  # share of worlds where something fits
    p_fit: float = fact("the pick fits, over all outcomes", default=1.0)  # share of worlds where the pick fits


@dataclass
class PlannedProbe:
    type_idx: int
    usd: float
    hours: float
    gain_usd: float  # expected loss it removes, beyond the probes before it
    p_change: float  # share of worlds where it changes the pick (after the probes before it)
    saving_if_changed: float  # mean loss removed in those worlds, dollars
    covers: list[int]  # siblings whose estimates it re-anchors
    reason: str


@dataclass
class ProbeChoice:
    """The probes chosen (by type index) and what they are expected to change: the report's
    probe rows and its probe plan (advisor/recommend/rows.py ProbeRow, ProbePlan) name them."""

    probes: list[PlannedProbe]
    now: Outlook | None
    after: Outlook | None
    usd: float = 0.0
    hours: float = 0.0  # wall time: the probes run in parallel
    why_empty: str | None = None
    limited_by_budget: list[int] = field(default_factory=list)  # what the plan would add without the budget, in order


class _Worlds:
    """The drawn truths and everything that does not depend on which probes are taken."""

    def __init__(self, econ: Economics, bel: Beliefs, draws: int, seed: int):
        rng = np.random.default_rng(seed)
        n_types = len(bel.group)
        _, dev = np.unique(bel.device, return_inverse=True)
        common = rng.standard_normal((draws, 1))
        shared = rng.standard_normal((draws, int(dev.max()) + 1 if n_types else 0))[:, dev]
        own_share = np.clip(1.0 - bel.common_share - bel.device_share, 0.0, 1.0)
        z = (np.sqrt(bel.common_share) * common + np.sqrt(bel.device_share) * shared
             + np.sqrt(own_share) * rng.standard_normal((draws, n_types)))
        self.f = np.exp(z * np.where(z > 0, bel.sd_high, bel.sd_low))
        self.f_obs = self.f * np.exp(bel.noise_sd * rng.standard_normal((draws, n_types)))
        self.log_obs = np.log(self.f_obs)
        self.held = bel.weight[bel.measured].sum(axis=0)  # the measurements' weight on each type
        _, self.group = np.unique(bel.group, return_inverse=True)
        self.econ, self.bel = econ, bel
        t = econ.type_idx
        ft = self.f[:, t]
        self.obj_fix, self.obj_var = econ.objective_fix_var()
        obj = self.obj_fix + self.obj_var / ft
        ok = econ.fits(*econ.at(slice(None), ft))
        self.best = np.where(ok, obj, np.inf).min(axis=1) if len(t) else np.full(draws, np.inf)
        self.live = np.isfinite(self.best)  # worlds with something feasible in truth
        # What recommend ranks on by the estimates as they stand (f = 1).
        self.est_obj = econ.decided_at(slice(None), 1.0)[2]
        self.picks = Picks(econ, bel, self.f_obs, self.log_obs, self.held)

    def truth(self, pick: np.ndarray, wait_h) -> tuple[np.ndarray, np.ndarray]:
        """(true objective, feasible in truth) of one pick per world (-1: none); picks (n, draws)
        with waits (n, 1) are n such questions at once."""
        e = self.econ
        m = np.arange(pick.shape[-1])
        p = np.maximum(pick, 0)
        ft = self.f[m, e.type_idx[p]]
        obj = self.obj_fix[p] + self.obj_var[p] / ft
        ok = (pick >= 0) & e.fits(*e.at(p, ft), wait_h)
        return np.where(pick >= 0, obj, np.inf), ok

    def loss(self, pick: np.ndarray, wait_h) -> np.ndarray:
        obj, ok = self.truth(pick, wait_h)
        # A miss: the run, found too slow or too dear, then a re-run on the true best.
        out = np.where(ok, obj, np.where(pick >= 0, obj, self.best) + self.best)
        return np.where(self.live, out, 0.0)

    def outlook(self, pick: np.ndarray, wait_h: float) -> Outlook:
        obj, ok = self.truth(pick, wait_h)
        live = self.live
        if not live.any():
            return Outlook(p_within=math.nan, p90_regret=math.nan, p_miss=math.nan, p_any=0.0, p_fit=0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            # A true best of $0 (capacity already paid for, --prices): only another $0 pick is within.
            rel = np.where(self.best > 0, obj / self.best - 1.0, np.where(obj > 0, np.inf, 0.0))
            regret = np.where(ok, rel, np.inf)[live]
        return Outlook(p90_regret=float(np.sort(regret)[math.ceil(0.9 * len(regret)) - 1]),
                       p_within=float(np.mean(regret <= RECHECK + 1e-12)),
                       p_miss=float(np.mean(~ok[live])), p_any=float(np.mean(live)), p_fit=float(np.mean(ok & live)))

    def pick_after(self, probed: list[int], wait_h: float) -> np.ndarray:
        """What recommend picks in each world once `probed` are measured: the estimates re-anchored
        on what the probes saw (an estimated u moves by the weighted mean of the probes' log
        ratios, the measurements keeping their weight at ratio 1; a probed type takes its own
        observation), then the best candidate that fits by them. Many probe sets at once:
        picks.Picks."""
        if probed:
            return self.picks.after(probed[:-1], probed[-1:], np.array([wait_h]))[0]
        e = self.econ
        cost, pess, _ = e.decided_at(slice(None), 1.0)
        ok = e.fits(cost, pess, wait_h)
        order = np.argsort(self.est_obj, kind="stable")
        hit = order[ok[order]]
        return np.full(self.f.shape[0], int(hit[0]) if len(hit) else -1)


def _distinct(a: np.ndarray) -> np.ndarray:
    """np.unique(a) (sorted distinct values). Asked for the indices too because plain np.unique
    imports numpy.ma to check for masked input (numpy 2.x): ~18 ms of recommend's start-up."""
    return np.unique(a, return_index=True)[0]


def relevant(econ: Economics, bel: Beliefs, pick: int | None, spread: float = 3.0, wait_h: float = 0.0) -> np.ndarray:
    """Candidates that could be the pick or the true best in some world (throughputs within
    `spread` sds of the estimates): optimistically feasible, and optimistically no worse than the
    best candidate that fits even at the slow end of its band (after `wait_h` of probing), which
    bounds the true best and beats them by any estimate. The rest cannot change a decision;
    leaving them out keeps the worlds small."""
    t = econ.type_idx
    up, down = np.exp(spread * bel.sd_high)[t], np.exp(-spread * bel.sd_low)[t]  # per type, then per candidate
    fix, var = econ.objective_fix_var()
    with np.errstate(invalid="ignore"):
        ok = econ.fits(*econ.at(slice(None), up))
        # Fits by recommend's figures (its band as it stands: the wider) even at the slow end: the
        # pick, whatever the world, ranks no worse than it there.
        states = range(len(econ.decide["cost"]))
        cost, pess, obj = (np.max(a, axis=0) for a in zip(*(econ.decided_at(slice(None), down, s) for s in states)))
        safe = econ.fits(cost, pess, wait_h)
    bound = max(obj[safe].min(), (fix + var / down)[safe].min()) if safe.any() else np.inf
    keep = ok & (fix + var / up <= bound)
    if pick is not None:
        keep[pick] = True
    idx = np.flatnonzero(keep)
    return idx[~_dominated(econ, idx, pick)]


def _dominated(econ: Economics, idx: np.ndarray, pick: int | None) -> np.ndarray:
    """Among idx, candidates another candidate of the same type beats or equals in every part
    of objective, cost and deadline hours (the same offer dearer in another region, say): they
    can never be the pick nor the only best."""
    fix, var = econ.objective_fix_var()
    parts = np.column_stack([fix[idx], var[idx], econ.cost_fix[idx], econ.cost_var[idx], econ.pess_fix[idx],
                             econ.pess_var[idx]] + [d[:, idx].T for d in econ.decide.values()])
    out = np.zeros(len(idx), dtype=bool)
    t = econ.type_idx[idx]
    for ty in _distinct(t):
        j = np.flatnonzero(t == ty)
        if len(j) < 2:
            continue
        a = parts[j]
        le = (a[None, :, :] <= a[:, None, :]).all(axis=2)  # le[x, y]: y is no worse than x everywhere
        lt = (a[None, :, :] < a[:, None, :]).any(axis=2)
        tie_first = np.tri(len(j), k=-1, dtype=bool)  # equal rows: keep the first
        beaten = (le & (lt | tie_first)).any(axis=1)
        out[j] = beaten
    if pick is not None:
        out &= idx != pick
    return out


def band_pickable(sub: Economics, bel: Beliefs) -> np.ndarray:
    """Per type: whether some candidate of it fits the budget and the deadline at a figure in its
    band (its top, the best case shown): a type that fits at none could never be picked, so it is
    never a probe the plan proposes, whatever its re-anchoring would tell of others (the plan's
    rows are the types to try)."""
    up = np.exp(band_z() * bel.sd_high)[sub.type_idx]
    with np.errstate(invalid="ignore", divide="ignore"):
        fits = sub.fits(*sub.at(slice(None), up))
    out = np.zeros(len(bel.probe_usd), dtype=bool)
    out[sub.type_idx[fits]] = True
    return out


def _options(w: _Worlds, sub: Economics, bel: Beliefs, in_play: np.ndarray, pickable: np.ndarray) -> list[int]:
    """The probes worth comparing, among the types that could be picked at a figure in their band:
    per device, its cheapest probe (it re-anchors the others); per sibling group in play, the type
    holding the group's best candidate (it tells that size too)."""
    out: set[int] = set()
    can = np.flatnonzero(np.isfinite(bel.probe_usd) & ~bel.measured & pickable)
    dev = np.unique(bel.device, return_inverse=True)[1]
    for d in _distinct(dev[can]):
        mine = can[dev[can] == d]
        out.add(int(mine[np.argmin(bel.probe_usd[mine])]))
    probeable = set(can.tolist())
    for g in _distinct(w.group[in_play]):
        members = [int(t) for t in in_play if w.group[t] == g and t in probeable]
        if not members:
            continue
        mine = np.flatnonzero(np.isin(sub.type_idx, members))
        out.add(int(sub.type_idx[mine[np.argmin(w.est_obj[mine])]]))
    return sorted(out)


def plan(econ: Economics, bel: Beliefs, pick: int | None, budget_usd: float | None = None,
         draws: int = 512, seed: int = 0, max_probes: int = 8, first: tuple[int, str] | None = None) -> ProbeChoice:
    """The probes worth their cost, most valuable first; `pick` is recommend's current pick
    (an index into econ), None when nothing fits by the estimates (then a probe is worth what it
    may reveal that fits: no pick counts as a miss). `first`: (type, why) probed ahead of the
    rest whatever its value (an uncalibrated estimate the ranking rests on: its band is a claim,
    so the worlds drawn from it cannot price the probe)."""
    if econ.objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {econ.objective!r}")
    waits = bel.probe_hours[np.isfinite(bel.probe_hours)]
    keep = relevant(econ, bel, pick, wait_h=float(waits.max()) if len(waits) else 0.0)
    if not len(keep):
        return ProbeChoice([], None, None, why_empty="nothing could fit the budget and the deadline even at the "
                         "fast end of every band: no probe can change that")
    sub = econ.subset(keep)
    pick_i = int(np.flatnonzero(keep == pick)[0]) if pick is not None else -1
    w = _Worlds(sub, bel, draws, seed)
    now_pick = np.full(draws, pick_i)
    loss_now = w.loss(now_pick, 0.0)
    now = w.outlook(now_pick, 0.0)
    # Dollars per unit of the objective: 1 for cost; for hours, the pick's $/h (with no pick, the
    # median of the candidates that could fit).
    fix, var = sub.objective_fix_var()
    if econ.objective != "fastest":
        usd_per_unit = 1.0
    else:
        rate = (sub.cost_fix + sub.cost_var) / (fix + var)
        usd_per_unit = float(rate[pick_i] if pick_i >= 0 else np.median(rate[np.isfinite(rate)]))
    in_play = _distinct(sub.type_idx)
    pickable = band_pickable(sub, bel)
    options = _options(w, sub, bel, in_play, pickable)
    chosen: list[int] = []
    probes: list[PlannedProbe] = []
    spent = wait = 0.0
    cur_pick, cur_loss = now_pick, loss_now

    def best_next(budget_left: float | None):
        """The probe that adds the most net value to those chosen (None when none is worth its cost)."""
        best = None
        ts = [t for t in options if t not in chosen
              and not (budget_left is not None and float(bel.probe_usd[t]) > budget_left + 1e-9)]
        wts = np.array([max(wait, float(bel.probe_hours[t])) for t in ts])
        picks = w.picks.after(chosen, ts, wts)
        losses = w.loss(picks, wts[:, None])
        for t, wt, p, lo in zip(ts, wts, picks, losses):
            usd = float(bel.probe_usd[t])
            gain = float((cur_loss - lo).mean()) * usd_per_unit
            if gain - usd > 0 and (best is None or gain - usd > best[0]):
                best = (gain - usd, t, p, lo, gain, float(wt))
        return best

    def take(best, why: str | None = None) -> None:
        nonlocal spent, wait, cur_pick, cur_loss
        _, t, p, lo, gain, wt = best
        changed = p != cur_pick
        saving = float((cur_loss - lo)[changed].mean()) * usd_per_unit if changed.any() else 0.0
        g = w.group[t]
        base = bel.base if bel.base is not None else np.arange(len(bel.group))
        covers = [int(u) for u in in_play if w.group[u] == g and base[u] != base[t]]
        pick_t = int(sub.type_idx[pick_i]) if pick_i >= 0 else -1
        reason = why or ("might fit, where nothing does by the estimates" if pick_i < 0
                         else "the pick rests on this estimate" if base[t] == base[pick_t]
                         else "the pick's device, another size" if w.group[pick_t] == g
                         else "could beat the pick")
        probes.append(PlannedProbe(t, float(bel.probe_usd[t]), float(bel.probe_hours[t]), gain,
                                   float(changed.mean()), saving, covers, reason))
        chosen.append(t)
        spent += float(bel.probe_usd[t])
        wait = wt
        cur_pick, cur_loss = p, lo

    if first is not None and np.isfinite(bel.probe_usd[first[0]]) and first[0] in in_play and pickable[first[0]]:
        t, wt = first[0], float(bel.probe_hours[first[0]])
        picks = w.picks.after([], [t], np.array([wt]))
        lo = w.loss(picks, np.array([[wt]]))[0]
        gain = float((cur_loss - lo).mean()) * usd_per_unit
        take((gain - float(bel.probe_usd[t]), t, picks[0], lo, gain, wt), first[1])
    while len(chosen) < max_probes:
        best = best_next(None if budget_usd is None else budget_usd - spent)
        if best is None:
            break
        take(best)
    # What the plan would go on to take without --probe-budget: those are the probes worth their
    # cost that the budget leaves out (not every probe with some value on its own: one may make
    # the others worthless).
    unaffordable: list[int] = []
    if budget_usd is not None:
        kept = (list(chosen), list(probes), spent, wait, cur_pick, cur_loss)
        while len(chosen) < max_probes and (best := best_next(None)) is not None:
            take(best)
            unaffordable.append(chosen[-1])
        chosen[:], probes[:] = kept[0], kept[1]
        spent, wait, cur_pick, cur_loss = kept[2:]
    after = w.outlook(cur_pick, wait) if chosen else now
    why = None
    if not chosen:
        why = ("the probes worth their cost do not fit the probe budget" if unaffordable
               else "no probe is worth its cost: none is expected to change the pick by more than it costs"
               if pick_i >= 0 else "no probe is worth its cost: none is likely enough to show an option that fits")
    return ProbeChoice(probes, now, after, spent, wait, why, unaffordable)
