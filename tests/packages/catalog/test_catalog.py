"""The shipped snapshot, catalog files on disk, and `advisor catalog show|info` from the CLI."""

from __future__ import annotations

import csv
import json
import re

import pytest
from checkout import ROOT

from advisor.paths import catalog_cache_path
from catalog.aws.describe import generation_of, parse_network
from catalog.io import SNAPSHOT_PATH, CatalogError, load, loads
from safeio import save_atomic

# A copy of the reference table (tests/data/README.md): a clean clone has no shared/ beside it.
REFERENCE_CSV = ROOT / "tests" / "data" / "aws-instances.csv"


@pytest.fixture(scope="module")
def snapshot():
    return load(SNAPSHOT_PATH)


@pytest.mark.parametrize("text, expected", [
    ("Up to 12.5 Gigabit", (12.5, True)),
    ("3200 Gigabit", (3200.0, False)),
    ("100 Gigabit", (100.0, False)),
    ("4x 100 Gigabit", (400.0, False)),
    ("16x 200 Gigabit", (3200.0, False)),
    ("Up to 10 Gigabit", (10.0, True)),
    ("Moderate", (None, False)),
    ("Low to Moderate", (None, False)),
    (None, (None, False)),
])
def test_parse_network(text, expected):
    assert parse_network(text) == expected


def test_generation_is_the_digit_in_the_family():
    assert [generation_of(f) for f in ("c7i", "p6-b200", "g4dn", "trn1", "dl2q", "gr6")] == [7, 6, 4, 1, 2, 6]


def test_snapshot_metadata(snapshot):
    assert snapshot.source == "snapshot"
    assert snapshot.fetched_at.isoformat().startswith("2025-12-01")
    assert "snapshot 2025-12" in snapshot.provenance and "Spot Instance Advisor" in snapshot.provenance
    assert snapshot.regions == ["eu-west-1", "us-east-1", "us-west-2"]
    assert len(snapshot.instance_types) == 157


def test_snapshot_matches_reference_prices(snapshot):
    """Every priced row of the reference table is an offer with the same numbers."""
    offers = {(o.instance_type, o.region, o.market): o for o in snapshot.iter_offers()}
    with open(REFERENCE_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        key = (row["instance_type"], row["region"])
        if row["on_demand_usd_per_hour"]:
            assert offers[(*key, "on-demand")].usd_per_hour == float(row["on_demand_usd_per_hour"])
        else:
            assert (*key, "on-demand") not in offers
        if row["spot_median"]:
            s = offers[(*key, "spot")]
            assert s.usd_per_hour == float(row["spot_median"]) and s.spot_min_usd == float(row["spot_min"])
            assert s.az_count == int(row["spot_az_count"])
            assert s.interruption_bucket == (int(row["spot_interruption_bucket"]) if row["spot_interruption_bucket"] else None)
    assert ("p5e.48xlarge", "us-west-2", "on-demand") not in offers  # no published price
    assert ("p5.4xlarge", "us-east-1", "spot") not in offers  # no spot price


def test_snapshot_instance_facts(snapshot):
    t = snapshot.instance_types
    assert (t["p4d.24xlarge"].accelerator_model, t["p4d.24xlarge"].accelerator_count) == ("A100-40GB", 8)
    assert t["p4d.24xlarge"].efa and t["p4d.24xlarge"].network_gbps == 400
    assert t["p4de.24xlarge"].accelerator_model == "A100-80GB"
    assert t["g6e.xlarge"].accelerator_model == "L40S"
    assert t["g6.xlarge"].accelerator_model == "L4"
    assert t["p5en.48xlarge"].accelerator_model == "H200"
    assert t["p3dn.24xlarge"].accelerator_model == "V100-32GB"
    assert t["p3.2xlarge"].accelerator_model == "V100-16GB"
    assert t["g5g.xlarge"].accelerator_model == "T4" and t["g5g.xlarge"].arch == "arm64"
    assert (t["trn1.2xlarge"].accelerator_kind, t["inf2.xlarge"].accelerator_kind) == ("neuron", "neuron")
    assert t["dl1.24xlarge"].accelerator_kind == "gaudi"
    assert t["dl2q.24xlarge"].accelerator_kind == "none"  # Qualcomm inference cards: a CPU instance here
    c7i = t["c7i.2xlarge"]
    assert (c7i.vcpus, c7i.memory_gib, c7i.cpu_clock_ghz, c7i.network_up_to, c7i.generation) == (8, 16.0, 3.2, True, 7)


def test_snapshot_cores_and_baseline_network_come_from_aws(snapshot):
    from catalog.accelerators import physical_cores

    t = snapshot.instance_types
    # AWS runs 4th-gen EPYC (c7a) and Graviton without SMT; Intel types with two threads per core.
    assert physical_cores(t["c7a.8xlarge"]) == 32
    assert physical_cores(t["c8g.8xlarge"]) == 32
    assert physical_cores(t["c7i.2xlarge"]) == 4
    # "Up to 12.5 Gigabit" is a burst; the baseline is what a long all-reduce gets.
    assert t["c7i.2xlarge"].network_baseline_gbps == 3.125
    assert t["p4d.24xlarge"].network_baseline_gbps == 400


def test_save_atomic_roundtrip(snapshot, tmp_path):
    p = tmp_path / "sub" / "catalog.json"
    save_atomic(snapshot, p)
    assert load(p) == snapshot
    assert [x.name for x in p.parent.iterdir()] == ["catalog.json"]  # no temporary left behind


def _snapshot_dict() -> dict:
    return json.loads(SNAPSHOT_PATH.read_text())


def test_truncated_json():
    with pytest.raises(CatalogError, match="not valid JSON"):
        loads(SNAPSHOT_PATH.read_text()[:5000], where="x.json")


def test_wrong_schema_version():
    d = _snapshot_dict()
    d["schema_version"] = 3
    with pytest.raises(CatalogError, match="schema_version 3"):
        loads(json.dumps(d))


FACTS = ("cloud", "socket_vcpus", "interconnect", "interconnect_gbs", "host_link", "host_link_gbs")


def test_a_schema_1_catalog_loads_with_the_facts_the_fetcher_writes():
    """A catalog cached before the facts were fields (schema 1: AWS's only) needs no refresh."""
    d = _snapshot_dict()
    d["schema_version"] = 1
    del d["cloud"]
    for t in d["instance_types"].values():
        for k in FACTS:
            del t[k]
    old, new = loads(json.dumps(d)), load(SNAPSHOT_PATH)
    assert old.schema_version == new.schema_version == 2 and old.cloud == "aws"
    assert old.instance_types == new.instance_types
    assert old.instance_types["p5.48xlarge"].interconnect_gbs == 450.0


@pytest.mark.parametrize("change, needle", [
    ({"interconnect_gbs": None}, "interconnect and interconnect_gbs must be given together"),
    ({"host_link": None}, "host_link and host_link_gbs must be given together"),
    ({"host_link_gbs": 63_000.0}, "less than or equal to 1000"),  # MB/s, not GB/s
    ({"cloud": "gcp"}, "is of cloud 'gcp', the catalog of 'aws'"),
])
def test_bad_facts_are_refused(change, needle):
    d = _snapshot_dict()
    d["instance_types"]["p4d.24xlarge"].update(change)
    with pytest.raises(CatalogError, match=needle):
        loads(json.dumps(d))


def test_catalog_imports_neither_advisor_nor_lightning_module():
    """catalog/ is the bottom layer: the advisor and the probe build on it, never the reverse."""
    import ast

    for f in (ROOT / "catalog").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            assert not any(n.split(".")[0] in ("advisor", "lightning_module") for n in names), (f, names)


def test_the_refresh_dispatch_names_each_clouds_fetcher():
    from catalog.aws import refresh
    from catalog.clouds import REFRESH, refresher

    assert list(REFRESH) == ["aws"] and refresher("aws") is refresh.refresh


@pytest.mark.parametrize("bad", [-1.0, 0.0, "NaN"])
def test_bad_price(bad):
    d = _snapshot_dict()
    d["offers"]["us-east-1"]["usd_per_hour"][0] = bad
    text = json.dumps(d).replace('"NaN"', "NaN")
    with pytest.raises(CatalogError,
                       match=r"usd_per_hour.0 \(\S+ (on-demand|spot)\): "
                             r"Input should be (greater than or equal to 0.000001|a finite number)"):
        loads(text)


def _cache_with_snapshot() -> bytes:
    save_atomic(load(SNAPSHOT_PATH), catalog_cache_path())
    return catalog_cache_path().read_bytes()


@pytest.mark.parametrize("mutate, needle", [
    (lambda t: t[:3000], "not valid JSON"),
    (lambda t: t.replace('"schema_version": 2', '"schema_version": 7', 1), "schema_version 7"),
    (lambda t: re.sub(r'("usd_per_hour": \[\s*)', r"\1-", t, count=1), "greater than or equal to 0.000001"),
])
def test_bad_catalog_file_from_cli(cli, tmp_path, mutate, needle):
    before = _cache_with_snapshot()
    bad = tmp_path / "bad.json"
    bad.write_text(mutate(SNAPSHOT_PATH.read_text()))
    code, out, err = cli("catalog", "show", "--catalog", str(bad))
    assert code == 2 and out == ""
    assert err.startswith("advisor: error:") and needle in err and err.count("\n") == 1
    assert catalog_cache_path().read_bytes() == before


def test_show_from_cli_uses_snapshot(cli):
    code, out, err = cli("catalog", "show", "--family", "g6e", "--region", "us-east-1", "--format", "json")
    assert code == 0
    rows = json.loads(out)["offers"]
    assert {r["instance_type"] for r in rows} == {f"g6e.{s}" for s in
                                                  ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge",
                                                   "48xlarge")}
    r = next(r for r in rows if r["instance_type"] == "g6e.xlarge" and r["market"] == "on-demand")
    assert r["usd_per_hour"] == 1.861 and r["accelerator"] == "1x L40S"
    assert "days old" in err  # the snapshot is older than --max-age 30


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown"])
def test_show_formats(cli, fmt):
    code, out, _ = cli("catalog", "show", "--accelerator", "A100", "--market", "spot", "--format", fmt)
    assert code == 0
    assert "p4d.24xlarge" in out and "p4de.24xlarge" in out and "g5.xlarge" not in out


def test_show_accelerator_filter_does_not_confuse_l4_and_l40s(cli):
    code, out, _ = cli("catalog", "show", "--accelerator", "NVIDIA L4", "--format", "json", "--max-age", "100000")
    models = {r["accelerator_model"] for r in json.loads(out)["offers"]}
    assert code == 0 and models == {"L4"}


@pytest.mark.parametrize("args, needle", [
    (("--family", "g9"), "unknown instance family 'g9'"),
    (("--region", "mars-1"), "unknown region 'mars-1'"),
    (("--accelerator", "RTX 9090"), "no instance type in this catalog has accelerator 'RTX 9090'"),
])
def test_show_bad_filters(cli, args, needle):
    code, _out, err = cli("catalog", "show", *args)
    assert code == 2 and needle in err and err.strip().count("\n") <= 1  # the age warning + the error


def test_info(cli):
    code, out, err = cli("catalog", "info", "--format", "json", "--max-age", "100000")
    info = json.loads(out)
    assert code == 0 and err == ""
    assert info["source"] == "snapshot" and info["path"] == str(SNAPSHOT_PATH)
    assert (info["instance_types"], len(info["regions"]), info["offers"]) == (157, 3, 865)
    assert info["on_demand_offers"] == 433 and info["spot_offers"] == 432
    assert "snapshot 2025-12" in info["provenance"]
