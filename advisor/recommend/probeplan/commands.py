"""The command lines that measure a probe plan's rows."""

from __future__ import annotations

import json
import shlex

from ..jobspec import JobSpec
from ..rows import ProbeRow


def probe_commands(job: JobSpec, probes: list[ProbeRow], program: str = "advisor") -> list[str]:
    """One `advisor launch` per region and market (the market the user asked for: a --market spot
    plan probes on spot), then the pull that imports the results (or `advisor probe` on such a
    machine). `program` is how the advisor is called (the CLI passes the name it was run by)."""
    if not probes:
        return []
    groups: dict[tuple[str, str, bool], list[str]] = {}
    for p in probes:  # a type where the host's CPU might add (ProbeRow.cpu_too) is probed with --cpu-too
        groups.setdefault((p.region, p.market, p.cpu_too), []).append(p.instance_type)
    shape = []
    if job.datamodule:
        shape.append(f"--datamodule {job.datamodule}")
    for flag, args in (("--init-args", job.init_args), ("--data-init-args", job.data_init_args)):
        if args:
            shape.append(f"{flag} {shlex.quote(json.dumps(args, sort_keys=True))}")
    if job.image_size != 224:
        shape.append(f"--image-size {job.image_size}")
    if job.num_classes != 1000:
        shape.append(f"--num-classes {job.num_classes}")

    def extra(cpu_too: bool) -> str:
        args = shape + (["--cpu-too"] if cpu_too else [])
        return f" --probe-args '{' '.join(args)}'" if args else ""
    cmds = [f"{program} launch --instance-type {','.join(names)} --region {region} --market {market} "
            f"--workload {job.workload}{extra(cpu_too)} --s3 s3://BUCKET/prefix"
            for (region, market, cpu_too), names in groups.items()]
    cmds.append(f"{program} results pull s3://BUCKET/prefix   # then run this recommend again: it re-plans from "
                "what the probes measured")
    cmds.append(f"(or on a machine of that type: {program} probe --workload {job.workload}"
                f"{' ' + ' '.join(shape) if shape else ''}"
                + "".join(f"; add --cpu-too on {p.instance_type}" for p in probes if p.cpu_too) + ")")
    return cmds
