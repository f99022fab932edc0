"""The bash script an EC2 probe instance runs at boot (its user-data).

It holds no AWS credentials: the wheel comes down and the result and log go up through
presigned URLs, so the instance needs no role. Order matters for cost safety: the watchdog
(`shutdown -h +MAX`) is armed before anything can hang, and an EXIT trap uploads the log and
powers off whatever happens; with InstanceInitiatedShutdownBehavior=terminate a power-off is
a termination, so billing stops.

What the URLs do carry: the access key id (X-Amz-Credential, not a secret) and, when the
launcher's credentials are temporary (SSO, an assumed role), the session token
(X-Amz-Security-Token). Neither signs anything without the secret key, which never leaves the
launching machine, so each URL allows only its own GET or PUT of one key until it expires
(--max-minutes plus a grace) or the session does. They are bearer tokens all the same, readable
on the instance through the metadata service and by anyone allowed
ec2:DescribeInstanceAttribute; the local run manifest keeps none of them.

Install choice: the Deep Learning AMI's PyTorch environment (/opt/pytorch) already has a CUDA
torch and torchvision matched to the driver. The wheel is pip-installed into that environment
with every installed torch-family package pinned by a constraints file, so pip can add
lightning and the small dependencies but can never replace the AMI's torch with a CPU-only or
mismatched build (if it would have to, the install fails and the log says why). A venv with
--system-site-packages would not see /opt/pytorch's packages: that environment is itself a
venv and --system-site-packages exposes only the base interpreter's. Where /opt/pytorch is
absent (a custom --ami), the first `python3` on PATH is used the same way.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from .code import BUNDLE_NAME, CODE_DIR

# EC2's limit on user-data: "limited to 16 KB, in raw form, before it is base64-encoded",
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html
USER_DATA_LIMIT = 16 * 1024

# Packages whose installed versions are pinned on the instance: the AMI's GPU build of torch
# and everything built against it.
PINNED_PACKAGE_PATTERN = r"^(torch|torchvision|torchaudio|triton|pytorch-triton|nvidia-[a-z0-9-]+)=="

DLAMI_PYTHON = "/opt/pytorch/bin/python"

# curl has no overall timeout of its own: a stalled transfer in the EXIT trap would keep the
# instance running (and billed) until the watchdog. Each attempt and the retries are bounded,
# so a transfer gives up after at most ~7 minutes. --fail makes an HTTP error a failure.
CURL = "curl -fsS --connect-timeout 20 --max-time 120 --retry 5 --retry-delay 5 --retry-max-time 300"


@dataclass(frozen=True)
class ProbeScript:
    run_id: str
    instance_type: str
    workload: str
    max_minutes: int
    result_url: str  # presigned PUT
    log_url: str  # presigned PUT
    package_url: str | None = None  # presigned GET of the wheel; None when package_spec is used
    package_filename: str | None = None  # the wheel's file name (pip needs the real name)
    package_spec: str | None = None  # a pip requirement, installed from the index instead
    probe_args: list[str] = field(default_factory=list)
    code_url: str | None = None  # presigned GET of the user's code bundle (launch --code; advisor/ec2/code.py)
    # Seconds of the watchdog's time kept back from the probe for the final uploads: the hung
    # probe's kill grace (timeout --kill-after=20) plus one whole attempt of the log upload
    # (curl --max-time 120), with 40 s to spare; a retried upload may still meet the watchdog.
    upload_reserve_s: int = 180


# The distribution's extra with what `advisor probe` trains with (torch, torchvision, lightning);
# the constraints file keeps the AMI's own torch build.
PROBE_EXTRA = "probe"
_NAMED_REQUIREMENT = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[([^\]]*)\])?(.*)", re.DOTALL)


def with_extra(requirement: str, extra: str) -> str:
    """'instance-advisor==0.1.0' -> 'instance-advisor[probe]==0.1.0' (extras it names are kept);
    a requirement that is only a URL has no name to hang an extra on and is left as it is."""
    m = _NAMED_REQUIREMENT.fullmatch(requirement.strip())
    if m is None or "://" in m.group(1) + m.group(3).split("@")[0]:
        return requirement
    extras = [e.strip() for e in (m.group(2) or "").split(",") if e.strip()]
    return f"{m.group(1)}[{','.join([*extras, extra] if extra not in extras else extras)}]{m.group(3)}"


def render(s: ProbeScript) -> str:
    if (s.package_url is None) == (s.package_spec is None):
        raise ValueError("give exactly one of package_url or package_spec")
    if s.package_url is not None and not (s.package_filename or "").endswith(".whl"):
        raise ValueError("package_filename must name a .whl file")
    q = shlex.quote
    probe_cmd = " ".join(
        [
            "advisor", "probe",
            "--workload", q(s.workload),
            "--instance-type", q(s.instance_type),
            "--output", '"$WORK/result.json"',
            "--no-store",  # the instance is about to vanish; the result travels as result.json
            *(q(a) for a in s.probe_args),
        ]
    )
    if s.package_url is not None:
        fetch = (
            f'{CURL} -o "$WORK/{s.package_filename}" {q(s.package_url)} '
            '|| { echo "advisor-probe: downloading the package failed"; exit 10; }\n'
        )
        target = f'"$WORK/{s.package_filename}[{PROBE_EXTRA}]"'
    else:
        fetch = ""
        target = q(with_extra(s.package_spec, PROBE_EXTRA))
    code_fetch = code_install = ""
    if s.code_url is not None:
        # The user's code (advisor/ec2/code.py's bundle): unpacked beside the probe's working folder,
        # its wheel and requirements installed under the same torch constraints, a package folder on
        # PYTHONPATH.
        code_fetch = (
            f'{CURL} -o "$WORK/{BUNDLE_NAME}" {q(s.code_url)} '
            '|| { echo "advisor-probe: downloading your code failed"; exit 10; }\n'
            f'mkdir -p "$WORK/{CODE_DIR}" && tar -xzf "$WORK/{BUNDLE_NAME}" -C "$WORK/{CODE_DIR}" '
            '|| { echo "advisor-probe: unpacking your code failed"; exit 10; }\n'
        )
        code_install = f"""for w in "$WORK/{CODE_DIR}"/wheels/*.whl; do
    [ -e "$w" ] || continue
    "$PY" -m pip install --constraint "$WORK/constraints.txt" "$w" \\
        || {{ echo "advisor-probe: installing your code failed"; exit 12; }}
done
if [ -f "$WORK/{CODE_DIR}/requirements.txt" ]; then
    "$PY" -m pip install --constraint "$WORK/constraints.txt" -r "$WORK/{CODE_DIR}/requirements.txt" \\
        || {{ echo "advisor-probe: installing your requirements failed"; exit 12; }}
fi
if [ -d "$WORK/{CODE_DIR}/src" ]; then export PYTHONPATH="$WORK/{CODE_DIR}/src${{PYTHONPATH:+:$PYTHONPATH}}"; fi
"""
    return f"""#!/bin/bash
# instance-advisor probe: run {s.run_id}, instance type {s.instance_type}, workload {s.workload}
# Watchdog first: whatever happens below, the instance powers off (and so terminates) after
# {s.max_minutes} minutes.
shutdown -h +{s.max_minutes} || true
# The probe is stopped this much earlier, so a hung one still uploads its log.
DEADLINE=$(( $(date +%s) + {s.max_minutes * 60 - s.upload_reserve_s} ))

set -u
export HOME="${{HOME:-/root}}"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
WORK="$(mktemp -d "${{TMPDIR:-/tmp}}/advisor-probe.XXXXXX")"  # TMPDIR: a test run keeps its own
LOG="$WORK/probe.log"
exec >>"$LOG" 2>&1

RESULT_URL={q(s.result_url)}
LOG_URL={q(s.log_url)}

finish() {{
    status=$?
    echo "advisor-probe: finished with exit status $status at $(date -u +%FT%TZ)"
    if [ "$status" -eq 0 ] && [ -s "$WORK/result.json" ]; then
        {CURL} -X PUT -T "$WORK/result.json" "$RESULT_URL" \\
            || echo "advisor-probe: uploading the result failed"
    fi
    {CURL} -X PUT -T "$LOG" "$LOG_URL" || true
    shutdown -h now
}}
trap finish EXIT

cd "$WORK" || exit 1
echo "advisor-probe: run {s.run_id} on {s.instance_type} started at $(date -u +%FT%TZ)"
{fetch}{code_fetch}
if [ -x {DLAMI_PYTHON} ]; then PY={DLAMI_PYTHON}; else PY="$(command -v python3)"; fi
if [ -z "$PY" ]; then echo "advisor-probe: no python3 on this image"; exit 11; fi
# An environment made by uv has no pip; the standard library can bootstrap one.
"$PY" -m pip --version >/dev/null 2>&1 || "$PY" -m ensurepip --upgrade \\
    || {{ echo "advisor-probe: no pip for $PY"; exit 11; }}
# Keep the image's torch stack exactly as installed (see advisor/ec2/userdata.py).
"$PY" -m pip list --format=freeze 2>/dev/null | grep -iE '{PINNED_PACKAGE_PATTERN}' > "$WORK/constraints.txt"
echo "advisor-probe: pinned $(wc -l < "$WORK/constraints.txt") torch-family packages"
"$PY" -m pip install --constraint "$WORK/constraints.txt" {target} \\
    || {{ echo "advisor-probe: installing the package failed"; exit 12; }}
{code_install}export PATH="$(dirname "$PY"):$PATH"

LEFT=$(( DEADLINE - $(date +%s) ))
if [ "$LEFT" -le 0 ]; then echo "advisor-probe: no time left for the probe within --max-minutes"; exit 13; fi
timeout --kill-after=20 "$LEFT" {probe_cmd} || {{
    rc=$?
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "advisor-probe: stopped: out of its --max-minutes time ($LEFT s were left for the probe)"
    fi
    exit "$rc"
}}
"""


__all__ = ["CURL", "DLAMI_PYTHON", "PINNED_PACKAGE_PATTERN", "USER_DATA_LIMIT", "ProbeScript", "render"]
