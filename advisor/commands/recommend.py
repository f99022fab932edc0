"""`advisor recommend`: rank instance types for a training job under a budget and a deadline.

The fast, offline path: no torch, lightning, torchvision, boto3 (and matplotlib only with --plot).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from .. import options as opt
from ..output import FORMATS, warn
from ..recommend.jobspec import JobSpec, parse_budget, parse_deadline, work_samples
from .common import (
    add_catalog_options,
    add_list_option,
    add_store_option,
    add_type_filter_options,
    command_name,
    load_catalog,
    read_store,
    type_filter,
)

if TYPE_CHECKING:
    from ..recommend.rows import CandidateRow, ProbeRow, Rows

log = logging.getLogger(__name__)

DEFAULT_MAX_INSTANCES = 4
MAX_INSTANCES = 64  # past this the scale-out model says nothing
# --obtainable-only ranks this many times --top candidates before dropping those not obtainable
OBTAINABLE_POOL = 5


def register(sub) -> None:
    p = sub.add_parser(
        "recommend",
        help="rank instance types for a training job under a budget and a deadline",
        description="Rank (instance type, count, region, market) for a training job: cheapest that meets the "
                    "deadline, fastest within the budget, or the Pareto set. Throughput comes from your probes "
                    "(measured), published figures (reference), or an estimate with a band (estimated).",
    )
    p.add_argument("--budget", required=True, metavar="USD", help="most you will spend, in USD")
    p.add_argument("--deadline", required=True, metavar="WHEN",
                   help="90m, 36h, 2d, 1d12h, ISO 8601 duration (P2DT3H) or a future date-time "
                        "(2026-12-01T09:00; UTC unless it carries a zone)")
    p.add_argument("--samples", metavar="N", help="training samples to process in total (1.2e8, 120M)")
    p.add_argument("--epochs", metavar="E", help="epochs (with --dataset-size)")
    p.add_argument("--dataset-size", metavar="N", help="samples per epoch (with --epochs)")
    p.add_argument("--workload", type=opt.text, default="resnet50",
                   help="resnet50 (default), resnet18, vit_b_16, mlp, or a probed 'package.module:LightningModuleClass' "
                        "(ranked from its probe results)")
    p.add_argument("--datamodule", type=opt.text, metavar="MODULE:CLASS", help="the DataModule the custom workload was probed with")
    p.add_argument("--image-size", type=opt.image_size, default=224, help="input side in pixels (default 224)")
    p.add_argument("--num-classes", type=opt.num_classes, default=1000, help="classes (default 1000)")
    p.add_argument("--objective", choices=("cheapest", "fastest", "pareto"), default="cheapest",
                   help="cheapest meeting the deadline (default), fastest within budget, or the Pareto set")
    add_list_option(p, "--region", metavar="R", help="only these regions")
    p.add_argument("--market", choices=("on-demand", "spot", "any"), default="on-demand",
                   help="on-demand (default), spot, or any (both, plus spot with on-demand fallback)")
    p.add_argument("--max-instances", type=opt.whole(1, MAX_INSTANCES), default=DEFAULT_MAX_INSTANCES, metavar="K",
                   help=f"consider 1..K data-parallel instances (default {DEFAULT_MAX_INSTANCES}: past that the "
                        "all-reduce model is outside anything measured)")
    add_type_filter_options(p)  # --family, --accelerator, --arch, --min-gpus: as `catalog show`
    p.add_argument("--gpu-only", action="store_true", help="leave CPU-only instance types out")
    p.add_argument("--min-accelerator-memory", type=opt.number(0, 4096, lo_open=True), metavar="GiB",
                   help="per-device memory the job needs (default: the workload's own floor)")
    p.add_argument("--require-dtype", choices=("bf16", "fp16"), help="exclude devices without native support")
    p.add_argument("--checkpoint-minutes", type=opt.positive_minutes, default=30.0, metavar="M",
                   help="checkpoint interval for spot (default 30): half of it is lost per interruption")
    p.add_argument("--restart-minutes", type=opt.minutes, default=5.0, metavar="M",
                   help="time to get going again after a spot interruption (default 5)")
    p.add_argument("--setup-minutes", type=opt.minutes, default=0.0, metavar="M",
                   help="billed time per run on every instance before training starts (boot, install, data "
                        "staging); default 0, the articles' arithmetic")
    p.add_argument("--probe-budget", type=opt.number(0, opt.MAX_BUDGET_USD), metavar="USD",
                   help="the most the 'Probe next' plan may spend on probes (default: no limit; each probe is "
                        "planned only when it is expected to save more than it costs)")
    p.add_argument("--top", type=opt.whole(1, 10_000), default=10, metavar="N", help="rows to show (default 10)")
    p.add_argument("--show-excluded", action="store_true", help="also list excluded instance types with the reason")
    p.add_argument("--check-account", action="store_true",
                   help="ask AWS whether your account can get each candidate: its vCPU quota (Service Quotas) and, "
                        "for spot, the spot placement score; needs credentials (IAM permissions: see README)")
    p.add_argument("--obtainable-only", action="store_true",
                   help="only candidates the account can get (obtainable yes); implies --check-account")
    p.add_argument("--plot", metavar="FILE", help="write a cost-vs-time plot to FILE.png, .svg or .pdf (needs matplotlib)")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format")
    p.add_argument("--references", type=opt.path, default="builtin", metavar="builtin|none|FILE",
                   help="published figures estimates are fitted on: builtin (the shipped dataset, default), none "
                        "(estimate from your probes alone; the calibration still applies) or a file in the same "
                        "schema (see 'advisor references list')")
    add_catalog_options(p)
    add_store_option(p)
    p.set_defaults(func=handle)


def job_from_args(args) -> JobSpec:
    # Numbers are bounded by their argparse types (advisor/options.py); these three parse here.
    budget = parse_budget(args.budget)
    deadline = parse_deadline(args.deadline)
    samples = work_samples(args.samples, args.epochs, args.dataset_size)
    wanted = type_filter(args)
    return JobSpec(
        probe_budget_usd=args.probe_budget, samples=samples, budget_usd=budget, deadline_hours=deadline.total_seconds() / 3600,
        workload=args.workload, datamodule=args.datamodule, image_size=args.image_size, num_classes=args.num_classes,
        objective=args.objective, regions=args.region, families=list(wanted.families),
        accelerators=list(wanted.accelerators), arch=wanted.arch, min_gpus=wanted.min_gpus,
        market=args.market, max_instances=args.max_instances,
        min_accelerator_memory_gib=args.min_accelerator_memory, require_dtype=args.require_dtype,
        checkpoint_minutes=args.checkpoint_minutes, restart_minutes=args.restart_minutes,
        setup_minutes=args.setup_minutes,
        include_cpu=not args.gpu_only,
    )


def load_measurements(args, workload_id: str) -> list:
    """The user's probes of this workload, newest first, read-only; nothing stored yet means none."""
    store = read_store(args)
    if store is None:
        return []
    with store:
        return store.results(workload_id=workload_id)


def handle(args) -> int:
    job = job_from_args(args)
    if args.plot:  # refused before anything is computed or printed
        from ..recommend.plot import check_target

        check_target(args.plot)
    catalog = load_catalog(args)
    from ..recommend.planner import build_plan, workload_spec
    from ..recommend.report import write
    from ..recommend.rows import build

    spec = workload_spec(job)  # its id picks the measurements; build_plan checks the filters
    measurements = load_measurements(args, spec.workload_id)
    # --obtainable-only ranks a deeper pool, so that --top rows remain after the unobtainable go
    plan = build_plan(catalog, job, measurements, top=args.top * OBTAINABLE_POOL if args.obtainable_only else args.top,
                      references=args.references)
    for w in plan.warnings:
        warn(w)
    rows = with_account_facts(build(plan), catalog, check=args.check_account or args.obtainable_only,
                              only=args.obtainable_only, top=args.top)
    write(plan, rows, args.format, probe_commands=probe_commands(job, rows.probes), show_excluded=args.show_excluded)
    if args.plot:
        from ..recommend.plot import plot_plan

        plot_plan(plan, rows, args.plot)
        if args.format == "table":
            print(f"\nplot written to {args.plot}")
    return 0


def with_account_facts(rows: Rows, catalog, *, check: bool, only: bool, top: int) -> Rows:
    """Rows with what the catalog knows about getting each type (Capacity Block / reservation
    classes) and, with `check`, what the account's quotas and spot placement scores say."""
    cands = [replace(r, sold_by_reservation=catalog.instance_types[r.instance_type].sold_by_reservation)
             for r in rows.candidates]
    if check:
        from ..ec2.account import Account, Need
        from ..ec2.account import check as check_account

        def need(r: CandidateRow) -> Need:
            it = catalog.instance_types[r.instance_type]
            # spot+od-fallback starts on spot: its first request is what must be obtainable
            return Need(r.instance_type, r.region, "on-demand" if r.market == "on-demand" else "spot", r.count,
                        it.vcpus, it.sold_by_reservation)

        account = Account()
        needs = [need(r) for r in cands]
        verdicts = check_account(needs, account)
        for w in account.warnings:
            warn(w)
        cands = [replace(r, obtainable=(v := verdicts[n]).obtainable, obtainable_reason=v.reason)
                 for r, n in zip(cands, needs)]
        if only:
            kept = [r for r in cands if r.obtainable == "yes"][:top]
            if not kept:
                warn(f"--obtainable-only: none of the {len(cands)} best candidates is obtainable by this account; "
                     "without --obtainable-only the note column says why")
            cands = [replace(r, rank=n + 1) if r.rank is not None else r for n, r in enumerate(kept)]
    return replace(rows, candidates=cands)


def probe_commands(job: JobSpec, probes: list[ProbeRow]) -> list[str]:
    """The command lines that measure the probe rows: one `advisor launch` per region and market
    (the market the user asked for: a --market spot plan probes on spot), then the pull that
    imports the results (or `advisor probe` on such a machine)."""
    if not probes:
        return []
    groups: dict[tuple[str, str], list[str]] = {}
    for p in probes:
        groups.setdefault((p.region, p.market), []).append(p.instance_type)
    shape = []
    if job.datamodule:
        shape.append(f"--datamodule {job.datamodule}")
    if job.image_size != 224:
        shape.append(f"--image-size {job.image_size}")
    if job.num_classes != 1000:
        shape.append(f"--num-classes {job.num_classes}")
    extra = f" --probe-args '{' '.join(shape)}'" if shape else ""
    me = command_name()
    cmds = [f"{me} launch --instance-type {','.join(names)} --region {region} --market {market} "
            f"--workload {job.workload}{extra} --s3 s3://BUCKET/prefix" for (region, market), names in groups.items()]
    cmds.append(f"{me} results pull s3://BUCKET/prefix   # then run this recommend again: it re-plans from "
                "what the probes measured")
    cmds.append(f"(or on a machine of that type: {me} probe --workload {job.workload}"
                f"{' ' + ' '.join(shape) if shape else ''})")
    return cmds
