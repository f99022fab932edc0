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

    @property
    def command(self) -> str:
        """The shell line that runs argv (each argument quoted as the shell needs)."""
        return shlex.join(self.argv)

    def __str__(self) -> str:  # print(advice.probe_commands[0]) prints the line to paste
        return self.command

    def line(self) -> str:
        """For people: the shell line, then what it is for."""
        return f"{self.command}   # {self.purpose}"


def probe_commands(job: JobSpec, probes: list[ProbeRow], program: str = "advisor") -> list[ProbeCommand]:
    """One `advisor launch` per region and market (the market the user asked for: a --market spot
    plan probes on spot), then the pull that imports the results, then the alternative of
    `advisor probe` on such a machine. `program` is how the advisor is called (the CLI passes the
    name it was run by)."""
    if not probes:
        return []
    groups: dict[tuple[str, str, bool], list[str]] = {}
    for p in probes:  # a type where the host's CPU might add (ProbeRow.cpu_too) is probed with --cpu-too
        groups.setdefault((p.region, p.market, p.cpu_too), []).append(p.instance_type)
    shape: list[str] = []
    if job.datamodule:
        shape += ["--datamodule", job.datamodule]
    for flag, args in (("--init-args", job.init_args), ("--data-init-args", job.data_init_args),
                       ("--optimizer", job.optimizer), ("--lr-scheduler", job.lr_scheduler)):
        if args:
            shape += [flag, json.dumps(args, sort_keys=True)]
    if job.image_size != 224:
        shape += ["--image-size", str(job.image_size)]
    if job.num_classes != 1000:
        shape += ["--num-classes", str(job.num_classes)]

    def extra(cpu_too: bool) -> list[str]:
        args = shape + (["--cpu-too"] if cpu_too else [])
        # --probe-args=VALUE: a value starting with "--" is read as an option of its own otherwise
        out = [f"--probe-args={shlex.join(args)}"] if args else []
        if is_custom(job.workload):  # the instances need the user's code (advisor/ec2/code.py)
            out += ["--code", code_path_hint(job.workload)]
        return out
    cmds = [ProbeCommand([program, "launch", "--instance-type", ",".join(names), "--region", region, "--market", market,
                          "--workload", job.workload, *extra(cpu_too), "--s3", BUCKET],
                         f"probe {', '.join(names)} on EC2 ({BUCKET}: a bucket of yours)"
                         + (" with --cpu-too: the host's CPU training beside the GPU might add" if cpu_too else ""))
            for (region, market, cpu_too), names in groups.items()]
    cmds.append(ProbeCommand([program, "results", "pull", BUCKET],
                             "then import the results and run this recommend again: it re-plans from what they measured"))
    too = [p.instance_type for p in probes if p.cpu_too]
    cmds.append(ProbeCommand([program, "probe", "--workload", job.workload, *shape],
                             "or, on a machine of that type, probe there instead of the two above"
                             + (f" (add --cpu-too on {', '.join(too)})" if too else "")))
    return cmds
