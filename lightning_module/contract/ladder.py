"""The optimisation ladder: the articles' manual tuning made automatic.

Pure logic, no torch: each rung proposes a configuration, a `measure` function (the seam that
tests replace) trains it and reports throughput, and the rung is kept only if it beats the best
so far by more than the noise of its own measurement: the lower end of its 95% CI must be above
the best's samples/s. A gain inside the noise would otherwise adopt a change (torch.compile's
minutes of compilation, more workers) for nothing and report the luckiest draw as the winner.
A failure (out of memory, a compile error or timeout, a missing extension) is recorded
as the rung's result and the ladder goes on.

After the tuning rungs come the extensions (ipex, run_cpu, zentorch, xla): each is detected at
run time by the caller and arrives here as an `Extension`, either to try or with the status
(`not-installed`, `not-applicable`, `skipped`) and reason it is recorded with.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .order import ORDERABLE
from .result import Contention, ProbeConfig, RungResult
from .threads import THREADS_GAIN, climb_threads, is_threads_rung, margin_note, thread_counts

log = logging.getLogger(__name__)

BATCH_GAIN = 0.03  # a batch size step must beat the best by more than this to count
# A rung lost at one batch size can win at another: bf16 and torch.compile lose at a small batch
# whose steps are bound by kernel launches and win once the batch fills the device (seen on an
# H100: a transformer's bf16 lost 0.79x at batch 16, its tuned batch was 128), and a 2x move is
# enough (seen on an AVX2 CPU, issue 32: ResNet-50's channels_last lost 0.97x at batch 32 and won
# at 128, and a raced ladder that settled on 64 never tried it again). When the batch search
# moves the batch by this factor or more, the rungs that lost or tied are measured again there.
REVISIT_BATCH_FACTOR = 2
# The batch search walks on past a step that neither wins nor loses by the batch gain (a flat
# stretch of the curve can precede a better one: issue 32) and stops after this many such steps
# in a row: a curve that stays flat gains nothing from a larger batch but its memory.
FLAT_STEPS = 2

# The rungs after the baseline in the order the ladder climbs them, each with what it tries in words:
# the one list of them (`advisor probe --skip` takes the names and its help lists the words; the
# probe plan counts them). A new rung is named here, climbed in run_ladder (a tuning rung) or
# detected in run/extensions.py (an extension), and set on ProbeConfig (and acted on in run/).
TUNING_RUNGS = {"threads": "intra-op threads", "precision": "bf16", "channels_last": "channels_last", "compile": "torch.compile",
                "workers": "loader workers", "batch": "batch size"}
EXTENSION_RUNGS = {"run_cpu": "run_cpu", "ipex": "ipex", "zentorch": "zentorch", "xla": "xla"}


def worker_counts(cpus: int) -> tuple[int, ...]:
    """The loader worker counts the workers rung tries on this many CPUs: 2, 4, 8, ... up to them."""
    out, n = [], 2
    while n <= cpus:
        out.append(n)
        n *= 2
    return tuple(out)


def measured_rungs(vcpus: int, cpu: bool = False) -> int:
    """How many rungs a full climb measures on a machine with `vcpus` CPUs when every tuning rung
    applies, the extensions aside (they run only where installed): the baseline, one per tuning
    rung, but one per worker count, two for the batch search's first step (double, half) and, on
    a CPU (`cpu`), one per thread count below the CPUs' (threads.thread_counts; none on a GPU)."""
    per_rung = {"threads": len(thread_counts(vcpus)) - 1 if cpu else 0, "workers": len(worker_counts(vcpus)),
                "batch": 2}
    return 1 + sum(per_rung.get(name, 1) for name in TUNING_RUNGS)


class RungSkipped(Exception):
    """The rung does not apply here (the message says why)."""


class NotInstalled(Exception):
    """The rung needs a package that is not installed or does not match torch."""


class CompileTimeout(Exception):
    """torch.compile ran past --compile-timeout."""


class RungTooSlow(Exception):
    """A step took so long that the rung cannot beat the best so far: cut short."""


class RungContended(Exception):
    """A step ran far past its limit while the machine was busy with other work: no verdict."""


class RungError(Exception):
    """A rung's outcome with its status already known (a child process reports it this way)."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status


class ProbeStopped(BaseException):
    """A signal (SIGINT, SIGTERM) asked the probe to stop: nothing is recorded, nothing stored."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class RankLost(Exception):
    """A rank of a multi-rank run died or stopped answering: the ranks are out of step, so the
    probe ends (nothing stored) instead of going on to the next rung."""


class LadderFailed(Exception):
    """The baseline could not be measured, so there is nothing to tune."""

    def __init__(self, rung: RungResult):
        super().__init__(f"baseline {rung.status}: {rung.error}")
        self.rung = rung


# An unbounded CI (one timed step) is inf, which a result cannot hold (every float in it is
# finite): a finite stand-in far above any throughput keeps the record valid.
CI_UNBOUNDED = 1e18


@dataclass
class RungMeasurement:
    samples_per_sec: float
    ci_low: float
    ci_high: float
    steps_timed: int
    compile_seconds: float | None = None
    peak_memory_gib: float | None = None
    extra: Any = None  # whatever the measuring side wants back for the winner (step stats, reason)
    contention: Contention | None = None
    remeasured: int = 0
    ci_target_met: bool | None = None
    samples_per_step: float | None = None  # counted from the batches (all ranks); None: the configuration's
    model_facts: dict | None = None  # parameters and optimizer state of the trained model (measure.model_facts)
    stop_reason: str | None = None  # why timing stopped (timing.stop_reason: "converged", "won", ...)
    runtime_overhead: dict | None = None  # the runtime's own memory (result.RuntimeOverhead's fields)
    rank_peaks: list[float] | None = None  # each rank's peak memory, GiB, rank 0 first; None: one rank

    def __post_init__(self) -> None:
        self.ci_high = min(self.ci_high, CI_UNBOUNDED)


# The CPU allocator says "DefaultCPUAllocator: can't allocate memory: ... (Cannot allocate memory)".
_OOM_WORDS = ("out of memory", "can't allocate memory", "cannot allocate memory")


def is_oom(exc: BaseException) -> bool:
    """torch.OutOfMemoryError (CUDA, MPS, XPU), the CPU allocator's RuntimeError, or the older
    RuntimeError('... out of memory ...')."""
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    msg = str(exc).lower()
    return isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError) and any(w in msg for w in _OOM_WORDS))


def _chain(exc: BaseException):
    """The exception and what it wraps: torch.compile re-raises errors from inside as InductorError /
    BackendCompilerFailed, so our own timeout can arrive several layers down."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__


def classify(exc: BaseException) -> tuple[str, str]:
    """A rung's status and a one-line reason from the exception it raised."""
    known = (NotInstalled, RungSkipped, CompileTimeout, RungTooSlow, RungContended, RungError)
    for inner in _chain(exc):
        if isinstance(inner, known) or is_oom(inner):
            exc = inner
            break
    msg = (str(exc).strip().splitlines() or [""])[0][:300]
    if isinstance(exc, RungError):
        return exc.status, msg
    if isinstance(exc, RungContended):
        return "contended", msg
    if isinstance(exc, NotInstalled):
        return "not-installed", msg
    if isinstance(exc, RungSkipped):
        return "skipped", msg
    if isinstance(exc, (CompileTimeout, RungTooSlow)):
        return "timeout", msg
    if is_oom(exc):
        return "oom", msg or "out of memory"
    return "failed", f"{type(exc).__name__}: {msg}"


@dataclass(frozen=True)
class Extension:
    """A rung that changes the software stack: tried with `update`, or recorded with `status`."""

    name: str
    update: dict = field(default_factory=dict)
    status: str | None = None  # None: try it; else "not-installed" | "not-applicable" | "skipped"
    why: str | None = None
    note: str | None = None  # recorded with the rung when it is tried


@dataclass
class LadderOptions:
    tune: bool = True
    batch_fixed: bool = False
    half_precision: str | None = "bf16-mixed"  # None where the device has no half precision
    vision: bool = True  # channels_last applies
    worker_counts: tuple[int, ...] = (2, 4)
    workers_supported: bool = True
    workers_note: str | None = None  # why the loader's workers cannot be changed (with workers_supported False)
    batch_note: str | None = None  # why the batch size cannot be changed (the batch rung is then "not tunable")
    pin_memory: bool = False  # set pin_memory with workers (GPU)
    extensions: tuple[Extension, ...] = ()
    skip: frozenset[str] = frozenset()
    batch_gain: float = BATCH_GAIN
    max_batch: int = 1 << 16
    # The longest a step of a batch rung may take for the walk to go on upwards: past it a larger
    # batch's rung could not time the steps its CI needs in its seconds (and a contended machine's
    # noise could walk the batch on for minutes a step). None: no bound.
    step_budget_s: float | None = None
    # CPU, one rank: the intra-op thread counts to try, from the baseline rung (its contention says
    # which cores are free: threads.free_cores). None: no threads rung (a GPU, several ranks).
    thread_counts: Callable[[RungResult], tuple[int, ...]] | None = None
    # The CPUs other processes leave free, from the baseline's contention (threads.free_cpus): a
    # loader worker is a process that needs a CPU of its own, so the workers rung tries no more
    # workers than that (beside a busy process on 2 CPUs, two workers and the training thread
    # would share the one CPU left). None: every count in worker_counts.
    free_cpus: Callable[[RungResult], int] | None = None
    # The order of the on/off rungs (order.ORDERABLE's kinds, each once): order.py reads it from past probes.
    order: tuple[str, ...] = ORDERABLE
    # The rungs are raced (run/probe.py): a rung lost by more than the batch curve moved is not
    # measured again at the batch the search settled on (_revisit, beyond_reversal).
    raced: bool = False


@dataclass
class Ladder:
    rungs: list[RungResult] = field(default_factory=list)
    best: RungResult | None = None
    best_measurement: RungMeasurement | None = None


Measure = Callable[[str, ProbeConfig], RungMeasurement]


def required_gain(rung: str, opts: LadderOptions) -> float:
    """The fraction by which a rung must beat the best so far to be kept: a batch step's
    batch_gain, a thread count's THREADS_GAIN (threads.py), nothing more for the others. The one
    home of it: the ladder keeps by it and the probe races a rung against it (race.py)."""
    if is_threads_rung(rung):
        return THREADS_GAIN
    return opts.batch_gain if rung.startswith("batch=") else 0.0


def race_lines(rung: str, best: float, opts: LadderOptions) -> tuple[float, float | None]:
    """The (threshold, floor) a rung races on against `best` samples/s (race.Race): the best by
    its required gain and, for a batch step, the best itself (below it the step is known slower
    and the search stops; inside the margin either side it is tied: batch_step's three answers)."""
    gain = required_gain(rung, opts)
    return best * (1 + gain), (best if gain > 0 else None)


def batch_step(sps: float, ci_low: float, ci_high: float, best: float, gain: float) -> str:
    """A measurement against the best so far: "won" (faster by `gain`, its CI's low end above the
    best: the ladder's keep rule; a CI from one step, ci_low 0, leaves the point estimate to
    decide), "lost" (slower by `gain`, or its CI's high end below the best: known slower) or
    "flat" (neither: inside the noise, or inside the margin)."""
    beyond_noise = ci_low <= 0 or ci_low > best
    if sps > best * (1 + gain) and beyond_noise:
        return "won"
    if sps < best * (1 - gain) or ci_high < best:
        return "lost"
    return "flat"


# A raced rung's verdict (race.RACED) as batch_step's: its race judged it on its lines.
_RACE_STEP = {"won": "won", "lost": "lost", "tied": "flat"}


def step_verdict(sps: float, ci_low: float, ci_high: float, best: float, gain: float,
                 stop_reason: str | None = None) -> str:
    """batch_step's answer, or the race's where the race stopped the rung: its verdict stands. A
    race that knows the step noise of the rungs before (race.Race.prior) decides after a step or
    two, where the rung's own 95% CI (one degree of freedom: 12.7 standard errors) still
    straddles the best; judged on that CI, a rung the race saw win by 24% was dropped."""
    if stop_reason in _RACE_STEP:
        return _RACE_STEP[stop_reason]
    return batch_step(sps, ci_low, ci_high, best, gain)


def run_ladder(
    start: ProbeConfig,
    measure: Measure,
    opts: LadderOptions,
    on_rung: Callable[[RungResult, RungResult | None], None] | None = None,
) -> Ladder:
    lad = Ladder()

    def record(rung: RungResult) -> RungResult:
        lad.rungs.append(rung)
        if on_rung:
            on_rung(rung, lad.rungs[0])  # the baseline (for the baseline itself, too)
        return rung

    def attempt(name: str, config: ProbeConfig, note: str | None = None) -> RungResult:
        gain = required_gain(name, opts)
        try:
            m = measure(name, config)
        except (KeyboardInterrupt, SystemExit, ProbeStopped, RankLost):
            raise
        except BaseException as e:  # every failure is a result; torch errors are not all Exceptions
            status, why = classify(e)
            log.debug("rung %s: %s", name, why, exc_info=True)
            return record(RungResult(rung=name, config=config, status=status, error=why, note=note))
        best_sps = lad.best.samples_per_sec if lad.best else 0.0
        step = step_verdict(m.samples_per_sec, m.ci_low, m.ci_high, best_sps, gain, m.stop_reason) if lad.best else "won"
        # A flat batch step (inside the noise or inside the margin) does not replace the batch
        # before it, however it reads: on a flat curve the batch the search started from stays, so
        # two ladders (full and raced) reading the same flat curve pick the same batch (issue 32:
        # batch 8-32 within a few per cent, picked by where the noise fell). The walk goes on past it.
        kept = step == "won"
        if name.startswith("batch=") and step == "flat":
            why = (f"flat: within the {gain:.0%} batch margin or the noise of {best_sps:,.1f} samples/s; the batch "
                   "before it stays")
            note = f"{note}; {why}" if note else why
        elif step == "flat" and is_threads_rung(name):
            note = f"{note}; {margin_note(lad.best)}" if note else margin_note(lad.best)
        rung = RungResult(
            rung=name, config=config, status="ok", samples_per_sec=m.samples_per_sec,
            ci_low=m.ci_low, ci_high=m.ci_high, steps_timed=m.steps_timed,
            compile_seconds=m.compile_seconds, kept=kept, peak_memory_gib=m.peak_memory_gib,
            contention=m.contention, remeasured=m.remeasured, ci_target_met=m.ci_target_met, note=note,
            stop_reason=m.stop_reason,
        )
        if kept:
            lad.best, lad.best_measurement = rung, m
        return record(rung)

    # rung name -> the ProbeConfig fields it changed, for the revisit (_revisit)
    kinds: dict[str, tuple[str, ...]] = {}

    def skip(name: str, why: str, status: str = "skipped") -> None:
        record(RungResult(rung=name, config=lad.best.config, status=status, error=why))

    base = attempt("baseline", start)
    if base.status != "ok":
        raise LadderFailed(base)
    if not opts.tune:
        return lad

    def skipped_by_user(kind: str, name: str) -> bool:
        if kind in opts.skip:
            skip(name, f"--skip {kind}")
            return True
        return False

    # Intra-op threads first (Article C; issue 33): every later rung is measured at the count the
    # machine can give, instead of beside a descheduled thread that makes each op wait.
    if opts.thread_counts is not None and base.config.threads and not skipped_by_user("threads", "threads"):
        climb_threads(lambda: lad.best, attempt, opts.thread_counts(base), base.config.threads)

    def precision() -> None:
        # Mixed precision (article A: +86% on a bf16 CPU; article B: AMP fp16 on a V100).
        name = "fp16" if opts.half_precision == "16-mixed" else "bf16"
        if not skipped_by_user("precision", name):
            if lad.best.config.precision != "32-true":
                skip(name, f"precision fixed at {lad.best.config.precision}")
            elif opts.half_precision is None:
                skip(name, "no half precision on this device")
            else:
                kinds[name] = ("precision",)
                attempt(name, lad.best.config.model_copy(update={"precision": opts.half_precision}))

    def channels_last() -> None:
        if not skipped_by_user("channels_last", "channels_last"):
            if not opts.vision:
                skip("channels_last", "not a convolutional image model")
            else:
                kinds["channels_last"] = ("channels_last",)
                attempt("channels_last", lad.best.config.model_copy(update={"channels_last": True}))

    def compile_() -> None:
        if not skipped_by_user("compile", "compile"):
            kinds["compile"] = ("compile",)
            attempt("compile", lad.best.config.model_copy(update={"compile": True}))

    def workers() -> None:
        # Loader workers (article B: the data-loading bottleneck); stop climbing once more stops helping.
        if not skipped_by_user("workers", "workers"):
            if not opts.workers_supported:
                skip("workers", opts.workers_note or "the DataModule does not take num_workers")
                return
            free = opts.free_cpus(base) if opts.free_cpus is not None else None
            counts = [n for n in opts.worker_counts if free is None or n <= free]
            if opts.worker_counts and not counts:
                skip("workers", f"{free} CPU(s) free of other processes' load while the baseline ran: no room for "
                                f"{opts.worker_counts[0]} loader workers beside the training")
            for n in counts:
                if n == lad.best.config.num_workers:
                    continue
                update = {"num_workers": n, "pin_memory": opts.pin_memory}
                kinds[f"workers={n}"] = tuple(update)  # a larger batch leaves loading a larger share of a step
                r = attempt(f"workers={n}", lad.best.config.model_copy(update=update))
                if not r.kept:
                    break

    # The on/off rungs in the order asked (contract/order.py: by expected gain per second).
    climb = {"precision": precision, "channels_last": channels_last, "compile": compile_, "workers": workers}
    if sorted(opts.order) != sorted(climb):
        raise ValueError(f"rung order {opts.order}: each of {', '.join(climb)} once")
    for kind in opts.order:
        climb[kind]()

    if not skipped_by_user("batch", "batch") and not opts.batch_fixed:
        if opts.batch_note:
            skip("batch", f"not tunable: {opts.batch_note}", status="not-applicable")
        else:
            decided_at = lad.best
            _batch_search(lad, attempt, opts)
            _revisit(lad, attempt, kinds, decided_at, opts)

    for ext in opts.extensions:
        if skipped_by_user(ext.name, ext.name):
            continue
        if ext.status is not None:
            skip(ext.name, ext.why or ext.status, status=ext.status)
        else:
            attempt(ext.name, lad.best.config.model_copy(update=ext.update), note=ext.note)
    return lad


def curve_spread(lad: Ladder, before: RungResult, bs: int) -> float:
    """How far the batch curve moved between the batch the rungs were decided at and `bs`: the
    largest over the smallest samples/s the ladder measured for the best configuration at the
    batches between them, both ends included (>= 1)."""
    lo, hi = sorted((before.config.batch_size, bs))
    same = before.config.model_dump(exclude={"batch_size"})
    pts = [r.samples_per_sec for r in (before, *lad.rungs) if r.status == "ok" and r.samples_per_sec
           and lo <= r.config.batch_size <= hi and r.config.model_dump(exclude={"batch_size"}) == same]
    return max(pts) / min(pts) if pts else 1.0


def beyond_reversal(r: RungResult, best_then: float, spread: float, gain: float, batch_gain: float) -> float | None:
    """The factor a raced rung lost by, when the batch move cannot reverse it, else None. Its loss
    is known (its race or its CI decided it, at the race's error rate); its size is its point
    estimate's, `best_then` x (1 + gain) over its samples/s: to win at the new batch, the change
    must gain that much more there, relative to the best, than it did at the old one. Taken as
    the bound: a change's effect moves with the batch by no more than the batch curve itself moved
    (`spread`, which carries the noise of the readings it is drawn from), with batch_gain on top
    for a clear margin. ResNet-50 on a 2-core AVX2 EPYC (issue 32): torch.compile lost ~11% at
    batch 32 and at 8 alike, the curve from 8 to 32 within 4%; a rung that lost 4% at 32 where
    the curve rose 1.5x to 64 is still measured again."""
    if not r.samples_per_sec or not best_then:
        return None
    needed = best_then * (1 + gain) / r.samples_per_sec
    return needed if needed > spread * (1 + batch_gain) else None


def _revisit(lad: Ladder, attempt, kinds: dict[str, tuple[str, ...]], before: RungResult, opts: LadderOptions) -> None:
    """Measure again, at the batch the search settled on, the rungs that lost or tied at the batch
    they were decided at (`before`: the best then), when the two batches are REVISIT_BATCH_FACTOR
    or more apart; raced, not a rung lost by more than the batch move could reverse (its note says so)."""
    bs, decided_at = lad.best.config.batch_size, before.config.batch_size
    if max(bs, decided_at) < REVISIT_BATCH_FACTOR * min(bs, decided_at):
        return
    spread = curve_spread(lad, before, bs)
    lost = [(i, r) for i, r in enumerate(lad.rungs) if r.rung in kinds and r.status == "ok" and not r.kept]
    for i, r in lost:
        cfg = lad.best.config.model_copy(update={f: getattr(r.config, f) for f in kinds[r.rung]})
        if cfg == lad.best.config:
            continue
        best_then = next((x.samples_per_sec for x in reversed(lad.rungs[:i]) if x.kept), None)
        by = (beyond_reversal(r, best_then, spread, required_gain(r.rung, opts), opts.batch_gain)
              if opts.raced and best_then else None)
        if by is not None:
            why = (f"not measured again at batch {bs}: it lost by {by:.2f}x, beyond the {spread:.2f}x the batch "
                   f"curve moved from {decided_at} to {bs}")
            lad.rungs[i] = r.model_copy(update={"note": f"{r.note}; {why}" if r.note else why})
            continue
        attempt(f"{r.rung}@batch={bs}", cfg, note=f"lost at batch {decided_at}; measured again at batch {bs}")


def _over_budget(r: RungResult, opts: LadderOptions) -> bool:
    """A batch rung's step (its batch over its samples/s: a lower bound with several ranks) took
    longer than opts.step_budget_s: the walk goes no higher."""
    if opts.step_budget_s is None or r.status != "ok" or not r.samples_per_sec > 0:
        return False
    return r.config.batch_size / r.samples_per_sec > opts.step_budget_s


def _batch_search(lad: Ladder, attempt, opts: LadderOptions) -> None:
    """Double and half the batch, then walk on in the direction whose step did not lose (double
    first where both did not): a step that wins moves the best, a flat one (batch_step) leaves it
    (the flat-curve rule: a batch that gains less than the margin does not replace the one before),
    and the walk stops at a step that loses, fails, or after FLAT_STEPS flat steps in a row;
    upwards, also at a step longer than opts.step_budget_s."""
    start = lad.best.config.batch_size
    tried: dict[int, tuple[RungResult, str]] = {}

    def try_size(bs: int) -> tuple[RungResult, str] | None:
        if bs < 1 or bs > opts.max_batch or bs in tried:
            return None
        best = lad.best.samples_per_sec
        r = attempt(f"batch={bs}", lad.best.config.model_copy(update={"batch_size": bs}))
        verdict = (step_verdict(r.samples_per_sec, r.ci_low or 0.0, r.ci_high or 0.0, best, opts.batch_gain,
                                r.stop_reason) if r.status == "ok" else "failed")
        tried[bs] = (r, verdict)
        return tried[bs]

    first = {2: try_size(start * 2), 0.5: try_size(start // 2)}
    moved = lad.best.config.batch_size
    if moved != start:
        step = 2 if moved > start else 0.5
    else:
        open_ = [f for f, t in first.items() if t is not None and t[1] == "flat"]
        if not open_:
            return
        step = open_[0]
    at, flat = int(start * step), int(first[step][1] == "flat")
    if step > 1 and _over_budget(first[step][0], opts):
        return
    while True:
        t = try_size(int(at * step))
        if t is None or t[1] in ("lost", "failed") or (step > 1 and _over_budget(t[0], opts)):
            return
        flat = flat + 1 if t[1] == "flat" else 0
        if flat >= FLAT_STEPS:
            return
        at = t[0].config.batch_size
