"""The finished ProbeResult: the confirmed pick with its FLOPs, peaks, utilisation, memory, the
machine it ran on, and whether its number can be believed (and if not, why)."""

from __future__ import annotations

import os
from datetime import datetime

import torch

from ..contract.ladder import Ladder, RungMeasurement
from ..contract.options import ProbeOptions
from ..contract.reliability import reasons
from ..contract.result import (
    Confirmation,
    GpuAndCpu,
    HardwareFingerprint,
    MemoryFit,
    ProbeConfig,
    ProbeResult,
    RuntimeOverhead,
    WorkloadShape,
    utilisation,
)
from ..contract.timing import step_stats, usable_steps
from . import hardware
from .activations import count_activations
from .devices import peak_rss_gib
from .peaks import datasheet_peak_tflops, matmul_peak_tflops, per_sample_counts
from .preview import Preview


def assemble_result(opts: ProbeOptions, accelerator: str, hw: HardwareFingerprint, lad: Ladder,
                    started: datetime, config: ProbeConfig, m: RungMeasurement,
                    confirmation: Confirmation | None, notes: list[str],
                    profile_dir: str | None, profile_trace: str | None, pv: Preview,
                    memory: MemoryFit | None, gpu_and_cpu: GpuAndCpu | None = None) -> ProbeResult:
    spec = opts.spec
    timing = m.extra

    fps, traffic, other_traffic, ops = per_sample_counts(spec, pv.first_batch)
    achieved = m.samples_per_sec * fps / 1e12 if fps else None
    per_device_peak = datasheet_peak_tflops(hw, accelerator, config.precision)
    ranks = config.devices * config.num_nodes
    # A GPU datasheet figure is per device; the CPU's covers the whole machine whatever the ranks.
    devices_in_peak = ranks if accelerator != "cpu" else 1
    peak_ds = per_device_peak * devices_in_peak if per_device_peak else None
    # Measured on rank 0's device (or, for CPU ranks, its share of the cores): one share per rank.
    share = ranks if accelerator != "cpu" else max(1.0, min(ranks, (os.cpu_count() or 1) / torch.get_num_threads()))

    def matmul_peak(seconds: float) -> float | None:
        mm = matmul_peak_tflops(accelerator, config.precision, seconds)
        return mm * share if mm else None

    peak_mm = matmul_peak(opts.matmul_seconds)
    if achieved and peak_mm and achieved > peak_mm:
        peak_mm = max(peak_mm, matmul_peak(2 * opts.matmul_seconds) or 0.0)  # measured low once (a busy moment)?
    util_mm, why_mm = utilisation(achieved, peak_mm, "measured matmul")
    util_ds, why_ds = utilisation(achieved, peak_ds, "datasheet")
    # The winning configuration's own peak: the process's would include every larger batch tried.
    peak_mem = m.peak_memory_gib if m.peak_memory_gib is not None else peak_rss_gib()

    instance_type, source = opts.instance_type, "given" if opts.instance_type else None
    if instance_type is None and (found := hardware.ec2_instance_type()):
        instance_type, source = found, "imds"

    why = reasons(m, opts.target_ci, confirmation) + notes + [w for w in (why_mm, why_ds) if w]
    stats = step_stats(usable_steps(timing), timing.warmup_steps, timing.warmup_seconds)
    shape = WorkloadShape(**(m.model_facts or {}), data_source=pv.data_source,
                          samples_counted_by=pv.samples_counted_by, batch_tunable=pv.batch_tunable,
                          batch_note=pv.batch_note, memory=memory, memory_traffic_bytes_per_sample=traffic,
                          other_traffic_bytes_per_sample=other_traffic, ops_per_step=ops,
                          tokens_per_sample=pv.tokens_per_sample, tokens_counted_by=pv.tokens_counted_by,
                          activations=count_activations(spec, pv.first_batch, config.precision)
                          if pv.tokens_per_sample else None)
    tokens_per_sec = m.samples_per_sec * pv.tokens_per_sample if pv.tokens_per_sample else None
    return ProbeResult(
        workload=spec, workload_id=spec.workload_id, instance_type=instance_type,
        instance_type_source=source, hardware=hw, software=hardware.software_versions(),
        config=config, samples_per_sec=m.samples_per_sec, samples_per_sec_ci=(m.ci_low, m.ci_high),
        step_time=stats, flops_per_sample=fps, achieved_tflops=achieved,
        peak_tflops_datasheet=peak_ds, utilisation_datasheet=util_ds,
        peak_tflops_matmul=peak_mm, utilisation_matmul=util_mm,
        peak_memory_gib=peak_mem, ladder=lad.rungs, started_at=started, stop_reason=timing.reason,
        devices_in_peak=devices_in_peak, profile_dir=profile_dir, profile_trace=profile_trace,
        contention=m.contention, confirmation=confirmation, reliable=not why, unreliable_reasons=why,
        pipeline_samples_per_sec_per_worker=pv.pipeline_samples_per_sec_per_worker, shape=shape,
        gpu_and_cpu=gpu_and_cpu, tokens_per_sec=tokens_per_sec,
        runtime_overhead=RuntimeOverhead(**m.runtime_overhead) if m.runtime_overhead else None,
        rank_peak_memory_gib=m.rank_peaks or [],
    )
