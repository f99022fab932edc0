"""What a probe is asked to do, and its defaults: the one home of every probe default.

Torch-free on purpose: `advisor probe`'s argument parser reads these defaults when the CLI is
built, and importing the CLI must not import torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .result import WorkloadSpec

ACCELERATOR = "auto"
PRECISION = "32-true"
TARGET_CI = 0.03  # stop timing a rung when the 95% CI half-width of samples/s is within this
MAX_SECONDS = 60.0  # timed seconds per rung at most
WARMUP_STEPS = 3  # untimed steps at the start of every rung (compilation adds one)
COMPILE_TIMEOUT = 300.0  # seconds torch.compile may take before the rung is given up
MATMUL_SECONDS = 1.0  # how long the matmul peak is measured
REMEASURE_ROUNDS = 1  # extra measurements of a rung whose CI is still wider than the target
# How long a rank of a multi-rank run waits for the others at a collective before the probe ends:
# above the longest honest step (a first step that compiles, up to COMPILE_TIMEOUT) with a margin.
RANK_TIMEOUT = 600.0
# Race each rung against the best so far (contract/race.py): it stops once its answer is known
# at the stated error rate. --no-race times every rung to the CI target or --max-seconds.
RACE = True
# Rounds in which the shallow copies of a model too big to measure whole are timed, every depth once a
# round back to back (run/shallow.py): the rounds' spread is the extrapolation's band, with the t of
# rounds - 1 degrees of freedom (4: 3.18; 2 would give 12.7). Each copy is timed max_seconds / rounds a round.
DEPTH_ROUNDS = 4
CONFIRM_ROUNDS = 3  # A B pairs measured to confirm the winner against the baseline (0: no confirmation)


@dataclass
class ProbeOptions:
    spec: WorkloadSpec = field(default_factory=WorkloadSpec)
    accelerator: str = ACCELERATOR
    devices: int | None = None
    num_nodes: int = 1
    strategy: str | None = None
    precision: str = PRECISION
    tune: bool = True
    target_ci: float = TARGET_CI
    max_seconds: float = MAX_SECONDS
    warmup_steps: int = WARMUP_STEPS
    max_steps: int | None = None
    compile_timeout: float = COMPILE_TIMEOUT
    instance_type: str | None = None
    profile_dir: str | None = None
    skip: frozenset[str] = frozenset()
    progress: bool = False  # the probe's own progress line on stderr (a terminal)
    matmul_seconds: float = MATMUL_SECONDS
    remeasure_rounds: int = REMEASURE_ROUNDS
    confirm_rounds: int = CONFIRM_ROUNDS
    own_batch_size: bool = False  # start from the batch size the user's module or DataModule sets itself
    rank_timeout: float = RANK_TIMEOUT
    race: bool = RACE
    cpu_too: bool = False  # also measure the CPU beside the GPU, and both at once (run/cpu_too.py)
    # A model too big to measure whole: the constructor argument that sets its depth and the two or
    # more shallower depths measured instead, in depth_rounds rounds (run/shallow.py); None: measured whole.
    depth_arg: str | None = None
    depths: tuple[int, ...] | None = None
    depth_rounds: int = DEPTH_ROUNDS
    # Earlier probes (the results store's, `advisor probe` reads them): the on/off rungs are climbed
    # in the order of their expected gain per second on this device class (order.py).
    past: tuple = ()


@dataclass
class MeasureSettings:
    """How one configuration is measured (the part of ProbeOptions that measure() needs)."""

    spec: WorkloadSpec
    warmup_steps: int = WARMUP_STEPS
    target_ci: float = TARGET_CI
    max_seconds: float = MAX_SECONDS
    max_steps: int | None = None
    compile_timeout: float = COMPILE_TIMEOUT
    progress: bool = False
    seed: int = 0
    rank_timeout: float = RANK_TIMEOUT
    race_threshold: float | None = None  # samples/s the rung races against (race.py); None: not raced
    race_floor: float | None = None  # a batch step's: lost below it, tied near it (race.Race.floor)
    race_prior: tuple[float, int] | None = None  # the step noise of the rungs before (race.Race.prior)
    # A step this long ends the warm-up at the first step alone (settle.settled_at's long_s); None:
    # a raced rung's RACE_LOOK_S, else the change-point alone (a raced probe's A-B legs set it: run/probe.py)
    look_s: float | None = None

    @classmethod
    def from_options(cls, opts: ProbeOptions) -> MeasureSettings:
        return cls(opts.spec, opts.warmup_steps, opts.target_ci, opts.max_seconds, opts.max_steps,
                   opts.compile_timeout, opts.progress, rank_timeout=opts.rank_timeout)
