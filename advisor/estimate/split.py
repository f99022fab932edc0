"""A training step's time on one device, split by what bounds it: the one home of that rule.

The probe's StepCounter (lightning_module/run/counting.py) splits a step's work three ways:

- matmul/conv/attention FLOPs F: bound by the device's tensor-core peak P at the precision used
  (catalog/data/accelerators.json, each figure with its datasheet source);
- the bytes of every other op, B_o (normalisation, softmax, elementwise; unfused, as eager
  PyTorch runs them): bound by its memory bandwidth B (the same table);
- its dispatched ops: bound by the host (advisor/estimate/host_floor.py: a per-op cost measured on
  our H100's host, applied as a floor on a GPU step's time, not added to it).

Per sample, on one device, with the workload's split intensity I_s = F / B_o:

    t / F = 1/P + (1/I_s) (theta_m beta / B + theta_o)

the first term the tensor cores', the second the memory system's (beta = 2 for fp32/TF32
activations, 1 for 16-bit) plus a fixed per-byte part (kernel launches and the framework's per-op
work come with the unfused ops that move those bytes). theta_m and theta_o are fitted (fit.py):
they hold the efficiencies (how much of the datasheet peak and bandwidth real kernels reach), and
they are the same for every device, so a workload that spends half its time in bandwidth-bound ops
gains the bandwidth ratio on that half and the FLOP/s ratio on the other. The fit writes the
second term against the reference workload's I_s: m_w = I_ref / I_s (fit.memory_factors).

Before the split the memory term took every op's bytes (matmuls' included: `ALL`), which
charged a transformer's large matmuls to the bandwidth; `NONE` gives every workload one intensity.
"""

from __future__ import annotations

import numpy as np

SPLIT = "split"  # F / the bytes of the ops without FLOPs (this module)
ALL = "all"  # F / every op's bytes (the model before the split)
NONE = "none"  # one intensity for every workload (the model before workload shapes)
SHAPES = (SPLIT, ALL, NONE)


def seconds_per_flop(inv_peak, mem_per_bandwidth, m, theta_m: float, theta_o: float):
    """A device's time per FLOP of a workload (1/(TFLOP/s) units): its tensor cores' 1/P, plus m x
    (theta_m x beta/B + theta_o) for the bandwidth-bound bytes. Arrays or floats, broadcast."""
    return np.asarray(inv_peak) + np.asarray(m) * (theta_m * np.asarray(mem_per_bandwidth) + theta_o)


def memory_share(inv_peak: float, mem_per_bandwidth: float, m: float, theta_m: float, theta_o: float) -> float:
    """The share of a step's device time its bandwidth-bound ops and their fixed part take."""
    total = float(seconds_per_flop(inv_peak, mem_per_bandwidth, m, theta_m, theta_o))
    return 1.0 - inv_peak / total
