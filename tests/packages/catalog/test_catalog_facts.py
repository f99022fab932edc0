"""Catalog facts checked on every instance type in moto's real DescribeInstanceTypes data."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import moto
import pytest

from catalog import accelerators as acc
from catalog.aws.describe import instance_type_from_describe, parse_network
from catalog.hardware import gpu_spec, sustained_network_gbps

MOTO_TYPES = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"


@pytest.fixture(scope="module")
def described() -> dict[str, dict]:
    with gzip.open(MOTO_TYPES) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def types(described):
    out = {n: instance_type_from_describe(d) for n, d in described.items()}
    return {n: t for n, t in out.items() if t is not None}


def test_every_type_parses(described, types):
    assert len(described) > 1000
    mac = {n for n, d in described.items() if n.startswith("mac")}
    assert set(described) - set(types) == mac  # only Mac hosts are no training target


def test_network_is_the_instances_own_figure_or_the_up_to_baseline(described, types):
    checked = 0
    for name, it in types.items():
        net = described[name]["NetworkInfo"]
        figure, up_to = parse_network(net.get("NetworkPerformance"))
        cards = sum(c.get("BaselineBandwidthInGbps") or 0 for c in net.get("NetworkCards") or [])
        if figure is None:  # "High", "Moderate": only the cards say anything
            assert it.network_baseline_gbps == (cards or None), name
        elif not up_to:
            assert it.network_baseline_gbps == figure, name
        else:
            assert it.network_baseline_gbps == min(cards, figure), name
            assert it.network_baseline_gbps <= figure, name
        checked += 1
        used, _ = sustained_network_gbps(it)
        assert used == it.network_baseline_gbps, name
    assert checked == len(types)


@pytest.mark.parametrize("name, gbps", [
    ("g6e.48xlarge", 400),  # four 400 Gbit/s cards, one "400 Gigabit" instance: not 1,600
    ("g6e.24xlarge", 200),
    ("c6in.32xlarge", 200), ("m6in.32xlarge", 200), ("r6in.32xlarge", 200),
    ("p6-b200.48xlarge", 3200),  # eight 200 Gbit/s cards: 1,600 summed
    ("trn2.3xlarge", 200),  # one card saying 50
    ("p4d.24xlarge", 400), ("p5.48xlarge", 3200),
    ("c7i.2xlarge", 3.125),  # "Up to 12.5 Gigabit": the baseline
    ("i7i.12xlarge", 28),  # "Up to 28 Gigabit" with a 28.125 card: never above the burst
])
def test_network_figures_that_summing_cards_got_wrong(types, name, gbps):
    assert types[name].network_baseline_gbps == pytest.approx(gbps)


def test_fractional_gpus_are_gpu_instances_with_a_share_of_an_l4(described, types):
    l4 = acc.get("L4")
    fractional = {n for n, d in described.items()
                  if any(g.get("Count") == 0 and (g.get("GpuPartitionSize") or 1) < 1
                         for g in (d.get("GpuInfo") or {}).get("Gpus", []))}
    assert {"g6f.large", "g6f.4xlarge", "gr6f.4xlarge"} <= fractional
    for name in fractional:
        it = types[name]
        share = described[name]["GpuInfo"]["Gpus"][0]["GpuPartitionSize"]
        assert (it.accelerator_kind, it.accelerator_model, it.accelerator_count) == ("gpu", "L4", 1), name
        assert it.accelerator_fraction == share
        assert gpu_spec(it) == l4
    assert types["g6f.large"].accelerator_fraction == 0.125
    assert types["gr6f.4xlarge"].accelerator_fraction == 0.5
    assert types["gr6f.4xlarge"].accelerator_memory_gib == pytest.approx(11.18, abs=0.01)  # the partition's


def test_every_whole_gpu_maps_to_its_own_spec_or_to_nothing(described, types):
    """A known name lands on the part with that memory; an unknown one is not given another's peaks."""
    for name, d in described.items():
        gpus = (d.get("GpuInfo") or {}).get("Gpus") or []
        if not gpus or gpus[0].get("Count", 0) == 0:
            continue
        it, g = types[name], gpus[0]
        spec = gpu_spec(it)
        if spec is None:
            assert g["Name"] in {"B300", "RTX PRO 4500", "RTX PRO Server 6000"}, (name, g["Name"])
            continue
        # T4g is the T4 silicon in a Graviton host; A100/V100 keys carry their memory ("A100-40GB").
        assert spec.key.split("-")[0] == {"T4g": "T4"}.get(g["Name"], g["Name"]), (name, g["Name"], spec.key)
        assert 0.8 * spec.memory_gib <= it.accelerator_memory_gib <= 1.1 * spec.memory_gib


def test_the_fetcher_writes_the_family_facts(types):
    """The estimator reads links and socket sizes from these fields, never from a family table."""
    p4d, g5, g6f, c7i, c7i_big = (types[n] for n in ("p4d.24xlarge", "g5.xlarge", "g6f.large", "c7i.2xlarge",
                                                     "c7i.48xlarge"))
    assert (p4d.interconnect_gbs, p4d.host_link_gbs) == (300.0, 31.5) and p4d.interconnect.startswith("NVLink 3")
    assert g5.interconnect is None and g5.host_link.startswith("PCIe Gen4")  # one GPU: nothing between devices
    assert types["g5.12xlarge"].interconnect_gbs == 31.5  # a family not listed: GPUs over PCIe Gen4
    assert types["p5en.48xlarge"].host_link_gbs == 63.0 and types["g4dn.12xlarge"].host_link_gbs == 15.75
    assert g6f.interconnect is None and g6f.host_link_gbs == 31.5  # a fractional GPU is one device
    assert c7i.host_link is None and c7i.interconnect is None and c7i.socket_vcpus == c7i_big.socket_vcpus == 96
    assert types["m5.large"].socket_vcpus is None  # not known: all its vCPUs count
    assert {t.cloud for t in types.values()} == {"aws"}
