"""What a rung may keep of the rung before it, no torch: its warm model (weights already placed,
its memory format set) and its warm loader (the dataset built, persistent workers running).

A rung is one change on top of the best so far; most changes leave the model as it was built:
mixed precision is the Trainer's autocast around the same weights, loader workers and pinning are
the loader's, and the batch size is the loader's for a built-in model (a user's module or its own
loader may read them when built: there all of them must match). The model is rebuilt where its build changes (memory
format, torch.compile, ipex, a child process's set-up, the device or the ranks) and the loader
where the batch, the workers or the pinning change. Several ranks never keep anything (each
rank's state would have to agree). The figures do not change by it: the weights' values do not set
a step's time, and the warm-up ends where the steps settle (settle.py) either way
(tests/packages/lightning_module/test_warm.py checks both in simulation).
"""

from __future__ import annotations

from .result import TUNED_ARGS, ProbeConfig

LOADER = TUNED_ARGS  # what the loader is built from: the knobs the probe turns
# What the model's build depends on (precision is not: it is the Trainer's, around the same weights).
MODEL = ("accelerator", "devices", "num_nodes", "strategy", "channels_last", "compile", "ipex", "run_cpu",
         "allocator", "openmp", "compile_backend", "xla")
MODEL_AND_LOADER, MODEL_ONLY = "model and loader", "model"


def keeps(prev: ProbeConfig | None, new: ProbeConfig, builtin: bool) -> str | None:
    """What a rung measuring `new` keeps of the rung that measured `prev` (None: nothing, build cold)."""
    if prev is None or new.devices * new.num_nodes > 1:
        return None
    if new.compile or new.ipex or new.run_cpu or new.xla:  # a wrapped or re-made model, or another process
        return None
    if any(getattr(prev, f) != getattr(new, f) for f in MODEL):
        return None
    same_loader = all(getattr(prev, f) == getattr(new, f) for f in LOADER)
    if same_loader:
        return MODEL_AND_LOADER
    return MODEL_ONLY if builtin else None  # a user's loader (or module) may be built from them


def settle_from(warm: bool, compiled: bool) -> int:
    """The step the warm-up may end at, at the earliest (settle.settled_at's `first`): after a cold
    rung's first step (its set-up: the model built, the loader started, lazy initialisation) and
    the compile step. A rung that kept the rung before's model (`warm`) has no set-up step to skip:
    its first step counts unless the change-point sets it apart, which it does for a first step
    1.3x the others nearly always (97%) and 2x always; a steady series times about one step sooner
    (1.47 warm-up steps to 0.37), and a 1.1x first step that passes for steady biases the first 4
    timed steps by about 1% (simulated in tests/packages/lightning_module/test_race_seconds.py)."""
    return (0 if warm else 1) + (1 if compiled else 0)
