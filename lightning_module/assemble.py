"""The finished ProbeResult: the ladder's winner with its FLOPs, peaks, utilisation, memory and
the machine it ran on."""

from __future__ import annotations

import os
from datetime import datetime

import torch

from . import hardware
from .devices import peak_rss_gib
from .ladder import Ladder
from .options import ProbeOptions
from .peaks import datasheet_peak_tflops, flops_per_sample, matmul_peak_tflops
from .result import HardwareFingerprint, ProbeResult
from .timing import step_stats


def assemble_result(opts: ProbeOptions, accelerator: str, hw: HardwareFingerprint, lad: Ladder,
                    started: datetime, profile_dir: str | None) -> ProbeResult:
    spec = opts.spec
    best, m = lad.best, lad.best_measurement
    timing = m.extra

    fps = flops_per_sample(spec)
    achieved = m.samples_per_sec * fps / 1e12 if fps else None
    per_device_peak = datasheet_peak_tflops(hw, accelerator, best.config.precision)
    ranks = best.config.devices * best.config.num_nodes
    # A GPU datasheet figure is per device; the CPU's covers the whole machine whatever the ranks.
    devices_in_peak = ranks if accelerator != "cpu" else 1
    peak_ds = per_device_peak * devices_in_peak if per_device_peak else None
    # Measured on rank 0's device (or, for CPU ranks, its share of the cores): one share per rank.
    mm = matmul_peak_tflops(accelerator, best.config.precision, opts.matmul_seconds)
    share = ranks if accelerator != "cpu" else max(1.0, min(ranks, (os.cpu_count() or 1) / torch.get_num_threads()))
    peak_mm = mm * share if mm else None
    # The winning rung's own peak: the process's would include every larger batch tried.
    peak_mem = best.peak_memory_gib if best.peak_memory_gib is not None else peak_rss_gib()

    instance_type, source = opts.instance_type, "given" if opts.instance_type else None
    if instance_type is None and (found := hardware.ec2_instance_type()):
        instance_type, source = found, "imds"

    stats = step_stats(timing.step_times, timing.warmup_steps, timing.warmup_seconds)
    return ProbeResult(
        workload=spec, workload_id=spec.workload_id, instance_type=instance_type,
        instance_type_source=source, hardware=hw, software=hardware.software_versions(),
        config=best.config, samples_per_sec=m.samples_per_sec, samples_per_sec_ci=(m.ci_low, m.ci_high),
        step_time=stats, flops_per_sample=fps, achieved_tflops=achieved,
        peak_tflops_datasheet=peak_ds, utilisation_datasheet=achieved / peak_ds if achieved and peak_ds else None,
        peak_tflops_matmul=peak_mm, utilisation_matmul=achieved / peak_mm if achieved and peak_mm else None,
        peak_memory_gib=peak_mem, ladder=lad.rungs, started_at=started, stop_reason=timing.reason,
        devices_in_peak=devices_in_peak, profile_dir=profile_dir,
    )
