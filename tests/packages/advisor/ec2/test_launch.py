"""`advisor launch` against moto: what run_instances receives, the manifest, status/cancel by
tag, the DryRun check, the refusals."""

from __future__ import annotations

import base64
import copy
import io
import re
from datetime import datetime, timezone

import pytest
from aws_fakes import put_public_parameter, serve_account
from botocore.exceptions import ClientError
from schema_check import checked

from advisor.ec2 import aws as ec2_aws
from advisor.ec2 import manifest as manifests
from advisor.ec2 import package, plan

moto = pytest.importorskip("moto")

REGION = "us-east-1"
BUCKET = "probe-bucket"
DLAMI = "/aws/service/deeplearning/ami/{arch}/oss-nvidia-driver-gpu-pytorch-{v}-ubuntu-24.04/latest/ami-id"


@pytest.fixture
def aws(monkeypatch, tmp_path):
    import boto3
    from moto import mock_aws

    account = serve_account(monkeypatch)
    # moto's ~thousand default AMIs take seconds to load in every test; three of our own do
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        amis = {
            name: ec2.register_image(Name=f"test-{name}", Architecture=arch, RootDeviceName="/dev/sda1")["ImageId"]
            for name, arch in (("x86_64", "x86_64"), ("arm64", "arm64"), ("old", "x86_64"))
        }
        put_public_parameter(DLAMI.format(arch="x86_64", v="2.9"), amis["x86_64"])
        put_public_parameter(DLAMI.format(arch="x86_64", v="2.8"), amis["old"])
        put_public_parameter(DLAMI.format(arch="arm64", v="2.9"), amis["arm64"])
        put_public_parameter("/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
                             amis["old"])
        wheel = tmp_path / "instance_advisor-0.1.0-py3-none-any.whl"
        wheel.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip: the instances are not real
        creds = boto3.Session().get_credentials()  # mock_aws sets its own fake ones
        yield type("AWS", (), {"ec2": ec2, "s3": s3, "amis": amis, "wheel": str(wheel), "account": account,
                                   "quotas": account.quotas,
                                   "key": creds.access_key, "secret": creds.secret_key})


@pytest.fixture
def run_calls(monkeypatch):
    """Every RunInstances call's parameters, and a hook to make one fail."""
    calls: list[dict] = []
    fail: dict[str, tuple[str, str]] = {}  # instance type -> (code, message), real launches only
    real = ec2_aws.client

    def hook(params, **_):
        calls.append(copy.deepcopy(params))
        if params.get("DryRun"):
            if "*" in fail and fail["*"][0] == "UnauthorizedOperation":
                raise ClientError({"Error": {"Code": fail["*"][0], "Message": fail["*"][1]}}, "RunInstances")
            return
        if params["InstanceType"] in fail:
            # the manifest must already be on disk, this type still pending
            m = manifests.load(params["TagSpecifications"][0]["Tags"][0]["Value"])
            assert m is not None and m.entry(params["InstanceType"]).state == "pending"
            code, msg = fail[params["InstanceType"]]
            raise ClientError({"Error": {"Code": code, "Message": msg}}, "RunInstances")

    def spy(service, region, **cfg):
        c = real(service, region, **cfg)
        if service == "ec2":
            c.meta.events.register("provide-client-params.ec2.RunInstances", hook)
        return c

    monkeypatch.setattr(ec2_aws, "client", spy)
    return type("Calls", (), {"calls": calls, "fail": fail})


def errors(err: str) -> list[str]:
    """stderr without warnings (an old catalog snapshot warns): what a failure printed."""
    return [ln for ln in err.splitlines() if not ln.startswith("advisor: warning:")]


def launched(calls):
    return [c for c in calls if not c.get("DryRun")]


def base_args(aws, types="g5.xlarge,g5g.xlarge", *extra):
    return ("launch", "--instance-types", types, "--s3", f"s3://{BUCKET}/probes", "--region", REGION,
            "--package", aws.wheel, *extra)


def test_launch_sends_ami_shutdown_tags_spot_and_user_data(aws, run_calls, cli):
    code, _out, err = cli(*base_args(aws, "g5.xlarge,g5g.xlarge", "--market", "spot", "--max-minutes", "30",
                                    "--workload", "resnet18", "--probe-args", "--max-seconds 20", "--yes"))
    assert code == 0, err
    calls = launched(run_calls.calls)
    assert [c["InstanceType"] for c in calls] == ["g5.xlarge", "g5g.xlarge"]
    # each architecture gets the newest PyTorch DLAMI of its own
    assert [c["ImageId"] for c in calls] == [aws.amis["x86_64"], aws.amis["arm64"]]
    run_id = manifests.list_run_ids()[0]
    for c in calls:
        assert c["InstanceInitiatedShutdownBehavior"] == "terminate"
        # moto's registered AMIs keep their root volume (DeleteOnTermination false): overridden
        assert c["BlockDeviceMappings"] == [
            {"DeviceName": "/dev/sda1", "Ebs": {"DeleteOnTermination": True, "VolumeSize": 15}}]
        assert c["InstanceMarketOptions"] == {
            "MarketType": "spot",
            "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
        }
        assert [t["ResourceType"] for t in c["TagSpecifications"]] == ["instance", "volume"]
        for spec in c["TagSpecifications"]:
            tags = {t["Key"]: t["Value"] for t in spec["Tags"]}
            assert tags["instance-advisor:run-id"] == run_id
            assert tags["instance-advisor:workload"] == "resnet18"
            assert tags["instance-advisor:role"] == "probe"
        assert c["ClientToken"] == f"{run_id}:{c['InstanceType']}"  # retries cannot start a second instance
        ud = c["UserData"]
        assert ud.startswith("#!/bin/bash\n")
        assert "shutdown -h +30" in ud
        assert f"--workload resnet18 --instance-type {c['InstanceType']} --output" in ud
        assert "--max-seconds 20" in ud
        assert aws.secret not in ud and "AWS_SECRET" not in ud and "AWS_ACCESS_KEY_ID" not in ud
        # the access key id appears only as the presigned URLs' X-Amz-Credential
        assert ud.count(aws.key) == ud.count(f"X-Amz-Credential={aws.key}") == 3

    # what EC2 (moto) recorded
    res = aws.ec2.describe_instances(Filters=[{"Name": "tag:instance-advisor:run-id", "Values": [run_id]}])
    insts = [i for r in res["Reservations"] for i in r["Instances"]]
    assert sorted(i["InstanceType"] for i in insts) == ["g5.xlarge", "g5g.xlarge"]
    assert all(i.get("InstanceLifecycle") == "spot" for i in insts)
    for i in insts:
        attr = aws.ec2.describe_instance_attribute(InstanceId=i["InstanceId"], Attribute="instanceInitiatedShutdownBehavior")
        assert attr["InstanceInitiatedShutdownBehavior"]["Value"] == "terminate"
        ud = aws.ec2.describe_instance_attribute(InstanceId=i["InstanceId"], Attribute="userData")["UserData"]["Value"]
        assert base64.b64decode(ud).decode().startswith("#!/bin/bash")

    # package and run description are in S3, under the run's own prefix
    keys = {o["Key"] for o in aws.s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    assert keys == {f"probes/{run_id}/run.json", f"probes/{run_id}/package/instance_advisor-0.1.0-py3-none-any.whl"}
    m = manifests.load(run_id)
    assert [e.state for e in m.entries] == ["launched", "launched"]
    assert all(e.instance_id and e.instance_id.startswith("i-") for e in m.entries)
    assert m.entries[0].result_key == f"probes/{run_id}/g5.xlarge/result.json"
    text = manifests.manifest_path(run_id).read_text()
    assert "X-Amz-Signature" not in text and aws.secret not in text


def test_ami_of_the_wrong_architecture_skips_that_type(aws, run_calls, cli, monkeypatch):
    # moto's DescribeImages leaves Architecture out for registered images: give the facts EC2 would
    monkeypatch.setattr(plan, "describe_amis", lambda ec2, amis: {a: plan.AmiFacts(arch="x86_64") for a in amis})
    code, out, err = cli(*base_args(aws, "g5.xlarge,g5g.xlarge", "--ami", aws.amis["x86_64"], "--yes", "--format", "json"))
    assert code == 1, err  # one of two launched
    assert [c["InstanceType"] for c in launched(run_calls.calls)] == ["g5.xlarge"]
    assert f"g5g.xlarge: skipped: AMI {aws.amis['x86_64']} is x86_64; g5g.xlarge needs arm64" in err
    assert [r["instance_type"] for r in checked(out, "launch")["instances"]] == ["g5.xlarge"]


def test_on_demand_has_no_market_options(aws, run_calls, cli):
    code, _, err = cli(*base_args(aws, "t3.micro", "--ami", aws.amis["old"], "--yes"))
    assert code == 0, err
    (call,) = launched(run_calls.calls)
    assert "InstanceMarketOptions" not in call
    assert call["ImageId"] == aws.amis["old"]  # --ami overrides the DLAMI lookup


def test_second_of_three_failing_does_not_stop_the_others(aws, run_calls, cli):
    run_calls.fail["g5g.xlarge"] = ("InsufficientInstanceCapacity", "We currently do not have sufficient\ng5g.xlarge capacity.")
    code, out, err = cli(*base_args(aws, "g5.xlarge,g5g.xlarge,t3.micro", "--yes", "--format", "json"))
    assert code == 1
    assert [c["InstanceType"] for c in launched(run_calls.calls)] == ["g5.xlarge", "g5g.xlarge", "t3.micro"]
    (run_id,) = manifests.list_run_ids()
    m = manifests.load(run_id)
    assert [e.state for e in m.entries] == ["launched", "failed", "launched"]
    assert m.entries[1].instance_id is None and m.entries[1].error_code == "InsufficientInstanceCapacity"
    assert m.entries[0].instance_id and m.entries[2].instance_id
    failed_lines = [ln for ln in err.splitlines() if "launch failed" in ln]
    assert failed_lines == [
        ("advisor: g5g.xlarge: launch failed: InsufficientInstanceCapacity: "
         "We currently do not have sufficient g5g.xlarge capacity.")
    ]
    doc = checked(out, "launch")  # stdout: only what was launched; the plan went to stderr
    rows = doc["instances"]
    assert [r["state"] for r in rows] == ["launched", "failed", "launched"]
    assert doc["run_id"] == run_id and rows[1]["instance_id"] is None
    assert '"max_cost_usd"' in err and '"schema": "launch-plan"' in err


def test_status_and_cancel_find_instances_by_tag(aws, run_calls, cli):
    run_calls.fail["g5g.xlarge"] = ("VcpuLimitExceeded",
                                    "You have requested more vCPU capacity than your current vCPU limit of 0 allows.")
    code, _, _ = cli(*base_args(aws, "g5.xlarge,g5g.xlarge,t3.micro", "--yes"))
    (run_id,) = manifests.list_run_ids()
    # an instance of another run must not be touched
    other = aws.ec2.run_instances(ImageId=aws.amis["old"], InstanceType="t3.micro",
                                  MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]

    code, out, err = cli("launch", "status", run_id, "--format", "json")
    assert code == 0, err
    rows = {r["instance_type"]: r for r in checked(out, "launch-status")["instances"]}
    assert rows["g5.xlarge"]["state"] == "running" and rows["t3.micro"]["state"] == "running"
    assert rows["g5.xlarge"]["launched_at"].endswith("Z")  # ISO 8601
    assert rows["g5g.xlarge"]["state"] == "launch failed"
    assert rows["g5g.xlarge"]["error"].startswith("VcpuLimitExceeded: ")
    assert rows["g5.xlarge"]["result"] == "not yet"

    # a result uploaded by the instance shows up
    m = manifests.load(run_id)
    aws.s3.put_object(Bucket=BUCKET, Key=m.entry("t3.micro").result_key, Body=b"{}")
    code, out, _ = cli("launch", "status", run_id, "--format", "json")
    assert {r["instance_type"]: r["result"] for r in checked(out, "launch-status")["instances"]}["t3.micro"] == "uploaded"

    code, out, err = cli("launch", "cancel", run_id, "--format", "json")
    assert code == 0, err
    cancelled = checked(out, "launch-cancel")["instances"]
    assert sorted(r["instance_type"] for r in cancelled) == ["g5.xlarge", "t3.micro"]
    assert other not in {r["instance_id"] for r in cancelled}
    state = aws.ec2.describe_instances(InstanceIds=[other])["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state == "running"

    # without the local manifest, status still finds the run's instances by tag
    manifests.manifest_path(run_id).unlink()
    code, out, err = cli("launch", "status", run_id, "--region", REGION, "--format", "json")
    assert code == 0, err
    assert sorted((r["instance_type"], r["state"]) for r in checked(out, "launch-status")["instances"]) == [
        ("g5.xlarge", "terminated"), ("t3.micro", "terminated")]
    code, out, err = cli("launch", "cancel", run_id, "--region", REGION)
    assert code == 0 and "no running instances" in err


def test_status_of_unknown_run_is_one_line_error(aws, cli):
    code, out, err = cli("launch", "status", "20260101-000000-000000", "--region", REGION)
    assert code == 2 and out == ""
    assert len(errors(err)) == 1 and "no instances tagged instance-advisor:run-id=20260101-000000-000000" in err


def test_dry_run_checks_and_starts_nothing(aws, run_calls, cli):
    code, out, err = cli(*base_args(aws, "g5.xlarge,g5g.xlarge", "--dry-run"))
    assert code == 0, err
    assert len(run_calls.calls) == 2 and all(c["DryRun"] for c in run_calls.calls)
    assert "g5.xlarge" in out and "g5g.xlarge" in out and "ok" in out
    assert "nothing launched" in err
    assert aws.ec2.describe_instances()["Reservations"] == []
    assert manifests.list_run_ids() == []
    assert "Contents" not in aws.s3.list_objects_v2(Bucket=BUCKET)


def test_unauthorized_dry_run_is_a_one_line_error(aws, run_calls, cli):
    run_calls.fail["*"] = ("UnauthorizedOperation",
                           "You are not authorized to perform this operation.\nEncoded authorization failure message: xyz")
    code, _out, err = cli(*base_args(aws, "g5.xlarge", "--yes"))
    assert code == 2
    assert errors(err) == [
        ("advisor: error: not allowed to launch instances: UnauthorizedOperation: You are not authorized "
        "to perform this operation. Encoded authorization failure message: xyz")]
    assert launched(run_calls.calls) == []
    assert manifests.list_run_ids() == []


def test_max_instances_refusal_before_any_aws_call(cli, monkeypatch):
    def no_aws(*a, **k):
        raise AssertionError("no AWS call expected")

    monkeypatch.setattr(ec2_aws, "client", no_aws)
    code, _out, err = cli("launch", "--instance-types", "g5.xlarge,g6.xlarge,g6e.xlarge", "--s3", "s3://b-b/p",
                         "--region", REGION, "--max-instances", "2", "--yes")
    assert code == 2
    (line,) = errors(err)
    assert line.startswith("advisor: error: 3 instance types would start 3 instances, more than --max-instances 2")


@pytest.mark.parametrize("extra,message", [
    (("--instance-type", "g5.xlarge,g6.xlarge,g5g.xlarge,c7i.8xlarge,p5.48xlarge", "--max-instances", "4"),
     "5 instance types would start 5 instances, more than --max-instances 4"),
    (("--instance-type", "g5.xlarge", "--max-minutes", "2"), "--max-minutes 2 is out of range"),
    (("--instance-type", "G5 xlarge"), "'g5 xlarge' is not an instance type name"),
])
def test_local_checks_come_before_the_aws_region(cli, monkeypatch, tmp_path, extra, message):
    """The README's example with no AWS configuration at all gives the error it shows, not 'no AWS region'."""
    for k in ("AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setattr(ec2_aws, "client", lambda *a, **k: pytest.fail("no AWS call expected"))
    code, _out, err = cli("launch", "--s3", "s3://my-probe-bucket/probes", *extra)
    assert code == 2
    (line,) = errors(err)
    assert message in line, line
    code, _out, err = cli("launch", "--s3", "s3://my-probe-bucket/probes", "--instance-type", "g5.xlarge")
    assert code == 2 and "no AWS region: pass --region or set AWS_DEFAULT_REGION" in err  # then the region


@pytest.mark.parametrize("value", ["-5", "0"])
def test_max_instances_below_one_says_so(cli, monkeypatch, value):
    # It was "1 instance types would start 1 instances, more than --max-instances -5".
    monkeypatch.setattr(ec2_aws, "client", lambda *a, **k: pytest.fail("no AWS call expected"))
    code, _out, err = cli("launch", "--instance-types", "g5.xlarge", "--s3", "s3://b-b/p", "--region", REGION,
                          "--max-instances", value, "--yes")
    assert code == 2
    (line,) = errors(err)
    assert f"--max-instances: must be at least 1, got {value}" in line


def test_a_launch_request_with_max_instances_below_one_is_refused():
    from advisor.ec2.aws import S3Location
    from advisor.ec2.plan import LaunchRequest, validate_request
    from advisor.errors import AdvisorError

    with pytest.raises(AdvisorError, match="--max-instances -5: must be at least 1"):
        validate_request(LaunchRequest(instance_types=["g5.xlarge"], s3=S3Location("b-b", "p"), region=REGION,
                                       max_instances=-5))


def test_no_confirmation_without_a_terminal(aws, run_calls, cli, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # not a tty
    code, _out, err = cli(*base_args(aws, "g5.xlarge"))
    assert code == 2
    assert "stdin is not a terminal; pass --yes" in err
    assert launched(run_calls.calls) == [] and manifests.list_run_ids() == []


class _Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("answer,launches", [("n\n", 0), ("y\n", 1)])
def test_confirmation_on_a_terminal(aws, run_calls, cli, monkeypatch, answer, launches):
    monkeypatch.setattr("sys.stdin", _Tty(answer))
    code, _out, err = cli(*base_args(aws, "g5.xlarge"))
    assert "Start 1 on-demand instance(s) in us-east-1 for at most 45 minutes each" in err
    assert len(launched(run_calls.calls)) == launches
    assert code == (0 if launches else 1)


def test_plan_table_prices_from_catalog(aws, run_calls, cli, tmp_path):
    from catalog.models import SCHEMA_VERSION, Catalog, InstanceType, RegionOffers
    from safeio import save_atomic

    it = InstanceType(name="g5.xlarge", family="g5", vcpus=4, memory_gib=16, arch="x86_64",
                      accelerator_kind="gpu", accelerator_model="A10G", accelerator_count=1)
    offers = RegionOffers(instance_type=["g5.xlarge", "g5.xlarge"], market=["on-demand", "spot"],
                          usd_per_hour=[1.006, 0.4], spot_min_usd=[None, 0.38], az_count=[None, 6],
                          price_at=[None, None], interruption_bucket=[None, 1], savings_pct=[None, 60.0])
    trn = InstanceType(name="trn1.2xlarge", family="trn1", vcpus=8, memory_gib=32, arch="x86_64",
                       accelerator_kind="neuron", accelerator_model="Trainium", accelerator_count=1)
    cat = Catalog(schema_version=SCHEMA_VERSION, source="file", fetched_at=datetime.now(timezone.utc), regions=[REGION],
                  instance_types={"g5.xlarge": it, "trn1.2xlarge": trn}, offers={REGION: offers})
    path = tmp_path / "catalog.json"
    save_atomic(cat, path)
    code, out, err = cli(*base_args(aws, "g5.xlarge,t3.micro,trn1.2xlarge", "--dry-run", "--market", "spot",
                                    "--max-minutes", "30", "--catalog", str(path), "--format", "json"))
    assert code == 0, err
    rows = {r["instance_type"]: r for r in checked(out, "launch-plan")["planned"]}
    assert rows["g5.xlarge"]["usd_per_hour"] == 0.4 and rows["g5.xlarge"]["max_cost_usd"] == 0.2
    assert rows["t3.micro"]["usd_per_hour"] is None and rows["t3.micro"]["max_cost_usd"] is None  # unknown: null
    assert "at most unknown" in err
    # the default AMI cannot drive Trainium: say so rather than measure its CPUs silently
    assert "trn1.2xlarge: the default Deep Learning AMI has no neuron software stack" in err


@pytest.mark.parametrize(
    "argv,message",
    [
        (("--instance-types", "g5.xlarge", "--s3", "bucket/prefix"), "is not an S3 URL"),
        (("--instance-types", "g5.xlarge,g5.xlarge", "--s3", "s3://bkt/p"), "names g5.xlarge more than once"),
        (("--instance-types", "g5.xlarge", "--s3", "s3://bkt/p", "--workload", "not a model"), "unknown workload"),
        (("--instance-types", "g5.xlarge", "--s3", "s3://bkt/p", "--probe-args", "--output x.json"), "must not contain --output"),
        (("--instance-types", "g5.xlarge", "--s3", "s3://bkt/p", "--max-minutes", "0"), "--max-minutes 0 is out of range"),
        (("--s3", "s3://bkt/p"), "launch needs --instance-type"),
    ],
)
def test_bad_input_is_one_line(cli, argv, message):
    code, out, err = cli("launch", "--region", REGION, *argv, "--yes")
    assert code == 2 and out == ""
    (line,) = errors(err)
    assert line.startswith("advisor: error: ") and message in line


def test_unknown_instance_type_is_one_line(aws, cli):
    code, _out, err = cli(*base_args(aws, "g5.xlarge,zz9.huge", "--dry-run"))
    assert code == 2
    (line,) = errors(err)
    assert "InvalidInstanceType" in line and "zz9.huge" in line


def test_missing_bucket_is_one_line(aws, run_calls, cli):
    code, _out, err = cli("launch", "--instance-types", "g5.xlarge", "--s3", "s3://no-such-bucket/p",
                         "--region", REGION, "--package", aws.wheel, "--yes")
    assert code == 2 and errors(err) == ["advisor: error: S3 bucket 'no-such-bucket' does not exist"]
    assert launched(run_calls.calls) == []


def test_unknown_ami_is_one_line(aws, run_calls, cli):
    code, _out, err = cli(*base_args(aws, "g5.xlarge", "--ami", "ami-0000000000000dead", "--yes"))
    assert code == 2
    (line,) = errors(err)
    assert line.startswith("advisor: error: AMI not found in us-east-1: InvalidAMIID")
    assert launched(run_calls.calls) == []


def test_no_dlami_parameter_asks_for_ami(aws, cli):
    code, _out, err = cli(*base_args(aws, "g5.xlarge", "--region", "eu-west-3", "--dry-run"))
    assert code == 2
    assert "no PyTorch Deep Learning AMI parameter under /aws/service/deeplearning/ami/x86_64/ in eu-west-3; pass --ami" in err


def test_build_wheel_from_source(tmp_path):
    import zipfile

    if package.project_root() is None:
        pytest.skip("not running from a source tree")
    root = package.project_root()
    before = sorted(p.name for p in root.iterdir())
    wheel = package.build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    assert "advisor/ec2/launch.py" in names and "lightning_module/contract/result.py" in names
    assert wheel.name.startswith("instance_advisor-")
    # the build ran on a copy: no build/ or egg-info appears in the checkout
    assert sorted(p.name for p in root.iterdir()) == before


def test_root_volume_override_only_where_the_ami_would_keep_it():
    import boto3
    from botocore.stub import Stubber

    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
    images = [
        {"ImageId": "ami-keeps", "RootDeviceName": "/dev/sda1", "Architecture": "arm64",
         "BlockDeviceMappings": [{"DeviceName": "/dev/sda1", "Ebs": {"DeleteOnTermination": False, "VolumeSize": 75}},
                                 {"DeviceName": "/dev/sdb", "VirtualName": "ephemeral0"}]},
        {"ImageId": "ami-deletes", "RootDeviceName": "/dev/xvda",
         "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"DeleteOnTermination": True, "VolumeSize": 100}}]},
    ]
    with Stubber(ec2) as stub:
        stub.add_response("describe_images", {"Images": images}, {"ImageIds": ["ami-deletes", "ami-keeps"]})
        facts = plan.describe_amis(ec2, {"ami-keeps", "ami-deletes"})
        assert facts["ami-keeps"].root_override == ("/dev/sda1", 75)
        assert facts["ami-deletes"].root_override is None
        assert facts["ami-keeps"].arch == "arm64" and facts["ami-deletes"].arch is None
    with Stubber(ec2) as stub:
        stub.add_client_error("describe_images", "UnauthorizedOperation", "no")
        assert plan.describe_amis(ec2, {"ami-keeps"}) == {}  # left to the AMI, with a warning


def test_temporary_credentials_warn_for_long_probes(aws, run_calls, cli, monkeypatch):
    monkeypatch.setenv("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEXAMPLETOKEN")
    code, _out, err = cli(*base_args(aws, "t3.micro", "--max-minutes", "90", "--yes"))
    assert code == 0, err
    assert "signed with temporary credentials; they stop working when those expire, which may be before the 110 minutes" in err
    code, _out, err = cli(*base_args(aws, "t3.micro", "--max-minutes", "20", "--yes"))
    assert code == 0 and "temporary credentials" not in err


def test_presigned_urls_name_the_buckets_regional_endpoint(aws, run_calls, cli):
    # botocore's default presigned host, bucket.s3.amazonaws.com, answers 307 for a bucket younger
    # than a day and fails in opt-in regions; curl --fail takes a 307 as success: results lost
    aws.s3.create_bucket(Bucket="probe-bucket-eu", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    code, _out, err = cli("launch", "--instance-types", "t3.micro", "--s3", "s3://probe-bucket-eu/probes",
                          "--region", REGION, "--package", aws.wheel, "--yes")
    assert code == 0, err
    (call,) = launched(run_calls.calls)
    urls = re.findall(r"https?://[^'\s]+", call["UserData"])
    assert len(urls) == 3
    assert all(u.startswith("https://probe-bucket-eu.s3.eu-west-1.amazonaws.com/probes/") for u in urls), urls
    # a dotted name stays path-style on the regional endpoint (a dotted virtual host fails TLS)
    aws.s3.create_bucket(Bucket="probe.bucket.eu", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    code, _out, err = cli("launch", "--instance-types", "t3.micro", "--s3", "s3://probe.bucket.eu/probes",
                          "--region", REGION, "--package", aws.wheel, "--yes")
    assert code == 0, err
    urls = re.findall(r"https?://[^'\s]+", launched(run_calls.calls)[-1]["UserData"])
    assert all(u.startswith("https://s3.eu-west-1.amazonaws.com/probe.bucket.eu/probes/") for u in urls), urls


@pytest.mark.parametrize("pattern", ["*", "2026*", "????????-??????-??????"])
def test_cancel_with_a_wildcard_run_id_terminates_nothing(aws, run_calls, cli, pattern):
    # EC2 tag filters treat * and ? as wildcards: a pattern must not reach other runs
    code, _, err = cli(*base_args(aws, "t3.micro", "--ami", aws.amis["old"], "--yes"))
    assert code == 0, err
    (run_id,) = manifests.list_run_ids()
    code, out, err = cli("launch", "cancel", pattern, "--region", REGION)
    assert code == 2 and out == ""
    assert errors(err) == [f"advisor: error: invalid run id {pattern!r}"]
    (inst,) = [i for r in aws.ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    assert inst["State"]["Name"] == "running"
    code, out, err = cli("launch", "status", run_id[:-1] + "?", "--region", REGION)
    assert code == 2 and "invalid run id" in err
    code, out, err = cli("launch", "cancel", run_id, "--format", "json")
    assert code == 0 and [r["instance_id"] for r in checked(out, "launch-cancel")["instances"]] == [inst["InstanceId"]]


@pytest.mark.parametrize(
    "probe_args,message",
    [
        ("--precison bf16-mixed", "--probe-args: unrecognized arguments: --precison bf16-mixed"),  # a typo
        ("--max-seconds abc", "--probe-args: argument --max-seconds: 'abc' is not a number"),
        ("--out elsewhere.json", "--probe-args must not contain --output: launch sets it"),  # argparse abbreviation
        ("--instance g6.xlarge", "--probe-args must not contain --instance-type: launch sets it"),
        ("--help", "--probe-args: --help is not a probe setting"),
    ],
)
def test_probe_args_are_checked_before_any_instance_pays_for_them(cli, monkeypatch, probe_args, message):
    # every instance would boot, install and then fail on the same bad argument
    def no_aws(*a, **k):
        raise AssertionError("no AWS call expected")

    monkeypatch.setattr(ec2_aws, "client", no_aws)
    code, out, err = cli("launch", "--instance-types", "g5.xlarge", "--s3", "s3://bkt/p", "--region", REGION,
                         f"--probe-args={probe_args}", "--yes")
    assert code == 2 and out == ""
    assert errors(err) == [f"advisor: error: {message}"]


def test_every_ebs_volume_the_ami_would_keep_is_deleted_with_the_instance(aws, run_calls, cli, monkeypatch):
    # an AMI made from an instance with an attached data volume maps it with DeleteOnTermination
    # false: every probe would leave a billed, orphaned volume behind
    import boto3
    from botocore.stub import Stubber

    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
    image = {"ImageId": "ami-data", "RootDeviceName": "/dev/xvda", "Architecture": "x86_64",
             "BlockDeviceMappings": [
                 {"DeviceName": "/dev/xvda", "Ebs": {"DeleteOnTermination": True, "VolumeSize": 100}},
                 {"DeviceName": "/dev/sdf", "Ebs": {"DeleteOnTermination": False, "VolumeSize": 500}},
                 {"DeviceName": "/dev/sdg", "Ebs": {"VolumeSize": 50}},  # EC2 leaves it out: false
                 {"DeviceName": "/dev/sdh", "Ebs": {"DeleteOnTermination": True, "VolumeSize": 10}},
                 {"DeviceName": "/dev/sdb", "VirtualName": "ephemeral0"}]}
    with Stubber(ec2) as stub:
        stub.add_response("describe_images", {"Images": [image]}, {"ImageIds": ["ami-data"]})
        facts = plan.describe_amis(ec2, {"ami-data"})
    assert facts["ami-data"].root_override is None
    assert facts["ami-data"].kept_volumes == {"/dev/sdf": 500, "/dev/sdg": 50}

    # and the launch (DryRun and real) overrides them, recorded in the manifest for the real one
    monkeypatch.setattr(plan, "describe_amis", lambda ec2, amis: {a: plan.AmiFacts(
        arch="x86_64", root_override=("/dev/sda1", 15), kept_volumes={"/dev/sdf": 20}) for a in amis})
    code, _out, err = cli(*base_args(aws, "t3.micro", "--ami", aws.amis["old"], "--yes"))
    assert code == 0, err
    assert len(run_calls.calls) == 2
    for call in run_calls.calls:
        assert call["BlockDeviceMappings"] == [
            {"DeviceName": "/dev/sda1", "Ebs": {"DeleteOnTermination": True, "VolumeSize": 15}},
            {"DeviceName": "/dev/sdf", "Ebs": {"DeleteOnTermination": True, "VolumeSize": 20}}]
    (run_id,) = manifests.list_run_ids()
    assert manifests.load(run_id).entry("t3.micro").kept_volumes == {"/dev/sdf": 20}


@pytest.mark.parametrize("name,message", [
    ("advisor.whl", "'advisor.whl' is not a wheel file name"),  # pip on the instance refuses it
    ('instance_advisor-0.1.0-py3-none-any"$(x).whl', "is not a wheel file name"),
    ("missing/instance_advisor-0.1.0-py3-none-any.whl", "no such wheel file"),
    ("instance_advisor-0.1.0.tar.gz", "a local package must be a .whl file"),  # not after the confirmation
])
def test_bad_wheel_is_refused_before_any_aws_call(cli, monkeypatch, tmp_path, name, message):
    def no_aws(*a, **k):
        raise AssertionError("no AWS call expected")

    monkeypatch.setattr(ec2_aws, "client", no_aws)
    wheel = tmp_path / name
    if not name.startswith("missing/"):
        wheel.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    code, out, err = cli("launch", "--instance-types", "g5.xlarge", "--s3", "s3://bkt/p", "--region", REGION,
                         "--package", str(wheel), "--yes")
    assert code == 2 and out == ""
    (line,) = errors(err)
    assert line.startswith("advisor: error: --package ") and message in line


def test_temporary_credentials_warning_comes_before_the_question(aws, run_calls, cli, monkeypatch):
    # a warning after the confirmation cannot change the decision it is about
    monkeypatch.setenv("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEXAMPLETOKEN")
    monkeypatch.setattr("sys.stdin", _Tty("n\n"))
    code, _out, err = cli(*base_args(aws, "t3.micro", "--max-minutes", "90"))
    assert code == 1 and launched(run_calls.calls) == []
    assert err.index("signed with temporary credentials") < err.index("Start 1 on-demand instance(s)")
    code, _out, err = cli(*base_args(aws, "t3.micro", "--max-minutes", "90", "--dry-run"))
    assert code == 0 and "signed with temporary credentials" in err


# ---------------------------------------------------------------- vCPU quotas (issue 10)


def test_a_type_over_its_quota_is_refused_before_any_run_instances(aws, run_calls, cli):
    aws.quotas["L-DB2E81BA"] = 0  # Running On-Demand G and VT instances
    code, _out, err = cli(*base_args(aws, "g5.xlarge", "--yes"))
    assert code == 2
    assert errors(err) == [(
        "advisor: error: g5.xlarge: the quota 'Running On-Demand G and VT instances' (L-DB2E81BA) is 0 vCPUs in "
        "us-east-1, and it needs 4; request an increase at https://us-east-1.console.aws.amazon.com/servicequotas/home/"
        "services/ec2/quotas/L-DB2E81BA or with 'aws service-quotas request-service-quota-increase --service-code ec2 "
        "--quota-code L-DB2E81BA --desired-value 4 --region us-east-1'; nothing launched")]
    assert run_calls.calls == []  # not even a DryRun
    assert manifests.list_run_ids() == []


def test_spot_quota_refuses_one_type_and_the_others_launch(aws, run_calls, cli):
    aws.quotas["L-3819A6DF"] = 4  # All G and VT Spot Instance Requests: one xlarge
    code, _out, err = cli(*base_args(aws, "g5.xlarge,g6.xlarge,c7i.large", "--market", "spot", "--yes"))
    assert code == 1, err  # not every planned type launched
    assert ("g6.xlarge: skipped: the quota 'All G and VT Spot Instance Requests' (L-3819A6DF) is 4 vCPUs in "
            "us-east-1, and it needs 4 beside the 4 of the types before it; request an increase") in err
    assert [c["InstanceType"] for c in launched(run_calls.calls)] == ["g5.xlarge", "c7i.large"]
    assert "g6.xlarge" not in {c["InstanceType"] for c in run_calls.calls}  # no DryRun for it either


def test_unreadable_quotas_warn_and_launch(aws, run_calls, cli):
    aws.account.deny.add("ListServiceQuotas")
    code, _out, err = cli(*base_args(aws, "g5.xlarge", "--yes"))
    assert code == 0, err
    assert ("advisor: warning: servicequotas:ListServiceQuotas in us-east-1: AWS refused (AccessDeniedException: "
            "not allowed to ListServiceQuotas)" in err and "the launch may still fail on a vCPU limit" in err)
    assert [c["InstanceType"] for c in launched(run_calls.calls)] == ["g5.xlarge"]


def test_plan_status_and_cancel_tables_fit_100_columns(aws, run_calls, cli, monkeypatch):
    """A long refusal (EC2's own message) wraps or moves under the plan table; json stays whole."""
    monkeypatch.setenv("COLUMNS", "100")
    refusal = ("You have requested more vCPU capacity than your current vCPU limit of 0 allows for the instance "
               "bucket that the specified instance type belongs to. Please visit http://aws.amazon.com/contact-us/"
               "ec2-request to request an adjustment to this limit.")
    run_calls.fail["t3.micro"] = ("VcpuLimitExceeded", refusal)
    # moto's DescribeImages leaves Architecture out for registered images: give the facts EC2 would
    monkeypatch.setattr(plan, "describe_amis", lambda ec2, amis: {a: plan.AmiFacts(arch="x86_64") for a in amis})
    wrong_arch = ("g5.xlarge,g5g.xlarge,t3.micro", "--ami", aws.amis["x86_64"], "--dry-run")
    code, out, err = cli(*base_args(aws, *wrong_arch))
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 100
    # the dry run's summary sentence too (it was 107 columns with three types)
    assert max(len(line) for line in err.splitlines() if not line.startswith("advisor:")) <= 100
    assert "nothing launched" in err.splitlines()[-1]
    assert "g5g.xlarge" in out and "[1]" not in out  # its refusal wraps in its column
    code, js, _ = cli(*base_args(aws, *wrong_arch, "--format", "json"))
    check = {r["instance_type"]: r for r in checked(js, "launch-plan")["planned"]}["g5g.xlarge"]["check_error"]
    assert " ".join(check.split()) in " ".join(line[line.index("  AMI ") + 2:] if "  AMI " in line else line.strip()
                                               for line in out.splitlines() if "ok" not in line)
    code, _, err = cli(*base_args(aws, "g5.xlarge,g5g.xlarge,t3.micro", "--yes"))
    assert max(len(line) for line in err.splitlines() if not line.startswith("advisor:")) <= 100  # the plan
    (run_id,) = manifests.list_run_ids()
    for action in ("status", "cancel"):
        code, out, err = cli("launch", action, run_id)
        assert code == 0, err
        assert max(len(line) for line in out.splitlines()) <= 100 and "g5.xlarge" in out
    code, out, _ = cli("launch", "status", run_id)
    assert "launch failed" in out and "vCPU limit of 0 allows" in " ".join(out.split())
