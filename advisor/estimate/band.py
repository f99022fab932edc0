"""What a throughput band means as a distribution, in one place (the ranking's confidence and the
probe plan both read it).

A band (low, high) around a figure is its calibrated central interval: it covers BAND_COVERAGE of
the truths (advisor/estimate/calibrate.py). The truth is the figure x f, log f split-normal with
median 0: below the figure its sd is log(figure / low) / z, above it log(high / figure) / z, z the
standard normal's (1 + BAND_COVERAGE) / 2 quantile. A run's hours scale with 1 / f, so the hours'
q-quantile is the figure's hours x exp(sd_low x z_q).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from .calibrate import CALIBRATED_SHARE

# The share of published figures an estimate's band is calibrated to cover (leave-one-device-out).
BAND_COVERAGE = CALIBRATED_SHARE


def band_z(coverage: float = BAND_COVERAGE) -> float:
    """The standard normal quantile a `coverage` central interval ends at."""
    return NormalDist().inv_cdf(0.5 + coverage / 2)


def split_normal_sds(samples_per_sec, low, high, coverage: float = BAND_COVERAGE) -> tuple[np.ndarray, np.ndarray]:
    """(sd_low, sd_high) of log(truth / samples_per_sec); 0 where the band is missing or empty."""
    z = band_z(coverage)
    samples_per_sec, low, high = (np.asarray(a, dtype=float) for a in (samples_per_sec, low, high))
    with np.errstate(divide="ignore", invalid="ignore"):
        sd_low = np.nan_to_num(np.log(samples_per_sec / low) / z, nan=0.0, posinf=0.0).clip(0)
        sd_high = np.nan_to_num(np.log(high / samples_per_sec) / z, nan=0.0, posinf=0.0).clip(0)
    return sd_low, sd_high


def slow_factor(sd_low, level: float) -> np.ndarray:
    """Hours at the `level` quantile over the figure's hours: exp(sd_low x z_level) (1 for level
    0.5; the truth is slower than this with probability 1 - level)."""
    return np.exp(np.asarray(sd_low, dtype=float) * NormalDist().inv_cdf(level))
