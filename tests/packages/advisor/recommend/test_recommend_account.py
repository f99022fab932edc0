"""`advisor recommend --check-account / --obtainable-only`, and the Capacity Block note every
recommendation carries without credentials (issue 10)."""

from __future__ import annotations

import json

import pytest
from aws_fakes import FakeAccount, serve_account
from recommend_catalogs import write_catalog

from catalog.models import RESERVATION_NOTE

JOB = ("--budget", "100000", "--deadline", "30d", "--samples", "1e8", "--top", "20")


@pytest.fixture
def catalog_file(tmp_path):
    return write_catalog(tmp_path / "cat.json")


@pytest.fixture
def creds(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEFORTESTS0001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake")


def recommend(cli, catalog_file, *args):
    code, out, err = cli("recommend", *JOB, "--catalog", catalog_file, "--format", "json", *args)
    assert code == 0, err
    doc = json.loads(out)
    return doc["recommendations"] or doc["closest"], err


def test_reservation_note_offline_without_any_aws_call(cli, catalog_file, monkeypatch):
    from advisor.ec2 import aws

    monkeypatch.setattr(aws, "client", lambda *a, **k: pytest.fail("offline recommend called AWS"))
    rows, _ = recommend(cli, catalog_file, "--family", "p4d", "--family", "g5")
    p4d = [r for r in rows if r["instance_type"] == "p4d.24xlarge"]
    assert p4d and all(RESERVATION_NOTE in r["notes"] for r in p4d)
    assert all(RESERVATION_NOTE not in r["notes"] for r in rows if r["instance_type"] != "p4d.24xlarge")
    assert all(r["obtainable"] is None for r in rows)
    code, out, _ = cli("recommend", *JOB, "--catalog", catalog_file, "--family", "p4d")
    assert code == 0 and "usually needs a Capacity" in out  # the table's note column (wrapped)


def test_check_account_quota_zero_for_p(cli, catalog_file, monkeypatch, creds):
    fake = serve_account(monkeypatch)
    fake.quotas["L-417A185B"] = 0  # Running On-Demand P instances
    rows, err = recommend(cli, catalog_file, "--check-account", "--family", "p4d", "--family", "g5")
    p4d = next(r for r in rows if r["instance_type"] == "p4d.24xlarge")
    assert p4d["obtainable"] == "no"
    assert p4d["obtainable_reason"] == "quota 0 vCPU for P instances in us-east-1 (needs 96)"
    assert "obtainable no: quota 0 vCPU for P instances in us-east-1 (needs 96)" in p4d["notes"]
    g5 = next(r for r in rows if r["instance_type"] == "g5.2xlarge" and r["market"] == "on-demand")
    assert g5["obtainable"] == "yes" and g5["obtainable_reason"].startswith("quota 1024 vCPU for G and VT instances")
    # no AWS warning (the hand-made catalog's p4d is only in us-east-1: that is said, and not by AWS)
    assert not [ln for ln in err.splitlines() if "warning" in ln and "days old" not in ln
                and "has no on-demand offer of family p4d" not in ln]
    # one listing per region, whatever the number of candidates
    assert [op for op, _ in fake.calls] == ["ListServiceQuotas"] * len({r["region"] for r in rows})


def test_spot_candidates_get_one_placement_score_call_per_count(cli, catalog_file, monkeypatch, creds):
    fake = serve_account(monkeypatch, FakeAccount(scores={"us-east-1": 8}))
    rows, _ = recommend(cli, catalog_file, "--check-account", "--market", "spot", "--max-instances", "2")
    spot = [r for r in rows if r["market"] == "spot"]
    assert spot and all(r["obtainable"] == "yes" for r in spot)
    assert all("spot placement score 8/10 in us-east-1" in r["obtainable_reason"] for r in spot)
    calls = [p for op, p in fake.calls if op == "GetSpotPlacementScores"]
    assert sorted(p["TargetCapacity"] for p in calls) == sorted({r["count"] for r in spot})
    for p in calls:  # every spot type of that count, in one call
        types = {r["instance_type"] for r in spot if r["count"] == p["TargetCapacity"]}
        assert set(p["InstanceTypes"]) == types and p["RegionNames"] == ["us-east-1"]
    # three types for one instance; two for two instances (g4dn, g5): their score is flagged
    assert {len(p["InstanceTypes"]) for p in calls} == {3, 2}
    two = next(r for r in spot if r["count"] == 2)
    assert "(from 2 types: AWS scores fewer than 3 low)" in two["obtainable_reason"]


def test_obtainable_only_drops_the_rest_and_renumbers(cli, catalog_file, monkeypatch, creds):
    fake = serve_account(monkeypatch)
    fake.quotas["L-DB2E81BA"] = 8  # G and VT: one g5.2xlarge, not two, not a g5.12xlarge
    all_rows, _ = recommend(cli, catalog_file, "--check-account", "--family", "g5", "--family", "c7i")
    assert {r["obtainable"] for r in all_rows} == {"yes", "no"}
    rows, _ = recommend(cli, catalog_file, "--obtainable-only", "--family", "g5", "--family", "c7i", "--top", "3")
    assert len(rows) == 3 and [r["rank"] for r in rows] == [1, 2, 3]
    assert all(r["obtainable"] == "yes" for r in rows)
    yes = [(r["instance_type"], r["count"], r["region"], r["market"]) for r in all_rows if r["obtainable"] == "yes"]
    assert [(r["instance_type"], r["count"], r["region"], r["market"]) for r in rows] == yes[:3]


def test_denied_scores_are_a_warning_and_unknown(cli, catalog_file, monkeypatch, creds):
    serve_account(monkeypatch, FakeAccount(deny={"GetSpotPlacementScores"}))
    rows, err = recommend(cli, catalog_file, "--check-account", "--market", "spot", "--family", "g5", "--family", "c7i",
                          "--family", "g4dn")
    assert {r["obtainable"] for r in rows} == {"unknown"}
    lines = [ln for ln in err.splitlines() if "GetSpotPlacementScores" in ln]
    assert len(lines) == 1 and lines[0].startswith("advisor: warning: ec2:GetSpotPlacementScores in us-east-1: AWS "
                                                   "refused (UnauthorizedOperation")
    assert "ec2:GetSpotPlacementScores" in lines[0] and "servicequotas:ListServiceQuotas" in lines[0]


def test_cached_answers_make_no_second_call(cli, catalog_file, monkeypatch, creds):
    fake = serve_account(monkeypatch, FakeAccount(scores={"us-east-1": 9}))
    first, _ = recommend(cli, catalog_file, "--check-account", "--market", "any")
    n = len(fake.calls)
    assert n > 0
    again, _ = recommend(cli, catalog_file, "--check-account", "--market", "any")
    assert len(fake.calls) == n and again == first


def test_check_account_without_credentials_is_one_line(cli, catalog_file, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    code, out, err = cli("recommend", *JOB, "--catalog", catalog_file, "--check-account")
    assert code == 2 and out == ""
    assert err.splitlines()[-1].startswith("advisor: error: --check-account: no AWS credentials found")


def test_partial_credentials_are_one_line(cli, catalog_file, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEFORTESTS0001")  # no secret
    code, _out, err = cli("recommend", *JOB, "--catalog", catalog_file, "--check-account")
    assert code == 2 and "Traceback" not in err
    assert "the AWS credentials are incomplete" in err.splitlines()[-1]
