"""How `advisor recommend` scales.

1. The ranking core (advisor.rank.evaluate + rank) on a synthetic problem of 1,300 instance
   types x 30 regions x 2 markets and max-instances 16 (~1.25M candidates). Target: median
   <= 200 ms.
2. The whole planner (throughput per type, offer columns, ranking) on a synthetic 1,300 x 30
   Catalog object.
3. `advisor recommend --budget 500 --deadline 2d --samples 1e8` on the shipped snapshot, wall
   time in a fresh subprocess (interpreter start and imports included). Target: <= 0.5 s.

Run: .venv/bin/python benchmarks/recommend_scale.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor import rank as rk
from catalog.models import INTERRUPTION_BUCKETS
from lightning_module.workload_facts import FACTS

N_TYPES, N_REGIONS, K = 1300, 30, 16


def synthetic_tables(seed: int = 0):
    rng = np.random.default_rng(seed)
    sps = rng.lognormal(5, 1.5, N_TYPES)
    spread = rng.uniform(1.05, 3.5, N_TYPES)
    types = rk.TypeTable(
        names=[f"x{i}.large" for i in range(N_TYPES)], sps=sps, low=sps / spread, high=sps * spread,
        source=rng.integers(0, 3, N_TYPES), step_s=128 / sps, intra_s=np.zeros(N_TYPES),
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
    types, offers = synthetic_tables()
    job = rk.Job(samples=1e8, budget_usd=500.0, deadline_h=48.0, loss_h=20 / 60, max_instances=K)
    c = rk.evaluate(types, offers, job)
    print(f"ranking core: {N_TYPES:,} types x {N_REGIONS} regions x 2 markets x {K} counts = {len(c):,} candidates, "
          f"{int(c.feasible.sum()):,} feasible")
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
    from advisor.jobspec import JobSpec
    from advisor.planner import build_plan
    from catalog.io import SNAPSHOT_PATH, load
    from catalog.models import Catalog, InstanceType, RegionOffers

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
    cat = Catalog.model_construct(schema_version=1, source="file", fetched_at=datetime.now(timezone.utc),
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


def time_end_to_end(repeat: int) -> None:
    cmd = [sys.executable, "-m", "advisor", "recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8"]
    env = {**os.environ, "INSTANCE_ADVISOR_CACHE_DIR": str(ROOT / ".bench-cache-none")}
    subprocess.run(cmd, capture_output=True, cwd=ROOT, env=env, check=True)  # warm the .pyc files
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, cwd=ROOT, env=env, check=True)
        times.append(time.perf_counter() - t0)
    print(f"end to end, shipped snapshot, subprocess ({' '.join(cmd[2:])}): median {statistics.median(times):.3f} s, "
          f"min {min(times):.3f} s over {repeat} runs")
    base = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import numpy, pydantic"], capture_output=True, check=True)
        base.append(time.perf_counter() - t0)
    print(f"  (for scale: 'python -c \"import numpy, pydantic\"' alone: median {statistics.median(base):.3f} s; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    time_core(args.repeat)
    time_planner(args.repeat)
    time_end_to_end(args.repeat)


if __name__ == "__main__":
    main()
