"""What the host's CPU would add by training beside an instance's GPUs (`advisor probe --cpu-too`,
Article C): the expected gain of the "GPU + CPU" variant, its band and where it comes from.

The model, per step of the GPUs' batch B (their rate G, step time T = B / G):

    together = (B + e x C x T) / (T + x)        gain = together / G - 1

- C: the CPU's samples/s alone on the vCPUs the instance has left once each GPU's training
  process (one vCPU each) and its data loaders (G / the pipeline's samples/s per vCPU, host.py)
  are served: the estimate model's CPU path on the same processor with that many vCPUs.
- e: the combining efficiency, the CPU rank's samples/s together over its samples/s alone
  (sharing the host with the GPU's process and loaders; a small share pays its fixed cost).
- x: the gradient exchange per step, which is not overlapped with compute: the fp32 gradients
  through the CPU (gloo) at an exchange rate in GB/s.

e and the exchange rate come from your own `--cpu-too` probe when the store holds one (measured:
e = the CPU's share over its busy time / its rate alone; x = the step's period less the busy
time), else from this project's H100 figures (docs/benchmarks.md), whose whole range is the
band. On the very instance type that was probed, the probe's own together figure is the answer.
The variant exists only when the gain's band lies above zero: beyond the noise, like the probe's
own rule for keeping "both".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from catalog.hardware import device_count
from catalog.models import InstanceType

# From the runs in docs/benchmarks.md (one H100 80GB HBM3, 16-vCPU Xeon host, torch 2.11), derived:
# the CPU rank's rate together / alone was 0.25 (benchmark, ResNet-18 32 px, share 11 of 4116:
# 11 / 0.053 s / 843.5), 0.51 (`advisor probe --cpu-too`, 32 of 8259: 32 / 0.095 s / 660.5) and
# 0.84-0.92 (two CPU ranks: 136 / 0.168 s / 960.5 and 256 / 0.155 s / 1,804).
# The exchange of ResNet-18's 44.7 MB of fp32 gradients (10 classes) took 0.153 s a step (the
# --cpu-too run: 8259 / 33,321 - 0.095), 0.061 s (benchmark: 4116 / 36,207 - 0.053) and 0.047 s (two
# CPU ranks: 392 / 1,826 - 0.168): 0.29, 0.74 and 0.96 GB/s; ResNet-50's 94.1 MB 0.102 s (259 / 846
# - 0.204): 0.92 GB/s. The band is the whole range; its middle the geometric mean of the ends.
E_RANGE = (0.25, 0.92)
EXCHANGE_GBS_RANGE = (0.29, 0.96)


def _figures(lo_hi: tuple[float, float]) -> tuple[float, float, float]:
    return lo_hi[0], math.sqrt(lo_hi[0] * lo_hi[1]), lo_hi[1]


@dataclass(frozen=True)
class GpuAndCpuGain:
    """The expected gain of training on the host's CPU beside the GPUs, and how it was worked out."""

    gain: float  # together / the GPUs alone - 1
    low: float
    high: float
    source: str  # "measured" (a --cpu-too probe of this type) | "estimated"
    basis: dict
    # The instance's samples/s with the CPU training beside the GPUs (mid, low, high): the "GPU + CPU"
    # candidate's throughput and band (advisor.estimate.throughput.cpu_variant).
    together: tuple[float, float, float]

    @property
    def variant(self) -> bool:
        """A "GPU + CPU" variant is offered: its gain's band is above zero."""
        return self.low > 0

    @property
    def worth_probing(self) -> bool:
        """Not measured here, and the band reaches a gain: `--cpu-too` would tell (a variant offered on
        the estimate is measured by the same probe)."""
        return self.source == "estimated" and self.high > 0

    def words(self) -> str:
        return (f"GPU + CPU: {self.gain:+.0%} expected ({self.low:+.0%} to {self.high:+.0%}, {self.source}: "
                f"{self.basis['from']})")


def from_probe(r, gpus: float) -> GpuAndCpuGain:
    """A --cpu-too probe of this very type: its together figure and CI against the GPU alone, applied
    to the type's own figure `gpus` (samples/s of the GPUs alone; the same probe's final rung when it is the newest)."""
    g = r.gpu_and_cpu
    alone = g.ranks[0].samples_per_sec_alone
    lo, hi = g.samples_per_sec_ci
    low, high = lo / alone - 1, hi / alone - 1
    return GpuAndCpuGain(g.gain, low, high, "measured",
                         {"from": f"your --cpu-too probe {r.result_id[:8]}", "result_id": r.result_id,
                          "kept": g.kept, "efficiency": round(g.efficiency, 4)},
                         (gpus * (1 + g.gain), gpus * (1 + low), gpus * (1 + high)))


def measured_inputs(g, gradient_bytes: float) -> tuple[float, float] | None:
    """(e, exchange GB/s) that a --cpu-too record shows (None where it cannot say)."""
    cpu = g.ranks[-1]
    period = sum(r.batch_size for r in g.ranks) / g.samples_per_sec
    exchange_s = period - max(r.busy_seconds for r in g.ranks)
    if exchange_s <= 0 or not math.isfinite(gradient_bytes):
        return None
    return cpu.batch_size / cpu.busy_seconds / cpu.samples_per_sec_alone, gradient_bytes / exchange_s / 1e9


def host_cpu(it: InstanceType, vcpus: int) -> InstanceType:
    """The instance's processor as a CPU instance of `vcpus` vCPUs (what the estimate model reads)."""
    return it.model_copy(update={"accelerator_kind": "none", "accelerator_model": None, "accelerator_count": 0,
                                 "accelerator_memory_gib": None, "accelerator_fraction": None, "vcpus": vcpus,
                                 "socket_vcpus": min(it.socket_vcpus, vcpus) if it.socket_vcpus else None})


def estimate(it: InstanceType, gpus: tuple[float, float, float], batch: int, cpu_estimator, pipeline_per_vcpu: float | None,
             gradient_bytes: float, measured: tuple[float, float, str] | None) -> GpuAndCpuGain | str:
    """The gain on `it` whose GPUs train at `gpus` (mid, low, high samples/s, all devices) at `batch`
    per device; `cpu_estimator(InstanceType)` is the estimate model's (an Estimate or why not);
    `measured`: (e, exchange GB/s, where) from a --cpu-too probe on another type. A string: why none."""
    g_mid, g_low, g_high = gpus
    n = device_count(it)
    if pipeline_per_vcpu is None:
        return "the data loaders' vCPUs are unknown (no pipeline rate for this workload)"
    if not math.isfinite(gradient_bytes):
        return "the gradients' size is unknown"
    loaders = math.ceil(g_mid / pipeline_per_vcpu)
    left = it.vcpus - n - loaders
    if left < 1:
        return f"no vCPU left: {it.vcpus} less {n} training process(es) and {loaders} loader(s)"
    cpu = cpu_estimator(host_cpu(it, left))
    if isinstance(cpu, str):
        return f"no CPU estimate: {cpu}"
    if measured is not None:
        e_mid, x_mid, where = measured
        e_lo = e_hi = e_mid
        x_lo = x_hi = x_mid
        src = f"e and the exchange from your --cpu-too probe on {where}"
    else:
        e_lo, e_mid, e_hi = _figures(E_RANGE)
        x_lo, x_mid, x_hi = _figures(EXCHANGE_GBS_RANGE)
        src = "e and the exchange from the H100 figures (docs/benchmarks.md)"

    def together(g: float, c: float, e: float, gbs: float) -> float:
        t = batch * n / g
        return (g * t + e * c * t) / (t + gradient_bytes / gbs / 1e9)

    def gain(g: float, c: float, e: float, gbs: float) -> float:
        return together(g, c, e, gbs) / g - 1

    mid = gain(g_mid, cpu.per_device, e_mid, x_mid)
    low = gain(g_high, cpu.low, e_lo, x_lo)
    high = gain(g_low, cpu.high, e_hi, x_hi)
    # The pair's own band: together rises with every input (while e C x < B, always at these sizes).
    t_mid = g_mid * (1 + mid)
    t_lo, t_hi = together(g_low, cpu.low, e_lo, x_lo), together(g_high, cpu.high, e_hi, x_hi)
    basis = {"from": f"{left} vCPUs' estimate, {src}", "cpu_vcpus": left, "loader_vcpus": loaders,
             "cpu_samples_per_sec": round(cpu.per_device, 2), "cpu_low": round(cpu.low, 2), "cpu_high": round(cpu.high, 2),
             "combining_efficiency": [round(e_lo, 3), round(e_mid, 3), round(e_hi, 3)],
             "exchange_gbs": [round(x_lo, 3), round(x_mid, 3), round(x_hi, 3)],
             "gradient_bytes": gradient_bytes, "batch_per_device": batch,
             "model": "together = (B + e C T) / (T + gradient bytes / exchange rate), T = B / G"}
    return GpuAndCpuGain(mid, min(low, mid), max(high, mid), "estimated", basis,
                         (t_mid, min(t_lo, t_mid), max(t_hi, t_mid)))
