"""`advisor results pull`: import launched runs' results from S3 (moto), idempotently, and
report what is missing, failed or corrupt."""

from __future__ import annotations

import json

import pytest
from factories import probe_result
from schema_check import checked

from advisor.ec2 import manifest as manifests
from advisor.store import ResultStore

pytest.importorskip("moto")

REGION = "us-east-1"
BUCKET = "probe-bucket"
RUN = "20261121-070000-abcdef"


A10G = {"accelerator": "gpu", "gpus": ("NVIDIA A10G",)}  # a GPU probe's result as an instance uploads it


@pytest.fixture
def run_pull(cli):
    def run(*argv: str):
        return cli("results", "pull", *argv)

    return run


@pytest.fixture
def bucket(monkeypatch):
    import boto3
    from moto import mock_aws

    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        yield s3


def put(s3, key: str, body: str | bytes) -> None:
    s3.put_object(Bucket=BUCKET, Key=f"probes/{RUN}/{key}", Body=body)


def put_run(s3, types: list[str]) -> None:
    m = manifests.RunManifest(
        run_id=RUN, region=REGION, bucket=BUCKET, prefix=f"probes/{RUN}", workload="resnet50",
        max_minutes=45, package="probes/x.whl",
        # model_construct: a hand-written run.json may name what launch would refuse (checked on reading)
        entries=[manifests.LaunchEntry.model_construct(
            instance_type=t, arch="x86_64", ami="ami-1", market="on-demand", state="pending",
            result_key=f"probes/{RUN}/{t}/result.json", log_key=f"probes/{RUN}/{t}/probe.log") for t in types],
    )
    put(s3, "run.json", m.model_dump_json())


def test_valid_truncated_wrong_schema_and_duplicate(bucket, run_pull, tmp_path):
    store_path = tmp_path / "results.sqlite"
    good = probe_result("g5.xlarge", 123.4, **A10G)
    types = ["g5.xlarge", "g6.xlarge", "g6e.xlarge", "g5.2xlarge", "c7i.8xlarge", "p5.48xlarge"]
    put_run(bucket, types)
    put(bucket, "g5.xlarge/result.json", good.model_dump_json())
    put(bucket, "g5.xlarge/probe.log", "ok\n")
    put(bucket, "g6.xlarge/result.json", good.model_dump_json()[:200])  # truncated upload
    put(bucket, "g6e.xlarge/result.json", json.dumps({"schema_version": 1, "workload_id": "x", "samples_per_sec": 1}))
    put(bucket, "g5.2xlarge/result.json", good.model_dump_json())  # the same result again
    put(bucket, "c7i.8xlarge/probe.log", "installing\n" + "".join(f"line {i}\n" for i in range(30))
        + "RuntimeError: CUDA error: no kernel image\nadvisor-probe: finished with exit status 1 at now\n")
    # p5.48xlarge never uploaded anything

    code, out, err = run_pull(f"s3://{BUCKET}/probes", "--store", str(store_path), "--format", "json")
    assert code == 1  # something failed or is corrupt
    rows = {r["instance_type"]: r for r in checked(out, "results-pull")["runs"]}
    assert [r["instance_type"] for r in checked(out, "results-pull")["runs"]] == types  # launch order
    assert rows["g5.xlarge"]["status"] == "imported" and rows["g5.xlarge"]["result_id"] == good.result_id
    assert rows["g6.xlarge"]["status"] == "corrupt"
    assert "not valid JSON" in rows["g6.xlarge"]["detail"]
    assert rows["g6.xlarge"]["detail"].startswith(f"s3://{BUCKET}/probes/{RUN}/g6.xlarge/result.json: ")
    assert rows["g6e.xlarge"]["status"] == "corrupt" and "invalid probe result" in rows["g6e.xlarge"]["detail"]
    assert rows["g5.2xlarge"]["status"] == "duplicate"
    assert rows["c7i.8xlarge"]["status"] == "failed"
    assert rows["c7i.8xlarge"]["log_tail"][-2:] == ["RuntimeError: CUDA error: no kernel image",
                                                   "advisor-probe: finished with exit status 1 at now"]
    assert len(rows["c7i.8xlarge"]["log_tail"]) == 15
    assert "RuntimeError: CUDA error" in rows["c7i.8xlarge"]["detail"]
    assert rows["p5.48xlarge"]["status"] == "missing"
    assert err.strip().endswith("1 imported, 1 duplicate, 1 failed, 2 corrupt, 1 missing")

    with ResultStore(store_path) as store:
        assert store.count() == 1
        assert store.get(good.result_id).samples_per_sec == good.samples_per_sec

    # pulling again adds nothing
    code, out, err = run_pull(f"s3://{BUCKET}/probes", "--run", RUN, "--store", str(store_path), "--format", "json")
    statuses = {r["instance_type"]: r["status"] for r in checked(out, "results-pull")["runs"]}
    assert statuses["g5.xlarge"] == "duplicate" and "imported" not in statuses.values()
    with ResultStore(store_path) as store:
        assert store.count() == 1


def test_table_output_and_local_manifest_launch_errors(bucket, run_pull, tmp_path):
    store_path = tmp_path / "results.sqlite"
    put_run(bucket, ["g5.xlarge", "g6.xlarge"])
    put(bucket, "g5.xlarge/result.json", probe_result("g5.xlarge", 250.0, **A10G).model_dump_json())
    # the local manifest knows g6.xlarge never started
    m = manifests.RunManifest.model_validate_json(bucket.get_object(Bucket=BUCKET, Key=f"probes/{RUN}/run.json")["Body"].read())
    m.entries[0].state, m.entries[0].instance_id = "launched", "i-0123"
    m.entries[1].state, m.entries[1].error = "failed", "InsufficientInstanceCapacity: no capacity"
    manifests.save(m)

    code, out, err = run_pull(f"s3://{BUCKET}/probes/", "--store", str(store_path))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["run_id", "instance_type", "status", "result_id", "samples_per_sec", "detail"]
    assert "imported" in lines[2] and "250" in lines[2]
    assert "not launched" in lines[3] and "InsufficientInstanceCapacity" in lines[3]
    assert "1 imported, 1 not launched" in err


def test_the_pull_table_fits_100_columns_with_a_long_detail(bucket, run_pull, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    put_run(bucket, ["g5.xlarge", "g6.xlarge"])
    result = probe_result("g5.xlarge", 250.0, **A10G)
    put(bucket, "g5.xlarge/result.json", result.model_dump_json())
    m = manifests.RunManifest.model_validate_json(bucket.get_object(Bucket=BUCKET, Key=f"probes/{RUN}/run.json")["Body"].read())
    long = ("InsufficientInstanceCapacity: We currently do not have sufficient g6.xlarge capacity in the "
            "Availability Zone you requested (us-east-1a). Our system will be working on provisioning additional "
            "capacity. You can currently get g6.xlarge capacity by not specifying an Availability Zone.")
    m.entries[1].state, m.entries[1].error = "failed", long
    manifests.save(m)
    code, out, err = run_pull(f"s3://{BUCKET}/probes/", "--store", str(tmp_path / "r.sqlite"))
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "not launched" in out and " ".join(long.split()) in " ".join(out.split())
    assert result.result_id in out  # whole, to copy into 'results show' (the headers wrap instead)


def test_nothing_there_is_a_one_line_error(bucket, run_pull, tmp_path):
    code, out, err = run_pull(f"s3://{BUCKET}/elsewhere", "--store", str(tmp_path / "r.sqlite"))
    assert code == 2 and out == ""
    assert err == f"advisor: error: nothing under s3://{BUCKET}/elsewhere: no launched run has written there\n"


def test_bad_url_is_one_line(run_pull, tmp_path):
    code, _out, err = run_pull("probe-bucket/probes", "--store", str(tmp_path / "r.sqlite"))
    assert code == 2 and err.count("\n") == 1 and "is not an S3 URL" in err


def test_run_prefix_url_pulls_that_run(bucket, run_pull, tmp_path):
    put_run(bucket, ["g5.xlarge"])
    put(bucket, "g5.xlarge/result.json", probe_result("g5.xlarge", 123.4, **A10G).model_dump_json())
    code, out, err = run_pull(f"s3://{BUCKET}/probes/{RUN}", "--store", str(tmp_path / "r.sqlite"), "--format", "json")
    assert code == 0, err
    assert [(r["run_id"], r["status"]) for r in checked(out, "results-pull")["runs"]] == [(RUN, "imported")]


def test_keys_that_are_not_runs_is_one_line(bucket, run_pull, tmp_path):
    bucket.put_object(Bucket=BUCKET, Key="other/notes.txt", Body=b"x")
    code, out, err = run_pull(f"s3://{BUCKET}/other", "--store", str(tmp_path / "r.sqlite"))
    assert code == 2 and out == ""
    assert err == (f"advisor: error: no probe runs under s3://{BUCKET}/other: "
                   "expected <run_id>/run.json or <run_id>/<type>/result.json keys\n")


def test_each_bad_name_in_the_manifest_gets_its_own_line(bucket, run_pull, tmp_path):
    # run.json written by hand or by another tool: its bad names are said, one row each, not dropped.
    put_run(bucket, ["g5.xlarge", "../etc", "bad\x1b[2Jname"])
    put(bucket, "g5.xlarge/result.json", probe_result("g5.xlarge", 123.4, **A10G).model_dump_json())
    code, out, err = run_pull(f"s3://{BUCKET}/probes", "--store", str(tmp_path / "r.sqlite"), "--format", "json")
    assert code == 0, err
    rows = checked(out, "results-pull")["runs"]
    ignored = [r for r in rows if r["status"] == "ignored"]
    assert len(ignored) == 2 and all("named in the run manifest" in r["detail"] for r in ignored)
    assert {r["instance_type"] for r in ignored} == {"../etc", "bad\x1b[2Jname"}
    assert [r["status"] for r in rows if r["instance_type"] == "g5.xlarge"] == ["imported"]
