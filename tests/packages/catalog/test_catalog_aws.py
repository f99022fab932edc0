"""Live refresh against moto (EC2, with AWS's real instance-type data) and a Stubber-driven
Pricing client (moto does not implement the Pricing API)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import boto3
import pytest
from botocore.stub import ANY, Stubber
from checkout import ROOT
from moto import mock_aws
from schema_check import checked

from advisor.paths import catalog_cache_path
from catalog.aws import refresh, spot_advisor
from catalog.io import SNAPSHOT_PATH, CatalogError, load
from safeio import save_atomic


def _price_item(itype: str, usd: str, unit: str = "Hrs", region: str = "us-east-1") -> str:
    """A PriceList entry as the Pricing API returns it: a JSON document inside a string."""
    return json.dumps({
        "product": {"productFamily": "Compute Instance",
                    "attributes": {"instanceType": itype, "regionCode": region, "operatingSystem": "Linux",
                                   "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}},
        "terms": {"OnDemand": {"SKU.JRTCKXETXF": {"priceDimensions": {"SKU.JRTCKXETXF.6YS6EN2CT7": {
            "unit": unit, "pricePerUnit": {"USD": usd}, "description": f"${usd} per On Demand Linux {itype} Instance Hour"}}}}},
    })


def _stub_pricing(region: str, pages: list[list[str]]):
    client = boto3.client("pricing", region_name="us-east-1")
    stub = Stubber(client)
    for i, items in enumerate(pages):
        expected = {"ServiceCode": "AmazonEC2", "Filters": ANY, "FormatVersion": "aws_v1"}
        if i:
            expected["NextToken"] = f"token-{i}"
        resp = {"PriceList": items, "FormatVersion": "aws_v1"}
        if i < len(pages) - 1:
            resp["NextToken"] = f"token-{i + 1}"
        stub.add_response("get_products", resp, expected)
    stub.activate()
    return client, stub


@pytest.fixture
def fake_creds(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


# --- DescribeInstanceTypes through moto: AWS's real data --------------------------------------


@mock_aws
def test_describe_instance_types_real_facts():
    ec2 = boto3.client("ec2", region_name="us-east-1")
    types = refresh.fetch_instance_types(ec2, families={"p4d", "g6e", "trn1", "c7i"})
    assert {t.family for t in types.values()} == {"p4d", "g6e", "trn1", "c7i"}  # wildcard filter "g6e.*"
    p4d = types["p4d.24xlarge"]
    assert (p4d.accelerator_kind, p4d.accelerator_model, p4d.accelerator_count, p4d.accelerator_memory_gib) == \
        ("gpu", "A100-40GB", 8, 40.0)
    assert p4d.efa and p4d.network_gbps == 400  # "4x 100 Gigabit"
    g6e = types["g6e.xlarge"]
    assert (g6e.accelerator_model, g6e.accelerator_count) == ("L40S", 1)
    assert g6e.network_up_to and g6e.network_gbps == 20
    trn = types["trn1.2xlarge"]
    assert (trn.accelerator_kind, trn.accelerator_model, trn.accelerator_count) == ("neuron", "Trainium", 1)
    c7i = types["c7i.2xlarge"]
    assert (c7i.accelerator_kind, c7i.accelerator_count, c7i.vcpus, c7i.memory_gib) == ("none", 0, 8, 16.0)
    assert c7i.cpu_manufacturer == "Intel" and c7i.cpu_clock_ghz == 3.2 and "Sapphire Rapids" in c7i.cpu_model


@mock_aws
def test_trn1_comes_from_neuron_info_not_gpu_info():
    rec = boto3.client("ec2", region_name="us-east-1").describe_instance_types(InstanceTypes=["trn1.2xlarge"])
    rec = rec["InstanceTypes"][0]
    assert "GpuInfo" not in rec and rec["NeuronInfo"]["NeuronDevices"][0]["Name"] == "Trainium"


@mock_aws
def test_offerings_by_region():
    offered = refresh.fetch_offered_types(boto3.client("ec2", region_name="us-west-2"), "us-west-2")
    assert "p4d.24xlarge" in offered and "c7i.2xlarge" in offered


@mock_aws
def test_spot_history_via_moto_gives_per_az_stats():
    ec2 = boto3.client("ec2", region_name="us-east-1")
    stats = refresh.fetch_spot(ec2, "us-east-1", ["c7i.2xlarge", "g6e.xlarge"], datetime.now(timezone.utc))
    assert stats["c7i.2xlarge"]["az_count"] >= 2  # one price per AZ that offers it
    assert stats["c7i.2xlarge"]["min"] <= stats["c7i.2xlarge"]["median"]


def test_spot_stats_keeps_only_the_latest_price_per_az():
    t0 = datetime(2025, 11, 1, tzinfo=timezone.utc)
    hist = [
        {"InstanceType": "g5.xlarge", "AvailabilityZone": "us-east-1a", "ProductDescription": "Linux/UNIX", "SpotPrice": "0.90",
         "Timestamp": t0},
        {"InstanceType": "g5.xlarge", "AvailabilityZone": "us-east-1a", "ProductDescription": "Linux/UNIX", "SpotPrice": "0.40",
         "Timestamp": t0 + timedelta(hours=2)},
        {"InstanceType": "g5.xlarge", "AvailabilityZone": "us-east-1b", "ProductDescription": "Linux/UNIX", "SpotPrice": "0.50",
         "Timestamp": t0},
        {"InstanceType": "g5.xlarge", "AvailabilityZone": "us-east-1c", "ProductDescription": "Linux/UNIX", "SpotPrice": "0.70",
         "Timestamp": t0},
        {"InstanceType": "g5.xlarge", "AvailabilityZone": "us-east-1c", "ProductDescription": "Windows", "SpotPrice": "0.10",
         "Timestamp": t0},
    ]
    s = refresh.spot_stats(hist)["g5.xlarge"]
    assert (s["min"], s["median"], s["az_count"]) == (0.40, 0.50, 3)
    assert s["timestamp"] == t0 + timedelta(hours=2)


def test_spot_stats_ignores_local_zones():
    t0 = datetime(2025, 11, 1, tzinfo=timezone.utc)
    row = {"InstanceType": "c7i.2xlarge", "ProductDescription": "Linux/UNIX", "Timestamp": t0}
    hist = [{**row, "AvailabilityZone": "us-east-1a", "SpotPrice": "0.16"},
            {**row, "AvailabilityZone": "us-east-1b", "SpotPrice": "0.17"},
            {**row, "AvailabilityZone": "us-east-1-bos-1a", "SpotPrice": "0.05"}]
    s = refresh.spot_stats(hist, "us-east-1")["c7i.2xlarge"]
    assert (s["min"], s["az_count"]) == (0.16, 2)


# --- Pricing API through Stubber ----------------------------------------------------------------


def test_get_products_two_pages_skips_zero_and_non_hourly():
    client, stub = _stub_pricing("us-east-1", [
        [_price_item("g5.xlarge", "1.0060000000"), _price_item("c7i.2xlarge", "0.0000000000")],
        [_price_item("p4d.24xlarge", "21.9576000000"), _price_item("g6e.xlarge", "5.00", unit="Quantity")],
    ])
    prices = refresh.fetch_on_demand_prices(client, "us-east-1")
    stub.assert_no_pending_responses()  # both pages were read (NextToken followed)
    assert prices == {"g5.xlarge": 1.006, "p4d.24xlarge": 21.9576}


def test_get_products_sends_the_documented_filters():
    client = boto3.client("pricing", region_name="us-east-1")
    stub = Stubber(client)
    stub.add_response("get_products", {"PriceList": []}, {
        "ServiceCode": "AmazonEC2", "FormatVersion": "aws_v1",
        "Filters": [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in (
            ("operatingSystem", "Linux"), ("tenancy", "Shared"), ("preInstalledSw", "NA"),
            ("capacitystatus", "Used"), ("licenseModel", "No License required"),
            ("marketoption", "OnDemand"), ("regionCode", "eu-west-1"))],
    })
    with stub:
        assert refresh.fetch_on_demand_prices(client, "eu-west-1") == {}
    stub.assert_no_pending_responses()


@pytest.mark.parametrize("code, needle", [
    ("AccessDeniedException", "needs IAM permissions"),
    ("ThrottlingException", "throttled"),
])
def test_pricing_errors_become_one_line(code, needle):
    client = boto3.client("pricing", region_name="us-east-1")
    stub = Stubber(client)
    stub.add_client_error("get_products", service_error_code=code, service_message="nope")
    with stub, pytest.raises(CatalogError) as e:
        refresh.fetch_on_demand_prices(client, "us-east-1")
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_ec2_unauthorized_operation():
    ec2 = boto3.client("ec2", region_name="us-east-1")
    stub = Stubber(ec2)
    stub.add_client_error("describe_instance_types", service_error_code="UnauthorizedOperation",
                          service_message="You are not authorized", http_status_code=403)
    with stub, pytest.raises(CatalogError, match="ec2:DescribeInstanceTypes"):
        refresh.fetch_instance_types(ec2)


def test_no_credentials(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(CatalogError, match="no AWS credentials"):
        refresh.refresh(regions=["us-east-1"], session=boto3.session.Session())


def test_unreachable_endpoint(fake_creds, monkeypatch):
    # a refused connection is tried twice (awscall.TIMEOUT_ATTEMPTS), not botocore's 8 times
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    with pytest.raises(CatalogError, match="cannot reach http://127.0.0.1:9"):
        refresh.refresh(regions=["us-east-1"], session=boto3.session.Session())


def test_unknown_region_rejected_before_any_call():
    with pytest.raises(CatalogError, match="unknown AWS region 'us-middle-9'"):
        refresh.refresh(regions=["us-east-1", "us-middle-9"])


def test_spot_advisor_file(tmp_path):
    f = tmp_path / "advisor.json"
    f.write_text(json.dumps({"spot_advisor": {"us-east-1": {"Linux": {"g5.xlarge": {"s": 61, "r": 3}}}}}))
    assert spot_advisor.load(f) == {"us-east-1": {"g5.xlarge": {"r": 3, "s": 61}}}
    # One entry out of shape refuses the whole file, saying which (it was once dropped in silence).
    f.write_text(json.dumps({"spot_advisor": {"us-east-1": {"Linux": {"g5.xlarge": {"s": 61, "r": 3}, "bad": {"r": 9}}}}}))
    with pytest.raises(CatalogError, match="'us-east-1' 'bad': interruption bucket 'r' is 9, not 0-4"):
        spot_advisor.load(f)
    f.write_text('{"spot_advisor": ')
    with pytest.raises(CatalogError, match="not valid JSON"):
        spot_advisor.load(f)
    f.write_text('{"ranges": []}')
    with pytest.raises(CatalogError, match="no 'spot_advisor'"):
        spot_advisor.load(f)


# --- End to end from the CLI --------------------------------------------------------------------


@mock_aws
def test_refresh_end_to_end_from_cli(cli, monkeypatch, tmp_path):
    client, stub = _stub_pricing("us-east-1", [
        [_price_item("g6e.xlarge", "1.861"), _price_item("p4d.24xlarge", "0.0")],
        [_price_item("p4d.24xlarge", "21.9576"), _price_item("trn1.2xlarge", "1.34375"),
         _price_item("c7i.2xlarge", "0.357"), _price_item("c7i.2xlarge", "0.1", unit="Quantity")],
    ])
    monkeypatch.setattr(refresh, "pricing_client", lambda session, deadline=None: client)
    advisor_file = tmp_path / "spot-advisor.json"
    advisor_file.write_text(json.dumps({"spot_advisor": {"us-east-1": {"Linux": {"c7i.2xlarge": {"s": 64, "r": 1}}}}}))

    code, out, err = cli("catalog", "refresh", "--regions", "us-east-1", "--families", "g6e,p4d,trn1,c7i",
                         "--spot-advisor", str(advisor_file), "--format", "json")
    assert code == 0, err
    stub.assert_no_pending_responses()
    done = checked(out, "catalog-refresh")
    assert done["regions"] == ["us-east-1"] and done["path"] == str(catalog_cache_path())
    cat = load(catalog_cache_path())
    assert cat.source == "aws-api" and cat.regions == ["us-east-1"]
    assert {it.family for it in cat.instance_types.values()} == {"g6e", "p4d", "trn1", "c7i"}
    od = {o.instance_type: o for o in cat.iter_offers("us-east-1") if o.market == "on-demand"}
    assert od["p4d.24xlarge"].usd_per_hour == 21.9576 and od["c7i.2xlarge"].usd_per_hour == 0.357
    spot = {o.instance_type: o for o in cat.iter_offers("us-east-1") if o.market == "spot"}
    assert spot["c7i.2xlarge"].interruption_bucket == 1 and spot["c7i.2xlarge"].savings_pct == 64
    assert spot["c7i.2xlarge"].az_count >= 2

    code, out, err = cli("catalog", "info", "--format", "json")
    assert code == 0
    info = checked(out, "catalog-info")
    assert info["source"] == "aws-api" and info["path"] == str(catalog_cache_path())
    assert info["instance_types"] == len(cat.instance_types)


@mock_aws
def test_failed_refresh_keeps_previous_cache_byte_identical(cli, monkeypatch):
    save_atomic(load(SNAPSHOT_PATH), catalog_cache_path())
    before = catalog_cache_path().read_bytes()
    client = boto3.client("pricing", region_name="us-east-1")
    stub = Stubber(client)
    stub.add_client_error("get_products", service_error_code="ThrottlingException", service_message="Rate exceeded")
    stub.activate()
    monkeypatch.setattr(refresh, "pricing_client", lambda session, deadline=None: client)
    code, _out, err = cli("catalog", "refresh", "--regions", "us-east-1", "--families", "c7i")
    assert code == 2 and "AWS throttled" in err and err.count("\n") == 1
    assert catalog_cache_path().read_bytes() == before


def test_unknown_region_from_cli_keeps_cache(cli):
    save_atomic(load(SNAPSHOT_PATH), catalog_cache_path())
    before = catalog_cache_path().read_bytes()
    code, _out, err = cli("catalog", "refresh", "--regions", "us-east-1,moon-1")
    assert code == 2 and "unknown AWS region 'moon-1'" in err and err.count("\n") == 1
    assert catalog_cache_path().read_bytes() == before


REAL_ADVISOR = ROOT / "tests" / "data" / "spot-advisor-excerpt.json"  # unchanged entries of the real file


def test_real_spot_advisor_file_format():
    adv = spot_advisor.load(REAL_ADVISOR)
    assert set(adv) == {"us-east-1", "us-west-2"}
    entries = [e for region in adv.values() for e in region.values()]
    assert len(entries) > 100 and all(0 <= e["r"] <= 4 and 0 < e["s"] < 100 for e in entries)
    assert adv["us-east-1"]["c7i.2xlarge"] == {"r": 4, "s": 59}  # as the real file has it


def test_catalog_commands_do_not_import_boto3_until_refresh():
    code = ("import sys; from advisor.cli import main; main(['catalog', 'show', '--format', 'csv', '--max-age', '1e6']);"
            "heavy = [m for m in ('boto3', 'botocore', 'torch', 'lightning', 'matplotlib') if m in sys.modules];"
            "assert not heavy, heavy")
    r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@mock_aws
def test_capacity_block_note_from_describe_instance_types(cli, monkeypatch):
    # moto ships AWS's real DescribeInstanceTypes records: p5.48xlarge lists "capacity-block" in
    # SupportedUsageClasses, g6e.xlarge does not; refresh keeps them, recommend says so
    client, _stub = _stub_pricing("us-east-1", [[_price_item("p5.48xlarge", "55.04"), _price_item("g6e.xlarge", "1.861"),
                                                  # c7i: published figures to estimate from
                                                  _price_item("c7i.2xlarge", "0.357")]])
    monkeypatch.setattr(refresh, "pricing_client", lambda session, deadline=None: client)
    code, _out, err = cli("catalog", "refresh", "--regions", "us-east-1", "--families", "p5,g6e,c7i")
    assert code == 0, err
    cat = load(catalog_cache_path())
    assert "capacity-block" in cat.instance_types["p5.48xlarge"].usage_classes
    assert cat.instance_types["g6e.xlarge"].usage_classes == ["on-demand", "spot"]
    code, out, err = cli("recommend", "--budget", "100000", "--deadline", "30d", "--samples", "1e9",
                         "--format", "json", "--top", "50", "--max-instances", "1")
    assert code == 0, err
    doc = json.loads(out)
    rows = doc["recommendations"]
    notes = {r["instance_type"]: r["notes"] for r in rows if r["market"] == "on-demand"}
    assert "usually needs a Capacity Block or reservation" in notes["p5.48xlarge"]
    assert "usually needs a Capacity Block or reservation" not in notes["g6e.xlarge"]
