"""How long one probe of a type runs: read from the store's past probes of the workload on the
same device class, and the ladder's bound (inputs.probe_seconds) only where the store has none.

A past probe's own wall time is its result's finished_at - started_at (run/probe.py stamps
started_at before the pre-check and finished_at when the result is assembled: the ladder, the A-B
confirmation and the memory fit, all of it). It is spread over the rungs that ran in it (a rung
skipped without training costs nothing), so a type with more vCPUs, whose ladder tries more worker
counts (ladder.measured_rungs), is priced for its own rungs; start-up (boot, pip) is added as the
bound adds it. Derived figures, each stated in the plan's output with what it rests on.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from catalog import accelerators as acc
from catalog.hardware import device_kind, gpu_spec
from catalog.models import InstanceType

from ...estimate.points import fingerprint_cpu_host, group_of, instance_cpu_host

# Rungs recorded without being trained: they took no time of the probe's.
NOT_RUN = ("skipped", "not-installed", "not-applicable")


@dataclass(frozen=True)
class DeviceClass:
    """What a probe's time is shared across: the device kind (cpu, gpu, ...) and its model (a GPU's
    chip, "A10"; a CPU's processor, "cpu:Intel Xeon Platinum 8488C"), None where it cannot be told."""

    kind: str
    model: str | None

    def words(self) -> str:
        kind = self.kind.upper() if self.kind in ("cpu", "gpu") else self.kind
        return f"{self.model.removeprefix('cpu:')} {kind}s" if self.model else f"any {kind}"


def type_class(it: InstanceType) -> DeviceClass:
    kind = device_kind(it)
    if kind == "cpu":
        host = instance_cpu_host(it)
        return DeviceClass(kind, host.group if host else f"cpu:{it.family}")
    spec = gpu_spec(it)
    return DeviceClass(kind, group_of(spec) if spec else it.accelerator_model)


def result_class(r, types: dict[str, InstanceType]) -> DeviceClass:
    """A stored probe's device class: its instance type's, else what its fingerprint says."""
    it = types.get(r.instance_type or "")
    if it is not None:
        return type_class(it)
    if r.config.accelerator == "cpu":
        host, _ = fingerprint_cpu_host(r.hardware, r.config.precision)
        return DeviceClass("cpu", host.group if host else None)
    gpus = r.hardware.gpus if r.hardware else []
    spec = acc.lookup(gpus[0].name, gpus[0].memory_gib) if gpus else None
    return DeviceClass(r.config.accelerator, group_of(spec) if spec else None)


def seconds_per_rung(r) -> float | None:
    """A past probe's wall time over the rungs that ran in it; None for a training run's record
    (its time is the user's training, not a probe's)."""
    if getattr(r, "source", "probe") != "probe":
        return None
    ran = sum(1 for g in r.ladder if g.status not in NOT_RUN)
    wall = (r.finished_at - r.started_at).total_seconds()
    if ran < 1 or not wall > 0:
        return None
    return wall / ran


@dataclass(frozen=True)
class PerRung:
    """What the store says one rung of a probe takes on a device class."""

    seconds: float  # the median past probe's wall time over its rungs that ran
    probes: int  # how many past probes it is the median of
    of: DeviceClass  # the class they ran on: the type's own, or its kind's

    def words(self) -> str:
        return f"{self.probes} past probe{'s' if self.probes > 1 else ''} of this workload on {self.of.words()}"


class PastProbes:
    """The store's probes of one workload, by device class, as per-rung seconds."""

    def __init__(self, measurements: Iterable, types: dict[str, InstanceType]):
        self.by_class: dict[DeviceClass, list[float]] = {}
        for r in measurements:
            per = seconds_per_rung(r)
            if per is None:
                continue
            cls = result_class(r, types)
            self.by_class.setdefault(cls, []).append(per)
            if cls.model is not None:  # also counted for its kind, the next-nearest class
                self.by_class.setdefault(DeviceClass(cls.kind, None), []).append(per)

    def per_rung(self, it: InstanceType) -> PerRung | None:
        """From the past probes of its device model, else of its kind; None where the store has none."""
        cls = type_class(it)
        for key in (cls, DeviceClass(cls.kind, None)):
            past = self.by_class.get(key)
            if past:
                return PerRung(statistics.median(past), len(past), key)
        return None
