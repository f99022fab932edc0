"""The Spot Instance Advisor data: fetched by `catalog refresh` from a local HTTP server on
127.0.0.1 standing in for AWS's public URL (a good file, a truncated one, a 404, one that never
answers), validated, and on any failure the previous catalog's buckets kept with a warning.

tests/data/spot-advisor-excerpt.json is an unchanged excerpt of the real file (its _source key
says which)."""

from __future__ import annotations

import json

import boto3
import pytest
from aws_fakes import LocalServer
from checkout import TESTS
from moto import mock_aws
from test_catalog_aws import _price_item, _stub_pricing

from advisor.paths import catalog_cache_path
from catalog.aws import refresh, spot_advisor
from catalog.io import CatalogError, load

EXCERPT = (TESTS / "data" / "spot-advisor-excerpt.json").read_bytes()


class Server(LocalServer):
    """Stands in for AWS's public URL: mode good | truncated (short of its Content-Length) | cut
    (no Content-Length, ends mid-document) | 404 | hang | html | tiny (valid, 1 entry)."""

    def __init__(self):
        self.mode = "good"
        self.hits = 0
        super().__init__(self._reply, "/spot-advisor-data.json")

    def _reply(self, h) -> None:
        self.hits += 1
        if self.mode == "hang":
            self.stop.wait(3)
            return
        if self.mode == "404":
            h.send_error(404, "Not Found")
            return
        body = {"good": EXCERPT, "truncated": EXCERPT, "cut": EXCERPT[: len(EXCERPT) // 2],
                "html": b"<html><body>Access Denied</body></html>",
                "tiny": json.dumps({"spot_advisor": {"us-east-1": {"Linux": {
                    "c7i.2xlarge": {"s": 59, "r": 4}}}}}).encode()}[self.mode]
        h.send_response(200)
        if self.mode != "cut":
            h.send_header("Content-Length", str(len(EXCERPT) if self.mode == "truncated" else len(body)))
        h.end_headers()
        h.wfile.write(body[: len(body) // 2] if self.mode == "truncated" else body)


@pytest.fixture
def server(monkeypatch):
    s = Server()
    monkeypatch.setenv(spot_advisor.URL_ENV, s.url)
    monkeypatch.setattr(spot_advisor, "SOCKET_TIMEOUT_S", 0.5)  # "hang" answers nothing for 3 s
    yield s
    s.close()


# ---------------------------------------------------------------- the fetch


def test_good_file(server):
    b = spot_advisor.fetch()
    assert set(b) == {"us-east-1", "us-west-2"}
    assert b["us-east-1"]["c7i.2xlarge"] == {"r": 4, "s": 59}
    assert b["us-east-1"]["g6e.xlarge"] == {"r": 1, "s": 58}
    assert server.hits == 1


@pytest.mark.parametrize(("mode", "message"), [
    ("truncated", "was cut off"),  # fewer bytes than its Content-Length
    ("cut", "not valid JSON"),  # no Content-Length, ends mid-document
    ("404", "HTTP 404"),
    ("hang", "timed out"),
    ("html", "not valid JSON"),
    ("tiny", "fewer than a complete copy"),
])
def test_bad_answers_are_one_line(server, mode, message):
    server.mode = mode
    with pytest.raises(CatalogError) as e:
        spot_advisor.fetch()
    # "timed out" for the hang: the 0.5 s socket timeout ended it, not the server's 3 s (no wall time
    # is asserted: a loaded machine stretches both)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).startswith(f"the Spot Instance Advisor data at {server.url}")


def test_only_http_urls(monkeypatch):
    monkeypatch.setenv(spot_advisor.URL_ENV, "file:///etc/passwd")
    with pytest.raises(CatalogError, match="not an http"):
        spot_advisor.fetch()


def test_buckets_from_a_catalog():
    from catalog.io import SNAPSHOT_PATH

    b = spot_advisor.from_catalog(load(SNAPSHOT_PATH))
    assert set(b) == {"us-east-1", "us-west-2", "eu-west-1"}
    assert all(0 <= v["r"] <= 4 for region in b.values() for v in region.values())


# ---------------------------------------------------------------- catalog refresh, end to end


def _refresh(cli, monkeypatch, *extra):
    client, stub = _stub_pricing("us-east-1", [[_price_item("c7i.2xlarge", "0.357"),
                                                 _price_item("g6e.xlarge", "1.861")]])
    monkeypatch.setattr(refresh, "pricing_client", lambda session, deadline=None: client)
    code, _out, err = cli("catalog", "refresh", "--regions", "us-east-1", "--families", "c7i,g6e", *extra)
    stub.assert_no_pending_responses()
    return code, err


def _buckets() -> dict[str, int | None]:
    """Two types' buckets in the refreshed us-east-1 (moto has spot prices for every c7i/g6e size)."""
    cat = load(catalog_cache_path())
    return {o.instance_type: o.interruption_bucket for o in cat.iter_offers("us-east-1")
            if o.market == "spot" and o.instance_type in ("c7i.2xlarge", "g6e.xlarge")}


@mock_aws
def test_refresh_fetches_the_buckets(cli, monkeypatch, server):
    code, err = _refresh(cli, monkeypatch)
    assert code == 0, err
    assert _buckets() == {"c7i.2xlarge": 4, "g6e.xlarge": 1}
    assert f"Spot Instance Advisor data {server.url}" in load(catalog_cache_path()).provenance
    assert "warning" not in err.replace("days old", "")


@pytest.mark.parametrize("mode", ["truncated", "cut", "404", "hang", "tiny"])
@mock_aws
def test_a_failed_fetch_keeps_the_previous_buckets(cli, monkeypatch, server, mode):
    code, err = _refresh(cli, monkeypatch)
    assert code == 0, err
    before = _buckets()
    server.mode = mode
    code, err = _refresh(cli, monkeypatch)
    assert code == 0, err
    warnings = [ln for ln in err.splitlines() if "Spot Instance Advisor" in ln]
    assert len(warnings) == 1 and warnings[0].startswith("advisor: warning: the Spot Instance Advisor data at")
    assert "keeping the interruption buckets of the previous catalog (aws-api, fetched " in warnings[0]
    assert _buckets() == before
    assert "spot offers from the previous catalog (aws-api, fetched " in load(catalog_cache_path()).provenance


@mock_aws
def test_no_previous_cache_keeps_the_snapshots_buckets(cli, monkeypatch, server):
    server.mode = "404"
    code, err = _refresh(cli, monkeypatch)
    assert code == 0, err
    from catalog.io import SNAPSHOT_PATH

    snap = {o.instance_type: o.interruption_bucket for o in load(SNAPSHOT_PATH).iter_offers("us-east-1")
            if o.market == "spot" and o.instance_type in ("c7i.2xlarge", "g6e.xlarge")}
    assert _buckets() == snap and "(snapshot, fetched 2025-12-01)" in err


@mock_aws
def test_spot_advisor_file_overrides_the_fetch(cli, monkeypatch, server, tmp_path):
    f = tmp_path / "advisor.json"
    f.write_text(json.dumps({"spot_advisor": {"us-east-1": {"Linux": {"c7i.2xlarge": {"s": 70, "r": 0}}}}}))
    code, err = _refresh(cli, monkeypatch, "--spot-advisor", str(f))
    assert code == 0, err
    assert server.hits == 0 and _buckets() == {"c7i.2xlarge": 0, "g6e.xlarge": None}


@mock_aws
def test_regions_all_reads_the_enabled_regions(monkeypatch):
    ec2 = boto3.client("ec2", region_name="us-east-1")
    enabled = sorted(r["RegionName"] for r in ec2.describe_regions()["Regions"])
    assert refresh.enabled_regions(boto3.session.Session()) == enabled and "us-east-2" in enabled


def test_regions_all_with_others_is_refused(cli):
    code, _out, err = cli("catalog", "refresh", "--regions", "all,us-east-1")
    assert code == 2 and "--region all cannot be combined" in err


def test_default_regions_include_us_east_2():
    assert refresh.DEFAULT_REGIONS == ("us-east-1", "us-east-2", "us-west-2", "eu-west-1")


def test_the_snapshot_has_no_us_east_2_prices_because_the_reference_table_has_none():
    # the shipped snapshot is built from the reference table, which has no us-east-2 rows:
    # no region is invented, a refresh adds it
    from catalog.io import SNAPSHOT_PATH

    assert "us-east-2" not in load(SNAPSHOT_PATH).regions



# ---------------------------------------------------------------- validate, then swap

_GOOD = {"spot_advisor": {"us-east-1": {"Linux": {"c7i.2xlarge": {"s": 70, "r": 0}}}}}
BAD_ADVISOR_FILES = {
    "a list of regions": json.dumps({"spot_advisor": ["us-east-1"]}).encode(),
    "a region that is a number": json.dumps({"spot_advisor": {"us-east-1": 3}}).encode(),
    "Linux a list": json.dumps({"spot_advisor": {"us-east-1": {"Linux": ["c7i.2xlarge"]}}}).encode(),
    "bucket 9": json.dumps({"spot_advisor": {"us-east-1": {"Linux": {"c7i.2xlarge": {"s": 70, "r": 9}}}}}).encode(),
    "bucket true": json.dumps({"spot_advisor": {"us-east-1": {"Linux": {"c7i.2xlarge": {"s": 70, "r": True}}}}}).encode(),
    "bucket '1'": json.dumps({"spot_advisor": {"us-east-1": {"Linux": {"c7i.2xlarge": {"s": 70, "r": "1"}}}}}).encode(),
    "no entries": json.dumps({"spot_advisor": {}}).encode(),
    "entries only for other regions": json.dumps(
        {"spot_advisor": {"eu-west-1": {"Linux": {"c7i.2xlarge": {"s": 70, "r": 1}}}}}).encode(),
    "UTF-16": json.dumps(_GOOD).encode("utf-16"),
    "UTF-32": json.dumps(_GOOD).encode("utf-32"),
    "invalid UTF-8": json.dumps(_GOOD).encode().replace(b"Linux", b"Lin\xffx"),
}


@pytest.mark.parametrize("case", list(BAD_ADVISOR_FILES))
@mock_aws
def test_a_bad_spot_advisor_file_leaves_the_catalog_byte_identical(cli, monkeypatch, server, tmp_path, case):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_GOOD))
    code, err = _refresh(cli, monkeypatch, "--spot-advisor", str(good))
    assert code == 0, err
    before = catalog_cache_path().read_bytes()
    bad = tmp_path / "bad.json"
    bad.write_bytes(BAD_ADVISOR_FILES[case])
    client, _stub = _stub_pricing("us-east-1", [[_price_item("c7i.2xlarge", "0.357")]])
    monkeypatch.setattr(refresh, "pricing_client", lambda session, deadline=None: client)
    code, _out, err = cli("catalog", "refresh", "--regions", "us-east-1", "--families", "c7i,g6e",
                         "--spot-advisor", str(bad))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "spot advisor file" in err and str(bad) in err
    assert catalog_cache_path().read_bytes() == before


@mock_aws
def test_provenance_counts_the_buckets_it_used(cli, monkeypatch, server, tmp_path):
    f = tmp_path / "advisor.json"
    f.write_text(json.dumps(_GOOD))
    code, err = _refresh(cli, monkeypatch, "--spot-advisor", str(f))
    assert code == 0, err
    cat = load(catalog_cache_path())
    spot = [o for o in cat.iter_offers("us-east-1") if o.market == "spot"]
    assert f"interruption buckets for 1 of {len(spot)} spot offers from the Spot Instance Advisor file advisor.json" \
        in cat.provenance


def _no_vcpus(rec):
    return {k: v for k, v in rec.items() if k != "VCpuInfo"}


def _negative_vcpus(rec):
    return {**rec, "VCpuInfo": {**rec["VCpuInfo"], "DefaultVCpus": -4}}


def _memory_a_string(rec):
    return {**rec, "MemoryInfo": "lots"}


@pytest.mark.parametrize("spoil", [_no_vcpus, _negative_vcpus, _memory_a_string])
@mock_aws
def test_an_aws_answer_out_of_shape_leaves_the_catalog_byte_identical(cli, monkeypatch, server, tmp_path, spoil):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_GOOD))
    code, err = _refresh(cli, monkeypatch, "--spot-advisor", str(good))
    assert code == 0, err
    before = catalog_cache_path().read_bytes()
    real = refresh.instance_type_from_describe
    monkeypatch.setattr(refresh, "instance_type_from_describe", lambda rec: real(spoil(rec)))
    client, _stub = _stub_pricing("us-east-1", [[_price_item("c7i.2xlarge", "0.357")]])
    monkeypatch.setattr(refresh, "pricing_client", lambda session, deadline=None: client)
    code, _out, err = cli("catalog", "refresh", "--regions", "us-east-1", "--families", "c7i,g6e",
                          "--spot-advisor", str(good))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "DescribeInstanceTypes answered" in err and "the previous catalog is kept" in err
    assert catalog_cache_path().read_bytes() == before


@pytest.mark.parametrize("item", [[], "[]", {"product": []}, {"product": {"attributes": {"instanceType": 5}}},
                                  {"product": {"attributes": {"instanceType": "c7i.large"}}, "terms": {"OnDemand": []}},
                                  {"product": {"attributes": {"instanceType": "c7i.large"}},
                                   "terms": {"OnDemand": {"t": {"priceDimensions": {"d": "x"}}}}}])
def test_a_price_list_entry_of_another_shape_is_no_price(item):
    assert refresh.parse_price_list_item(item) is None


def test_spot_history_entries_of_another_shape_are_skipped():
    good = {"InstanceType": "c7i.large", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.05",
            "ProductDescription": "Linux/UNIX"}
    stats = refresh.spot_stats([good, "x", None, {**good, "InstanceType": None}, {**good, "SpotPrice": "NaN"}],
                               "us-east-1")
    assert list(stats) == ["c7i.large"] and stats["c7i.large"]["az_count"] == 1
