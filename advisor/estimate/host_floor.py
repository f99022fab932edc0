"""Host floor: one step on a GPU takes at least what the host needs to dispatch it.

Eager PyTorch runs a training step op by op from the host: Python, Lightning's loop, the
dispatcher and about one CUDA launch per op. A small model's kernels finish faster than the host
issues them, so its step time is the host's, whatever the GPU's FLOP/s and bandwidth (the
roofline, fit.py, has no such term: it carried a 628 samples/s CPU probe of a tiny transformer to
130,000/s on a T4, where an H100 ran it at 3,131). On a GPU

    step seconds >= step_host_s + ops_per_step x op_host_s [+ batch / loader samples/s per worker]
    so per-device samples/s <= batch / that

with ops_per_step the probe's count (result.WorkloadShape.ops_per_step) at its best batch, the
loader's term where that configuration had no loader workers (the batch is made in the training
process between steps; the probe's own pipeline rate), and the two constants from
advisor/data/host_floor.json (derived from our H100 measurements, the source in the file). A larger
batch on the GPU than the probe's raises the floor per sample, and so do loader workers,
torch.compile and CUDA graphs (fewer launches): the floor is for the probe's configuration. Not on
CPUs: a CPU probe's time already holds its host work. JSON only: `advisor recommend` never imports torch.

The host's own speed enters through its clock (host_speed in the data file): the dispatch seconds
divide by the host's sustained clock over the reference host's, whose clock was not recorded and is
bounded by the catalog's hosts of its class, so every floor carries that range in its band; a host
whose clock the catalog lacks keeps the reference's figure with a wider band, never a guessed clock.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

FLOOR_PATH = Path(__file__).resolve().parents[1] / "data" / "host_floor.json"


@dataclass(frozen=True)
class FloorConstants:
    step_host_s: float  # per step: Lightning's loop, the optimizer's foreach step, the batch's copy
    op_host_s: float  # per op dispatched
    below: float  # the band: the floor / below ... the floor x above
    above: float
    source: str
    band_why: str


@lru_cache(maxsize=1)
def _data() -> dict:
    """advisor/data/host_floor.json, read once."""
    return json.loads(FLOOR_PATH.read_text(encoding="utf-8"))


def constants() -> FloorConstants:
    """The floor's constants as advisor/data/host_floor.json states them, with their source."""
    body = _data()
    band = body["band"]
    return FloorConstants(float(body["step_host_s"]), float(body["op_host_s"]), float(band["below"]),
                          float(band["above"]), body["source"], band["why"])


@dataclass(frozen=True)
class HostSpeed:
    """A host's single-thread speed over the reference host's: its middle and the ends of its band."""

    ratio: float
    low: float
    high: float
    clock_ghz: float | None  # the catalogued sustained clock; None: not catalogued


def host_speed(clock_ghz: float | None) -> HostSpeed:
    """The data file's rule: the host's sustained clock over the reference host's, whose range (not
    its figure) is known; the middle is the range's geometric mean. No clock: the reference's speed,
    the band from the catalog's slowest to its fastest GPU host."""
    s = _data()["host_speed"]
    lo, hi = s["reference_clock_ghz"]
    if not clock_ghz:
        slow, fast = s["unknown_host_clock_ghz"]
        return HostSpeed(1.0, slow / hi, fast / lo, None)
    return HostSpeed(clock_ghz / math.sqrt(lo * hi), clock_ghz / hi, clock_ghz / lo, clock_ghz)


def step_seconds(ops_per_step: int, c: FloorConstants | None = None) -> float:
    """The host's least time for one step of `ops_per_step` ops on a GPU."""
    c = c or constants()
    return c.step_host_s + ops_per_step * c.op_host_s


def measured_figures() -> dict[str, list[dict]]:
    """The data file's measured examples: `fitted_on` (the constants' source) and `held_out`."""
    body = _data()
    return {"fitted_on": body["fitted_on"], "held_out": body["held_out"]}


def floor_of(figure: dict, c: FloorConstants | None = None) -> float:
    """The floor's samples/s for one of the data file's examples (its ops, batch and loader)."""
    loader = figure["pipeline_samples_per_sec_per_worker"] if figure["num_workers"] == 0 else None
    c = c or constants()
    return HostFloor(figure["ops_per_step"], figure["batch"], loader).samples_per_sec_with(c)


def derive(figures: list[dict]) -> tuple[float, float]:
    """(step_host_s, op_host_s): least squares of each example's host seconds a step (its measured
    step time less its loader's, where it had no workers) on its ops; two examples: the line through
    them. How the data file's constants were derived; the benchmark and the tests redo it."""
    points = []
    for f in figures:
        loader = f["batch"] / f["pipeline_samples_per_sec_per_worker"] if f["num_workers"] == 0 else 0.0
        points.append((f["ops_per_step"], f["batch"] / f["samples_per_sec"] - loader))
    n = len(points)
    mx = sum(o for o, _ in points) / n
    my = sum(t for _, t in points) / n
    slope = sum((o - mx) * (t - my) for o, t in points) / sum((o - mx) ** 2 for o, _ in points)
    return my - slope * mx, slope


@dataclass(frozen=True)
class HostFloor:
    """The floor for one workload's probe-counted step, per GPU."""

    ops_per_step: int
    batch: int  # samples per step on one device (the probe's best configuration)
    loader_samples_per_sec: float | None = None  # the loader in the training process (0 workers); None: in workers
    raised_by: float = 1.0  # a GPU probe that measured above the floor: its host was faster

    @property
    def samples_per_sec(self) -> float:
        """On the reference host (speed 1)."""
        return self.samples_per_sec_with(constants())

    def samples_per_sec_with(self, c: FloorConstants, speed: float = 1.0) -> float:
        """On a host `speed` times the reference's: its dispatch is that much shorter; the loader's
        term is the probe host's own measurement."""
        loader = self.batch / self.loader_samples_per_sec if self.loader_samples_per_sec else 0.0
        return self.raised_by * self.batch / (step_seconds(self.ops_per_step, c) / speed + loader)

    def on_host(self, clock_ghz: float | None) -> tuple[float, float, float]:
        """The floor on a host of this sustained clock: the middle and its band's ends (host_speed's
        range times the constants' own band)."""
        c, s = constants(), host_speed(clock_ghz)
        return (self.samples_per_sec_with(c, s.ratio), self.samples_per_sec_with(c, s.low) / c.below,
                self.samples_per_sec_with(c, s.high) * c.above)

    def apply(self, mid: float, low: float, high: float,
              clock_ghz: float | None = None) -> tuple[float, float, float, bool]:
        """(mid, low, high) per device after the floor on a host of this clock, and whether it binds
        the middle figure: the step's time is the larger of the roofline's and the host's, at each
        end of the band."""
        f, f_low, f_high = self.on_host(clock_ghz)
        return min(mid, f), min(low, f_low), min(high, f_high), mid > f

    def basis(self, binds: bool, ops_from: str, clock_ghz: float | None = None) -> dict:
        c, s = constants(), host_speed(clock_ghz)
        rule = _data()["host_speed"]
        f, f_low, f_high = self.on_host(clock_ghz)
        out = {"ops_per_step": self.ops_per_step, "batch": self.batch, "ops_from": ops_from,
               "step_host_s": c.step_host_s, "op_host_s": c.op_host_s,
               "loader_samples_per_sec": None if self.loader_samples_per_sec is None else round(self.loader_samples_per_sec),
               "rule": "per-device samples/s <= batch / ((step_host_s + ops_per_step x op_host_s) / host_speed [+ batch / "
                       "loader_samples_per_sec: no loader workers]), on a GPU",
               "host_clock_ghz": s.clock_ghz, "host_speed": round(s.ratio, 3),
               "host_speed_band": [round(s.low, 3), round(s.high, 3)],
               "host_speed_rule": rule["rule"], "reference_clock_ghz": rule["reference_clock_ghz"],
               "reference_clock_source": rule["reference_clock_source"],
               "max_samples_per_sec_per_device": round(f, 1),
               "max_band": [round(f_low, 1), round(f_high, 1)], "binds": binds,
               "band": f"x/{c.below:g} to x{c.above:g} times host_speed_band: {c.band_why}", "source": c.source}
        if s.clock_ghz is None:
            out["host_speed_unknown"] = rule["unknown_host_source"]
        if self.raised_by > 1.0:
            out["raised_by_gpu_probe"] = round(self.raised_by, 3)
        return out

    def note(self, clock_ghz: float | None = None) -> str:
        loader = " and the loader in its process" if self.loader_samples_per_sec else ""
        more = "a larger batch, loader workers" if self.loader_samples_per_sec else "a larger batch"
        host = f"this {clock_ghz:g} GHz host" if clock_ghz else "a host of uncatalogued clock"
        return (f"host-bound: ~{self.ops_per_step} ops a step at batch {self.batch}{loader} cap one GPU near "
                f"{self.on_host(clock_ghz)[0]:,.0f}/s on {host}; {more} or torch.compile/CUDA graphs raise it")
