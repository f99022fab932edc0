"""The account check (advisor/ec2/account.py): vCPU quotas and spot placement scores per
candidate, against botocore's Stubber. moto 5.2 implements neither EC2's Service Quotas (its
Service Quotas backend knows only VPC) nor GetSpotPlacementScores (NotImplementedError)."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber

from advisor.ec2 import account
from advisor.ec2.account import Account, Need, check, launch_refusals
from advisor.ec2.quotas import CLASSES, quota_class
from advisor.errors import AdvisorError

P_OD = "L-417A185B"
G_OD = "L-DB2E81BA"
G_SPOT = "L-3819A6DF"


def _quota(code: str, value: float, name: str | None = None) -> dict:
    name = name or next(q.name for c in CLASSES for q in (c.on_demand, c.spot) if q and q.code == code)
    return {"ServiceCode": "ec2", "QuotaCode": code, "QuotaName": name, "Value": value, "Unit": "None"}


class Clients:
    """Stubbed clients per (service, region), and a record of which were asked for."""

    def __init__(self):
        self.clients: dict[tuple[str, str], tuple[object, Stubber]] = {}
        self.asked: list[tuple[str, str]] = []

    def stub(self, service: str, region: str) -> Stubber:
        if (service, region) not in self.clients:
            c = boto3.client(service, region_name=region, aws_access_key_id="x", aws_secret_access_key="y")
            st = Stubber(c)
            st.activate()
            self.clients[(service, region)] = (c, st)
        return self.clients[(service, region)][1]

    def __call__(self, service: str, region: str):
        self.asked.append((service, region))
        return self.stub(service, region) and self.clients[(service, region)][0]

    def done(self):
        for _c, st in self.clients.values():
            st.assert_no_pending_responses()


@pytest.fixture
def clients():
    c = Clients()
    yield c
    c.done()


@pytest.fixture
def acct(clients, tmp_path):
    return Account(client=clients, cache_path=tmp_path / "account.json")


def listing(clients, region: str, *quotas: dict) -> None:
    clients.stub("service-quotas", region).add_response(
        "list_service_quotas", {"Quotas": list(quotas)}, {"ServiceCode": "ec2"})


def scores(clients, region: str, types: list[str], count: int, regions: list[str], result: dict[str, int]) -> None:
    clients.stub("ec2", region).add_response(
        "get_spot_placement_scores",
        {"SpotPlacementScores": [{"Region": r, "Score": s} for r, s in result.items()]},
        {"InstanceTypes": sorted(types), "TargetCapacity": count, "TargetCapacityUnitType": "units",
         "SingleAvailabilityZone": False, "RegionNames": sorted(regions)})


# ---------------------------------------------------------------- quotas


def test_quota_zero_is_no_with_the_quota_in_the_reason(clients, acct):
    listing(clients, "us-east-1", _quota(P_OD, 0))
    need = Need("p5en.48xlarge", "us-east-1", "on-demand", 1, 192)
    v = check([need], acct)[need]
    assert v.obtainable == "no"
    assert v.reason == "quota 0 vCPU for P instances in us-east-1 (needs 192)"
    assert v.quota is not None and v.quota.code == P_OD


def test_quota_enough_is_yes(clients, acct):
    listing(clients, "us-west-2", _quota(G_OD, 64), _quota(P_OD, 0))
    need = Need("g5.xlarge", "us-west-2", "on-demand", 2, 4)
    v = check([need], acct)[need]
    assert (v.obtainable, v.reason) == ("yes", "quota 64 vCPU for G and VT instances in us-west-2 (needs 8)")


@pytest.mark.parametrize(("quota", "verdict"), [(31, "no"), (32, "yes")])
def test_quota_just_short_for_count_4(clients, acct, quota, verdict):
    # g5.2xlarge has 8 vCPUs: 4 of them need 32, and 31 is one short
    listing(clients, "us-east-1", _quota(G_OD, quota))
    need = Need("g5.2xlarge", "us-east-1", "on-demand", 4, 8)
    v = check([need], acct)[need]
    assert v.obtainable == verdict and "(needs 32)" in v.reason and f"quota {quota} vCPU" in v.reason


def test_one_listing_per_region_serves_every_candidate(clients, acct):
    listing(clients, "us-east-1", _quota(G_OD, 16), _quota(P_OD, 384))
    needs = [Need("g5.xlarge", "us-east-1", "on-demand", 1, 4), Need("g6.12xlarge", "us-east-1", "on-demand", 1, 48),
             Need("p4d.24xlarge", "us-east-1", "on-demand", 2, 96)]
    got = check(needs, acct)
    assert [got[n].obtainable for n in needs] == ["yes", "no", "yes"]
    assert clients.asked == [("service-quotas", "us-east-1")]


def test_capacity_block_types_on_demand_are_unknown_even_with_quota(clients, acct):
    listing(clients, "us-east-1", _quota(P_OD, 384))
    need = Need("p5.48xlarge", "us-east-1", "on-demand", 1, 192, sold_by_reservation=True)
    v = check([need], acct)[need]
    assert v.obtainable == "unknown"
    assert v.reason == "quota 384 vCPU for P instances in us-east-1 (needs 192); usually needs a Capacity Block or reservation"


def test_quota_matched_by_name_when_its_code_differs(clients, acct):
    # a re-coded quota is still found by its documented name (punctuation and case aside)
    listing(clients, "us-east-1", _quota("L-NEWCODE1", 8, "All Trn spot instance requests"))
    need = Need("trn1.2xlarge", "us-east-1", "spot", 1, 8)
    scores(clients, "us-east-1", ["trn1.2xlarge"], 1, ["us-east-1"], {"us-east-1": 9})
    v = check([need], acct)[need]
    assert v.reason.startswith("spot quota 8 vCPU for Trn instances in us-east-1 (needs 8)")


def test_quota_left_out_of_the_listing_is_asked_for_then_its_default(clients, acct):
    listing(clients, "us-east-1")
    sq = clients.stub("service-quotas", "us-east-1")
    sq.add_client_error("get_service_quota", "NoSuchResourceException", "no applied value",
                        expected_params={"ServiceCode": "ec2", "QuotaCode": G_OD})
    sq.add_response("get_aws_default_service_quota", {"Quota": _quota(G_OD, 0)},
                    {"ServiceCode": "ec2", "QuotaCode": G_OD})
    need = Need("g6.xlarge", "us-east-1", "on-demand", 1, 4)
    assert check([need], acct)[need].obtainable == "no"


@pytest.mark.parametrize(("code", "words"), [
    ("AccessDeniedException", "AWS refused (AccessDeniedException"),
    ("ThrottlingException", "AWS throttled the requests"),
])
def test_a_refused_quota_api_is_a_warning_and_unknown(clients, acct, code, words):
    clients.stub("service-quotas", "us-east-1").add_client_error("list_service_quotas", code, "nope")
    listing(clients, "eu-west-1", _quota(G_OD, 64))
    needs = [Need("g5.xlarge", "us-east-1", "on-demand", 1, 4), Need("g5.xlarge", "eu-west-1", "on-demand", 1, 4),
             Need("g6.xlarge", "us-east-1", "on-demand", 1, 4)]
    got = check(needs, acct)
    assert [got[n].obtainable for n in needs] == ["unknown", "yes", "unknown"]
    assert got[needs[0]].reason == "quota for G and VT instances in us-east-1 unknown"
    (w,) = acct.warnings  # once, not once per candidate
    assert w.startswith("servicequotas:ListServiceQuotas in us-east-1: ") and words in w
    if code.startswith("Access"):
        assert "servicequotas:ListServiceQuotas, servicequotas:GetServiceQuota, ec2:GetSpotPlacementScores" in w


def test_no_credentials_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(AdvisorError, match="--check-account: no AWS credentials found"):
        check([Need("g5.xlarge", "us-east-1", "on-demand", 1, 4)])


# ---------------------------------------------------------------- spot placement scores


SPOT3 = ["g5.xlarge", "g6.xlarge", "g6e.xlarge"]


@pytest.mark.parametrize(("score", "verdict"), [(9, "yes"), (7, "yes"), (5, "unknown"), (3, "no"), (2, "no")])
def test_spot_score_decides_with_three_types_in_one_call(clients, acct, score, verdict):
    listing(clients, "us-east-1", _quota(G_SPOT, 256))
    scores(clients, "us-east-1", SPOT3, 4, ["us-east-1"], {"us-east-1": score})
    needs = [Need(t, "us-east-1", "spot", 4, 4) for t in SPOT3]
    got = check(needs, acct)
    assert {got[n].obtainable for n in needs} == {verdict}
    assert got[needs[0]].reason == (f"spot quota 256 vCPU for G and VT instances in us-east-1 (needs 16); "
                                    f"spot placement score {score}/10 in us-east-1")


def test_spot_scores_one_call_per_count_over_regions(clients, acct):
    listing(clients, "us-east-1", _quota(G_SPOT, 256))
    listing(clients, "us-west-2", _quota(G_SPOT, 256))
    scores(clients, "us-east-1", SPOT3, 2, ["us-east-1", "us-west-2"], {"us-east-1": 8, "us-west-2": 2})
    scores(clients, "us-east-1", ["g5.xlarge"], 1, ["us-east-1"], {"us-east-1": 2})
    needs = [Need(t, r, "spot", 2, 4) for t in SPOT3 for r in ("us-east-1", "us-west-2")]
    needs.append(Need("g5.xlarge", "us-east-1", "spot", 1, 4))
    got = check(needs, acct)
    assert got[needs[0]].obtainable == "yes" and got[needs[1]].obtainable == "no"
    # one type alone scores low whatever the capacity: not a no
    lone = got[needs[-1]]
    assert lone.obtainable == "unknown" and "from 1 type: AWS scores fewer than 3 low" in lone.reason


def test_spot_quota_short_is_no_whatever_the_score(clients, acct):
    listing(clients, "us-east-1", _quota(G_SPOT, 4))
    scores(clients, "us-east-1", SPOT3, 2, ["us-east-1"], {"us-east-1": 10})
    needs = [Need(t, "us-east-1", "spot", 2, 4) for t in SPOT3]
    v = check(needs, acct)[needs[0]]
    assert v.obtainable == "no" and v.reason.startswith("spot quota 4 vCPU for G and VT instances in us-east-1 (needs 8)")


def test_denied_spot_scores_leave_the_quota_verdicts(clients, acct):
    listing(clients, "us-east-1", _quota(G_SPOT, 0), _quota(G_OD, 64))
    clients.stub("ec2", "us-east-1").add_client_error("get_spot_placement_scores", "UnauthorizedOperation", "not allowed")
    needs = [Need(t, "us-east-1", "spot", 1, 4) for t in SPOT3] + [Need("g5.xlarge", "us-east-1", "on-demand", 1, 4)]
    got = check(needs, acct)
    assert [got[n].obtainable for n in needs] == ["no", "no", "no", "yes"]
    assert "no spot placement score for us-east-1" in got[needs[0]].reason
    assert len(acct.warnings) == 1 and "ec2:GetSpotPlacementScores in us-east-1" in acct.warnings[0]


def test_high_memory_types_cannot_be_spot(clients, acct):
    need = Need("u7i-12tb.224xlarge", "us-east-1", "spot", 1, 896)
    scores(clients, "us-east-1", [need.instance_type], 1, ["us-east-1"], {"us-east-1": 1})
    v = check([need], acct)[need]
    assert v.obtainable == "no" and v.reason.startswith("High Memory instances cannot run as spot")


# ---------------------------------------------------------------- the cache


def test_answers_are_cached_for_an_hour_then_asked_again(clients, tmp_path):
    now = [1_000_000.0]
    path = tmp_path / "cache" / "account.json"
    listing(clients, "us-east-1", _quota(G_SPOT, 256))
    scores(clients, "us-east-1", SPOT3, 1, ["us-east-1"], {"us-east-1": 8})
    needs = [Need(t, "us-east-1", "spot", 1, 4) for t in SPOT3]
    first = check(needs, Account(client=clients, cache_path=path, now=lambda: now[0]))
    assert json.loads(path.read_text())["quotas"]["us-east-1"]["quotas"][G_SPOT][1] == 256
    assert [p.name for p in path.parent.iterdir()] == ["account.json"]  # no temporary file left
    asked = len(clients.asked)

    now[0] += 3599  # within the hour: no call at all (the stubs have no responses left)
    assert check(needs, Account(client=clients, cache_path=path, now=lambda: now[0])) == first
    assert len(clients.asked) == asked

    now[0] += 2  # past it: asked again
    listing(clients, "us-east-1", _quota(G_SPOT, 0))
    scores(clients, "us-east-1", SPOT3, 1, ["us-east-1"], {"us-east-1": 8})
    again = check(needs, Account(client=clients, cache_path=path, now=lambda: now[0]))
    assert again[needs[0]].obtainable == "no"


def test_a_corrupt_cache_is_asked_again_and_rewritten(clients, tmp_path):
    path = tmp_path / "account.json"
    path.write_text('{"quotas": {"us-east-1": ')
    listing(clients, "us-east-1", _quota(G_OD, 8))
    need = Need("g5.xlarge", "us-east-1", "on-demand", 1, 4)
    assert check([need], Account(client=clients, cache_path=path))[need].obtainable == "yes"
    assert json.loads(path.read_text())["version"] == 1


def test_an_unwritable_cache_is_a_warning(clients, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    acct = Account(client=clients, cache_path=blocker / "account.json")  # its folder is a file
    listing(clients, "us-east-1", _quota(G_OD, 8))
    need = Need("g5.xlarge", "us-east-1", "on-demand", 1, 4)
    assert check([need], acct)[need].obtainable == "yes"
    assert len(acct.warnings) == 1 and acct.warnings[0].startswith("cannot write the account-check cache")


def test_cache_is_per_credentials(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAONE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    one = account._credentials_key()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIATWO")
    assert account._credentials_key() != one and "AKIA" not in one


# ---------------------------------------------------------------- launch


def test_launch_refusals_share_a_class_quota_in_order(clients, tmp_path):
    listing(clients, "us-east-1", _quota(G_OD, 12), _quota(P_OD, 0), _quota("L-1216C47A", 5))
    acct = Account(client=clients, cache_path=tmp_path / "a.json", cache_seconds=0)
    refused = launch_refusals("us-east-1", "on-demand",
                              {"g5.xlarge": 4, "g6.2xlarge": 8, "g6e.xlarge": 4, "c7i.large": 2, "p5.48xlarge": 192}, acct)
    assert set(refused) == {"g6e.xlarge", "p5.48xlarge"}  # 4 + 8 fit in 12; 4 more do not
    assert refused["g6e.xlarge"].startswith("the quota 'Running On-Demand G and VT instances' (L-DB2E81BA) is 12 vCPUs "
                                            "in us-east-1, and it needs 4 beside the 12 of the types before it; ")
    assert "--quota-code L-417A185B --desired-value 192 --region us-east-1" in refused["p5.48xlarge"]


def test_every_known_family_has_a_quota_class():
    from catalog.io import SNAPSHOT_PATH, load

    for name in load(SNAPSHOT_PATH).instance_types:
        assert quota_class(name) is not None, name
