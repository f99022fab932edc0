"""The user-data script, run for real: `advisor launch` against a moto server on 127.0.0.1
(so the presigned URLs point at it), then each instance's script is executed by bash with
shims on PATH for `shutdown`, `python3` (pip) and `advisor` (the probe). The result and the
log must arrive in S3, the watchdog and the final shutdown must be issued, and `results
pull` must import the one good result and report the failed probe with its log tail."""

from __future__ import annotations

import base64
import re
import shutil
import stat
import subprocess
from datetime import datetime, timezone

import pytest
from schema_check import checked

from advisor.ec2 import manifest as manifests
from advisor.store import ResultStore
from lightning_module.contract.result import ProbeResult, parse_result

pytest.importorskip("moto.server")
if shutil.which("bash") is None or shutil.which("curl") is None:
    pytest.skip("bash and curl are needed to run the user-data script", allow_module_level=True)

REGION = "us-east-1"
BUCKET = "probe-run-bucket"
SECRET = "fake/secret/key/that/must/not/leak0000"


def result_json(instance_type: str) -> str:
    return ProbeResult.model_validate({
        "workload": {"model": "mlp", "image_size": 32, "num_classes": 10},
        "workload_id": "mlp-32px-10c",
        "instance_type": instance_type,
        "instance_type_source": "given",
        "hardware": {"cpu_model": "stub"},
        "software": {"python": "3.12.3", "torch": "2.9.0"},
        "config": {"accelerator": "cpu", "batch_size": 32},
        "samples_per_sec": 1000.0,
        "samples_per_sec_ci": [990.0, 1010.0],
        "step_time": {"n_steps": 20, "mean_s": 0.032, "median_s": 0.032, "stdev_s": 0.001, "p10_s": 0.031,
                      "p90_s": 0.033, "warmup_steps": 3, "warmup_seconds": 0.5},
        "started_at": datetime(2026, 11, 21, 7, 0, tzinfo=timezone.utc),
    }).model_dump_json()


def shim(path, body: str) -> None:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def moto_server(monkeypatch):
    from moto.server import ThreadedMotoServer

    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEFORTESTS0001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def test_user_data_runs_uploads_and_shuts_down(moto_server, cli, tmp_path):
    import boto3

    s3 = boto3.client("s3", region_name=REGION)
    ec2 = boto3.client("ec2", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    ami = ec2.register_image(Name="test-dlami", Architecture="x86_64", RootDeviceName="/dev/sda1")["ImageId"]
    wheel = tmp_path / "instance_advisor-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK\x05\x06" + b"\0" * 18 + b"unique-bytes-7f3a")

    code, _out, err = cli("launch", "--instance-types", "t3.micro,t3.small", "--s3", f"s3://{BUCKET}/probes",
                         "--region", REGION, "--ami", ami, "--package", str(wheel), "--workload", "mlp",
                         "--probe-args", "--max-seconds 5", "--max-minutes", "30", "--yes")
    assert code == 0, err
    (run_id,) = manifests.list_run_ids()
    m = manifests.load(run_id)

    # shims: the instance's tools, recording what they were asked to do
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    calls.mkdir()
    fixture = tmp_path / "fixture-result.json"
    shim(bin_dir / "shutdown", f'echo "$*" >> {calls}/shutdown\n')
    shim(bin_dir / "python3", f'''echo "$*" >> {calls}/python
case "$1 $2 $3" in
  "-m pip --version") echo "pip 25.0 (shim)" ;;
  "-m pip list") printf 'torch==2.9.0+cu128\\ntorchvision==0.24.0+cu128\\nnumpy==2.1.0\\nnvidia-cudnn-cu12==9.1.0\\n' ;;
  "-m pip install") w="${{@: -1}}"; cp "${{w%\\[probe\\]}}" {calls}/installed.whl; cp "$5" {calls}/constraints.txt ;;
  *) exit 64 ;;
esac
''')
    shim(bin_dir / "advisor", f'''echo "$*" >> {calls}/advisor
while [ $# -gt 0 ]; do
  case "$1" in
    --output) out="$2"; shift ;;
    --instance-type) itype="$2"; shift ;;
  esac
  shift
done
if [ "$itype" = t3.small ]; then echo "RuntimeError: probe blew up on $itype" >&2; exit 3; fi
echo "probe on $itype"
sed "s/__TYPE__/$itype/" {fixture} > "$out"
''')
    fixture.write_text(result_json("__TYPE__"))

    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    for entry in m.entries:
        ud = ec2.describe_instance_attribute(InstanceId=entry.instance_id, Attribute="userData")["UserData"]["Value"]
        script = base64.b64decode(ud).decode()
        assert SECRET not in script and "AWS_SECRET_ACCESS_KEY" not in script
        assert moto_server in script  # the presigned URLs point at the local server
        path = tmp_path / f"user-data-{entry.instance_type}.sh"
        path.write_text(script)
        proc = subprocess.run(["bash", str(path)], env=env, capture_output=True, text=True, timeout=120, check=False)
        # the trap's exit status is the probe's
        assert proc.returncode == (0 if entry.instance_type == "t3.micro" else 3), proc.stdout + proc.stderr

    # watchdog first, then the final power-off, once per instance
    assert (calls / "shutdown").read_text().splitlines() == ["-h +30", "-h now", "-h +30", "-h now"]
    pip_calls = (calls / "python").read_text().splitlines()
    assert pip_calls[:2] == ["-m pip --version", "-m pip list --format=freeze"]
    assert re.fullmatch(r"-m pip install --constraint /\S+/constraints\.txt "
                        r"/\S+/instance_advisor-0\.1\.0-py3-none-any\.whl\[probe\]",
                        pip_calls[2])
    # pip got the downloaded wheel (same bytes as uploaded) and the torch stack pinned
    assert (calls / "installed.whl").read_bytes() == wheel.read_bytes()
    assert (calls / "constraints.txt").read_text().splitlines() == [
        "torch==2.9.0+cu128", "torchvision==0.24.0+cu128", "nvidia-cudnn-cu12==9.1.0"]
    first_probe = (calls / "advisor").read_text().splitlines()[0]
    assert re.fullmatch(r"probe --workload mlp --instance-type t3.micro --output /\S+/result\.json --no-store --max-seconds 5",
                        first_probe)

    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"probes/{run_id}/")["Contents"]}
    ok, bad = m.entry("t3.micro"), m.entry("t3.small")
    assert {ok.result_key, ok.log_key, bad.log_key} <= keys
    assert bad.result_key not in keys
    uploaded = parse_result(s3.get_object(Bucket=BUCKET, Key=ok.result_key)["Body"].read())
    assert uploaded.instance_type == "t3.micro"
    ok_log = s3.get_object(Bucket=BUCKET, Key=ok.log_key)["Body"].read().decode()
    assert "pinned 3 torch-family packages" in ok_log and "probe on t3.micro" in ok_log
    assert "advisor-probe: finished with exit status 0" in ok_log

    # and results pull brings it home
    store = tmp_path / "store.sqlite"
    code, out, err = cli("results", "pull", f"s3://{BUCKET}/probes", "--run", run_id, "--store", str(store), "--format", "json")
    assert code == 1, err  # one probe failed
    rows = {r["instance_type"]: r for r in checked(out, "results-pull")["runs"]}
    assert rows["t3.micro"]["status"] == "imported"
    assert rows["t3.small"]["status"] == "failed"
    tail = rows["t3.small"]["log_tail"]
    assert tail[-2] == "RuntimeError: probe blew up on t3.small"
    assert tail[-1].startswith("advisor-probe: finished with exit status 3 at ")
    with ResultStore(store) as st:
        assert st.count() == 1


def test_user_data_with_your_code_runs_it_from_the_bundle(moto_server, cli, tmp_path):
    """--code (a package folder), --requirements and a --config in --probe-args: the instance's
    script unpacks them, installs the requirements under the torch constraints, puts the package on
    PYTHONPATH and runs the probe with the config's shipped copy."""
    import boto3

    s3 = boto3.client("s3", region_name=REGION)
    ec2 = boto3.client("ec2", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    ami = ec2.register_image(Name="test-dlami", Architecture="x86_64", RootDeviceName="/dev/sda1")["ImageId"]
    wheel = tmp_path / "instance_advisor-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    pkg = tmp_path / "src" / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "lm.py").write_text("class TinyLM: ...\n")
    req = tmp_path / "requirements.txt"
    req.write_text("sentencepiece\n")
    cfg = tmp_path / "lm.yaml"
    cfg.write_text("model:\n  init_args: {d_model: 64}\n")
    code, _out, err = cli("launch", "--instance-types", "t3.micro", "--s3", f"s3://{BUCKET}/probes", "--region", REGION,
                          "--ami", ami, "--package", str(wheel), "--workload", "mypkg.lm:TinyLM", "--code", str(pkg),
                          "--requirements", str(req), "--probe-args", f"--config {cfg}", "--yes")
    assert code == 0, err
    (run_id,) = manifests.list_run_ids()
    (entry,) = manifests.load(run_id).entries

    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    calls.mkdir()
    shim(bin_dir / "shutdown", "true\n")
    shim(bin_dir / "python3", f'''echo "$*" >> {calls}/python
case "$1 $2 $3" in
  "-m pip --version") echo "pip 25.0 (shim)" ;;
  "-m pip list") printf 'torch==2.9.0+cu128\\n' ;;
  "-m pip install") if [ "$6" = -r ]; then cp "$7" {calls}/requirements.txt; fi ;;
  *) exit 64 ;;
esac
''')
    fixture = tmp_path / "fixture-result.json"
    fixture.write_text(result_json("t3.micro"))
    # the probe: mypkg importable from PYTHONPATH, the config at the path it was given (relative to its folder)
    shim(bin_dir / "advisor", f'''while [ $# -gt 0 ]; do
  case "$1" in --output) out="$2"; shift ;; --config) config="$2"; shift ;; esac; shift
done
ls "${{PYTHONPATH%%:*}}/mypkg/lm.py" > {calls}/found || exit 5
cp "$config" {calls}/config.yaml || exit 6
cp {fixture} "$out"
''')
    ud = ec2.describe_instance_attribute(InstanceId=entry.instance_id, Attribute="userData")["UserData"]["Value"]
    path = tmp_path / "user-data.sh"
    path.write_text(base64.b64decode(ud).decode())
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    proc = subprocess.run(["bash", str(path)], env=env, capture_output=True, text=True, timeout=120, check=False)
    log = s3.get_object(Bucket=BUCKET, Key=entry.log_key)["Body"].read().decode()
    assert proc.returncode == 0, log
    assert (calls / "requirements.txt").read_text() == "sentencepiece\n"
    assert (calls / "config.yaml").read_text() == cfg.read_text()
    assert (calls / "found").read_text().strip().endswith("/code/src/mypkg/lm.py")
    install = [c for c in (calls / "python").read_text().splitlines() if c.startswith("-m pip install")]
    assert len(install) == 2 and all("--constraint" in c for c in install)  # the advisor, then the requirements
    assert entry.result_key in {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
