"""Time catalog.io.load on the shipped snapshot and on a synthetic full-size catalog.

The synthetic catalog has the shape a refresh of every region gives: 1,300 instance types x
30 regions x 2 markets (78,000 offers). Target: it loads in under 150 ms (median).

    .venv/bin/python benchmarks/catalog_load.py [--runs 7]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog.aws.families import facts
from catalog.io import SNAPSHOT_PATH, load
from catalog.models import SCHEMA_VERSION, Catalog, InstanceType, RegionOffers
from safeio import save_atomic

TARGET_MS = 150.0


def synthetic(n_types: int = 1300, n_regions: int = 30, seed: int = 0) -> Catalog:
    rng = random.Random(seed)
    now = datetime(2025, 12, 1, tzinfo=timezone.utc)
    types = {}
    for i in range(n_types):
        fam = f"x{i // 10}g{i % 7}"
        gpu = i % 5 == 0
        types[f"{fam}.s{i}"] = InstanceType(
            name=f"{fam}.s{i}", family=fam, generation=i % 8 + 1, vcpus=2 ** (i % 8) * 2,
            memory_gib=4.0 * 2 ** (i % 8), arch="arm64" if i % 4 == 0 else "x86_64",
            cpu_manufacturer="Intel", cpu_model="Intel Xeon", cpu_clock_ghz=3.2,
            accelerator_kind="gpu" if gpu else "none", accelerator_model="L4" if gpu else None,
            accelerator_count=1 if gpu else 0, accelerator_memory_gib=24.0 if gpu else None,
            network_gbps=12.5, network_up_to=True, efa=i % 3 == 0,
            **facts(fam, "gpu" if gpu else "none", 1 if gpu else 0),
        )
    names = list(types)
    offers = {}
    for r in range(n_regions):
        ro = RegionOffers()
        for name in names:
            od = round(rng.uniform(0.05, 40), 4)
            for market in ("on-demand", "spot"):
                spot = market == "spot"
                ro.instance_type.append(name)
                ro.market.append(market)
                ro.usd_per_hour.append(round(od * 0.4, 4) if spot else od)
                ro.spot_min_usd.append(round(od * 0.35, 4) if spot else None)
                ro.az_count.append(rng.randint(1, 6) if spot else None)
                ro.price_at.append(now)
                ro.interruption_bucket.append(rng.randint(0, 4) if spot else None)
                ro.savings_pct.append(float(rng.randint(30, 90)) if spot else None)
        offers[f"region-{r:02d}"] = ro
    return Catalog(schema_version=SCHEMA_VERSION, source="file", fetched_at=now, provenance="synthetic benchmark",
                   regions=sorted(offers), instance_types=types, offers=offers)


def time_load(path: Path, runs: int) -> list[float]:
    load(path)  # warm the OS page cache and pydantic's validators once
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        load(path)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()

    snap = time_load(SNAPSHOT_PATH, args.runs)
    cat = load(SNAPSHOT_PATH)
    n_snap = sum(len(ro) for ro in cat.offers.values())
    print(f"snapshot  {SNAPSHOT_PATH.name}: {len(cat.instance_types)} types, {len(cat.regions)} regions, "
          f"{n_snap} offers, {SNAPSHOT_PATH.stat().st_size / 1e3:.0f} kB: "
          f"median {statistics.median(snap):.1f} ms (min {min(snap):.1f}, max {max(snap):.1f}, {args.runs} runs)")

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "synthetic.json"
        syn = synthetic()
        save_atomic(syn, path)
        n = sum(len(ro) for ro in syn.offers.values())
        times = time_load(path, args.runs)
        med = statistics.median(times)
        print(f"synthetic 1,300 types x 30 regions x 2 markets: {n} offers, {path.stat().st_size / 1e6:.1f} MB: "
              f"median {med:.1f} ms (min {min(times):.1f}, max {max(times):.1f}, {args.runs} runs); "
              f"target < {TARGET_MS:.0f} ms: {'met' if med < TARGET_MS else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
