"""Hand-made catalogs for the recommend/rank tests: small enough that the right answer is known."""

from __future__ import annotations

from datetime import datetime, timezone

from catalog.aws.families import facts
from catalog.models import SCHEMA_VERSION, Catalog, InstanceType, Offer, RegionOffers

NOW = datetime(2026, 11, 1, tzinfo=timezone.utc)

# Specs as AWS describes them (describe_instance_types); network in Gbit/s.
TYPES = {
    "c7i.2xlarge": {"family": "c7i", "vcpus": 8, "memory_gib": 16, "arch": "x86_64", "cpu_manufacturer": "Intel",
                        "cpu_model": "Intel Xeon Platinum 8488C", "cpu_clock_ghz": 3.2, "network_gbps": 12.5, "network_up_to": True},
    "c7i.8xlarge": {"family": "c7i", "vcpus": 32, "memory_gib": 64, "arch": "x86_64", "cpu_manufacturer": "Intel",
                        "cpu_model": "Intel Xeon Platinum 8488C", "cpu_clock_ghz": 3.2, "network_gbps": 12.5},
    "g5.2xlarge": {"family": "g5", "vcpus": 8, "memory_gib": 32, "arch": "x86_64", "cpu_manufacturer": "AMD",
                       "cpu_clock_ghz": 3.3, "accelerator_kind": "gpu", "accelerator_model": "A10G", "accelerator_count": 1,
                       "accelerator_memory_gib": 24, "network_gbps": 10, "network_up_to": True},
    "g5.12xlarge": {"family": "g5", "vcpus": 48, "memory_gib": 192, "arch": "x86_64", "cpu_manufacturer": "AMD",
                        "cpu_clock_ghz": 3.3, "accelerator_kind": "gpu", "accelerator_model": "A10G", "accelerator_count": 4,
                        "accelerator_memory_gib": 24, "network_gbps": 40},
    "g4dn.xlarge": {"family": "g4dn", "vcpus": 4, "memory_gib": 16, "arch": "x86_64", "cpu_manufacturer": "Intel",
                        "cpu_clock_ghz": 2.5, "accelerator_kind": "gpu", "accelerator_model": "T4", "accelerator_count": 1,
                        "accelerator_memory_gib": 16, "network_gbps": 25, "network_up_to": True},
    "p4d.24xlarge": {"family": "p4d", "vcpus": 96, "memory_gib": 1152, "arch": "x86_64", "cpu_manufacturer": "Intel",
                         "cpu_clock_ghz": 3.0, "accelerator_kind": "gpu", "accelerator_model": "A100", "accelerator_count": 8,
                         "accelerator_memory_gib": 40, "network_gbps": 400, "efa": True},
    "trn1.2xlarge": {"family": "trn1", "vcpus": 8, "memory_gib": 32, "arch": "x86_64", "cpu_manufacturer": "Intel",
                         "cpu_clock_ghz": 3.5, "accelerator_kind": "neuron", "accelerator_model": "Trainium", "accelerator_count": 1,
                         "accelerator_memory_gib": 32, "network_gbps": 12.5},
}

# (type, region, market, $/h, interruption bucket)
OFFERS = [
    ("c7i.2xlarge", "us-east-1", "on-demand", 0.357, None),
    ("c7i.2xlarge", "us-east-1", "spot", 0.1291, 0),
    ("c7i.8xlarge", "us-east-1", "on-demand", 1.428, None),
    ("g5.2xlarge", "us-east-1", "on-demand", 1.212, None),
    ("g5.2xlarge", "us-east-1", "spot", 0.50, 2),
    ("g5.12xlarge", "us-east-1", "on-demand", 5.672, None),
    ("g4dn.xlarge", "us-east-1", "on-demand", 0.526, None),
    ("g4dn.xlarge", "us-east-1", "spot", 0.20, None),
    ("p4d.24xlarge", "us-east-1", "on-demand", 21.96, None),
    ("trn1.2xlarge", "us-east-1", "on-demand", 1.34375, None),
    ("c7i.2xlarge", "eu-west-1", "on-demand", 0.3997, None),
    ("g5.2xlarge", "eu-west-1", "on-demand", 1.36, None),
]


def instance(name: str, **over) -> InstanceType:
    spec = {**TYPES[name], **over}
    # with the per-family facts AWS's fetcher adds (socket size, GPU links)
    aws = facts(spec["family"], spec.get("accelerator_kind", "none"), spec.get("accelerator_count", 0))
    return InstanceType(name=name, **{**aws, **spec})


def make_catalog(types: dict | None = None, offers: list | None = None, **type_overrides) -> Catalog:
    types = types or {n: instance(n, **type_overrides.get(n, {})) for n in TYPES}
    offers = [o for o in OFFERS if o[0] in types] if offers is None else offers
    by_region: dict[str, RegionOffers] = {}
    for name, region, market, price, bucket in offers:
        by_region.setdefault(region, RegionOffers()).append(
            Offer(instance_type=name, region=region, market=market, usd_per_hour=price, interruption_bucket=bucket))
    return Catalog(schema_version=SCHEMA_VERSION, source="file", fetched_at=NOW, provenance="hand-made test catalog",
                   regions=sorted(by_region), instance_types=types, offers=by_region)


def write_catalog(path, catalog: Catalog | None = None) -> str:
    from catalog.io import save_atomic

    save_atomic(catalog or make_catalog(), path)
    return str(path)


def probe_result(instance_type: str, sps: float, *, accelerator: str = "cpu", devices: int = 1,
                 num_nodes: int = 1, precision: str = "bf16-mixed", model: str = "resnet50",
                 finished_at: datetime = NOW, torch: str = "2.15.0", lightning: str = "2.6.0",
                 ci: float = 0.02, flops_per_sample: float | None = None):
    from lightning_module.contract.result import (
        HardwareFingerprint,
        ProbeConfig,
        ProbeResult,
        SoftwareVersions,
        StepTimeStats,
        WorkloadSpec,
    )

    spec = WorkloadSpec(model=model)
    cfg = ProbeConfig(accelerator=accelerator, devices=devices, num_nodes=num_nodes, precision=precision,
                      batch_size=64)
    return ProbeResult(
        workload=spec, workload_id=spec.workload_id, instance_type=instance_type, instance_type_source="given",
        hardware=HardwareFingerprint(), software=SoftwareVersions(python="3.11.7", torch=torch, lightning=lightning),
        config=cfg, samples_per_sec=sps, samples_per_sec_ci=(sps * (1 - ci), sps * (1 + ci)),
        step_time=StepTimeStats(n_steps=50, mean_s=0.1, median_s=0.1, stdev_s=0.001, p10_s=0.099, p90_s=0.101,
                                warmup_steps=5, warmup_seconds=3.0),
        started_at=finished_at, finished_at=finished_at, flops_per_sample=flops_per_sample,
    )
