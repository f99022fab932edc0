"""`advisor probe`: measure (and tune) a training workload on this machine's accelerator."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import get_args

from lightning_module.contract import options as defaults
from lightning_module.contract.ladder import EXTENSION_RUNGS, TUNING_RUNGS
from lightning_module.contract.result import BUILTIN_MODELS, AcceleratorName, Precision, WorkloadSpec
from lightning_module.contract.settle import MAX_WARMUP_FACTOR
from lightning_module.contract.workload_source import WorkloadSourceError, check_source
from safeio import check_name, first_error, save_atomic

from .. import options as opt
from ..errors import AdvisorError
from ..output import add_format_option, emit
from ..output import say as say_out  # the local say() is the progress line on stderr
from ..render.probe import LADDER_COLUMNS, ladder_rows, leg_line, rung_line, summary_lines
from .common import (
    add_list_option,
    add_store_option,
    add_user_workload_options,
    open_store,
    read_store,
    store_path,
    user_workload,
)

ACCELERATORS = ("auto", *get_args(AcceleratorName))  # auto: Lightning picks
PRECISIONS = get_args(Precision)
SKIPPABLE = (*TUNING_RUNGS, *EXTENSION_RUNGS)
_WORKLOAD = WorkloadSpec()  # the workload defaults live on the contract


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
    w.add_argument("--depth-arg", metavar="NAME",
                   help="for a model too big for this machine: the constructor argument that sets its depth "
                        "(e.g. n_layer); with --depths, shallower copies are timed in rounds and extrapolated")
    w.add_argument("--depths", type=_depths, metavar="A,B[,C...]",
                   help="two or more shallower depths measured with --depth-arg (e.g. 1,2,3: three check the line); "
                        "the full depth is the workload's own --depth-arg value")
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
                   help=f"the warm-up runs until the step times settle, at most {MAX_WARMUP_FACTOR}x this many steps "
                   f"(default {defaults.WARMUP_STEPS}; compilation adds one)")
    m.add_argument("--max-steps", type=opt.whole(1, 10**7), metavar="N", help="timed steps per rung at most")
    m.add_argument("--compile-timeout", type=_positive_float, default=defaults.COMPILE_TIMEOUT, metavar="S",
                   help=f"give up on torch.compile after this long (default {defaults.COMPILE_TIMEOUT:g})")
    m.add_argument("--race", action=argparse.BooleanOptionalAction, default=defaults.RACE,
                   help="stop timing a rung as soon as it has clearly won or lost against the best so far, "
                   "at a stated 5%% false-stop rate (default); --no-race times every rung to --target-ci or --max-seconds")
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


def _depths(text: str) -> tuple[int, int]:
    from lightning_module.contract.extrapolate import DepthError, parse_depths

    try:
        return parse_depths(text)
    except DepthError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix(f"--depths {text!r}: ")) from None


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


def _past_probes(args) -> tuple:
    """The store's earlier probes, whose ladders order this one's rungs (contract/order.py); none
    where there is no store yet (this probe creates it)."""
    path = store_path(args)
    if not path.is_file():
        return ()
    try:
        with read_store(args) as store:
            return tuple(r for r in store.results() if r.source == "probe")
    except AdvisorError as e:  # only the order is at stake here: the seeds' order, said so
        print(f"advisor: warning: {e}; the rungs are climbed in the seeds' order", file=sys.stderr)
        return ()


def _probe(args, stop: SignalStop) -> int:
    require_probe_extra()
    spec, own_batch = _spec(args)
    try:  # what the user's source shows is wrong, said before torch is imported (seconds)
        check_source(spec)
    except WorkloadSourceError as e:
        raise AdvisorError(str(e)) from None
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
    from lightning_module.run.workloads import WorkloadError, with_defaults

    measure.quiet_lightning(verbose=getattr(args, "verbose", 0) > 0)
    if cpu_too.is_extra_rank():
        cpu_too.train_along()  # the CPU rank Lightning started: rank 0 probes and reports
        return 0
    try:
        spec = with_defaults(spec)  # the constructors' defaults, recorded: the id is of the arguments as built
    except WorkloadError as e:
        raise AdvisorError(str(e)) from None
    opts = defaults.ProbeOptions(
        spec=spec, accelerator=args.accelerator, devices=args.devices, strategy=args.strategy,
        precision=args.precision, tune=args.tune, target_ci=args.target_ci, max_seconds=args.max_seconds,
        warmup_steps=args.warmup_steps, max_steps=args.max_steps, compile_timeout=args.compile_timeout,
        instance_type=args.instance_type, profile_dir=args.profile, skip=frozenset(args.skip),
        progress=sys.stderr.isatty(), remeasure_rounds=args.remeasure, confirm_rounds=args.confirm_rounds,
        own_batch_size=own_batch, rank_timeout=args.rank_timeout, cpu_too=args.cpu_too, race=args.race,
        depth_arg=args.depth_arg, depths=args.depths, past=_past_probes(args),
    )
    if (args.depth_arg is None) != (args.depths is None):
        raise AdvisorError("--depth-arg and --depths come together: the argument that sets the depth and the two "
                           "depths to measure")
    if args.depth_arg is not None and not args.depth_arg.isidentifier():
        raise AdvisorError(f"--depth-arg {args.depth_arg!r} is not a Python identifier")
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
        result = probe.run_probe(opts, on_rung=lambda r, base: say(rung_line(r, base)),
                                 on_leg=lambda name, m: say(leg_line(name, m)), checked=checked)
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


















