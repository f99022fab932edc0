#!/usr/bin/env python3
"""CPU cost per sample of the probe's synthetic data pipeline: where advisor.estimate.host's
default host cap comes from.

Runs lightning_module.run.data.SyntheticDataModule with one DataLoader worker at several image sizes
and counts CPU seconds per sample of the worker (read after it exits) and of the main (training)
process, then fits each as fixed + bytes / rate. CPU time, not wall time: a busy machine does not inflate it.

    .venv/bin/python scripts/measure_pipeline.py
"""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch

from lightning_module.run.data import SyntheticDataModule

BATCH, WARM, TIMED, PREFETCH = 128, 5, 150, 2


def cpu_us_per_sample(size: int) -> tuple[float, float]:
    """(worker CPU us per sample, main-process CPU us per sample)."""
    dm = SyntheticDataModule(image_size=size, batch_size=BATCH, num_workers=1)
    dl = dm.train_dataloader()
    it = iter(dl)
    for _ in range(WARM):
        next(it)
    t0 = os.times()
    for _ in range(TIMED):
        next(it)
    t1 = os.times()
    del it, dl
    gc.collect()
    time.sleep(1.0)  # the worker exits; its CPU time shows up in the children's counters
    t2 = os.times()
    main = (t1.user - t0.user) + (t1.system - t0.system)
    worker = (t2.children_user - t0.children_user) + (t2.children_system - t0.children_system)
    worker_samples = (WARM + TIMED + PREFETCH) * BATCH  # the worker also made the warm-up and prefetched batches
    return 1e6 * worker / worker_samples, 1e6 * main / (TIMED * BATCH)


def main() -> int:
    torch.set_num_threads(1)
    sizes = (224, 112, 64, 32)
    us = [cpu_us_per_sample(s) for s in sizes]
    nbytes = np.array([3.0 * s * s for s in sizes])
    for s, (w, m) in zip(sizes, us):
        print(f"{s:4d} px: worker {w:7.1f} + main process {m:6.1f} CPU us per sample")
    for name, col in (("worker", 0), ("main process", 1)):
        slope, fixed = np.polyfit(nbytes, [u[col] for u in us], 1)
        print(f"fit, {name}: {fixed:.1f} us + bytes / {1 / slope:.0f} bytes per us")
    print(f"CPU: {os.uname().machine}, {os.cpu_count()} logical CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
