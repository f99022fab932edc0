"""`advisor launch`: probe instance types on EC2 (and `launch status` / `launch cancel`)."""

from __future__ import annotations

import argparse
import contextlib
import io
import shlex
import sys
from typing import get_args

from catalog.hardware import vendor_sdk
from catalog.io import CatalogError
from catalog.models import Market
from lightning_module.contract.result import WorkloadSpec

from ..ec2 import MAX_INSTANCES, MAX_MINUTES
from ..errors import AdvisorError
from ..options import whole
from ..output import add_format_option, emit, say, warn
from .common import add_catalog_options, add_list_option, load_catalog, one_region, user_workload

PROBED_BY_DEFAULT = WorkloadSpec.model_fields["model"].default  # the probe's own default workload

PLAN_COLUMNS = ("instance_type", "arch", "ami", "market", "usd_per_hour", "max_cost_usd", "check")
LAUNCH_COLUMNS = ("instance_type", "state", "instance_id", "error")
STATUS_COLUMNS = ("instance_type", "instance_id", "market", "state", "launched_at", "result", "error")
CANCEL_COLUMNS = ("instance_type", "instance_id", "previous_state", "state")


def register(sub) -> None:
    p = sub.add_parser(
        "launch",
        help="probe instance types on EC2 itself; results come back through S3",
        description=(
            "Start one EC2 instance per instance type; each runs 'advisor probe' and uploads its "
            "result to S3, then powers off (and terminates). 'advisor results pull' imports the "
            "results. Your own model goes with it: --workload mypkg.lm:TinyLM --code mypkg [--requirements FILE]. "
            "Subcommands: 'status RUN_ID', 'cancel RUN_ID'."
        ),
        epilog="Example: advisor launch --instance-type g5.xlarge,g6.xlarge --s3 s3://my-bucket/probes "
               "--region us-east-1 --market spot --dry-run",
    )
    add_list_option(p, "--instance-type", metavar="TYPE", aliases=("--instance-types",),
                    unique=False, help="instance types to probe, one instance each")
    p.add_argument("--s3", metavar="S3_URL", help="s3://bucket/prefix for the package, results and logs")
    p.add_argument("--region", type=one_region, help="EC2 region (default: the AWS configuration's)")
    p.add_argument("--market", choices=get_args(Market), default="on-demand",
                   help="how the probe instances are bought (default on-demand; spot costs less and may be "
                        "interrupted, which loses that probe)")
    p.add_argument("--workload", default=PROBED_BY_DEFAULT, help=f"what to probe (default {PROBED_BY_DEFAULT})")
    p.add_argument("--probe-args", default="", metavar="ARGS", help="extra arguments for 'advisor probe', as one string")
    p.add_argument("--max-minutes", type=int, default=MAX_MINUTES,
                   help=f"watchdog: each instance powers off after this (default {MAX_MINUTES})")
    p.add_argument("--max-instances", type=whole(1, 10**6), default=MAX_INSTANCES, metavar="N",
                   help=f"refuse to start more instances than this (default {MAX_INSTANCES})")
    p.add_argument("--ami", help="AMI for every type (default: the PyTorch Deep Learning AMI for the type's architecture)")
    p.add_argument("--subnet", help="subnet id (default: the default VPC's); it needs a route to the internet for pip")
    p.add_argument("--security-group", help="security group id (no inbound rules are needed)")
    p.add_argument("--iam-instance-profile", metavar="NAME", help="instance profile to attach (not needed for the uploads)")
    p.add_argument("--package", metavar="PATH_OR_SPEC",
                   help="a wheel file or a pip requirement (default: a wheel built from this installation's source)")
    p.add_argument("--code", metavar="PATH", help="your own code, for --workload package.module:Class: your project folder "
                   "(built into a wheel), a wheel of it, or its package folder (shipped as is)")
    p.add_argument("--requirements", metavar="FILE", help="a pip requirements file for your code (installed on each "
                   "instance; torch stays the image's)")
    p.add_argument("--dry-run", action="store_true", help="check permissions and show the plan; start nothing")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    add_catalog_options(p)
    add_format_option(p)
    p.set_defaults(func=handle_launch)

    actions = p.add_subparsers(dest="action", metavar="{status,cancel}")
    s = actions.add_parser(
        "status", help="instances of a run, their state and whether results arrived",
        description="The run's instances (from the local manifest, else found by the run-id tag in --region), "
                    "their EC2 state, and whether each one's result is in S3 yet.",
        epilog="Example: advisor launch status 20261124-141000-123456")
    s.add_argument("run_id", metavar="RUN_ID")
    s.add_argument("--region", type=one_region, help="region, when this machine has no manifest of the run")
    add_format_option(s)
    s.set_defaults(func=handle_status)
    c = actions.add_parser(
        "cancel", help="terminate every instance of a run",
        description="Terminate every instance of the run that is still alive (found by its run-id tag); "
                    "results already in S3 stay there.",
        epilog="Example: advisor launch cancel 20261124-141000-123456 --region us-east-1")
    c.add_argument("run_id", metavar="RUN_ID")
    c.add_argument("--region", type=one_region, help="region, when this machine has no manifest of the run")
    add_format_option(c)
    c.set_defaults(func=handle_cancel)


def _request(args):
    from ..ec2.aws import parse_s3_url
    from ..ec2.code import shipped_config
    from ..ec2.plan import LaunchRequest

    if not args.instance_type:
        raise AdvisorError("launch needs --instance-type A,B,... (or a subcommand: status RUN_ID, cancel RUN_ID)")
    if not args.s3:
        raise AdvisorError("launch needs --s3 s3://bucket/prefix for the package and the results")
    try:
        probe_args = shlex.split(args.probe_args)
    except ValueError as e:
        raise AdvisorError(f"--probe-args: {e}") from None
    check_probe_args(args.workload, probe_args)
    probe_args, config = shipped_config(probe_args)  # a --config file goes in the code bundle
    return LaunchRequest(
        instance_types=args.instance_type,
        s3=parse_s3_url(args.s3),
        region=args.region or "",  # resolved from the AWS configuration after the local checks
        market=args.market,
        workload=args.workload,
        probe_args=probe_args,
        max_minutes=args.max_minutes,
        max_instances=args.max_instances,
        ami=args.ami,
        subnet=args.subnet,
        security_group=args.security_group,
        iam_instance_profile=args.iam_instance_profile,
        package=args.package,
        code=args.code,
        requirements=args.requirements,
        config=config,
    )


class _ProbeArgsParser(argparse.ArgumentParser):
    def error(self, message: str):
        raise AdvisorError(f"--probe-args: {message}")


def check_probe_args(workload: str, probe_args: list[str]) -> None:
    """Parse the instance's `advisor probe` command line here, with this advisor's own probe
    parser: a typo would otherwise fail on every instance, after each has booted and installed
    at the user's expense. The launcher's own options must come out as it set them (argparse
    accepts abbreviations, so `--out x` would redirect the result away from the upload)."""
    from . import probe

    sub = _ProbeArgsParser(prog="advisor").add_subparsers(parser_class=_ProbeArgsParser)
    probe.register(sub)
    set_by_launch = {"workload": ("--workload", workload), "instance_type": ("--instance-type", "x.large"),
                     "output": ("--output", "result.json")}
    argv = [*(a for opt, v in set_by_launch.values() for a in (opt, v)), "--no-store", *probe_args]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            ns = sub.choices["probe"].parse_args(argv)
    except SystemExit:  # --help: argparse printed (to nowhere) and exited
        raise AdvisorError("--probe-args: --help is not a probe setting") from None
    for dest, (opt, value) in set_by_launch.items():
        if getattr(ns, dest) != value:
            raise AdvisorError(f"--probe-args must not contain {opt}: launch sets it")
    try:  # the workload's own options too (--init-args, --config, --optimizer ...), as the probe reads them
        user_workload(ns, workload)
    except AdvisorError as e:
        raise AdvisorError(f"--probe-args: {e}") from None


def _catalog_or_none(args):
    try:
        return load_catalog(args)
    except (AdvisorError, CatalogError) as e:
        warn(f"prices unknown: {e}")
        return None


def _warn_unsupported_accelerators(catalog, types: list[str]) -> None:
    """The default AMI carries CUDA torch only: Trainium/Inferentia and Gaudi need their own."""
    if catalog is None:
        return
    for t in types:
        it = catalog.instance_types.get(t)
        if it is not None and vendor_sdk(it) is not None:
            warn(f"{t}: the default Deep Learning AMI has no {it.accelerator_kind} software stack, so the probe "
                 f"would measure its CPUs only; pass --ami with a {it.accelerator_kind} image")


def confirm(question: str) -> bool:
    if not sys.stdin or not sys.stdin.isatty():
        raise AdvisorError("refusing to launch without confirmation: stdin is not a terminal; pass --yes")
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def handle_launch(args) -> int:
    from ..ec2.aws import default_region
    from ..ec2.launch import execute
    from ..ec2.manifest import manifest_path
    from ..ec2.plan import launchable, plan_launch, validate_request

    req = _request(args)
    validate_request(req)  # before any AWS call or configuration: a --max-instances refusal costs nothing
    req.region = default_region(args.region)  # the first thing that reads the AWS configuration
    catalog = _catalog_or_none(args)
    plan = plan_launch(req, catalog)
    if len(plan) == 1 and plan[0].check_error and not args.dry_run:  # one type, refused: one line
        raise AdvisorError(f"{plan[0].instance_type}: {plan[0].check_error}; nothing launched")
    if not req.ami:
        _warn_unsupported_accelerators(catalog, req.instance_types)
    # A real launch prints the plan as part of the confirmation, on stderr, so stdout carries
    # one document: what was launched.
    plan_out = None if args.dry_run else sys.stderr
    if args.format == "json":
        from .. import schemas

        schemas.write("launch-plan", stream=plan_out, region=req.region, max_minutes=req.max_minutes,
                      planned=[{k: getattr(p, k) for k in ("instance_type", "arch", "ami", "market", "usd_per_hour",
                                                           "max_cost_usd", "check_error")} for p in plan])
    else:
        emit([p.row() for p in plan], args.format, PLAN_COLUMNS, stream=plan_out, notes="check")
    ok = [p for p in plan if p.check_error is None]
    for p in plan:
        if p.check_error:
            warn(f"{p.instance_type}: skipped: {p.check_error}")
    costs = [p.max_cost_usd for p in ok]
    total = "unknown" if any(c is None for c in costs) else f"${sum(costs):.2f}"
    if args.dry_run:
        say(f"dry run: {len(ok)} of {len(plan)} instance(s) would start; at most {total} "
            f"if every one runs its full {req.max_minutes} minutes; nothing launched", sys.stderr)
        return 0 if ok else 1
    launchable(plan)
    if not args.yes and not confirm(
        f"Start {len(ok)} {req.market} instance(s) in {req.region} for at most {req.max_minutes} "
        f"minutes each (max cost {total})?"
    ):
        print("advisor: nothing launched", file=sys.stderr)
        return 1

    def progress(entry) -> None:
        if entry.state == "launched":
            print(f"advisor: {entry.instance_type}: launched {entry.instance_id}", file=sys.stderr)
        else:
            print(f"advisor: {entry.instance_type}: launch failed: {entry.error}", file=sys.stderr)

    m = execute(req, plan, on_launch=progress)
    if args.format == "json":
        from .. import schemas

        schemas.write("launch", run_id=m.run_id, region=req.region,
                      instances=[e.model_dump(include=set(LAUNCH_COLUMNS)) for e in m.entries])
    else:
        emit([{"run_id": m.run_id, **e.model_dump(include=set(LAUNCH_COLUMNS))} for e in m.entries],
             args.format, ("run_id", *LAUNCH_COLUMNS))
    launched = sum(e.state == "launched" for e in m.entries)
    print(
        f"advisor: run {m.run_id}: {launched} of {len(m.entries)} launched; manifest {manifest_path(m.run_id)}\n"
        f"advisor: follow with 'advisor launch status {m.run_id}', then "
        f"'advisor results pull {req.s3} --run {m.run_id}'",
        file=sys.stderr,
    )
    return 0 if launched == len(plan) else 1


def handle_status(args) -> int:
    from ..ec2.launch import run_status

    rows = run_status(args.run_id, args.region)
    if args.format == "json":
        from .. import schemas

        schemas.write("launch-status", run_id=args.run_id, instances=rows)
    else:
        emit(rows, args.format, STATUS_COLUMNS)
    return 0


def handle_cancel(args) -> int:
    from ..ec2.launch import cancel_run

    rows = cancel_run(args.run_id, args.region)
    if args.format == "json":
        from .. import schemas

        schemas.write("launch-cancel", run_id=args.run_id, instances=rows)
    if not rows:
        print(f"advisor: no running instances in run {args.run_id}", file=sys.stderr)
    elif args.format != "json":
        emit(rows, args.format, CANCEL_COLUMNS)
    return 0
