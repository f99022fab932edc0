"""`advisor probe`: measure (and tune) a training workload on this machine's accelerator."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from contextlib import contextmanager
from pathlib import Path

from lightning_module.contract import options as defaults
from lightning_module.contract.ladder import EXTENSION_RUNGS, TUNING_RUNGS
from lightning_module.contract.reliability import baseline_moved, moved_line, speedup_over_baseline
from lightning_module.contract.result import BUILTIN_MODELS, WorkloadSpec
from safeio import check_name, first_error, save_atomic

from .. import options as opt
from ..errors import AdvisorError
from ..output import add_format_option, emit
from ..output import say as say_out  # the local say() is the progress line on stderr
from .common import (
    add_list_option,
    add_store_option,
    add_user_workload_options,
    open_store,
    user_workload,
)

ACCELERATORS = ("auto", "cpu", "gpu", "mps", "tpu")
PRECISIONS = ("32-true", "bf16-mixed", "16-mixed")
SKIPPABLE = (*TUNING_RUNGS, *EXTENSION_RUNGS)
_WORKLOAD = WorkloadSpec()  # the workload defaults live on the contract
LADDER_COLUMNS = ("rung", "status", "samples/s", "ci", "x baseline", "batch", "precision", "kept", "reliable", "note")


# Option types and bounds live in advisor/options.py (one home for every command's options).
_positive_int = opt.whole(1, 4096)
_positive_float = opt.number(0, 86_400, lo_open=True)  # seconds: a day at most
_fraction = opt.fraction
_count = opt.whole(0, 10)  # re-measurements, A-B rounds


def register(sub) -> None:
    p = sub.add_parser(
        "probe",
        help="measure a training workload's throughput here and tune it (the optimisation ladder)",
        description="Train a workload for a short while on this machine, tune it rung by rung "
        f"({', '.join((*TUNING_RUNGS.values(), *EXTENSION_RUNGS.values()))}), "
        "confirm the winner against the baseline in alternation and record it in the results store. "
        "Exit status: 0 done, 1 the baseline could not be measured, 2 bad input, 130 stopped by SIGINT "
        "(Ctrl-C), 143 stopped by SIGTERM; a stopped probe stores nothing.",
        epilog="Example: advisor probe --workload resnet18 --image-size 32 --num-classes 10 --max-seconds 3 "
               "--output /tmp/resnet18.json",
    )
    w = p.add_argument_group("workload")
    w.add_argument("--workload", type=opt.text, metavar="NAME",
                   help=f"one of {', '.join(BUILTIN_MODELS)} (default {_WORKLOAD.model}), or package.module:LightningModuleClass")
    w.add_argument("--datamodule", type=opt.text, metavar="MODULE:CLASS",
                   help="your LightningDataModule; default: your module's own train_dataloader() "
                        "(synthetic images for the builtin workloads)")
    add_user_workload_options(w)
    w.add_argument("--image-size", type=opt.image_size, metavar="PX",
                   help=f"input side (default {_WORKLOAD.image_size}); for your own module, its constructor's image_size")
    w.add_argument("--num-classes", type=opt.num_classes, metavar="N",
                   help=f"classes (default {_WORKLOAD.num_classes}); for your own module, its constructor's num_classes")
    w.add_argument("--batch-size", type=opt.batch_size, metavar="N",
                   help="use this batch size and do not search (per device)")
    w.add_argument("--start-batch-size", type=opt.batch_size, metavar="N",
                   help=f"where the batch-size search starts (default: your module's own batch_size; "
                        f"{_WORKLOAD.batch_size} for the builtin workloads, the articles' toy)")
    d = p.add_argument_group("device")
    d.add_argument("--accelerator", choices=ACCELERATORS, default=defaults.ACCELERATOR)
    d.add_argument("--devices", type=_positive_int, metavar="N",
                   help="devices to train on (default: all GPUs; on a CPU one rank per NUMA node)")
    d.add_argument("--strategy", metavar="NAME", help="Lightning strategy (default auto; ddp across CPU NUMA nodes)")
    d.add_argument("--cpu-too", action="store_true",
                   help="after tuning on the GPU, measure the CPU alone and both training at once (each "
                   "its own batch, gradients weighted by samples); kept only when it beats the GPU alone "
                   "beyond the noise")
    d.add_argument("--rank-timeout", type=_positive_float, default=defaults.RANK_TIMEOUT, metavar="S",
                   help="with several ranks: end the probe when one waits this long for another at a "
                   f"collective, a rank that hung (default {defaults.RANK_TIMEOUT:g})")
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
    m.add_argument("--max-steps", type=opt.whole(1, 10**7), metavar="N", help="timed steps per rung at most")
    m.add_argument("--compile-timeout", type=_positive_float, default=defaults.COMPILE_TIMEOUT, metavar="S",
                   help=f"give up on torch.compile after this long (default {defaults.COMPILE_TIMEOUT:g})")
    m.add_argument("--remeasure", type=_count, default=defaults.REMEASURE_ROUNDS, metavar="N",
                   help="measure a rung again, at most N more times, while its CI is wider than the target "
                   f"and it could still win (default {defaults.REMEASURE_ROUNDS})")
    m.add_argument("--confirm-rounds", type=_count, default=defaults.CONFIRM_ROUNDS, metavar="N",
                   help="A-B rounds measuring the winner against the baseline in alternation before the "
                   f"result is written; the pick is kept only if its speed-up holds (default "
                   f"{defaults.CONFIRM_ROUNDS}; 0: no confirmation)")
    m.add_argument("--profile", metavar="DIR",
                   help="write a torch.profiler trace of the winner into this new (or empty) directory: "
                   "DIR/trace.json for Perfetto, and TensorBoard's format")
    o = p.add_argument_group("result")
    o.add_argument("--instance-type", type=opt.instance_type, metavar="TYPE",
                   help="the EC2 instance type to file the result under (default: from instance metadata)")
    o.add_argument("--output", type=opt.path, metavar="FILE", help="also write the ProbeResult JSON here")
    o.add_argument("--no-store", action="store_true", help="do not save the result in the results store")
    add_store_option(o)
    add_format_option(p)
    p.set_defaults(func=handle)


def _spec(args) -> tuple[WorkloadSpec, bool]:
    """The workload, and whether its batch starts at the author's own batch size."""
    from pydantic import ValidationError

    u = user_workload(args, _WORKLOAD.model)
    start = args.batch_size or args.start_batch_size or u.batch_size
    try:
        spec = WorkloadSpec(
            model=u.model, datamodule=u.datamodule, image_size=args.image_size or _WORKLOAD.image_size,
            num_classes=args.num_classes or _WORKLOAD.num_classes,
            batch_size=start or _WORKLOAD.batch_size, batch_size_fixed=args.batch_size is not None,
            init_args=u.init_args, data_init_args=u.data_init_args,
            optimizer=u.optimizer, lr_scheduler=u.lr_scheduler,
        )
    except ValidationError as e:
        raise AdvisorError(first_error(e).msg) from None
    return spec, start is None and spec.model not in BUILTIN_MODELS


def ci_text(samples_per_sec: float, ci_low: float, ci_high: float) -> str:
    """The 95% CI as a relative half-width, for tables."""
    if not samples_per_sec > 0:  # a rung that measured nothing has no relative width
        return ""
    rel = (ci_high - ci_low) / 2 / samples_per_sec
    return f"±{rel:.1%}" if rel < 1 else ">±100%"


def _pct(r) -> str:
    if r.samples_per_sec is None or r.ci_high is None or r.ci_low is None:
        return ""
    return ci_text(r.samples_per_sec, r.ci_low, r.ci_high)


def rung_doubts(r) -> list[str]:
    """Why a measured rung's number is shaky, briefly: contended, or its CI never reached the
    target (`results show` and the JSON carry the whole record)."""
    from lightning_module.contract.contention import brief

    out = []
    if r.contention is not None and r.contention.contended:
        out.append(brief(r.contention))
    if r.ci_target_met is False:
        out.append("CI above target" + (f" after {r.remeasured} re-measurement(s)" if r.remeasured else ""))
    return out


def ladder_rows(rungs, confirmation=None) -> list[dict]:
    """The ladder table; with a baseline that moved before the confirmation, no ratio to it (they
    would be the machine's change, not the rungs')."""
    moved = confirmation is not None and baseline_moved(confirmation.baseline_shift)
    base = rungs[0].samples_per_sec if rungs and rungs[0].samples_per_sec and not moved else None
    rows = []
    for k, r in enumerate(rungs):
        doubts = rung_doubts(r) if r.status == "ok" else []
        note = [x for x in (r.error, r.note) if x]
        if r.compile_seconds:
            note.append(f"compile {r.compile_seconds:.0f} s")
        if r.remeasured and r.ci_target_met:
            note.append(f"re-measured {r.remeasured}x")
        if moved and k == 0:
            note.append(f"moved {confirmation.baseline_shift:.2f}x by the confirmation: no ratio to it is a speed-up")
        rows.append({
            "rung": r.rung,
            "status": r.status,
            "samples/s": round(r.samples_per_sec, 2) if r.samples_per_sec is not None else None,
            "ci": _pct(r),
            "x baseline": round(r.samples_per_sec / base, 2) if base and r.samples_per_sec else None,
            "batch": r.config.batch_size,
            "precision": r.config.precision,
            "kept": "yes" if r.kept else "",
            # A rung from before the probe judged its numbers has no verdict to show.
            "reliable": ("no" if doubts else "" if r.contention is None and r.ci_target_met is None else "yes")
            if r.status == "ok" else "",
            "note": "; ".join(note + doubts),
        })
    return rows


def _rung_line(rung, base) -> str:
    if rung.status == "ok":
        ratio = f" {rung.samples_per_sec / base.samples_per_sec:.2f}x" if base and base.samples_per_sec else ""
        doubts = rung_doubts(rung)
        return (f"probe: {rung.rung:<14} {rung.samples_per_sec:10.2f} samples/s {_pct(rung):>7} "
                f"({rung.steps_timed} steps){ratio}{'  kept' if rung.kept else ''}"
                + (f"  [{'; '.join(doubts)}]" if doubts else ""))
    return f"probe: {rung.rung:<14} {rung.status}: {rung.error}"


def _leg_line(name: str, m) -> str:
    contended = "  [contended]" if m.contention is not None and m.contention.contended else ""
    return f"probe: confirm {name:<8} {m.samples_per_sec:10.2f} samples/s ({m.steps_timed} steps){contended}"


def _write_result(path: Path, result) -> None:
    try:
        save_atomic(result, path, indent=2)  # removes its temporary file on any failure, Ctrl-C too
    except OSError as e:
        raise AdvisorError(f"cannot write {path}: {e.strerror or e}") from None


class SignalStop:
    """SIGINT and SIGTERM stop a probe with ProbeStopped: Lightning turns a KeyboardInterrupt
    into a silent exit 1 and its own SIGTERM handler into a silent exit 0 (it raises
    SIGTERMException, a SystemExit), so the command catches both signals itself. While the result
    is being written they are held and act once it is written, so a result is stored whole or not at all."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.holding = False
        self.pending: int | None = None
        self.stopping: int | None = None
        self.stored = False

    def _handler(self, signum, frame):
        from lightning_module.contract.ladder import ProbeStopped

        if self.holding or self.stopping is not None:
            # Held during the write; or a second Ctrl-C while the first one unwinds (a child
            # process being stopped): the first signal's stop goes on, to its exit status.
            self.pending = self.pending or signum
            return
        self.stopping = signum
        raise ProbeStopped(signum)

    @contextmanager
    def installed(self):
        old = {s: signal.signal(s, self._handler) for s in self.SIGNALS}
        try:
            yield self
        finally:
            for s, h in old.items():
                # Stopping: later signals are ignored while the stop unwinds to its status (the
                # CLI's handler would raise again); the CLI puts the handlers back when it returns.
                signal.signal(s, signal.SIG_IGN if self.stopping is not None else h)

    @contextmanager
    def held(self):
        from lightning_module.contract.ladder import ProbeStopped

        self.holding = True
        try:
            yield
        finally:
            self.holding = False
            if self.pending is not None:
                self.stopping = self.pending
                raise ProbeStopped(self.pending)

    def message(self, signum: int) -> str:
        name = signal.Signals(signum).name
        if self.stored:
            return f"advisor: probe stopped by {name} after its result was saved"
        return f"advisor: probe stopped by {name}: nothing was stored"


def _check_profile_dir(text: str) -> None:
    """Found out now, not after the minutes of measuring the trace was to come from."""
    prof = Path(text)
    if prof.exists() and not prof.is_dir():
        raise AdvisorError(f"--profile {prof} is a file; give a new or empty directory for the trace")
    if prof.is_dir() and any(prof.iterdir()):
        raise AdvisorError(f"--profile {prof} is not empty; give a new or empty directory, so the trace is this probe's alone")
    try:
        prof.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise AdvisorError(f"--profile {prof}: cannot create it: {e.strerror or e}") from None
    if not os.access(prof, os.W_OK):
        raise AdvisorError(f"--profile {prof} is not writable")


# What `advisor probe` trains with: the `probe` extra (pyproject.toml), import name -> distribution.
PROBE_MODULES = {"torch": "torch", "torchvision": "torchvision", "lightning": "lightning"}


def require_probe_extra() -> None:
    """One line instead of a traceback when the core install (no torch) runs the probe."""
    from importlib.util import find_spec

    missing = [dist for mod, dist in PROBE_MODULES.items() if find_spec(mod) is None]
    if missing:
        raise AdvisorError(f"advisor probe needs {', '.join(PROBE_MODULES.values())}; this installation lacks "
                        f"{', '.join(missing)}: pip install 'instance-advisor[probe]' (in a checkout: pip install -e '.[probe]')")


def check_label(args) -> None:
    """--instance-type must be a type this machine can be (instance_label.contradictions); a type
    the catalog does not know cannot be checked, and is taken as given."""
    from catalog.io import load
    from lightning_module.contract.instance_label import contradictions
    from lightning_module.run.hardware import fingerprint

    from .common import catalog_path

    it = load(catalog_path(args)).instance_types.get(args.instance_type)
    if it is None:
        return
    wrong = contradictions(it, fingerprint())
    if wrong:
        raise AdvisorError(f"--instance-type {args.instance_type} is not this machine: {'; '.join(wrong)} "
                           "(off EC2, leave --instance-type out)")


def handle(args) -> int:
    from lightning_module.contract.ladder import ProbeStopped

    stop = SignalStop()
    # From the start: a signal while torch and Lightning import (seconds) is the same stop, with
    # the same line and status, as one while a rung is timed.
    try:
        with stop.installed():
            return _probe(args, stop)
    except ProbeStopped as e:
        print(stop.message(e.signum), file=sys.stderr)
        return 128 + e.signum
    finally:
        # The other ranks this process started (DDP, --cpu-too) do not outlive it: a stop or an
        # error here would leave them waiting at a collective until --rank-timeout.
        if (ranks := sys.modules.get("lightning_module.run.ranks")) is not None:
            ranks.stop_children()


def _probe(args, stop: SignalStop) -> int:
    require_probe_extra()
    spec, own_batch = _spec(args)
    out_path = check_name(args.output, "--output", AdvisorError) if args.output else None
    if out_path is not None and out_path.is_dir():
        raise AdvisorError(f"--output {out_path} is a directory; give a file name")
    if out_path is not None:
        # Found out now, not after the minutes of measuring that the file was to hold.
        try:
            out_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise AdvisorError(f"--output {out_path}: cannot create {out_path.parent}: {e.strerror or e}") from None
        if not os.access(out_path.parent, os.W_OK):
            raise AdvisorError(f"--output {out_path}: {out_path.parent} is not writable")
    if args.profile:
        _check_profile_dir(args.profile)

    from lightning_module.contract.ladder import LadderFailed, RankLost
    from lightning_module.run import cpu_too, measure, probe, ranks
    from lightning_module.run.devices import is_global_zero
    from lightning_module.run.workloads import WorkloadError

    measure.quiet_lightning(verbose=getattr(args, "verbose", 0) > 0)
    if cpu_too.is_extra_rank():
        cpu_too.train_along()  # the CPU rank Lightning started: rank 0 probes and reports
        return 0
    opts = defaults.ProbeOptions(
        spec=spec, accelerator=args.accelerator, devices=args.devices, strategy=args.strategy,
        precision=args.precision, tune=args.tune, target_ci=args.target_ci, max_seconds=args.max_seconds,
        warmup_steps=args.warmup_steps, max_steps=args.max_steps, compile_timeout=args.compile_timeout,
        instance_type=args.instance_type, profile_dir=args.profile, skip=frozenset(args.skip),
        progress=sys.stderr.isatty(), remeasure_rounds=args.remeasure, confirm_rounds=args.confirm_rounds,
        own_batch_size=own_batch, rank_timeout=args.rank_timeout, cpu_too=args.cpu_too,
    )
    if args.instance_type:
        check_label(args)
    try:
        checked = probe.preflight(opts)
    except WorkloadError as e:
        raise AdvisorError(str(e)) from None
    accelerator, pv = checked.accelerator, checked.preview
    rank0 = is_global_zero()
    ranks.on_lost = _rank_lost_exit

    def say(line: str) -> None:
        if rank0:
            print(line, file=sys.stderr, flush=True)

    saved = None
    say(f"probe: {spec.workload_id} on {accelerator}, {pv.data_source} data, batch {pv.batch_size}"
        f"{' (fixed)' if spec.batch_size_fixed else '' if pv.batch_tunable else ' (not tunable)'}, "
        f"{'tuning' if args.tune else 'baseline only'}; "
        f"up to {args.max_seconds:g} s per rung")
    try:
        result = probe.run_probe(opts, on_rung=lambda r, base: say(_rung_line(r, base)),
                                 on_leg=lambda name, m: say(_leg_line(name, m)), checked=checked)
    except WorkloadError as e:
        raise AdvisorError(str(e)) from None
    except (LadderFailed, RankLost, cpu_too.CpuTooFailed) as e:
        print(f"advisor: error: probe failed, nothing stored: {e}", file=sys.stderr)
        return 1
    if result is None:
        return 0  # another DDP rank: it measured along, rank 0 reports
    with stop.held():
        if out_path is not None:
            _write_result(out_path, result)
        if not args.no_store:
            with open_store(args) as store:
                store.add(result)
            saved = store.path
        stop.stored = out_path is not None or saved is not None

    if args.format == "json":  # the whole result, as 'results show' prints it
        from .. import schemas

        schemas.write("result", result=result)
        return 0
    emit(ladder_rows(result.ladder, result.confirmation), args.format, LADDER_COLUMNS, notes="note")
    if args.format in ("table", "markdown"):
        print()
        for line in summary_lines(result, saved, out_path):
            say_out(line)
    return 0


def _rank_lost_exit(message: str) -> None:
    """The rank watch's last resort, from its thread, when the main thread is stuck waiting for a rank
    that died (lightning_module/run/ranks.py): the same line and status as a RankLost."""
    print(f"advisor: error: probe failed, nothing stored: multi-rank run failed: {message}", file=sys.stderr, flush=True)
    os._exit(1)


def _mb(n: float) -> str:
    if n < 2**20:
        return f"{n / 2**10:,.1f} KiB"
    return f"{n / 2**20:,.1f} MiB" if n < 2**30 else f"{n / 2**30:,.2f} GiB"


def shape_lines(r) -> list[str]:
    """The workload's shape as the probe recorded it (ProbeResult.shape; none in a schema 1 result)."""
    s = r.shape
    if s is None:
        return []
    source = {"datamodule": "its DataModule", "module": "its own train_dataloader()", "synthetic": "synthetic images"}
    parts = []
    if s.parameters is not None:
        parts.append(f"{s.parameters:,} parameters ({_mb(s.parameter_bytes)})")
    if s.optimizer_state_bytes is not None:
        parts.append(f"optimizer state {_mb(s.optimizer_state_bytes)}")
    parts.append(f"data from {source[s.data_source]}")
    parts.append("batch tunable" if s.batch_tunable else "batch not tunable" + (f" ({s.batch_note})" if s.batch_note else ""))
    if s.samples_counted_by == "hook":
        parts.append("samples counted by samples_in_batch()")
    lines = [f"workload: {'; '.join(parts)}"]
    if (m := s.memory) is not None:
        at = ", ".join(f"{p.batch_size}: {p.peak_gib:.3g}" for p in m.points)
        what = "GPU allocated" if m.where == "accelerator" else "process RSS"
        fit = (f"{m.fixed_gib:.3g} GiB + {m.per_sample_gib * 1024:.3g} MiB/sample" if m.fixed_gib is not None
               else "no fit")
        lines.append(f"memory fit{' (derived)' if m.derived else ''}: {fit} ({what}; GiB at batch {at})"
                     + (f"; {m.note}" if m.note else ""))
    if s.memory_traffic_bytes_per_sample and r.flops_per_sample:
        lines.append(f"intensity: {r.flops_per_sample / s.memory_traffic_bytes_per_sample:.3g} FLOP/byte "
                     f"({_mb(s.memory_traffic_bytes_per_sample)} of op-level memory traffic per sample, unfused)"
                     + (f"; {s.memory_traffic_note}" if s.memory_traffic_note else ""))
    if s.ops_per_step:
        lines.append(f"ops: {s.ops_per_step:,} a step (training_step + backward, dispatched one by one: on a GPU "
                     "the host's floor for a small model)")
    if r.pipeline_samples_per_sec_per_worker:
        lines.append(f"data pipeline: {r.pipeline_samples_per_sec_per_worker:,.0f} samples/s per worker "
                     "(the loader alone, no model)")
    return lines


def describe(config) -> str:
    parts = [config.accelerator + (f" x{config.devices}" if config.devices > 1 else ""), config.precision]
    if config.channels_last:
        parts.append("channels_last")
    if config.compile:
        parts.append("compiled" + (f" ({config.compile_backend})" if config.compile_backend != "inductor" else ""))
    parts.append(f"batch {config.batch_size}")
    parts.append(f"{config.num_workers} workers" + (" +pin_memory" if config.pin_memory else ""))
    if config.run_cpu:
        parts.append("run_cpu (" + ", ".join([config.allocator or "default allocator",
                                              "Intel OpenMP" if config.openmp == "intel" else "default OpenMP",
                                              "pinned cores"]) + ")")
    if config.ipex:
        parts.append("ipex")
    if config.xla:
        parts.append("torch_xla")
    return ", ".join(parts)


def gpu_and_cpu_line(g) -> str:
    """`--cpu-too`'s record: each rank alone, both together, the split and the verdict."""
    alone = " + ".join(f"{r.device} {r.samples_per_sec_alone:,.1f}" for r in g.ranks)
    split = ", ".join(f"{r.device} {r.batch_size}" + (f" in {r.precision}" if r.precision else "") for r in g.ranks)
    first = g.ranks[0]
    if g.kept:
        verdict = f"kept: beats the {first.device} alone beyond the noise"
    elif g.samples_per_sec_ci[1] < first.samples_per_sec_alone:  # even its CI's top end loses
        verdict = f"not kept: {-g.gain:.1%} slower than the {first.device} alone"
    else:
        verdict = "not kept: no gain beyond the noise"
    return (f"alone {alone}; together {g.samples_per_sec:,.1f} samples/s (95% CI {ci_range(*g.samples_per_sec_ci)}, "
            f"{g.gain:+.1%}), efficiency {g.efficiency:.0%}, batch {split}, {g.rounds} round(s); {verdict}"
            + (f"; {g.note}" if g.note else ""))


def confirmation_line(c) -> str:
    verdict = "held: the tuned configuration is kept" if c.held else "did not hold: the baseline is kept"
    return (f"{c.speedup:.2f}x baseline (95% CI {ci_range(*c.speedup_ci)}) over {c.rounds} "
            f"A-B rounds; {verdict}" + (f"; {moved_line(c)}" if baseline_moved(c.baseline_shift)
                                         else "; contended" if c.contended else ""))


def contention_line(c) -> str:
    parts = [f"{c.contended_steps} of {c.steps} steps contended"]
    if c.wait_share is not None:
        parts.append(f"run-queue wait {c.wait_share:.0%}")
    if c.steal_share is not None:
        parts.append(f"steal {c.steal_share:.0%}")
    if c.others_share is not None:
        parts.append(f"other processes {c.others_share:.0%} of its CPUs")
    if c.cpu_share is not None:
        parts.append(f"CPU share {c.cpu_share:.0%} of {c.cores_in_use} core(s)")
    if c.load_average is not None:
        parts.append(f"load {c.load_average:.1f} on {c.cpus} CPU(s)")
    if c.gpu_other_processes:
        parts.append(f"{c.gpu_other_processes} other GPU process(es)")
    if c.gpu_clock_ratio is not None:
        parts.append(f"GPU clock {c.gpu_clock_ratio:.0%} of max")
    return ", ".join(parts)


def reliability_line(r) -> str:
    if not r.reliable:
        return "no: " + "; ".join(r.unreliable_reasons)
    if r.contention is None and r.confirmation is None:
        return "not judged (the probe that wrote this result did not record contention)"
    return "yes"


def ci_range(low: float, high: float) -> str:
    """A 95% CI as 'low-high'; an unbounded upper end (one or two timed steps) says so."""
    from lightning_module.contract.ladder import CI_UNBOUNDED

    return f"{low:.2f}-{high:.2f}" if high < CI_UNBOUNDED else f"{low:.2f}-unbounded"


def summary_lines(result, saved, out_path) -> list[str]:
    r = result
    x = speedup_over_baseline(r)  # the confirmed figure, as 'results list' stores it
    c = r.confirmation
    said = ("" if x is None and (c is None or not baseline_moved(c.baseline_shift))
            else ", no speed-up stated: the baseline moved (contended)" if x is None
            else f", {x:.2f}x baseline" + (" (confirmed)" if c is not None and c.held else
                                             " (the baseline is kept)" if c is not None else ""))
    lines = [
        (f"{'best' if c is None or c.held else 'kept'}: {r.samples_per_sec:.2f} samples/s "
         f"(95% CI {ci_range(*r.samples_per_sec_ci)}, {r.step_time.n_steps} steps, {r.stop_reason}){said}"),
        f"config: {describe(r.config)}",
    ]
    if r.confirmation is not None:
        lines.append(f"confirmed: {confirmation_line(r.confirmation)}")
    lines.append(f"reliable: {reliability_line(r)}")
    if r.contention is not None:
        lines.append(f"contention: {contention_line(r.contention)}")
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
    lines.extend(shape_lines(r))
    where = r.instance_type or "unknown instance type"
    lines.append(f"machine: {where}; {r.hardware.cpu_model or 'unknown CPU'}"
                 + (f"; {len(r.hardware.gpus)}x {r.hardware.gpus[0].name}" if r.hardware.gpus else ""))
    if (g := r.gpu_and_cpu) is not None:
        lines.append(f"cpu too: {gpu_and_cpu_line(g)}")
    if r.profile_trace:
        lines.append(f"profile: {r.profile_trace} (open in https://ui.perfetto.dev or chrome://tracing)")
    elif r.profile_dir:
        lines.append(f"profile: {r.profile_dir} (tensorboard --logdir {r.profile_dir})")
    if saved:
        lines.append(f"saved: result {r.result_id[:12]} in {saved}")
    if out_path:
        lines.append(f"wrote: {out_path}")
    return lines
