"""Run manifests are read back as strictly as results (issue 21): typed, bounded, one-line text;
a bad local manifest is one line, a bad run.json entry its own `ignored` row of `results pull`."""

from __future__ import annotations

import json

import pytest
from factories import probe_result
from test_pull import A10G, BUCKET, RUN, bucket, put, run_pull  # noqa: F401 (fixtures)

from advisor.ec2 import manifest as manifests
from advisor.errors import AdvisorError


def base() -> dict:
    e = manifests.LaunchEntry(instance_type="g5.xlarge", arch="x86_64", ami="ami-0abc", market="spot",
                              usd_per_hour=0.5, root_volume_gib=100, result_key=f"probes/{RUN}/g5.xlarge/result.json",
                              log_key=f"probes/{RUN}/g5.xlarge/probe.log")
    m = manifests.RunManifest(run_id=RUN, region="us-east-1", bucket=BUCKET, prefix=f"probes/{RUN}",
                              workload="resnet50", max_minutes=45, package="probes/x.whl", entries=[e])
    return json.loads(m.model_dump_json())


def test_a_manifest_round_trips():
    doc = base()
    manifests.save(manifests.validated(manifests.RunManifest, doc, "m"))
    assert manifests.load(RUN).model_dump(mode="json") == doc


@pytest.mark.parametrize("path, value, words", [
    (("max_minutes",), True, "max_minutes"),
    (("max_minutes",), 1e9, "max_minutes"),
    (("max_minutes",), "45", "max_minutes"),
    (("manifest_version",), 2, "manifest_version"),
    (("entries", 0, "usd_per_hour"), 1e308, "usd_per_hour"),
    (("entries", 0, "usd_per_hour"), 5e-324, "usd_per_hour"),
    (("entries", 0, "root_volume_gib"), 10**9, "root_volume_gib"),
    (("entries", 0, "instance_type"), "../etc", "instance_type"),
    (("entries", 0, "error"), "a\x1b[2Jb", "control characters"),
    (("entries", 0, "launched_at"), "2099-01-01T00:00:00Z", "in the future"),
    (("run_id",), "a/b", "run_id"),
    (("bucket",), "Not A Bucket", "bucket"),
])
def test_a_bad_local_manifest_is_one_line(path, value, words):
    doc = base()
    node = doc
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    f = manifests.manifest_path(RUN)
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(doc))
    with pytest.raises(AdvisorError) as e:
        manifests.load(RUN)
    assert words in str(e.value) and "\n" not in str(e.value) and "is not a valid run manifest" in str(e.value)


def test_a_bad_entry_of_run_json_is_its_own_ignored_row(bucket, run_pull, tmp_path):  # noqa: F811
    doc = base()
    bad = {**doc["entries"][0], "instance_type": "g6.xlarge", "usd_per_hour": True}
    doc["entries"].append(bad)
    put(bucket, "run.json", json.dumps(doc))
    put(bucket, "g5.xlarge/result.json", probe_result("g5.xlarge", 123.4, **A10G).model_dump_json())
    code, out, err = run_pull(f"s3://{BUCKET}/probes", "--store", str(tmp_path / "r.sqlite"), "--format", "json")
    assert code == 0, err
    rows = {r["instance_type"]: r for r in json.loads(out)["runs"]}
    assert rows["g5.xlarge"]["status"] == "imported"
    assert rows["g6.xlarge"]["status"] == "ignored" and "usd_per_hour" in rows["g6.xlarge"]["detail"]


def test_a_run_json_that_is_not_a_manifest_is_one_warning(bucket, run_pull, tmp_path):  # noqa: F811
    put(bucket, "run.json", json.dumps({**base(), "max_minutes": True}))
    put(bucket, "g5.xlarge/result.json", probe_result("g5.xlarge", 123.4, **A10G).model_dump_json())
    code, out, err = run_pull(f"s3://{BUCKET}/probes", "--store", str(tmp_path / "r.sqlite"), "--format", "json")
    assert code == 0, err
    assert [ln for ln in err.splitlines() if "run.json" in ln and "max_minutes" in ln], err
    assert [r["status"] for r in json.loads(out)["runs"]] == ["imported"]  # the keys' own types are still pulled


# --- property: every field of a manifest given hostile values -----------------------------------

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_paths import leaves, set_path

HOSTILE = st.one_of(
    st.sampled_from([5e-324, 1e-300, 0.0, -1.0, 1e300, 1.7976931348623157e308, True, False, "40", "", None, [], {},
                     10**30, 2**63, 1.5, 3, "\x1b[2J", "a\nb", "../../etc", "x" * 5000, "2999-01-01T00:00:00Z"]),
    st.floats(allow_nan=False, allow_infinity=False), st.integers(-(10**20), 10**20), st.text(max_size=20),
)
FIELDS = list(leaves(base()))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(FIELDS), value=HOSTILE)
def test_hostile_values_in_any_field_are_one_line_or_a_usable_manifest(path, value):
    f = manifests.manifest_path(RUN)
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(set_path(base(), path, value)))
    try:
        m = manifests.load(RUN)
    except AdvisorError as e:
        assert "\n" not in str(e) and str(e).startswith("run manifest ")
        return
    # loaded: it writes back as it reads (what launch saves after each request)
    assert manifests.validated(manifests.RunManifest, json.loads(m.model_dump_json()), "again") == m


@pytest.mark.parametrize("name", ["ab", "abc", "a" * 63, "a" * 64, "Bucket", "my.bucket-1", "-abc", "abc-"])
def test_a_manifest_takes_the_buckets_an_s3_url_takes(name):
    """One bucket rule (ec2.aws.BUCKET_PATTERN) for --s3 and the manifest that records it."""
    from pydantic import ValidationError

    from advisor.ec2.aws import parse_s3_url

    try:
        parse_s3_url(f"s3://{name}/probes")
        url_ok = True
    except AdvisorError:
        url_ok = False
    try:
        manifests.RunManifest.model_validate_json(json.dumps(base() | {"bucket": name}))
        manifest_ok = True
    except ValidationError:
        manifest_ok = False
    assert url_ok == manifest_ok == (name in ("abc", "a" * 63, "my.bucket-1"))


def test_nothing_launchable_is_one_line_and_the_checked_ones_launch():
    from advisor.ec2.plan import PlannedLaunch, launchable

    refused = PlannedLaunch("g5.xlarge", "x86_64", "ami-1", "on-demand", 1.0, 0.5, check_error="over the vCPU quota")
    passed = PlannedLaunch("g6.xlarge", "x86_64", "ami-1", "on-demand", 1.0, 0.5)
    assert launchable([refused, passed]) == [passed]
    with pytest.raises(AdvisorError, match=r"^no instance type passed the checks \(quota, AMI, EC2 DryRun\); nothing launched$"):
        launchable([refused])
