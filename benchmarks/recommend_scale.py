"""How `advisor recommend` scales.

1. The ranking core (advisor.recommend.rank.evaluate + rank) on a synthetic problem of 1,300 instance
   types x 30 regions x 2 markets and max-instances 16 (~1.25M candidates). Target: median
   <= 200 ms.
2. The whole planner (throughput per type, offer columns, ranking) on a synthetic 1,300 x 30
   Catalog object.
3. `advisor recommend --budget 500 --deadline 2d --samples 1e8` on the shipped snapshot, wall
   time in a fresh subprocess (interpreter start and imports included), with compiled .pyc files
   as an installed package has them. Target: <= 0.5 s. Once with the cross-device model already
   in the cache dir (every run after the first), once with an empty cache dir (the first run:
   the model is fitted and cached); then where the time of one run goes.

Run: .venv/bin/python benchmarks/recommend_scale.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor.recommend import rank as rk
from catalog.models import INTERRUPTION_BUCKETS
from lightning_module.contract.workload_facts import FACTS

N_TYPES, N_REGIONS, K = 1300, 30, 16


def synthetic_tables(seed: int = 0):
    rng = np.random.default_rng(seed)
    samples_per_sec = rng.lognormal(5, 1.5, N_TYPES)
    spread = rng.uniform(1.05, 3.5, N_TYPES)
    types = rk.TypeTable(
        names=[f"x{i}.large" for i in range(N_TYPES)], samples_per_sec=samples_per_sec, low=samples_per_sec / spread,
        high=samples_per_sec * spread,
        source=rng.integers(0, 3, N_TYPES), step_s=128 / samples_per_sec, intra_s=np.zeros(N_TYPES),
        inter_unit_s=2 * FACTS["resnet50"].gradient_bytes() / (rng.choice([12.5, 25, 50, 100, 400], N_TYPES) * 1e9 / 8),
    )
    t_idx = np.tile(np.arange(N_TYPES), N_REGIONS * 2)
    n = len(t_idx)
    market = np.repeat([rk.ON_DEMAND, rk.SPOT], N_TYPES * N_REGIONS)
    base = rng.lognormal(0, 1.2, N_TYPES)[t_idx] * rng.uniform(0.9, 1.2, n)
    price = np.where(market == rk.SPOT, base * rng.uniform(0.3, 0.7, n), base)
    bucket = rng.integers(0, 5, n)
    mids = np.array([(lo + hi) / 2 for lo, hi in INTERRUPTION_BUCKETS])
    highs = np.array([hi for _, hi in INTERRUPTION_BUCKETS])
    offers = rk.OfferTable(
        type_idx=t_idx, region_idx=np.tile(np.repeat(np.arange(N_REGIONS), N_TYPES), 2), market=market,
        price=price, od_price=np.full(n, np.nan),
        rate_mid=np.where(market == rk.SPOT, mids[bucket], 0.0), rate_high=np.where(market == rk.SPOT, highs[bucket], 0.0),
    )
    return types, offers


def time_core(repeat: int) -> None:
    from advisor.recommend.jobspec import DEFAULT_CONFIDENCE

    types, offers = synthetic_tables()
    for confidence in (0.0, DEFAULT_CONFIDENCE):
        job = rk.Job(samples=1e8, budget_usd=500.0, deadline_hours=48.0, loss_hours=20 / 60, max_instances=K,
                     confidence=confidence)
        c = rk.evaluate(types, offers, job)
        print(f"ranking core at --confidence {confidence:g}: {N_TYPES:,} types x {N_REGIONS} regions x 2 markets x {K} "
              f"counts = {len(c):,} candidates, {int(c.feasible.sum()):,} feasible")
        for objective in ("cheapest", "fastest", "pareto"):
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                c = rk.evaluate(types, offers, job)
                ranked = rk.rank(c, objective, 10)
                times.append(time.perf_counter() - t0)
            print(f"  evaluate + rank ({objective:8s}): median {statistics.median(times) * 1e3:7.1f} ms, "
                  f"min {min(times) * 1e3:7.1f} ms over {repeat} runs ({len(ranked)} rows)")


def time_planner(repeat: int) -> None:
    from advisor.recommend.jobspec import JobSpec
    from advisor.recommend.planner import build_plan
    from catalog.io import SNAPSHOT_PATH, load
    from catalog.models import SCHEMA_VERSION, Catalog, InstanceType, RegionOffers

    snap = load(SNAPSHOT_PATH)
    protos = list(snap.instance_types.values())
    rng = np.random.default_rng(1)
    types: dict[str, InstanceType] = {}
    for i in range(N_TYPES):
        p = protos[i % len(protos)]
        name = f"{p.name.split('.')[0]}.syn{i}"
        types[name] = p.model_copy(update={"name": name})
    names = list(types)
    offers = {}
    for r in range(N_REGIONS):
        n = len(names)
        od = rng.lognormal(0, 1.2, n)
        offers[f"xx-region-{r}"] = RegionOffers.model_construct(
            instance_type=names * 2, market=["on-demand"] * n + ["spot"] * n,
            usd_per_hour=list(od) + list(od * 0.4), spot_min_usd=[None] * 2 * n, az_count=[None] * 2 * n,
            price_at=[None] * 2 * n, interruption_bucket=[None] * n + list(rng.integers(0, 5, n).tolist()),
            savings_pct=[None] * 2 * n)
    cat = Catalog.model_construct(schema_version=SCHEMA_VERSION, source="file", fetched_at=datetime.now(timezone.utc),
                                  provenance="synthetic", regions=list(offers),
                                  instance_types={**snap.instance_types, **types}, offers=offers)
    job = JobSpec(samples=1e8, budget_usd=500, deadline_hours=48, market="any", max_instances=K)
    times = []
    for _ in range(max(1, repeat // 2)):
        t0 = time.perf_counter()
        plan = build_plan(cat, job)
        times.append(time.perf_counter() - t0)
    print(f"planner (throughput per type + offer columns + ranking, market any -> {len(plan.candidates):,} "
          f"candidates): median {statistics.median(times) * 1e3:.0f} ms over {len(times)} runs")


RECOMMEND = ["recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8"]


def _env(cache: str) -> dict[str, str]:
    # .pyc files are written and used, as in an installed package (PYTHONDONTWRITEBYTECODE would
    # recompile every module of the advisor on every run: ~0.1 s more).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "INSTANCE_ADVISOR_CACHE_DIR": cache, "INSTANCE_ADVISOR_DATA_DIR": cache + "/data"}


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, cwd=ROOT, env=env, check=True)
    return time.perf_counter() - t0


def time_end_to_end(repeat: int) -> None:
    cmd = [sys.executable, "-m", "advisor", *RECOMMEND]
    with tempfile.TemporaryDirectory(prefix="advisor-bench-") as tmp:
        warm = _env(tmp + "/warm")
        _timed(cmd, warm)  # compiles the .pyc files, fits and caches the model, stamps the age warning
        times = [_timed(cmd, warm) for _ in range(repeat)]
        print(f"end to end, shipped snapshot, subprocess ({' '.join(cmd[2:])}): median {statistics.median(times):.3f} s, "
              f"min {min(times):.3f} s over {repeat} runs")
        cold = [_timed(cmd, _env(f"{tmp}/cold{i}")) for i in range(max(3, repeat // 2))]
        print(f"  first run (empty cache dir: the cross-device model is fitted and cached): median "
              f"{statistics.median(cold):.3f} s over {len(cold)} runs")
        base = [_timed([sys.executable, "-c", "import numpy, pydantic"], warm) for _ in range(repeat)]
        print(f"  (for scale: 'python -c \"import numpy, pydantic\"' alone: median {statistics.median(base):.3f} s; "
              f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")
        phases = [_phases(warm) for _ in range(repeat)]
        print("  where one run's time goes (in-process, median of " + str(repeat) + " fresh processes; ms):")
        for name in phases[0]:
            print(f"    {name:58s} {statistics.median(p[name] for p in phases):6.0f}")


# One run of the command in a fresh process, timed by phase: the imports by who first needs them,
# the work by the function that does it. Printed as JSON for time_end_to_end.
_PHASES = r"""
import json, sys, time, io, contextlib
t = [("start", time.perf_counter())]
mark = lambda name: t.append((name, time.perf_counter()))
import advisor.cli as cli
mark("import advisor.cli")
parser = cli.build_parser()
mark("build the parser (imports pydantic, the catalog and result models)")
args = parser.parse_args(sys.argv[1:])
import advisor.recommend.planner as pl, advisor.recommend.probeplan.inputs as pi  # noqa: E401
import advisor.render.report as rp, advisor.estimate.throughput as tp  # noqa: E401
import advisor.commands.recommend as rc
mark("import numpy, the planner, estimator, probe plan, report")
spans = {}
def timed(mod, name, label):
    f = getattr(mod, name)
    def g(*a, **k):
        t0 = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            spans[label] = spans.get(label, 0.0) + time.perf_counter() - t0
    setattr(mod, name, g)
timed(rc, "load_catalog", "load the catalog snapshot")
timed(tp, "cross_device_model", "reference rows + cross-device model (cached)")
timed(pl, "plan_probes", "probe plan (value of information)")
timed(rp, "write", "write the table")
t0 = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    args.func(args)
total = time.perf_counter() - t0
out = {name: (b - a) * 1e3 for (_, a), (name, b) in zip(t, t[1:])}
out.update({k: v * 1e3 for k, v in spans.items()})
out["everything else: throughput per type, ranking, rows"] = (total - sum(spans.values())) * 1e3
out["total in process (interpreter start not included)"] = (time.perf_counter() - t[0][1]) * 1e3
print(json.dumps(out))
"""


def _phases(env: dict[str, str]) -> dict[str, float]:
    import json

    out = subprocess.run([sys.executable, "-c", _PHASES, *RECOMMEND], capture_output=True, cwd=ROOT, env=env,
                         check=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    time_core(args.repeat)
    time_planner(args.repeat)
    time_end_to_end(args.repeat)


if __name__ == "__main__":
    main()
