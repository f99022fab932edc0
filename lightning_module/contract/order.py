"""The order the ladder climbs its on/off tuning rungs in: by expected gain per second of probing.

Each rung is tried on top of the best so far and raced against it (race.py), so the order decides
how long the probe takes: a rung that wins early raises the bar, and the rungs after it lose
sooner. The order is read from what earlier probes measured on this device class (the same
accelerator kind and CPU model or GPU name, run/probe.py tells), the same workload's first, any
workload's else; with none, from the seeds' ladders (contract/data/seed_ladders.json: the
project's source articles). Pure logic, no torch.

A rung's gain is its samples/s over the best before it, less one, counted as nothing where it
lost (a rung that loses gains nothing but costs its seconds); its seconds are its steps (timed and
warm-up) at its own step time, plus compilation. The expected gain per second of a kind is the
sum of its gains over the sum of its seconds across the ladders read. Kinds with a measured gain
go first, the highest gain per second first; kinds with no evidence keep the default order after
them; kinds known to have gained nothing go last, the quickest first.

Only the on/off kinds move (ORDERABLE): the batch search comes after them (its revisit measures
the rungs that lost at the batch they were decided at) and the extensions after it, as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .options import MAX_SECONDS, WARMUP_STEPS
from .result import HardwareFingerprint, ProbeResult, RungResult

ORDERABLE = ("precision", "channels_last", "compile", "workers")  # the default order (ladder.TUNING_RUNGS')
SEEDS = Path(__file__).with_name("data") / "seed_ladders.json"
_NAMES = {"bf16": "precision", "fp16": "precision", "channels_last": "channels_last", "compile": "compile"}
_FAILED = ("failed", "oom", "timeout", "contended")  # ran, and cost time, but measured no gain


def kind_of(rung: str) -> str | None:
    """The orderable kind a rung's name is of; None for the others (baseline, batch, extensions, revisits)."""
    if "@" in rung:
        return None
    if rung.startswith("workers="):
        return "workers"
    return _NAMES.get(rung)


@dataclass(frozen=True)
class Evidence:
    kind: str
    gain: float  # samples/s over the best before it, less one (negative: it lost)
    seconds: float | None  # what measuring it took; None: not known (priced at MAX_SECONDS)


def rung_seconds(r: RungResult) -> float | None:
    if not r.samples_per_sec:
        return None
    c = r.config
    step = c.batch_size * c.devices * c.num_nodes / r.samples_per_sec
    return (r.steps_timed + WARMUP_STEPS) * step + (r.compile_seconds or 0.0)


def ladder_evidence(rungs: Sequence[RungResult]) -> list[Evidence]:
    """What one stored ladder says of each orderable rung it ran."""
    out: list[Evidence] = []
    best = None
    for r in rungs:
        if r.rung == "baseline":
            best = r.samples_per_sec if r.status == "ok" else None
            continue
        kind = kind_of(r.rung)
        if kind is not None and best:
            if r.status == "ok" and r.samples_per_sec:
                out.append(Evidence(kind, r.samples_per_sec / best - 1.0, rung_seconds(r)))
            elif r.status in _FAILED:
                out.append(Evidence(kind, 0.0, None))
        if r.kept and r.samples_per_sec:
            best = r.samples_per_sec
    return out


def same_device(a: HardwareFingerprint, accel_a: str, b: HardwareFingerprint, accel_b: str) -> bool:
    """One device class: the same accelerator kind and the same GPU (first GPU's name) or CPU model."""
    if accel_a != accel_b:
        return False
    if accel_a == "cpu":
        return bool(a.cpu_model) and a.cpu_model == b.cpu_model
    return bool(a.gpus) and bool(b.gpus) and a.gpus[0].name == b.gpus[0].name


def seed_evidence(accelerator: str, path: Path = SEEDS) -> list[Evidence]:
    """The seeds' ladders on this accelerator kind (their gains; their seconds are not known)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    return [Evidence(r["kind"], r["gain"], None) for lad in doc["ladders"] if lad["accelerator"] == accelerator
            for r in lad["rungs"]]


def gain_per_second(evidence: Iterable[Evidence]) -> dict[str, tuple[float, float]]:
    """Per kind: (expected gain per second, mean seconds), from the evidence."""
    gains: dict[str, float] = {}
    secs: dict[str, list[float]] = {}
    for e in evidence:
        gains[e.kind] = gains.get(e.kind, 0.0) + max(e.gain, 0.0)
        secs.setdefault(e.kind, []).append(e.seconds if e.seconds is not None else MAX_SECONDS)
    return {k: (gains[k] / max(sum(s), 1e-9), sum(s) / len(s)) for k, s in secs.items()}


def rung_order(evidence: Iterable[Evidence], default: Sequence[str] = ORDERABLE) -> tuple[str, ...]:
    """The orderable kinds by expected gain per second (the module's docstring says the rule)."""
    score = gain_per_second(evidence)
    gaining = sorted((k for k in default if k in score and score[k][0] > 0), key=lambda k: -score[k][0])
    unknown = [k for k in default if k not in score]
    idle = sorted((k for k in default if k in score and score[k][0] <= 0), key=lambda k: score[k][1])
    return tuple(gaining + unknown + idle)


@dataclass(frozen=True)
class Order:
    kinds: tuple[str, ...]
    basis: str  # what it was read from, in words


def order_for(past: Iterable[ProbeResult], hw: HardwareFingerprint, accelerator: str, workload_id: str) -> Order:
    """The order for a probe on `hw`: from `past` probes on this device class (this workload's, else
    any workload's), else from the seeds' ladders."""
    here = [r for r in past if r.source == "probe" and same_device(r.hardware, r.config.accelerator, hw, accelerator)]
    for which, rs in (("this workload", [r for r in here if r.workload_id == workload_id]), ("other workloads", here)):
        ev = [e for r in rs for e in ladder_evidence(r.ladder)]
        if ev:
            return Order(rung_order(ev), f"{len(rs)} past probe(s) of {which} on this device class")
    return Order(rung_order(seed_evidence(accelerator)), "the seeds' ladders (no past probe on this device class)")
