"""The tests' factories of probe records (and the decision benchmark's): a valid ProbeResult, and a
ladder RungMeasurement; no torch."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from lightning_module.contract.result import (
    GpuInfo,
    HardwareFingerprint,
    ProbeConfig,
    ProbeResult,
    RungResult,
    SoftwareVersions,
    StepTimeStats,
    WorkloadSpec,
)

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)  # also the recommend tests' "now" (recommend_catalogs.NOW)


def probe_result(instance_type: str | None = "c7i.2xlarge", samples_per_sec: float = 40.0, *, n: int = 0,
                 accelerator: str = "cpu", devices: int = 1, num_nodes: int = 1, precision: str = "bf16-mixed",
                 model: str = "resnet50", ci: float = 0.02, finished_at: datetime | None = None,
                 torch: str = "2.15.0", lightning: str | None = None, flops_per_sample: float | None = None,
                 result_id: str | None = None, gpus: tuple[str, ...] = (),
                 spec: WorkloadSpec | None = None) -> ProbeResult:
    """A probe of `model` on `instance_type` at samples_per_sec + n. `n` numbers a series: the nth
    result finished n minutes after T0, so a series has distinct figures and sorts by n. `ci`: the
    95% CI's relative half-width. `gpus`: the fingerprint's GPU names. `spec`: the workload in full
    (its arguments and recorded defaults), in place of `model`."""
    sps = samples_per_sec + n
    half = sps * ci
    finished = finished_at or T0 + timedelta(minutes=n, seconds=30)
    spec = spec or WorkloadSpec(model=model)
    cfg = ProbeConfig(accelerator=accelerator, devices=devices, num_nodes=num_nodes, precision=precision,
                      channels_last=True, batch_size=32)
    base = ProbeConfig(accelerator=accelerator, devices=devices, num_nodes=num_nodes, batch_size=32)
    return ProbeResult(
        **({"result_id": result_id} if result_id else {}),
        workload=spec, workload_id=spec.workload_id, instance_type=instance_type,
        instance_type_source="given" if instance_type else None,
        hardware=HardwareFingerprint(cpu_model="Test CPU", physical_cores=4, isa_flags=["avx2"],
                                     gpus=[GpuInfo(name=g, memory_gib=22.0) for g in gpus]),
        software=SoftwareVersions(python="3.11.0", torch=torch, lightning=lightning),
        config=cfg, samples_per_sec=sps, samples_per_sec_ci=(sps - half, sps + half),
        step_time=StepTimeStats(n_steps=20, mean_s=0.8, median_s=0.8, stdev_s=0.01, p10_s=0.79,
                                p90_s=0.81, warmup_steps=3, warmup_seconds=2.5),
        ladder=[
            RungResult(rung="baseline", config=base, status="ok", samples_per_sec=sps / 4,
                       ci_low=1, ci_high=sps, steps_timed=10, kept=True),
            RungResult(rung="bf16", config=cfg, status="ok", samples_per_sec=sps, ci_low=1,
                       ci_high=sps * 2.5, steps_timed=20, kept=True),
        ],
        started_at=finished - timedelta(seconds=30), finished_at=finished, flops_per_sample=flops_per_sample,
    )


def fake_measurement(v: float, batch: int, steps: int = 20, **kw):
    """A RungMeasurement whose step times agree with its samples/s (the confirmation pools them)."""
    from lightning_module.contract.ladder import RungMeasurement
    from lightning_module.contract.timing import Timing

    return RungMeasurement(v, v, v, steps, extra=Timing([batch / v] * steps, 1, 0.5, batch / v, "converged"),
                       ci_target_met=True, **kw)
