"""The commands that measure a probe plan's rows: argument lists, each with what it is for."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from ...ec2.code import code_path_hint, is_custom
from ..jobspec import JobSpec
from ..rows import ProbeRow

BUCKET = "s3://BUCKET/prefix"  # the user's own bucket: a placeholder the text says to replace


@dataclass(frozen=True)
class ProbeCommand:
    argv: list[str]  # run as is (no shell); the first is how the advisor is called
    purpose: str

    def line(self) -> str:
        """For people: the shell line, then what it is for."""
        return f"{shlex.join(self.argv)}   # {self.purpose}"


def probe_commands(job: JobSpec, probes: list[ProbeRow], program: str = "advisor") -> list[ProbeCommand]:
    """One `advisor launch` per region and market (the market the user asked for: a --market spot
    plan probes on spot), then the pull that imports the results, then the alternative of
    `advisor probe` on such a machine. `program` is how the advisor is called (the CLI passes the
    name it was run by)."""
    if not probes:
        return []
    groups: dict[tuple[str, str], list[str]] = {}
    for p in probes:
        groups.setdefault((p.region, p.market), []).append(p.instance_type)
    shape: list[str] = []
    if job.datamodule:
        shape += ["--datamodule", job.datamodule]
    for flag, args in (("--init-args", job.init_args), ("--data-init-args", job.data_init_args)):
        if args:
            shape += [flag, json.dumps(args, sort_keys=True)]
    if job.image_size != 224:
        shape += ["--image-size", str(job.image_size)]
    if job.num_classes != 1000:
        shape += ["--num-classes", str(job.num_classes)]
    extra = ["--probe-args", shlex.join(shape)] if shape else []
    if is_custom(job.workload):  # the instances need the user's code (advisor/ec2/code.py)
        extra += ["--code", code_path_hint(job.workload)]
    cmds = [ProbeCommand([program, "launch", "--instance-type", ",".join(names), "--region", region, "--market", market,
                          "--workload", job.workload, *extra, "--s3", BUCKET],
                         f"probe {', '.join(names)} on EC2 ({BUCKET}: a bucket of yours)")
            for (region, market), names in groups.items()]
    cmds.append(ProbeCommand([program, "results", "pull", BUCKET],
                             "then import the results and run this recommend again: it re-plans from what they measured"))
    cmds.append(ProbeCommand([program, "probe", "--workload", job.workload, *shape],
                             "or, on a machine of that type, probe there instead of the two above"))
    return cmds
