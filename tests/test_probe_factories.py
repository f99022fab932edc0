"""Valid ProbeResults without torch, for the store and results tests (imported by them)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from lightning_module.contract.result import (
    HardwareFingerprint,
    ProbeConfig,
    ProbeResult,
    RungResult,
    SoftwareVersions,
    StepTimeStats,
    WorkloadSpec,
)

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def make_result(i: int = 0, instance_type: str | None = "c7i.2xlarge", sps: float = 40.0,
                model: str = "resnet50", result_id: str | None = None) -> ProbeResult:
    cfg = ProbeConfig(accelerator="cpu", precision="bf16-mixed", channels_last=True, batch_size=32)
    base = ProbeConfig(accelerator="cpu", batch_size=32)
    spec = WorkloadSpec(model=model)
    extra = {"result_id": result_id} if result_id else {}
    return ProbeResult(
        **extra,
        workload=spec, workload_id=spec.workload_id, instance_type=instance_type,
        instance_type_source="given" if instance_type else None,
        hardware=HardwareFingerprint(cpu_model="Test CPU", physical_cores=4, isa_flags=["avx2"]),
        software=SoftwareVersions(python="3.11.0", torch="2.15.0"),
        config=cfg, samples_per_sec=sps + i, samples_per_sec_ci=(sps + i - 1, sps + i + 1),
        step_time=StepTimeStats(n_steps=20, mean_s=0.8, median_s=0.8, stdev_s=0.01, p10_s=0.79,
                                p90_s=0.81, warmup_steps=3, warmup_seconds=2.5),
        ladder=[
            RungResult(rung="baseline", config=base, status="ok", samples_per_sec=(sps + i) / 4,
                       ci_low=1, ci_high=20, steps_timed=10, kept=True),
            RungResult(rung="bf16", config=cfg, status="ok", samples_per_sec=sps + i, ci_low=1,
                       ci_high=99, steps_timed=20, kept=True),
        ],
        started_at=T0 + timedelta(minutes=i), finished_at=T0 + timedelta(minutes=i, seconds=30),
    )


def test_factory_result_round_trips():
    from lightning_module.contract.result import parse_result

    r = make_result(3)
    assert parse_result(r.model_dump_json()) == r


def test_a_time_without_an_offset_is_read_as_utc():
    import json

    from lightning_module.contract.result import parse_result

    data = json.loads(make_result(1).model_dump_json())
    data["finished_at"] = "2026-01-01T10:00:00"
    data["started_at"] = "2026-01-01T09:59:00"
    r = parse_result(json.dumps(data))
    assert r.finished_at == datetime(2026, 1, 1, 10, 0, tzinfo=timezone.utc)
    assert r.finished_at - T0 == timedelta(hours=10)  # comparable with the probe's own aware times
