"""The probe instance's user-data script: shape, safety and syntax (`bash -n`)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from advisor.ec2.userdata import ProbeScript, render

URL = "https://bkt.s3.us-east-1.amazonaws.com/p/{}?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=ab'cd"


def script(**kw) -> str:
    base = {
        "run_id": "20261121-070000-abcdef",
        "instance_type": "g5.xlarge",
        "workload": "resnet50",
        "max_minutes": 30,
        "result_url": URL.format("result.json"),
        "log_url": URL.format("probe.log"),
        "package_url": URL.format("pkg.whl"),
        "package_filename": "instance_advisor-0.1.0-py3-none-any.whl",
        "probe_args": ["--precision", "bf16-mixed", "--max-seconds", "20", "it's; rm -rf /"],
    }
    base.update(kw)
    return render(ProbeScript(**base))


def commands(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is needed to check the script's syntax")
@pytest.mark.parametrize("variant", ["wheel", "spec"])
def test_script_is_valid_bash(tmp_path, variant):
    kw = {} if variant == "wheel" else {"package_url": None, "package_filename": None, "package_spec": "instance-advisor==0.1.0"}
    path = tmp_path / "user-data.sh"
    path.write_text(script(**kw))
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_watchdog_is_armed_before_anything_else():
    text = script()
    assert text.startswith("#!/bin/bash\n")
    assert commands(text)[0] == "shutdown -h +30 || true"
    # and the script always ends by powering off, from the EXIT trap
    assert "trap finish EXIT" in text
    assert text.index("shutdown -h now") < text.index("trap finish EXIT")


def test_probe_command_and_quoting():
    text = script()
    probe = [c for c in commands(text) if "advisor probe" in c]
    assert probe == [
        ("timeout --kill-after=20 \"$LEFT\" advisor probe --workload resnet50 --instance-type g5.xlarge "
         "--output \"$WORK/result.json\" --no-store --precision bf16-mixed --max-seconds 20 'it'\"'\"'s; rm -rf /' || {")
    ]
    # a quote inside a URL cannot break out of its assignment
    assert "RESULT_URL='https://bkt.s3.us-east-1.amazonaws.com/p/result.json?" in text
    assert "ab'\"'\"'cd'" in text


def test_install_pins_the_images_torch():
    text = script()
    assert "/opt/pytorch/bin/python" in text
    # the wheel with its probe extra (torch, torchvision, lightning), the image's torch pinned
    assert '-m pip install --constraint "$WORK/constraints.txt" "$WORK/instance_advisor-0.1.0-py3-none-any.whl[probe]"' in text
    assert "torch|torchvision" in text


def test_pip_spec_variant_downloads_nothing():
    text = script(package_url=None, package_filename=None, package_spec="instance-advisor[plot]==0.1.0")
    assert "pkg.whl" not in text
    assert "pip install --constraint \"$WORK/constraints.txt\" 'instance-advisor[plot,probe]==0.1.0'" in text


@pytest.mark.parametrize("spec, installed", [
    ("instance-advisor", "instance-advisor[probe]"),
    ("instance-advisor==0.1.0", "instance-advisor[probe]==0.1.0"),
    ("instance-advisor[probe]>=0.1", "instance-advisor[probe]>=0.1"),
    ("instance-advisor @ https://example.com/x/instance_advisor-0.1.0-py3-none-any.whl",
     "instance-advisor[probe] @ https://example.com/x/instance_advisor-0.1.0-py3-none-any.whl"),
    ("git+https://github.com/me/instance-advisor.git", "git+https://github.com/me/instance-advisor.git"),  # no name
])
def test_pip_spec_gets_the_probe_extra(spec, installed):
    from advisor.ec2.userdata import with_extra

    assert with_extra(spec, "probe") == installed


def test_exactly_one_package_source():
    with pytest.raises(ValueError):
        script(package_spec="instance-advisor")
    with pytest.raises(ValueError):
        script(package_url=None, package_filename=None)
    with pytest.raises(ValueError):
        script(package_filename="pkg.tar.gz")


def test_every_transfer_is_time_bounded():
    # curl has no total timeout of its own: a stalled upload in the EXIT trap would keep the
    # instance billing until the watchdog instead of powering off after the probe
    text = script()
    curls = [c for c in commands(text) if c.startswith("curl ")]
    assert len(curls) == 3  # the wheel, the result, the log
    for c in curls:
        assert re.search(r"--connect-timeout \d+ ", c) and re.search(r"--max-time \d+ ", c), c
        assert re.search(r"--retry-max-time \d+ ", c), c


def test_worst_case_script_fits_ec2s_16_kib(monkeypatch):
    # presigned URLs signed with temporary credentials carry the session token in each of the
    # three URLs. 2,000 characters is our assumption, not a bound: AWS fixes no maximum ("typical
    # size is less than 4096 bytes", GetSessionToken's Credentials docs). Measured with this
    # script: 1,300 -> 8,415 bytes, 2,000 -> 10,641, 4,096 -> 17,355, over the limit, where
    # launch fails each type with UserDataTooLarge instead of starting it.
    import base64

    import boto3
    from botocore.config import Config

    from advisor.ec2.userdata import USER_DATA_LIMIT

    s3 = boto3.client("s3", region_name="ap-southeast-2", aws_access_key_id="ASIAEXAMPLEEXAMPLE00",
                      aws_secret_access_key="x", aws_session_token=base64.b64encode(bytes(range(256)) * 6).decode()[:2000],
                      config=Config(signature_version="s3v4", s3={"addressing_style": "virtual"}))
    key = "a/fairly/long/team/prefix/20261121-070000-abcdef/p4de.24xlarge/"
    url = lambda op, name: s3.generate_presigned_url(
        op, Params={"Bucket": "an-organisations-probe-results-bucket", "Key": key + name}, ExpiresIn=(1440 + 20) * 60)
    text = script(instance_type="p4de.24xlarge", max_minutes=1440, result_url=url("put_object", "result.json"),
                  log_url=url("put_object", "probe.log"),
                  package_url=url("get_object", "instance_advisor-0.1.0-py3-none-any.whl"))
    assert "X-Amz-Security-Token" in text
    assert len(text.encode()) < USER_DATA_LIMIT * 0.75, len(text.encode())


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("curl") is None, reason="bash and curl run the script")
def test_a_failed_download_still_powers_off(tmp_path):
    # nothing listens on the URLs' port: the wheel download fails before any install
    dead = "http://127.0.0.1:9/p/{}?X-Amz-Signature=a%2Fb&x=1"
    path = tmp_path / "user-data.sh"
    path.write_text(script(result_url=dead.format("result.json"), log_url=dead.format("probe.log"),
                           package_url=dead.format("pkg.whl")))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "shutdown-calls"
    for tool, body in (("shutdown", f'echo "$*" >> {calls}\n'), ("python3", "exit 99\n"), ("advisor", "exit 99\n")):
        (bin_dir / tool).write_text("#!/bin/bash\n" + body)
        (bin_dir / tool).chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    proc = subprocess.run(["bash", str(path)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 10, proc.stdout + proc.stderr  # "downloading the package failed"
    assert calls.read_text().splitlines() == ["-h +30", "-h now"]


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("curl") is None, reason="bash and curl run the script")
def test_a_hung_probe_is_stopped_in_time_to_upload_its_log(tmp_path):
    # the watchdog alone would power off mid-probe with nothing uploaded: 'missing', no log
    import http.server
    import threading

    uploads: dict[str, bytes] = {}

    class Put(http.server.BaseHTTPRequestHandler):
        def do_PUT(self):
            uploads[self.path.split("?")[0]] = self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Put)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/p/"
    try:
        path = tmp_path / "user-data.sh"
        # 5 minutes, all but 2 seconds kept for the uploads: the probe gets 2 seconds
        path.write_text(script(max_minutes=5, upload_reserve_s=5 * 60 - 2, package_url=None, package_filename=None,
                               package_spec="instance-advisor", result_url=base + "result.json", log_url=base + "probe.log"))
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        calls = tmp_path / "shutdown-calls"
        for tool, body in (("shutdown", f'echo "$*" >> {calls}\n'), ("python3", "exit 0\n"),
                           ("advisor", 'echo "probe hangs"; sleep 60\n')):
            (bin_dir / tool).write_text("#!/bin/bash\n" + body)
            (bin_dir / tool).chmod(0o755)
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
        proc = subprocess.run(["bash", str(path)], env=env, capture_output=True, text=True, timeout=60, check=False)
    finally:
        server.shutdown()
    assert proc.returncode == 124, proc.stdout + proc.stderr
    assert calls.read_text().splitlines() == ["-h +5", "-h now"]
    log = uploads["/p/probe.log"].decode()
    assert "probe hangs" in log and "stopped: out of its --max-minutes time" in log
    assert "/p/result.json" not in uploads
