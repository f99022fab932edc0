"""`advisor probe --cpu-too`: the probe's winner on the GPU alone, the CPU alone, then both at once
(run/hetero.py), recorded as ProbeResult.gpu_and_cpu; "both" is kept only when its CI clears the
GPU alone, the ladder's rule for every rung.

Rank 1 (the CPU) is this command re-run by Lightning's launcher: rank 0 puts the plan in the
environment first, and the re-run command, seeing it, trains along (`train_along`) instead of
probing.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

import torch

from catalog.accelerators import cpu_native_bf16

from ..contract import balance, cores
from ..contract.ladder import RankLost
from ..contract.options import MeasureSettings
from ..contract.result import GpuAndCpu, ProbeConfig, RankShare, WorkloadSpec
from . import hetero
from .builders import build_workload
from .hardware import parse_cpuinfo, read_cpuinfo
from .readers import physical_cores, pin

PLAN_ENV = "ADVISOR_CPU_TOO_PLAN"
# Tests only: the device that stands in for the GPU (two CPU ranks run the whole GPU + CPU path).
MAIN_DEVICE_ENV = "ADVISOR_CPU_TOO_MAIN_DEVICE"
CPU_BATCH = 64  # the CPU's batch when measured alone (at most the GPU's): a rate per sample, not a fit
STEPS = 10  # timed steps alone and per balancing round, unless --max-steps says fewer
WARMUP = 2


class CpuTooFailed(Exception):
    """The GPU + CPU measurement could not run: the probe ends (its line says why)."""


@dataclass
class CpuTooLayout:
    spec: dict
    configs: list[dict]
    devices: list[str]
    threads: list[int]
    cpus: list[list[int]]  # each rank's CPUs (contract/cores.py), alone and together
    total: int
    rates_alone: list[float]
    steps: int
    precisions: list[str]  # each rank's
    rank_timeout: float


def main_device() -> str:
    return os.environ.get(MAIN_DEVICE_ENV) or "cuda:0"


def _builder(plan: CpuTooLayout) -> hetero.Builder:
    spec = WorkloadSpec(**plan.spec)
    configs = [ProbeConfig(**c) for c in plan.configs]

    def build(rank: int, batch: int):
        return build_workload(spec, configs[rank].model_copy(update={"batch_size": batch}), seed=rank)

    return build


def _together(plan: CpuTooLayout) -> hetero.Balanced:
    pin(plan.cpus[hetero.this_rank()])
    return hetero.balance_run(_builder(plan), plan.devices, plan.total, plan.rates_alone, plan.threads, plan.steps,
                              WARMUP, plan.precisions, plan.rank_timeout)


def cpu_precision(gpu_precision: str, isa_flags: list[str], manufacturer: str | None = None) -> str:
    """The CPU rank's precision beside a GPU rank at `gpu_precision`: bf16 where the GPU won with
    mixed precision (bf16 or fp16) and this CPU computes bf16 natively (the catalog's rule), else
    fp32: emulated bf16 is slower than fp32 (docs/probe.md). Each rank's gradients are float32
    whatever it computes in, so the weighted exchange stays exact."""
    native = cpu_native_bf16(isa_flags, manufacturer)
    return "bf16-mixed" if gpu_precision.endswith("-mixed") and native else "32-true"


def is_extra_rank() -> bool:
    return bool(os.environ.get(PLAN_ENV)) and hetero.this_rank() != 0


def train_along() -> None:
    """Rank 1's whole part: the rounds rank 0 runs, from rank 0's plan."""
    _together(CpuTooLayout(**json.loads(os.environ[PLAN_ENV])))


def measure_gpu_and_cpu(settings: MeasureSettings, final: ProbeConfig) -> GpuAndCpu:
    """The GPU alone, the CPU alone (on the cores the GPU's loaders and host thread leave), both."""
    main = main_device()
    # Each rank at its own precision: the GPU's pick (its fp16 loss scale is taken out of its
    # gradients before the exchange), the CPU in bf16 only where it has bf16 natively.
    cpu = parse_cpuinfo(read_cpuinfo())
    precisions = [final.precision, cpu_precision(final.precision, cpu["isa_flags"], cpu["cpu_manufacturer"])]
    main_cfg = final.model_copy(update={"compile": False})
    cpu_cfg = ProbeConfig(accelerator="cpu", precision=precisions[1], channels_last=final.channels_last,
                          batch_size=min(final.batch_size, CPU_BATCH))
    # The GPU rank keeps whole cores for its main thread and loader workers; the CPU rank the rest.
    machine = physical_cores()
    split = cores.gpu_and_cpu(machine, host_cpus=1 + final.num_workers)
    threads = [r.threads for r in split]
    steps = min(settings.max_steps or STEPS, STEPS)
    plan = CpuTooLayout(spec=settings.spec.model_dump(), configs=[main_cfg.model_dump(), cpu_cfg.model_dump()],
                devices=[main, "cpu"], threads=threads, cpus=[r.cpus for r in split], total=0, rates_alone=[],
                steps=steps, precisions=precisions, rank_timeout=settings.rank_timeout)
    before, everything = torch.get_num_threads(), sorted(c for core in machine for c in core)
    try:
        build = _builder(plan)
        plan.rates_alone = []
        for r, (dev, cfg) in enumerate([(main, main_cfg), ("cpu", cpu_cfg)]):
            pin(plan.cpus[r])  # alone on the very CPUs it has together
            plan.rates_alone.append(hetero.run_alone(build, r, dev, cfg.batch_size, threads[r], steps, WARMUP,
                                                     precisions[r]))
        # The GPU keeps about its tuned batch; the CPU's share is in proportion to its rate.
        plan.total = max(main_cfg.batch_size + 1, round(main_cfg.batch_size * sum(plan.rates_alone) / plan.rates_alone[0]))
        os.environ[PLAN_ENV] = json.dumps(asdict(plan))
        out = _together(plan)
    except RankLost:
        raise
    except Exception as e:
        raise CpuTooFailed(f"--cpu-too: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}") from e
    finally:
        pin(everything)
        torch.set_num_threads(before)
    last = out.final
    alone0 = plan.rates_alone[0]
    lo, hi = last.ci
    if not lo <= last.samples_per_sec <= hi:  # under two timed steps: no spread to judge by
        lo = hi = last.samples_per_sec
    kinds = ["gpu" if main.startswith("cuda") else "cpu", "cpu"]
    note = None
    if out.dropped:
        note = "; ".join(f"the {kinds[i]} rank was dropped after {len(out.rounds)} round(s): its share of "
                         f"{last.shares[i]} of {sum(last.shares)} samples is under {balance.MIN_SHARE:.0%} of the "
                         f"batch, where its fixed per-step cost dominates" for i in out.dropped)
    elif last.imbalance > balance.BALANCED:
        note = (f"the ranks' step times stayed {last.imbalance:.0%} apart after {len(out.rounds)} round(s) "
                f"(balanced: within {balance.BALANCED:.0%})")
    if not last.overlap:  # the after-backward twin was the faster
        after = "the gradient exchange after backward (measured faster here than overlapped with backward)"
        note = f"{note}; {after}" if note else after
    return GpuAndCpu(
        ranks=[RankShare(device=kinds[i], batch_size=last.shares[i], threads=threads[i], precision=precisions[i],
                         samples_per_sec_alone=plan.rates_alone[i], busy_seconds=max(last.busy_s[i], 1e-9))
               for i in range(2)],
        samples_per_sec=last.samples_per_sec, samples_per_sec_ci=(lo, hi),
        efficiency=balance.efficiency(last.samples_per_sec, plan.rates_alone), rounds=len(out.rounds),
        precision=precisions[0], kept=not out.dropped and lo > alone0 and last.samples_per_sec > alone0, note=note,
    )
