#!/usr/bin/env python3
"""Build the shipped catalog snapshot (catalog/data/snapshot.json).

Joins the reference table of 157 ML-relevant instance types x 3 regions (prices, spot
statistics, interruption buckets) with the real DescribeInstanceTypes records moto ships
(network, EFA, CPU manufacturer and clock, GPU/Neuron details), which is what a live refresh
reads too.

    .venv/bin/python scripts/build_snapshot.py [--csv PATH] [--out PATH]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import logging
import math
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from catalog.accelerators import cpu_families, lookup
from catalog.aws.describe import family_of, generation_of, instance_type_from_describe
from catalog.aws.families import facts
from catalog.io import SNAPSHOT_PATH
from catalog.models import SCHEMA_VERSION, Catalog, InstanceType, Offer, RegionOffers
from safeio import save_atomic

log = logging.getLogger("build_snapshot")

# shared/ sits beside the checkout
DEFAULT_CSV = Path(__file__).resolve().parents[2] / "shared" / "reference" / "aws-instances.csv"
# The reference README dates the prices "snapshot 2025-12"; the first of the month stands for it.
SNAPSHOT_DATE = datetime(2025, 12, 1, tzinfo=timezone.utc)

# Types in the reference table that moto's DescribeInstanceTypes copy lacks. Their network
# figures are AWS's published ones (EC2 accelerated computing specifications page); no
# sustained clock is published in a form we could check, so it stays empty.
MISSING_FROM_MOTO = {
    "p3.2xlarge": ("Up to 10 Gigabit", False),
    "p3.8xlarge": ("10 Gigabit", False),
    "p3.16xlarge": ("25 Gigabit", False),
    "dl1.24xlarge": ("4x 100 Gigabit", True),
}

PROVENANCE = (
    "Prices: AWS public Linux on-demand prices (shared tenancy) and Linux/UNIX spot prices per "
    "availability zone, as captured in a public cloud-catalog snapshot from late 2025 (treat as "
    "'snapshot 2025-12'; prices change, a live refresh replaces them). Spot usd_per_hour is the "
    "median over the region's regular AZs (Local Zones ignored), spot_min_usd the minimum. "
    "Interruption buckets and savings: AWS Spot Instance Advisor data of 2025-06. "
    "Specs: the reference table (vCPU, memory, accelerators) joined with the real "
    "DescribeInstanceTypes data shipped in moto {moto_version} (network, EFA, CPU manufacturer "
    "and sustained clock, GPU/Neuron devices); CPU models from AWS instance type pages; socket "
    "sizes and GPU links per family from catalog/aws/families.py (datasheets, PCI-SIG, AWS launches). "
    "{missing} are not in moto's copy: network from AWS's published specifications, no clock. "
    "dl2q.24xlarge is listed as a CPU instance: its Qualcomm AI100 inference cards cannot run "
    "PyTorch training. Built by scripts/build_snapshot.py from aws-instances.csv."
)


def _moto_types() -> tuple[dict, str]:
    import moto

    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    with gzip.open(path) as f:
        return json.load(f), moto.__version__


def _float(text: str) -> float | None:
    if text is None or text.strip() == "":
        return None
    v = float(text)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"bad price {text!r}")
    return v


def _int(text: str) -> int | None:
    return int(text) if text and text.strip() else None


def _from_csv(row: dict[str, str], network: tuple[str, bool]) -> InstanceType:
    """An InstanceType for a type moto does not describe, from the reference row."""
    from catalog.aws.describe import parse_network

    name = row["instance_type"]
    family = family_of(name)
    fam = cpu_families().get(family)
    count = int(row["accelerator_count"] or 0)
    mem_gib = int(row["accelerator_memory_mib"]) / 1024 if row["accelerator_memory_mib"] else None
    spec = lookup(row["accelerator"], mem_gib) if count else None
    if count and spec is None:
        raise ValueError(f"{name}: accelerator {row['accelerator']!r} is not in accelerators.json")
    gbps, up_to = parse_network(network[0])
    return InstanceType(
        name=name, family=family, generation=generation_of(family),
        vcpus=int(row["vcpus"]), memory_gib=float(row["memory_gib"]), arch=row["arch"],
        cpu_manufacturer=fam.manufacturer if fam else None, cpu_model=fam.cpu_model if fam else None,
        accelerator_kind=spec.kind if spec else "none", accelerator_model=spec.key if spec else None,
        accelerator_count=count, accelerator_memory_gib=mem_gib,
        network_gbps=gbps, network_up_to=up_to, efa=network[1],
        **facts(family, spec.kind if spec else "none", count),
    )


def _check_agrees(it: InstanceType, row: dict[str, str]) -> None:
    """The two sources must describe the same machine; a disagreement means a stale input."""
    problems = []
    if it.vcpus != int(row["vcpus"]):
        problems.append(f"vcpus {it.vcpus} vs {row['vcpus']}")
    if abs(it.memory_gib - float(row["memory_gib"])) > 0.01 * it.memory_gib:
        problems.append(f"memory {it.memory_gib} vs {row['memory_gib']}")
    if it.arch != row["arch"]:
        problems.append(f"arch {it.arch} vs {row['arch']}")
    if row["accelerator"] and it.accelerator_count != int(row["accelerator_count"]):
        problems.append(f"accelerators {it.accelerator_count} vs {row['accelerator_count']}")
    if row["accelerator"]:
        mem = int(row["accelerator_memory_mib"]) / 1024 if row["accelerator_memory_mib"] else None
        spec = lookup(row["accelerator"], mem)
        if spec is None or spec.key != it.accelerator_model:
            problems.append(f"accelerator {it.accelerator_model} vs {row['accelerator']}")
    if problems:
        raise ValueError(f"{it.name}: reference table and DescribeInstanceTypes disagree: {'; '.join(problems)}")


def build(csv_path: Path) -> Catalog:
    described, moto_version = _moto_types()
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    types: dict[str, InstanceType] = {}
    offers: dict[str, list[Offer]] = {}
    for row in rows:
        name, region = row["instance_type"], row["region"]
        if name not in types:
            if name in described:
                it = instance_type_from_describe(described[name])
                if it is None:
                    raise ValueError(f"{name}: not a training target in DescribeInstanceTypes")
                _check_agrees(it, row)
            elif name in MISSING_FROM_MOTO:
                it = _from_csv(row, MISSING_FROM_MOTO[name])
            else:
                raise ValueError(f"{name} is neither in moto's data nor in MISSING_FROM_MOTO")
            types[name] = it
        region_offers = offers.setdefault(region, [])
        od = _float(row["on_demand_usd_per_hour"])
        if od is not None:
            region_offers.append(Offer(instance_type=name, region=region, market="on-demand", usd_per_hour=od))
        median = _float(row["spot_median"])
        if median is not None:
            region_offers.append(Offer(
                instance_type=name, region=region, market="spot", usd_per_hour=median,
                spot_min_usd=_float(row["spot_min"]), az_count=_int(row["spot_az_count"]),
                interruption_bucket=_int(row["spot_interruption_bucket"]),
                savings_pct=float(row["spot_savings_pct"]) if row["spot_savings_pct"] else None,
            ))
    missing = sorted(n for n in types if n not in described)
    return Catalog(
        schema_version=SCHEMA_VERSION,
        cloud="aws",
        source="snapshot",
        fetched_at=SNAPSHOT_DATE,
        provenance=PROVENANCE.format(moto_version=moto_version, missing=", ".join(missing) or "No types"),
        regions=sorted(offers),
        instance_types=dict(sorted(types.items())),
        offers={r: RegionOffers.from_offers(o) for r, o in sorted(offers.items())},
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=DEFAULT_CSV, help="reference aws-instances.csv")
    ap.add_argument("--out", type=Path, default=SNAPSHOT_PATH)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cat = build(args.csv)
    save_atomic(cat, args.out, indent=1)
    n_offers = sum(len(o) for o in cat.offers.values())
    log.info("wrote %s: %d types, %d regions, %d offers", args.out, len(cat.instance_types), len(cat.regions), n_offers)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
