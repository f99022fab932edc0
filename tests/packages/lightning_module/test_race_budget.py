"""What the raced ladder no longer spends (issue 32), on simulated step times: a rung whose CI has
already decided it against its lines is not re-measured for the +-3% target. No wall times."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from lightning_module.contract.ladder import RungMeasurement
from lightning_module.contract.reliability import decided, summarise
from lightning_module.contract.timing import Timing


def reading(sps: float, lo: float, hi: float) -> RungMeasurement:
    return RungMeasurement(sps, lo, hi, 5)


@pytest.mark.parametrize("ci,threshold,floor,answer", [
    ((112.0, 140.0), 100.0, None, "won"),  # an on/off rung: its CI's low end above the best
    ((80.0, 99.0), 100.0, None, "lost"),
    ((95.0, 112.0), 100.0, None, None),  # straddles the best: not known
    ((104.0, 110.0), 103.0, 100.0, "won"),  # a batch step: above the best by the margin
    ((92.0, 99.5), 103.0, 100.0, "lost"),  # known slower than the best
    ((98.0, 102.5), 103.0, 100.0, "tied"),  # inside the +-3% band
    ((96.0, 102.5), 103.0, 100.0, None),  # reaches below the band: not known
])
def test_a_ci_decides_a_rung_against_its_lines(ci, threshold, floor, answer):
    assert decided(reading(sum(ci) / 2, *ci), threshold, floor) == answer


def noisy_probe(race: bool, seed: int = 5):
    """run_probe whose channels_last reads 1.5x the baseline over 4 steps of 10% noise: a CI far
    wider than +-3% whose low end is still above the best. Returns each rung's measure count."""
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import probe

    rng = random.Random(seed)
    calls: Counter = Counter()

    def measure(rung, cfg):
        calls[rung] += 1
        v, noise, n = (150.0, 0.10, 4) if cfg.channels_last and not rung.startswith("confirm") else (100.0, 0.005, 20)
        mean = cfg.batch_size / v
        t = Timing([mean * (1 + rng.gauss(0, noise)) for _ in range(n)], 1, mean, mean, "time-limit")
        return summarise(t, cfg.batch_size, 0.03)

    spec = WorkloadSpec(model="resnet18", image_size=8, num_classes=10, batch_size=32)
    opts = probe.ProbeOptions(spec=spec, accelerator="cpu", matmul_seconds=0.05, confirm_rounds=1, race=race,
                              remeasure_rounds=1, skip=frozenset({"threads", "precision", "compile", "workers", "batch",
                                                                  "run_cpu"}))
    return probe.run_probe(opts, measure_fn=measure), calls


def test_a_rung_its_ci_has_decided_is_not_remeasured_when_raced():
    full, full_calls = noisy_probe(race=False)
    raced, raced_calls = noisy_probe(race=True)
    for result in (full, raced):
        cl = next(r for r in result.ladder if r.rung == "channels_last")
        assert cl.kept and cl.ci_target_met is False  # won, its CI wider than the target
    assert full_calls["channels_last"] == 2  # the full ladder measures it again for the target
    assert raced_calls["channels_last"] == 1  # raced: the verdict stands (the A-B confirmation confirms)
    assert raced.config.channels_last and full.config.channels_last
