"""`advisor probe`: measure (and tune) a training workload on this machine's accelerator."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from catalog.io import save_atomic
from lightning_module import options as defaults
from lightning_module.result import BUILTIN_MODELS, WorkloadSpec

from ..errors import UserError
from ..output import add_format_option, emit
from .common import add_list_option, add_store_option, open_store

ACCELERATORS = ("auto", "cpu", "gpu", "mps", "tpu")
PRECISIONS = ("32-true", "bf16-mixed", "16-mixed")
SKIPPABLE = ("precision", "channels_last", "compile", "workers", "batch", "ipex")
_WORKLOAD = WorkloadSpec()  # the workload defaults live on the contract
LADDER_COLUMNS = ("rung", "status", "samples/s", "ci", "x baseline", "batch", "precision", "kept", "note")


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {v})")
    return v


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 (got {text})")
    return v


def _fraction(text: str) -> float:
    """'3%' or '0.03'."""
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction or percentage (e.g. 0.03 or 3%)") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (or 0% and 100%), got {text}")
    return v


def register(sub) -> None:
    p = sub.add_parser(
        "probe",
        help="measure a training workload's throughput here and tune it (the optimisation ladder)",
        description="Train a workload for a short while on this machine, tune it rung by rung "
        "(bf16, channels_last, torch.compile, loader workers, batch size, ipex) and record the best "
        "throughput in the results store.",
    )
    w = p.add_argument_group("workload")
    w.add_argument("--workload", default=_WORKLOAD.model, metavar="NAME",
                   help=f"one of {', '.join(BUILTIN_MODELS)} (default {_WORKLOAD.model}), or package.module:LightningModuleClass")
    w.add_argument("--datamodule", metavar="MODULE:CLASS",
                   help="your LightningDataModule (must accept batch_size); default: synthetic images")
    w.add_argument("--image-size", type=_positive_int, default=_WORKLOAD.image_size, metavar="PX")
    w.add_argument("--num-classes", type=_positive_int, default=_WORKLOAD.num_classes, metavar="N")
    w.add_argument("--batch-size", type=_positive_int, metavar="N",
                   help="use this batch size and do not search (per device)")
    w.add_argument("--start-batch-size", type=_positive_int, default=_WORKLOAD.batch_size, metavar="N",
                   help=f"where the batch-size search starts (default {_WORKLOAD.batch_size}, the articles' toy)")
    d = p.add_argument_group("device")
    d.add_argument("--accelerator", choices=ACCELERATORS, default=defaults.ACCELERATOR)
    d.add_argument("--devices", type=_positive_int, metavar="N",
                   help="devices to train on (default: all GPUs; on a CPU one rank per NUMA node)")
    d.add_argument("--strategy", metavar="NAME", help="Lightning strategy (default auto; ddp across CPU NUMA nodes)")
    d.add_argument("--precision", choices=PRECISIONS, default=defaults.PRECISION,
                   help=f"the baseline's precision (default {defaults.PRECISION}; the ladder tries bf16/fp16)")
    m = p.add_argument_group("measurement")
    m.add_argument("--tune", action=argparse.BooleanOptionalAction, default=True,
                   help="climb the optimisation ladder (default) or only measure the baseline")
    add_list_option(m, "--skip", metavar="RUNG", choices=SKIPPABLE, help=f"rungs not to try: {', '.join(SKIPPABLE)}")
    m.add_argument("--target-ci", type=_fraction, default=defaults.TARGET_CI, metavar="FRACTION",
                   help="stop timing a rung when the 95%% CI half-width of samples/s is within this "
                   f"(default {defaults.TARGET_CI * 100:g}%%)")
    m.add_argument("--max-seconds", type=_positive_float, default=defaults.MAX_SECONDS, metavar="S",
                   help=f"time limit per rung for timed steps (default {defaults.MAX_SECONDS:g})")
    m.add_argument("--warmup-steps", type=_positive_int, default=defaults.WARMUP_STEPS, metavar="N",
                   help=f"steps not timed at the start of each rung (default {defaults.WARMUP_STEPS}; compilation adds one)")
    m.add_argument("--max-steps", type=_positive_int, metavar="N", help="timed steps per rung at most")
    m.add_argument("--compile-timeout", type=_positive_float, default=defaults.COMPILE_TIMEOUT, metavar="S",
                   help=f"give up on torch.compile after this long (default {defaults.COMPILE_TIMEOUT:g})")
    m.add_argument("--profile", metavar="DIR", help="write a torch.profiler TensorBoard trace of the winner here")
    o = p.add_argument_group("result")
    o.add_argument("--instance-type", metavar="TYPE",
                   help="the EC2 instance type to file the result under (default: from instance metadata)")
    o.add_argument("--output", metavar="FILE", help="also write the ProbeResult JSON here")
    o.add_argument("--no-store", action="store_true", help="do not save the result in the results store")
    add_store_option(o)
    add_format_option(p)
    p.set_defaults(func=handle)


def _spec(args):
    from pydantic import ValidationError

    try:
        return WorkloadSpec(
            model=args.workload, datamodule=args.datamodule, image_size=args.image_size,
            num_classes=args.num_classes,
            batch_size=args.batch_size or args.start_batch_size, batch_size_fixed=args.batch_size is not None,
        )
    except ValidationError as e:
        raise UserError(e.errors()[0]["msg"].removeprefix("Value error, ")) from None


def ci_text(samples_per_sec: float, ci_low: float, ci_high: float) -> str:
    """The 95% CI as a relative half-width, for tables."""
    rel = (ci_high - ci_low) / 2 / samples_per_sec
    return f"±{rel:.1%}" if rel < 1 else ">±100%"


def _pct(r) -> str:
    if r.samples_per_sec is None or r.ci_high is None or r.ci_low is None:
        return ""
    return ci_text(r.samples_per_sec, r.ci_low, r.ci_high)


def ladder_rows(rungs) -> list[dict]:
    base = rungs[0].samples_per_sec if rungs and rungs[0].samples_per_sec else None
    rows = []
    for r in rungs:
        rows.append({
            "rung": r.rung,
            "status": r.status,
            "samples/s": round(r.samples_per_sec, 2) if r.samples_per_sec is not None else None,
            "ci": _pct(r),
            "x baseline": round(r.samples_per_sec / base, 2) if base and r.samples_per_sec else None,
            "batch": r.config.batch_size,
            "precision": r.config.precision,
            "kept": "yes" if r.kept else "",
            "note": r.error or (f"compile {r.compile_seconds:.0f} s" if r.compile_seconds else ""),
        })
    return rows


def _rung_line(rung, base) -> str:
    if rung.status == "ok":
        ratio = f" {rung.samples_per_sec / base.samples_per_sec:.2f}x" if base and base.samples_per_sec else ""
        return (f"probe: {rung.rung:<14} {rung.samples_per_sec:10.2f} samples/s {_pct(rung):>7} "
                f"({rung.steps_timed} steps){ratio}{'  kept' if rung.kept else ''}")
    return f"probe: {rung.rung:<14} {rung.status}: {rung.error}"


def _write_result(path: Path, result) -> None:
    try:
        save_atomic(result, path, indent=2)  # removes its temporary file on any failure, Ctrl-C too
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}") from None


# What `advisor probe` trains with: the `probe` extra (pyproject.toml), import name -> distribution.
PROBE_MODULES = {"torch": "torch", "torchvision": "torchvision", "lightning": "lightning"}


def require_probe_extra() -> None:
    """One line instead of a traceback when the core install (no torch) runs the probe."""
    from importlib.util import find_spec

    missing = [dist for mod, dist in PROBE_MODULES.items() if find_spec(mod) is None]
    if missing:
        raise UserError(f"advisor probe needs {', '.join(PROBE_MODULES.values())}; this installation lacks "
                        f"{', '.join(missing)}: pip install 'instance-advisor[probe]' (in a checkout: pip install -e '.[probe]')")


def handle(args) -> int:
    require_probe_extra()
    spec = _spec(args)
    out_path = Path(args.output) if args.output else None
    if out_path is not None and out_path.is_dir():
        raise UserError(f"--output {out_path} is a directory; give a file name")
    if out_path is not None:
        # Found out now, not after the minutes of measuring that the file was to hold.
        try:
            out_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"--output {out_path}: cannot create {out_path.parent}: {e.strerror or e}") from None
        if not os.access(out_path.parent, os.W_OK):
            raise UserError(f"--output {out_path}: {out_path.parent} is not writable")

    from lightning_module import probe
    from lightning_module.devices import is_global_zero
    from lightning_module.ladder import LadderFailed
    from lightning_module.workloads import WorkloadError

    probe.quiet_lightning(verbose=getattr(args, "verbose", 0) > 0)
    opts = defaults.ProbeOptions(
        spec=spec, accelerator=args.accelerator, devices=args.devices, strategy=args.strategy,
        precision=args.precision, tune=args.tune, target_ci=args.target_ci, max_seconds=args.max_seconds,
        warmup_steps=args.warmup_steps, max_steps=args.max_steps, compile_timeout=args.compile_timeout,
        instance_type=args.instance_type, profile_dir=args.profile, skip=frozenset(args.skip),
        progress_bar=sys.stderr.isatty(),
    )
    try:
        accelerator = probe.preflight(opts)
    except WorkloadError as e:
        raise UserError(str(e)) from None
    rank0 = is_global_zero()
    if rank0:
        print(f"probe: {spec.workload_id} on {accelerator}, batch {spec.batch_size}{' (fixed)' if spec.batch_size_fixed else ''}, "
              f"{'tuning' if args.tune else 'baseline only'}; up to {args.max_seconds:g} s per rung", file=sys.stderr)

    def on_rung(rung, base):
        if rank0:
            print(_rung_line(rung, base), file=sys.stderr, flush=True)

    try:
        result = probe.run_probe(opts, on_rung=on_rung)
    except WorkloadError as e:
        raise UserError(str(e)) from None
    except LadderFailed as e:
        print(f"advisor: error: probe failed, nothing stored: {e}", file=sys.stderr)
        return 1
    if result is None:
        return 0  # another DDP rank: it measured along, rank 0 reports

    if out_path is not None:
        _write_result(out_path, result)
    saved = None
    if not args.no_store:
        with open_store(args) as store:
            store.add(result)
        saved = store.path

    emit(ladder_rows(result.ladder), args.format, LADDER_COLUMNS)
    if args.format in ("table", "markdown"):
        print()
        for line in summary_lines(result, saved, out_path):
            print(line)
    return 0


def describe(config) -> str:
    parts = [config.accelerator + (f" x{config.devices}" if config.devices > 1 else ""), config.precision]
    if config.channels_last:
        parts.append("channels_last")
    if config.compile:
        parts.append("compiled")
    parts.append(f"batch {config.batch_size}")
    parts.append(f"{config.num_workers} workers" + (" +pin_memory" if config.pin_memory else ""))
    if config.ipex:
        parts.append("ipex")
    return ", ".join(parts)


def summary_lines(result, saved, out_path) -> list[str]:
    r = result
    base = r.ladder[0].samples_per_sec if r.ladder and r.ladder[0].samples_per_sec else None
    lines = [
        f"best: {r.samples_per_sec:.2f} samples/s (95% CI {r.samples_per_sec_ci[0]:.2f}-{r.samples_per_sec_ci[1]:.2f}, "
        f"{r.step_time.n_steps} steps, {r.stop_reason})" + (f", {r.samples_per_sec / base:.2f}x baseline" if base else ""),
        f"config: {describe(r.config)}",
    ]
    if r.flops_per_sample:
        util = []
        if r.utilisation_matmul is not None:
            util.append(f"{r.utilisation_matmul:.0%} of measured matmul peak {r.peak_tflops_matmul:.3g} TFLOP/s")
        if r.utilisation_datasheet is not None:
            util.append(f"{r.utilisation_datasheet:.0%} of datasheet peak {r.peak_tflops_datasheet:.3g} TFLOP/s")
        lines.append(f"compute: {r.flops_per_sample / 1e9:.4g} GFLOP/sample, {r.achieved_tflops:.3g} TFLOP/s"
                     + (f" = {'; '.join(util)}" if util else ""))
    if r.peak_memory_gib is not None:
        lines.append(f"peak memory: {r.peak_memory_gib:.2f} GiB ({'GPU allocated' if r.config.accelerator == 'gpu' else 'process RSS'})")
    where = r.instance_type or "unknown instance type"
    lines.append(f"machine: {where}; {r.hardware.cpu_model or 'unknown CPU'}"
                 + (f"; {len(r.hardware.gpus)}x {r.hardware.gpus[0].name}" if r.hardware.gpus else ""))
    if r.profile_dir:
        lines.append(f"profile: {r.profile_dir} (tensorboard --logdir {r.profile_dir})")
    if saved:
        lines.append(f"saved: result {r.result_id[:12]} in {saved}")
    if out_path:
        lines.append(f"wrote: {out_path}")
    return lines
