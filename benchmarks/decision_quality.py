"""Decisions, not estimates: how cheaply the advisor gets a user to the right instance type.

Simulated users over the reference dataset (advisor/data/reference_measurements.json). Each
scenario:
- truth: one published tuned, half-precision PyTorch row of the workload per instance type, for
  its device at its device count (the instance's own row when one ran on that type). MXNet MLPerf
  submissions are left out of the truth (not of the advisor's references): the probe trains
  PyTorch. A scenario's truths come from one published table (one suite and software release: one
  user's stack); its candidates are the instance types of that table's devices offered in one
  region of the shipped snapshot on one market, each device kept with probability DEVICE_KEEP (at
  least two). Sizes of one device share its figure: no published figure varies the host, so host
  limits cannot be scored here. Every published row of the candidate devices, any workload, is
  hidden from the advisor: it estimates them from the other devices' rows only.
  `--mixed` is a harder world: devices drawn freely, each device's truth preferably from one
  table, else from any of its rows (software releases mixed across devices: two NGC releases of
  one A100 table differ by 75%, which no estimate of one user's stack can know);
- the job: work log-uniform in SAMPLES; objective cheapest (75%) or fastest (25%); market on-demand
  (50%), spot (25%) or any (25%); one instance (max-instances 1: nothing published says how k
  instances scale on AWS networks, so k > 1 would be scored against the advisor's own model); the
  deadline log-uniform between 1.2x the truly fastest option's hours (at least an hour) and 2x the
  truly cheapest one's (binding for some jobs, slack for others); the budget 1.5-5x the true
  cheapest feasible cost (cheapest) or between 1.2x that and 1.5x the fastest feasible one's
  (fastest); --probe-budget PROBE_BUDGET_SHARE of the budget, at most MAX_PROBES probes;
- each probe reveals the truth x noise at the probe's 3% CI; each round of probes runs in parallel
  and takes its longest probe's hours off the deadline; recommend runs again on what is known.

Strategies, on the same scenarios, truths and noise: the advisor's plan (value of information),
no probes, the old plan (unmeasured types whose band overlaps the best option, cheapest first:
rank.probe_next), and random probing within the same probe budget and probe count.

Reported per strategy: share of scenarios whose final pick is feasible in truth and within 10% of
the true optimum (cost for cheapest, hours for fastest), regret quantiles, deadline missed in
truth, budget overrun in truth, no pick, probe dollars (and as a share of the true optimum's
cost), probes taken. Not a timing benchmark. Run:

    .venv/bin/python benchmarks/decision_quality.py [--scenarios 500] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor.estimate.references import Measurement, ReferenceSet, load_references
from advisor.recommend import rank as rk
from advisor.recommend.jobspec import JobSpec
from advisor.recommend.planner import build_plan
from advisor.recommend.probeplan.inputs import PROBE_NOISE_SD, PROBE_TARGET_CI, probe_offers
from catalog import accelerators as acc
from catalog.io import load as load_catalog
from catalog.models import OFFER_COLUMNS, Catalog, InstanceType, RegionOffers

sys.path.insert(0, str(ROOT / "tests"))
from factories import probe_result as fake_result

WORKLOAD = "resnet50"
SNAPSHOT = ROOT / "catalog" / "data" / "snapshot.json"
MAX_PROBES = 3
PROBE_BUDGET_SHARE = 0.10
DEVICE_KEEP = 0.7
SAMPLES = (1e7, 1e9)  # ~8 to ~800 ImageNet-1k epochs
MARKETS = (("on-demand", 0.5), ("spot", 0.25), ("any", 0.25))
OBJECTIVES = (("cheapest", 0.75), ("fastest", 0.25))
WITHIN = 0.10
MIN_DEADLINE_H = 1.0  # nobody plans a training run against a deadline minutes away
STRATEGIES = ("advisor", "none", "old-plan", "random")
HALF = ("16-mixed", "bf16-mixed")
NOW = datetime(2026, 11, 1, tzinfo=timezone.utc)


# ---------------------------------------------------------------------------------------------
# Truth: which published rows stand for which instance type


def device_of(it: InstanceType) -> tuple[str, str | None, float | None] | None:
    """(dataset device name, form factor the type has, memory GiB) of an instance's accelerator."""
    if it.accelerator_kind == "none":
        return ("cpu", None, None)
    spec = acc.lookup(it.accelerator_model or "", it.accelerator_memory_gib)
    if spec is None or spec.kind != "gpu":
        return None
    form = "SXM" if "SXM" in spec.name else None
    return (spec.key.split("-")[0], form, spec.memory_gib)


def rows_match(m: Measurement, it: InstanceType) -> bool:
    """A tuned half-precision PyTorch row of the workload that ran this device at this device count
    (the probe trains PyTorch: an MXNet MLPerf submission is not what it can reach)."""
    if m.model != WORKLOAD or m.nodes != 1 or not m.tuned or (m.precision not in HALF and m.device != "cpu"):
        return False
    if not m.framework.lower().startswith("pytorch"):
        return False
    dev = device_of(it)
    if m.instance_type:
        # A run on one size stands for the other sizes of its family with as many devices: no
        # published figure varies the host. A CPU's throughput follows its cores: that size only.
        ran = m.instance_type.split(".")[0]
        return m.instance_type == it.name or (dev is not None and dev[0] != "cpu" and ran == it.family
                                              and m.gpus == it.accelerator_count)
    if dev is None or dev[0] == "cpu" or m.device.lower() != dev[0].lower():
        return False
    if m.gpus != it.accelerator_count:
        return False
    # AWS's V100/A100/H100/H200 are the SXM parts: a PCIe card's row is another device.
    if dev[1] == "SXM" and (m.device_variant or "").upper().startswith("PCIE"):
        return False
    return not (m.device_memory_gib and dev[2] and abs(m.device_memory_gib / dev[2] - 1) > 0.1)


def table_key(m: Measurement) -> str:
    """One suite at one software release (a user's stack): the publisher's repository (else the page
    or document) and the framework release. Not the file: Lambda's v2 suite keeps each run in a
    folder of its own."""
    s = m.source
    return f"{s.repo or s.url or s.document or m.id} [{m.framework}]"


def truth_rows(catalog: Catalog, refs: list[Measurement]) -> dict[str, list[Measurement]]:
    out = {}
    for name, it in catalog.instance_types.items():
        rows = [m for m in refs if rows_match(m, it)]
        if rows:
            out[name] = rows
    return out


# ---------------------------------------------------------------------------------------------
# Scenarios


@dataclass
class Scenario:
    index: int
    seed: int
    region: str
    market: str
    objective: str
    samples: int
    budget_usd: float
    deadline_hours: float
    probe_budget_usd: float
    types: list[str]
    truth: dict[str, float]  # instance-wide samples/s
    truth_row: dict[str, str]
    hidden_devices: list[str]
    preferred_source: str
    noise: dict[str, float]  # the multiplicative error each type's probe would report
    optimum: str = ""
    optimum_value: float = math.nan
    optimum_cost: float = math.nan

    def job(self, deadline: float | None = None, confidence: float = 0.0) -> JobSpec:
        return JobSpec(samples=self.samples, budget_usd=self.budget_usd, deadline_hours=deadline or self.deadline_hours,
                       workload=WORKLOAD, objective=self.objective, regions=[self.region], market=self.market,
                       max_instances=1, include_cpu="cpu" in self.hidden_devices, confidence=confidence)


def sub_catalog(catalog: Catalog, types: list[str], region: str) -> Catalog:
    """The scenario's candidates priced in its region; every other type stays described (an
    estimator may anchor on a published run on it) but unpriced, so it is never a candidate."""
    ro = catalog.offers[region]
    keep = [i for i, n in enumerate(ro.instance_type) if n in set(types)]
    cols = {c: [getattr(ro, c)[i] for i in keep] for c in OFFER_COLUMNS}
    return Catalog(schema_version=catalog.schema_version, source="file", fetched_at=catalog.fetched_at,
                   provenance="decision benchmark scenario", regions=[region],
                   instance_types=catalog.instance_types, offers={region: RegionOffers.model_validate(cols)})


def probe_result(it: InstanceType, sps: float, ci: float):
    """A probe's result as `advisor results pull` stores it (the recommend tests' factory)."""
    gpu = it.accelerator_kind != "none"
    return fake_result(it.name, sps, accelerator="gpu" if gpu else "cpu", devices=it.accelerator_count if gpu else 1,
                       model=WORKLOAD, ci=ci, finished_at=NOW)


class World:
    """What the benchmark knows and the advisor does not: the catalog, the dataset, the truths."""

    def __init__(self, seed: int, mixed: bool = False):
        self.seed = seed
        self.mixed = mixed
        self.catalog = load_catalog(SNAPSHOT)
        self.ref_set = load_references()
        self.refs = self.ref_set.measurements
        self._visible: dict[frozenset, ReferenceSet] = {}
        self.truths: dict[tuple[int, int], object] = {}  # (seed, scenario) -> its plan with every truth measured
        self.rows = truth_rows(self.catalog, self.refs)
        self.devices = sorted({self._dev(n) for n in self.rows})

    def _in(self, name: str, table: str) -> bool:
        return any(table_key(m) == table for m in self.rows[name])

    @staticmethod
    def _keep(rng, devices: list[str]) -> list[str]:
        """Each device kept with probability DEVICE_KEEP, at least two."""
        keep = [d for d in devices if rng.random() < DEVICE_KEEP]
        while len(keep) < 2:
            keep = sorted(set(keep) | {str(rng.choice(devices))})
        return keep

    def _dev(self, name: str) -> str:
        d = device_of(self.catalog.instance_types[name])
        return d[0] if d else "?"

    def oracle(self, scn: Scenario, job: JobSpec, cat: Catalog):
        """recommend with every type measured exactly, on the point estimate (confidence 0): its
        candidates' costs and pessimistic hours are the truth."""
        exact = [probe_result(cat.instance_types[n], scn.truth[n], 1e-9) for n in scn.types]
        return build_plan(cat, job, exact, top=1)  # every type measured: no estimate is read

    def visible(self, hidden: list[str]) -> ReferenceSet:
        """The reference rows the advisor may see: every row but the hidden devices' (one set, and
        one fitted model, per hidden set)."""
        key = frozenset(hidden)
        if key not in self._visible:
            rows = [m for m in self.refs if m.device not in key]
            self._visible[key] = ReferenceSet(schema_version=self.ref_set.schema_version,
                                              about=f"decision benchmark: all rows but {sorted(key)}", measurements=rows)
        return self._visible[key]

    def scenario(self, i: int) -> Scenario | None:
        rng = np.random.default_rng([self.seed, i])
        region = rng.choice(sorted(self.catalog.offers))
        market = _pick(rng, MARKETS)
        objective = _pick(rng, OBJECTIVES)
        want = {"on-demand"} if market == "on-demand" else {"spot"} if market == "spot" else {"on-demand", "spot"}
        ro = self.catalog.offers[region]
        offered = {n for n, m in zip(ro.instance_type, ro.market) if m in want}
        names = sorted(n for n in self.rows if n in offered)
        if self.mixed:
            # Devices at random; each device's truth preferably from one table, else any of its rows.
            devices = sorted({self._dev(n) for n in names})
            if len(devices) < 2:
                return None
            keep = self._keep(rng, devices)
            types = [n for n in names if self._dev(n) in keep]
            preferred = str(rng.choice(sorted({table_key(m) for n in types for m in self.rows[n]})))
        else:
            # One table (one suite, one software release: one user's stack), its devices at random.
            tables = sorted({table_key(m) for n in names for m in self.rows[n]})
            tables = [t for t in tables if len({self._dev(n) for n in names if self._in(n, t)}) >= 2]
            if not tables:
                return None
            preferred = str(rng.choice(tables))
            keep = self._keep(rng, sorted({self._dev(n) for n in names if self._in(n, preferred)}))
            types = [n for n in names if self._dev(n) in keep and self._in(n, preferred)]
        truth, truth_row = {}, {}
        for n in types:
            rows = self.rows[n]
            mine = [m for m in rows if table_key(m) == preferred] or rows
            m = mine[int(rng.integers(len(mine)))]
            truth[n], truth_row[n] = m.samples_per_sec, m.id
        noise = {n: float(np.exp(PROBE_NOISE_SD * rng.standard_normal())) for n in types}
        samples = math.ceil(np.exp(rng.uniform(*np.log(SAMPLES))))  # whole samples, as a job counts them
        scn = Scenario(i, self.seed, str(region), market, objective, samples, 1.0, 1.0, 0.0, types, truth, truth_row,
                       keep, preferred, noise)
        cat = sub_catalog(self.catalog, types, scn.region)
        loose = JobSpec(samples=samples, budget_usd=1e15, deadline_hours=1e9, workload=WORKLOAD,
                        objective="cheapest", regions=[scn.region], market=market, max_instances=1, confidence=0)
        c = self.oracle(scn, loose, cat).candidates
        ok = np.isfinite(c.cost) & np.isfinite(c.hours_pess)
        if not ok.any():
            return None
        cost, pess = c.cost[ok], c.hours_pess[ok]
        t_fast, t_cheap = pess.min(), pess[np.argmin(cost)]
        lo = max(1.2 * t_fast, MIN_DEADLINE_H)
        hi = max(2.0 * t_cheap, 2.0 * lo)
        scn.deadline_hours = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
        fits = pess <= scn.deadline_hours
        c_min = cost[fits].min()
        if objective == "cheapest":
            scn.budget_usd = float(c_min * np.exp(rng.uniform(np.log(1.5), np.log(5.0))))
        else:
            c_fast = cost[fits][np.argmin(pess[fits])]
            lo, top = 1.2 * c_min, max(1.5 * c_fast, 1.3 * c_min)
            scn.budget_usd = float(np.exp(rng.uniform(np.log(lo), np.log(top))))
        scn.probe_budget_usd = PROBE_BUDGET_SHARE * scn.budget_usd
        best = self.oracle(scn, scn.job(), cat)
        if not len(best.ranked):
            return None
        self.truths[(self.seed, i)] = best
        b = int(best.ranked[0])
        scn.optimum = best.types.names[int(best.candidates.type_idx[b])]
        scn.optimum_value = float(best.candidates.cost[b] if objective != "fastest" else best.candidates.hours[b])
        scn.optimum_cost = float(best.candidates.cost[b])
        return scn

    def scenarios(self, n: int) -> list[Scenario]:
        out, i = [], 0
        while len(out) < n:
            s = self.scenario(i)
            if s is not None:
                out.append(s)
            i += 1
            if i > 20 * n + 100:
                raise SystemExit(f"only {len(out)} usable scenarios in {i} draws: too few devices with a published figure")
        return out


def _pick(rng, choices):
    names, p = zip(*choices)
    return str(rng.choice(names, p=np.array(p) / sum(p)))


# ---------------------------------------------------------------------------------------------
# Running the advisor on a scenario


def old_probe_next(c: rk.Candidates, types: rk.TypeTable, best: int, objective: str, job: JobSpec,
                   offers: rk.OfferTable, limit: int = 5) -> list[tuple[int, int]]:
    """The old plan, as advisor.recommend.rank.probe_next was before the value-of-information plan replaced
    it (main @ 6adde99): unmeasured types that could beat or match the best option within their
    bands, [(type index, offer index of its cheapest one-instance price)], cheapest probe first."""
    cost_lo, cost_hi = c.cost_band()
    hours_lo, hours_hi = c.hours_band()
    lo, hi = (hours_lo, hours_hi) if objective == "fastest" else (cost_lo, cost_hi)
    # Feasible at the optimistic end of the band.
    could = (types.source[c.type_idx] != 0) & (lo <= hi[best]) & rk.feasible_mask(
        cost_lo, hours_lo * (c.hours_pess / c.hours), job.budget_usd, job.deadline_hours)
    # bincount, not np.unique: unique imports numpy.ma (~30 ms of a sub-second command)
    t_hits = np.flatnonzero(np.bincount(c.type_idx[could], minlength=len(types.names)))
    if len(t_hits) == 0:
        return []
    # The probe runs on one instance: the cheapest single-instance offer of each type.
    # On-demand preferred: a probe interrupted half-way measures nothing.
    single = c.k == 1
    offer_price = offers.price[c.offer] * np.where(offers.market[c.offer] == rk.ON_DEMAND, 1.0, 1e6)
    price = np.where(single, offer_price, np.inf)
    best_offer = np.full(len(types.names), -1)
    best_price = np.full(len(types.names), np.inf)
    order = np.argsort(price, kind="stable")[::-1]  # later writes (cheaper) win
    best_offer[c.type_idx[order]] = c.offer[order]
    best_price[c.type_idx[order]] = price[order]
    plan = sorted((best_price[t], t) for t in t_hits if np.isfinite(best_price[t]))
    out = [(int(t), int(best_offer[t])) for _, t in plan[:limit]]
    # The best option itself, when it rests on an estimate, is always worth its probe.
    bt = int(c.type_idx[best])
    if types.source[bt] != 0 and bt not in [t for t, _ in out] and np.isfinite(best_price[bt]):
        out.append((bt, int(best_offer[bt])))
    return out


@dataclass
class Outcome:
    strategy: str
    pick: str | None
    feasible: bool
    regret: float  # inf when infeasible or no pick
    missed_deadline: bool
    over_budget: bool
    probe_usd: float
    probes: list[str] = field(default_factory=list)
    rounds: int = 0


def run(world: World, scn: Scenario, strategy: str, confidence: float) -> Outcome:
    cat = sub_catalog(world.catalog, scn.types, scn.region)
    visible = world.visible(scn.hidden_devices)
    rng = np.random.default_rng([scn.seed, scn.index, 7])
    measured: dict[str, float] = {}
    spent = elapsed = 0.0
    rounds = 0
    while True:
        left = scn.deadline_hours - elapsed
        if left <= 0:
            plan = None
            break
        # recommend --probe-budget with what is left of it (the plan is the advisor's; the ranking is all's)
        job = scn.job(left, confidence).model_copy(update={"probe_budget_usd": scn.probe_budget_usd - spent})
        known = [probe_result(cat.instance_types[n], v, PROBE_TARGET_CI) for n, v in measured.items()]
        plan = build_plan(cat, job, known, top=1, references=visible)
        if len(measured) >= MAX_PROBES or strategy == "none":
            break
        its = [cat.instance_types[n] for n in plan.types.names]
        offs = probe_offers(plan.types, plan.offers, its)
        cost = {plan.types.names[t]: o.usd for t, o in enumerate(offs) if o is not None}
        hours = {plan.types.names[t]: o.hours for t, o in enumerate(offs) if o is not None}
        if strategy == "advisor":
            wanted = [plan.types.names[q.type_idx] for q in plan.probe.probes]
        elif strategy == "old-plan":
            best = int(plan.ranked[0]) if len(plan.ranked) else None
            old = [] if best is None else old_probe_next(plan.candidates, plan.types, best, job.objective,
                                                          plan.job, plan.offers)
            wanted = [plan.types.names[t] for t, _ in old]
        elif rounds == 0:  # random: one round, unmeasured types in random order
            pool = [n for n in plan.types.names if n in cost and n not in measured]
            wanted = [pool[j] for j in rng.permutation(len(pool))]
        else:
            wanted = []
        batch = []
        for n in wanted:
            if n in measured or n not in cost or len(measured) + len(batch) >= MAX_PROBES:
                continue
            if spent + cost[n] > scn.probe_budget_usd + 1e-9:
                continue
            batch.append(n)
            spent += cost[n]
        if not batch:
            break
        for n in batch:
            measured[n] = scn.truth[n] * scn.noise[n]
        elapsed += max(hours[n] for n in batch)
        rounds += 1
    return judge(world, scn, strategy, plan, cat, elapsed, spent, list(measured), rounds)


def judge(world: World, scn: Scenario, strategy: str, plan, cat: Catalog, elapsed: float, spent: float,
          probes: list[str], rounds: int) -> Outcome:
    none = Outcome(strategy, None, False, math.inf, False, False, spent, probes, rounds)
    if plan is None or not len(plan.ranked):
        return none
    i = int(plan.ranked[0])
    c, o = plan.candidates, plan.offers
    key = (plan.types.names[int(c.type_idx[i])], int(o.market[int(c.offer[i])]), int(c.k[i]))
    truth = world.truths.get((scn.seed, scn.index)) or world.oracle(scn, scn.job(), cat)
    tc, to = truth.candidates, truth.offers
    j = next(j for j in range(len(tc)) if (truth.types.names[int(tc.type_idx[j])], int(to.market[int(tc.offer[j])]),
                                             int(tc.k[j])) == key)
    missed = bool(tc.hours_pess[j] > scn.deadline_hours - elapsed)
    over = bool(tc.cost[j] > scn.budget_usd)
    value = float(tc.hours[j] if scn.objective == "fastest" else tc.cost[j])
    ok = not (missed or over)
    regret = value / scn.optimum_value - 1.0 if ok else math.inf
    return Outcome(strategy, key[0], ok, regret, missed, over, spent, probes, rounds)


# ---------------------------------------------------------------------------------------------
# Report


def summarise(scns: list[Scenario], results: dict[tuple[float, str], list[Outcome]]) -> list[dict]:
    out = []
    for (conf, s), rs in results.items():
        reg = np.array([r.regret for r in rs])
        fin = reg[np.isfinite(reg)]
        share = np.array([r.probe_usd / sc.optimum_cost for r, sc in zip(rs, scns)])
        out.append({
            "confidence": f"{conf:g}",
            "strategy": s,
            "within 10%": f"{np.mean(reg <= WITHIN + 1e-12):.1%}",
            "median regret": f"{np.median(fin):.1%}" if len(fin) else "-",
            "p90 regret": _pct(np.sort(reg)[math.ceil(0.9 * len(reg)) - 1]),
            "deadline missed": f"{np.mean([r.missed_deadline for r in rs]):.1%}",
            "over budget": f"{np.mean([r.over_budget for r in rs]):.1%}",
            "no pick": f"{np.mean([r.pick is None for r in rs]):.1%}",
            "probe $ median": f"{np.median([r.probe_usd for r in rs]):.2f}",
            "probe $ mean": f"{np.mean([r.probe_usd for r in rs]):.2f}",
            "probe $ / job median": f"{np.median(share):.1%}",
            "probes mean": f"{np.mean([len(r.probes) for r in rs]):.2f}",
        })
    return out


def _pct(x: float) -> str:
    return "miss" if not math.isfinite(x) else f"{x:.1%}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--confidence", default="0,0.9",
                    help="recommend --confidence values to run, comma-separated (default 0,0.9); every strategy at the "
                         "last, the advisor's plan and no probes at the others")
    ap.add_argument("--mixed", action="store_true",
                    help="a harder world: devices drawn freely, each device's truth from any of its tables "
                         "(software releases mixed across devices)")
    args = ap.parse_args(argv)
    from tabulate import tabulate

    t0 = time.perf_counter()
    world = World(args.seed, mixed=args.mixed)
    print(f"reference rows: {len(world.refs)}; instance types with a published {WORKLOAD} figure at their "
          f"device count: {len(world.rows)} ({', '.join(sorted(world.rows))}); devices: {', '.join(world.devices)}")
    scns = world.scenarios(args.scenarios)
    confidences = [float(c) for c in args.confidence.split(",")]
    runs = [(c, s) for c in confidences for s in (STRATEGIES if c == confidences[-1] else ("advisor", "none"))]
    results = {(c, s): [run(world, sc, s, c) for sc in scns] for c, s in runs}
    counts = {k: sum(1 for sc in scns if sc.objective == k) for k, _ in OBJECTIVES}
    markets = {k: sum(1 for sc in scns if sc.market == k) for k, _ in MARKETS}
    print(f"{len(scns)} scenarios (seed {args.seed}): objectives {counts}, markets {markets}; "
          f"candidate types per scenario median {statistics.median(len(sc.types) for sc in scns)}")
    rows = summarise(scns, results)
    print(tabulate(rows, headers="keys", tablefmt="github"))
    for conf in confidences:
        adv, none = results[(conf, "advisor")], results[(conf, "none")]
        reg = np.array([r.regret for r in adv])
        share = np.median([r.probe_usd / sc.optimum_cost for r, sc in zip(adv, scns)])
        print(f"\ntargets at --confidence {conf:g} (advisor, at most {MAX_PROBES} probes): within 10% of the true "
              f"optimum in {np.mean(reg <= WITHIN + 1e-12):.1%} (>= 90%); deadline missed in truth in "
              f"{np.mean([r.missed_deadline for r in adv]):.1%} (< 2%), with no probe "
              f"{np.mean([r.missed_deadline for r in none]):.1%} (<= 10% at 0.9); median probe spend {share:.1%} "
              f"of the job's cost (< 5%)")
    print(f"[{time.perf_counter() - t0:.0f} s]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
