"""Hand-made catalogs for the recommend/rank tests: small enough that the right answer is known."""

from __future__ import annotations

from factories import T0

from catalog.aws.families import facts
from catalog.models import SCHEMA_VERSION, Catalog, InstanceType, Offer, RegionOffers

NOW = T0  # the tests' "now": results made by factories.probe_result are fresh

# Specs as AWS describes them (describe_instance_types); network in Gbit/s.
TYPES = {
    "c7i.2xlarge": {"family": "c7i", "vcpus": 8, "memory_gib": 16, "arch": "x86_64", "cpu_manufacturer": "Intel",
                        "cpu_model": "Intel Xeon Platinum 8488C", "cpu_clock_ghz": 3.2, "network_gbps": 12.5,
                        "network_up_to": True},
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
                         "cpu_clock_ghz": 3.5, "accelerator_kind": "neuron", "accelerator_model": "Trainium",
                         "accelerator_count": 1,
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
    from safeio import save_atomic

    save_atomic(catalog or make_catalog(), path)
    return str(path)
