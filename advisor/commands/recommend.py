"""`advisor recommend`: rank instance types for a training job under a budget and a deadline.

The fast, offline path: no torch, lightning, torchvision, boto3 (and matplotlib only with --plot).
"""

from __future__ import annotations

import shlex
from dataclasses import fields
from typing import get_args

from pydantic import ValidationError

from lightning_module.contract.result import BUILTIN_MODELS
from safeio import first_error

from .. import options as opt
from .. import render
from ..errors import AdvisorError
from ..estimate.memory import DEFAULT_GLOBAL_BATCH_TOKENS, DEFAULT_SEQ_LEN, METHODS, Training
from ..output import FORMATS, add_format_option, warn
from ..recommend.jobspec import (
    JobSpec,
    MarketChoice,
    Objective,
    RequiredDtype,
    parse_budget,
    parse_deadline,
    parse_tokens,
    work_samples,
)
from .common import (
    add_catalog_options,
    add_list_option,
    add_store_option,
    add_type_filter_options,
    add_user_workload_options,
    command_name,
    load_catalog,
    store_to_read,
    type_filter,
    user_workload,
)

MAX_INSTANCES = 64  # past this the scale-out model says nothing
# The defaults live on JobSpec and, for token workloads, on Training (one home each): argparse
# uses and shows them, and an option without one (None) takes the job's own.
JOB = {name: f.default for name, f in JobSpec.model_fields.items()}
TRAINING = {f.name: f.default for f in fields(Training)}


def register(sub) -> None:
    p = sub.add_parser(
        "recommend",
        help="rank instance types for a training job under a budget and a deadline",
        description="Rank (instance type, count, region, market) for a training job: cheapest that meets the "
                    "deadline, fastest within the budget, or the Pareto set. Throughput comes from your probes "
                    "(measured), published figures (reference), or an estimate with a band (estimated).",
        epilog="Example: advisor recommend --budget 500 --deadline 2d --samples 1e8 --market any",
    )
    p.add_argument("--budget", required=True, metavar="USD", help="most you will spend, in USD")
    p.add_argument("--deadline", required=True, metavar="WHEN",
                   help="90m, 36h, 2d, 1d12h, ISO 8601 duration (P2DT3H) or a future date-time "
                        "(2026-12-01T09:00; UTC unless it carries a zone)")
    p.add_argument("--samples", metavar="N", help="training samples to process in total (1.2e8, 120M)")
    p.add_argument("--epochs", metavar="E", help="epochs (with --dataset-size)")
    p.add_argument("--dataset-size", metavar="N", help="samples per epoch (with --epochs)")
    models = ", ".join(f"{m} (default)" if m == JOB["workload"] else m for m in BUILTIN_MODELS)
    p.add_argument("--workload", type=opt.text,
                   help=f"{models}, or a probed 'package.module:LightningModuleClass' (ranked from its probe results)")
    p.add_argument("--datamodule", type=opt.text, metavar="MODULE:CLASS",
                   help="the DataModule the custom workload was probed with")
    add_user_workload_options(p)  # the constructor arguments it was probed with: part of its id
    p.add_argument("--image-size", type=opt.image_size, help=f"input side in pixels (default {JOB['image_size']})")
    p.add_argument("--num-classes", type=opt.num_classes, help=f"classes (default {JOB['num_classes']})")
    p.add_argument("--objective", choices=get_args(Objective), default=JOB["objective"],
                   help="cheapest meeting the deadline (default), fastest within budget, or the Pareto set")
    add_list_option(p, "--region", metavar="R", help="only these regions")
    p.add_argument("--confidence", type=opt.number(0, 1), default=JOB["confidence"], metavar="P",
                   help=f"a candidate fits when it meets the deadline and the budget with probability >= P over its "
                        f"throughput band and its spot interruptions; cheapest and fastest rank on the P-quantile of "
                        f"cost and time (default {JOB['confidence']:g}; 0 ranks on the point estimate)")
    p.add_argument("--prices", type=opt.path, metavar="FILE",
                   help="your own prices, a YAML or JSON file: discounts per family, region or market (Savings "
                        "Plans, EDP), fixed $/h per instance type, capacity already paid for (docs/recommend.md)")
    p.add_argument("--market", choices=get_args(MarketChoice), default=JOB["market"],
                   help="on-demand (default), spot, or any (both, plus spot with on-demand fallback)")
    p.add_argument("--max-instances", type=opt.whole(1, MAX_INSTANCES), default=JOB["max_instances"], metavar="K",
                   help=f"consider 1..K data-parallel instances (default {JOB['max_instances']}: past that the "
                        "all-reduce model is outside anything measured)")
    add_type_filter_options(p)  # --family, --accelerator, --arch, --min-gpus: as `catalog show`
    p.add_argument("--gpu-only", action="store_true", help="leave CPU-only instance types out")
    p.add_argument("--min-accelerator-memory", type=opt.number(0, 4096, lo_open=True), metavar="GiB",
                   help="per-device memory the job needs (default: the workload's own floor)")
    p.add_argument("--require-dtype", choices=get_args(RequiredDtype), help="exclude devices without native support")
    p.add_argument("--checkpoint-minutes", type=opt.positive_minutes, default=JOB["checkpoint_minutes"], metavar="M",
                   help=f"checkpoint interval for spot (default {JOB['checkpoint_minutes']:g}): half of it is lost per "
                        "interruption")
    p.add_argument("--restart-minutes", type=opt.minutes, default=JOB["restart_minutes"], metavar="M",
                   help=f"time to get going again after a spot interruption (default {JOB['restart_minutes']:g})")
    p.add_argument("--setup-minutes", type=opt.minutes, default=JOB["setup_minutes"], metavar="M",
                   help="billed time per run on every instance before training starts (boot, install, data "
                        f"staging); default {JOB['setup_minutes']:g}, the articles' arithmetic")
    p.add_argument("--probe-budget", type=opt.number(0, opt.MAX_BUDGET_USD), metavar="USD",
                   help="the most the 'Probe next' plan may spend on probes (default: no limit; each probe is "
                        "planned only when it is expected to save more than it costs)")
    p.add_argument("--top", type=opt.whole(1, 10_000), default=opt.DEFAULT_TOP, metavar="N",
                   help=f"rows to show (default {opt.DEFAULT_TOP})")
    p.add_argument("--show-excluded", action="store_true", help="also list excluded instance types with the reason")
    p.add_argument("--check-account", action="store_true",
                   help="ask AWS whether your account can get each candidate: its vCPU quota (Service Quotas) and, "
                        "for spot, the spot placement score; needs credentials (IAM permissions: docs/iam.md)")
    p.add_argument("--obtainable-only", action="store_true",
                   help="only candidates the account can get (obtainable yes); implies --check-account")
    p.add_argument("--plot", metavar="FILE", help="write a cost-vs-time plot to FILE.png, .svg or .pdf (needs matplotlib)")
    extra = render.extra_formats(FORMATS)  # the registry's formats past every command's: skypilot, html
    add_format_option(p, extra=extra, extra_help="; ".join(render.FORMATS[name].help for name in extra))
    p.add_argument("file", nargs="?", metavar="FILE", help="the page --format html writes (after html)")
    llm = p.add_argument_group("token workloads (a transformer language model; docs/llm-memory.md)")
    llm.add_argument("--model-shape", type=opt.text, metavar="SHAPE",
                     help="the model: a preset (llama-3-8b, mistral-7b, llama-2-7b, ...: "
                          "'advisor recommend --model-shape list'), a "
                          "preset with fields changed (llama-3-8b,n_layers=40) or every field (d_model=4096,n_layers=32,"
                          "n_heads=32,n_kv_heads=8,d_ff=14336,vocab=128256); ranks (type, count, strategy) by tokens")
    llm.add_argument("--tokens", metavar="N", help="tokens to train on (2e9, 2B): with --model-shape (or --samples "
                     "with --seq-len), or with a probed --workload whose probe counted tokens per sample")
    llm.add_argument("--seq-len", type=opt.whole(1, 1_048_576), metavar="L",
                     help=f"tokens per sequence (default {DEFAULT_SEQ_LEN})")
    llm.add_argument("--finetune", choices=METHODS, default=TRAINING["method"],
                     help="full (default): every weight trains; lora: a frozen 16-bit base with adapters; "
                          "qlora: the base in 4 bits")
    llm.add_argument("--lora-rank", type=opt.whole(1, 4096), default=TRAINING["lora_rank"], metavar="R",
                     help=f"LoRA rank (default {TRAINING['lora_rank']}, on query and value)")
    llm.add_argument("--strategy", choices=("ddp", "zero1", "zero2", "zero3", "fsdp", "hybrid"),
                     help="pin the strategy (default: the least costly that fits; zero3 is fsdp full shard)")
    llm.add_argument("--precision", choices=("bf16-true", "bf16-mixed", "16-mixed", "32-true"),
                     default=TRAINING["precision"],
                     help=f"what the weights, gradients and optimizer state are kept in (default {TRAINING['precision']})")
    llm.add_argument("--optimizer-kind", choices=("adamw", "adamw8bit", "sgd"), default=TRAINING["optimizer"],
                     help="adamw (default), adamw8bit (bitsandbytes), sgd (with momentum): its state per parameter")
    llm.add_argument("--fsdp-no-sync", action="store_true",
                     help="your script accumulates gradients under FSDP1's no_sync() (litgpt's finetune scripts do): "
                          "each GPU holds the whole unsharded gradient between optimizer steps, reduce-scattered once "
                          "a step (default: reduce-scattered every micro-batch, FSDP2's way)")
    llm.add_argument("--global-batch-tokens", type=opt.whole(1, 2**40), default=DEFAULT_GLOBAL_BATCH_TOKENS, metavar="T",
                     help=f"tokens per optimizer step across all devices (default {DEFAULT_GLOBAL_BATCH_TOKENS}): how often "
                          "gradients are exchanged")
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
    if args.tokens is not None:  # converted to samples by the probe's tokens per sample (planner.resolve_work)
        if args.samples is not None or args.epochs is not None or args.dataset_size is not None:
            raise AdvisorError("give either --tokens or --samples (or --epochs with --dataset-size), not both")
        if args.seq_len is not None:
            raise AdvisorError("--seq-len is for --model-shape: a probed workload's tokens per sample are the "
                               "ones its probe counted")
        samples, tokens = None, int(parse_tokens(args.tokens))
    else:
        samples, tokens = work_samples(args.samples, args.epochs, args.dataset_size), None
    wanted = type_filter(args)
    user = user_workload(args, JOB["workload"])
    try:  # JobSpec checks what argparse's types do not (--confidence's gap between 0 and a half)
        return JobSpec(
            probe_budget_usd=args.probe_budget, samples=samples, tokens=tokens, budget_usd=budget,
            deadline_hours=deadline.total_seconds() / 3600,
            workload=user.model, datamodule=user.datamodule, init_args=user.init_args, data_init_args=user.data_init_args,
            optimizer=user.optimizer, lr_scheduler=user.lr_scheduler,
            image_size=args.image_size or JOB["image_size"], num_classes=args.num_classes or JOB["num_classes"],
            objective=args.objective, regions=args.region, families=list(wanted.families),
            accelerators=list(wanted.accelerators), arch=wanted.arch, min_gpus=wanted.min_gpus,
            market=args.market, max_instances=args.max_instances,
            min_accelerator_memory_gib=args.min_accelerator_memory, require_dtype=args.require_dtype,
            checkpoint_minutes=args.checkpoint_minutes, restart_minutes=args.restart_minutes,
            setup_minutes=args.setup_minutes,
            include_cpu=not args.gpu_only, confidence=args.confidence,
        )
    except ValidationError as e:
        raise AdvisorError(first_error(e).msg) from None


def handle(args) -> int:
    if args.model_shape is not None:
        return handle_tokens(args)
    job = job_from_args(args)
    if job.tokens is not None:
        from lightning_module.contract.workload_facts import facts_for

        if facts_for(job.workload) is not None:  # a builtin image model: its samples hold no tokens
            raise AdvisorError(f"--tokens counts a token workload, and {job.workload} is an image model: give --samples, "
                               "name a transformer with --model-shape, or a probed sequence model with --workload")
    # A bad --format file, --plot or --prices is refused before anything is computed or printed.
    page_target = render.check(args.format, args.file)
    if args.plot:
        from ..render.plot import check_target

        check_target(args.plot)
    prices = None
    if args.prices:
        from ..recommend.prices import load_prices

        prices = load_prices(args.prices)
    catalog = load_catalog(args)
    from ..advice import advise

    advice = advise(job, catalog=catalog, store=store_to_read(args), references=args.references,
                    check_account=args.check_account, obtainable_only=args.obtainable_only, top=args.top,
                    program=command_name(), say=warn, prices=prices)
    advice.show(args.format, show_excluded=args.show_excluded, target=page_target,
                command_line=f"{command_name()} {shlex.join(args.argv)}", version=args.advisor_version)
    if args.plot:
        from ..render.plot import plot_plan

        plot_plan(advice.plan, advice.rows, args.plot)
        if render.FORMATS[args.format].for_people:
            print(f"\nplot written to {args.plot}")
    return 0


def llm_job_from_args(args):
    """The token workload's job; every check before anything is computed."""
    from lightning_module.contract.transformer_shape import ShapeError, parse_shape

    from ..estimate.memory import STRATEGY_ALIASES, MemoryModelError, Training
    from ..recommend.jobspec import work_tokens
    from ..recommend.llm import LlmJob

    try:
        shape = parse_shape(args.model_shape)
        training = Training(method=args.finetune, precision=args.precision, optimizer=args.optimizer_kind,
                            lora_rank=args.lora_rank, no_sync_accumulation=args.fsdp_no_sync)
    except (ShapeError, MemoryModelError) as e:
        raise AdvisorError(str(e)) from None
    seq_len = args.seq_len or DEFAULT_SEQ_LEN
    tokens = work_tokens(args.tokens, args.samples, seq_len if args.samples or args.epochs else args.seq_len,
                         args.epochs, args.dataset_size)
    if args.objective == "pareto":
        raise AdvisorError("--objective pareto is not offered for token workloads yet: use cheapest or fastest")
    strategy = STRATEGY_ALIASES.get(args.strategy, args.strategy) if args.strategy else None
    return LlmJob(shape, training, seq_len, tokens, parse_budget(args.budget),
                  parse_deadline(args.deadline).total_seconds() / 3600, args.objective, args.max_instances, strategy,
                  tuple(args.region or ()), args.market, args.global_batch_tokens, args.setup_minutes)


def handle_tokens(args) -> int:
    from lightning_module.contract.transformer_shape import PRESETS

    from ..recommend.llm import advise_llm
    from ..render.tokens import document_fields

    if args.model_shape.strip().lower() == "list":
        for name, shape in PRESETS.items():
            print(f"{name:<24} {shape.params() / 1e9:6.2f}B  {shape.source}")
        return 0
    offered = render.token_formats()
    if args.format not in offered:
        raise AdvisorError(f"--format {args.format} is not offered for token workloads yet: use {', '.join(offered)}")
    if args.plot:
        raise AdvisorError("--plot is not offered for token workloads yet")
    page_target = render.check(args.format, args.file)  # a bad page file: refused before anything is computed
    unsupported = [flag for flag, given in (("--prices", args.prices), ("--check-account", args.check_account),
                                            ("--obtainable-only", args.obtainable_only), ("--probe-budget", args.probe_budget),
                                            ("--require-dtype", args.require_dtype),
                                            ("--min-accelerator-memory", args.min_accelerator_memory)) if given]
    if unsupported:
        raise AdvisorError(f"{', '.join(unsupported)} not offered for token workloads (--model-shape) yet")
    job = llm_job_from_args(args)
    wanted = type_filter(args)
    advice = advise_llm(load_catalog(args), job, top=args.top, wanted=wanted)
    if args.format == "json":
        from .. import schemas

        schemas.write("recommend-tokens", **document_fields(advice))
    else:
        render.show_tokens(advice, args.format, show_excluded=args.show_excluded, target=page_target,
                           command_line=f"{command_name()} {shlex.join(args.argv)}", version=args.advisor_version)
    return 0
