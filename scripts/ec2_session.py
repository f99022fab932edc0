"""Record docs/ec2.md's session: every `advisor launch`, `launch status`, `launch cancel` and
`results pull` command the page shows, run as shown (at COLUMNS=100, stdout and stderr in the
order a terminal shows them) against moto in server mode on 127.0.0.1.

What is moto's: S3, SSM, EC2 (DescribeInstanceTypes is moto's copy of AWS's data, so the
architectures and vCPUs are real), the instances and their ids. What moto lacks is served by
tests/aws_fakes.py's hook: Service Quotas (every EC2 vCPU quota 1024 but 'Running On-Demand P
instances', 0, which the page's first command meets). Fixed so that a run prints the same every
time: moto's random seed (the AMI and instance ids), the run id and the instances' launch time,
and a catalog age limit no snapshot reaches. The instances never run: before the first `results
pull` this script does what their user-data would have done (g5.xlarge uploads a stand-in result
of 412.7 samples/s, g5g.xlarge only a log whose pip install failed, both then power off; g6.xlarge
stays running with nothing uploaded). The package is the real wheel of this checkout.

    .venv/bin/python scripts/ec2_session.py    # prints [[line, command, [output lines]], ...] as JSON

scripts/regenerate_doc_outputs.py writes the outputs into docs/ec2.md; tests/test_ec2_doc.py
checks the page shows what this prints.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
import tempfile
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

PAGE = "docs/ec2.md"
REGION = "us-east-1"
BUCKET = "my-probe-bucket"
SEED = 2026
RUN_AT = datetime(2026, 11, 21, 6, 55, 7, tzinfo=timezone.utc)
RUN_TOKEN = "a35712"  # new_run_id's random part
LAUNCHED_AT = datetime(2026, 11, 21, 6, 55, 9, tzinfo=timezone.utc)
RESULT_ID = "80d06ce8ddc74b2e9fe91fb33851a017"
SHOWN_DATA_DIR = "/home/me/.local/share/instance-advisor"  # the default data dir, as the page shows it
DLAMI = "/aws/service/deeplearning/ami/{arch}/oss-nvidia-driver-gpu-pytorch-2.9-ubuntu-24.04/latest/ami-id"
FAILED_LOG = """advisor-probe: run {run_id} on g5g.xlarge started at 2026-11-21T06:57:41Z
advisor-probe: pinned 9 torch-family packages
ERROR: Could not find a version that satisfies the requirement lightning>=2.4
advisor-probe: installing the package failed
advisor-probe: finished with exit status 12 at 2026-11-21T07:12:40Z
"""


def page_commands() -> list:
    """The page's advisor commands, as tests/test_readme.py reads them."""
    import test_readme as tr

    return [c for c in tr.COMMANDS if c.page == PAGE and c.argv[0] == ".venv/bin/advisor"]


def environment(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "INSTANCE_ADVISOR_"))}
    env.update(
        MOTO_EC2_LOAD_DEFAULT_AMIS="false",  # read when moto's EC2 backend starts: two AMIs of our own
        AWS_ACCESS_KEY_ID="AKIAIOSFODNN7EXAMPLE", AWS_SECRET_ACCESS_KEY="moto-secret",  # static: no expiry warning
        AWS_DEFAULT_REGION=REGION,
        AWS_CONFIG_FILE=str(tmp / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp / "none"),
        INSTANCE_ADVISOR_DATA_DIR=str(tmp / "data"), INSTANCE_ADVISOR_CACHE_DIR=str(tmp / "cache"),
        INSTANCE_ADVISOR_MAX_AGE="36500",  # the snapshot's age warning would depend on today's date
        COLUMNS="100",
    )
    return env


def serve(mp):
    """moto on 127.0.0.1 with the bucket and the Deep Learning AMIs' parameters; its URL."""
    from aws_fakes import FakeAccount, put_public_parameter, serve_account
    from moto.ec2.models import instances as moto_instances
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the server's request lines are no output
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/seed?a={SEED}", method="POST")).read()
    mp.setattr(moto_instances, "utcnow", lambda: LAUNCHED_AT.replace(tzinfo=None))
    mp.setenv("AWS_ENDPOINT_URL", url)
    import boto3

    boto3.client("s3", region_name=REGION).create_bucket(Bucket=BUCKET)
    ec2 = boto3.client("ec2", region_name=REGION)
    for arch in ("x86_64", "arm64"):
        ami = ec2.register_image(Name=f"Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.9 ({arch})",
                                 Architecture=arch, RootDeviceName="/dev/sda1")["ImageId"]
        put_public_parameter(DLAMI.format(arch=arch), ami, REGION)
    quotas = FakeAccount().quotas
    quotas["L-417A185B"] = 0.0  # Running On-Demand P instances
    serve_account(mp, FakeAccount(quotas=quotas))
    return server


def fix_run_id(mp) -> None:
    from advisor.ec2 import manifest

    real = manifest.new_run_id
    mp.setattr(manifest.secrets, "token_hex", lambda n: RUN_TOKEN)
    mp.setattr(manifest, "new_run_id", lambda now=None: real(RUN_AT))


def instances_do_their_part(run_id: str) -> None:
    """What the user-data would have done by the time of the first pull."""
    import boto3
    from factories import probe_result

    s3 = boto3.client("s3", region_name=REGION)
    ec2 = boto3.client("ec2", region_name=REGION)
    result = probe_result("g5.xlarge", 412.7, accelerator="gpu", gpus=("NVIDIA A10G",), result_id=RESULT_ID,
                          finished_at=datetime(2026, 11, 21, 7, 9, 52, tzinfo=timezone.utc))
    prefix = f"probes/{run_id}"
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/g5.xlarge/result.json", Body=result.model_dump_json().encode())
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/g5.xlarge/probe.log", Body=b"advisor-probe: finished with exit "
                  b"status 0 at 2026-11-21T07:10:03Z\n")
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/g5g.xlarge/probe.log", Body=FAILED_LOG.format(run_id=run_id).encode())
    tagged = ec2.describe_instances(Filters=[{"Name": "tag:instance-advisor:run-id", "Values": [run_id]}])
    done = [i["InstanceId"] for r in tagged["Reservations"] for i in r["Instances"]
            if i["InstanceType"] in ("g5.xlarge", "g5g.xlarge")]
    ec2.terminate_instances(InstanceIds=done)  # they powered off, which terminates them


def run(argv: list[str]) -> list[str]:
    """One command's output lines, stdout and stderr in the order they were written."""
    from advisor.cli import main

    buf = io.StringIO()
    logging.root.handlers.clear()  # main's basicConfig binds the stderr of the moment
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        main(argv)
    return buf.getvalue().rstrip("\n").splitlines()


def record() -> list[tuple[int, str, list[str]]]:
    """(line, command, output lines) of every advisor command of the page, in the page's order."""
    import pytest

    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        for k in [k for k in os.environ if k.startswith(("AWS_", "INSTANCE_ADVISOR_"))]:
            mp.delenv(k)
        for k, v in environment(Path(tmp)).items():
            mp.setenv(k, v)
        server = serve(mp)
        fix_run_id(mp)
        from advisor.ec2 import manifest

        out, pulled = [], False
        try:
            for cmd in page_commands():
                argv = cmd.argv[1:]
                if argv[:2] == ["results", "pull"] and not pulled:
                    instances_do_their_part(manifest.list_run_ids()[0])
                    pulled = True
                lines = [ln.replace(tmp + "/data", SHOWN_DATA_DIR) for ln in run(argv)]
                out.append((cmd.line, cmd.text, lines))
        finally:
            server.stop()
    return out


if __name__ == "__main__":
    json.dump([list(x) for x in record()], sys.stdout, indent=1)
    print()
