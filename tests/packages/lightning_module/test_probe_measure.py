"""measure(): one configuration in a real Trainer, cut short when a step is too slow to matter."""

from __future__ import annotations

import textwrap
import time

import pytest

SLOW_MODULE = '''
import time
import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SLEPT = []


class Sleepy(pl.LightningModule):
    def __init__(self, num_classes=10):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, num_classes))

    def training_step(self, batch, batch_idx):
        time.sleep(0.02 if batch_idx < 3 else 5.0)  # fast warm-up, then a step that never ends in time
        SLEPT.append(batch_idx)  # the steps whose sleep ran to its end
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.randn(256, 3, 4, 4), torch.arange(256) % 10), batch_size=4)
'''


SLOW_START = SLOW_MODULE.replace("Sleepy", "SlowStart").replace(
    "time.sleep(0.02 if batch_idx < 3 else 5.0)  # fast warm-up, then a step that never ends in time",
    "time.sleep(1.0 if batch_idx == 0 else 0.02)  # a slow set-up step, then steady fast steps")


@pytest.fixture
def sleepy(user_module):
    user_module("sleepywork", textwrap.dedent(SLOW_MODULE) + textwrap.dedent(SLOW_START))


def test_a_step_past_the_slow_limit_is_cut_short(sleepy):
    from lightning_module.contract.ladder import RungTooSlow
    from lightning_module.contract.options import MeasureSettings
    from lightning_module.contract.result import ProbeConfig, WorkloadSpec
    from lightning_module.run import measure

    measure.quiet_lightning()
    settings = MeasureSettings(WorkloadSpec(model="sleepywork:Sleepy", image_size=4, num_classes=10),
                               warmup_steps=1, max_seconds=30)
    import sleepywork

    with pytest.raises(RungTooSlow, match="cannot win"):
        measure.measure(settings, ProbeConfig(accelerator="cpu", batch_size=4), slow_step_s=0.5)
    assert max(sleepywork.SLEPT) < 3  # the 5 s step was interrupted inside its sleep
    # The alarm is disarmed afterwards: a normal rung in the same process runs to its end.
    fast = MeasureSettings(WorkloadSpec(model="mlp", image_size=4, num_classes=10), warmup_steps=1,
                           max_seconds=0.2)
    m = measure.measure(fast, ProbeConfig(accelerator="cpu", batch_size=4), slow_step_s=0.5)
    assert m.samples_per_sec > 0 and m.steps_timed >= 2
    time.sleep(0.6)  # a stray SIGALRM would raise here


def test_a_slow_first_step_does_not_cut_the_rung(sleepy):
    """The first step is set-up and warm-up: a 1 s first step under a 0.5 s step limit is no
    reason to drop a rung whose steady steps are fast."""
    from lightning_module.contract.options import MeasureSettings
    from lightning_module.contract.result import ProbeConfig, WorkloadSpec
    from lightning_module.run import measure

    measure.quiet_lightning()
    settings = MeasureSettings(WorkloadSpec(model="sleepywork:SlowStart", image_size=4, num_classes=10),
                               warmup_steps=1, max_seconds=0.3)
    m = measure.measure(settings, ProbeConfig(accelerator="cpu", batch_size=4), slow_step_s=0.5)
    assert m.steps_timed >= 2


def test_peak_rss_is_per_rung_not_the_process_lifetime():
    from lightning_module.run import devices

    devices.reset_peak_rss()
    before = devices.peak_rss_gib()
    big = bytearray(512 * 2**20)  # zero pages are not resident until touched
    big[:: 4096] = b"\1" * (len(big) // 4096)
    assert devices.peak_rss_gib() - before > 0.4
    del big
    devices.reset_peak_rss()
    assert devices.peak_rss_gib() - before < 0.2  # a later rung does not inherit the 512 MiB


def test_the_result_reports_the_winning_rungs_peak_memory_on_cpu():
    from factories import fake_measurement

    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import probe

    def measure(rung, cfg):
        v = 100.0 / cfg.batch_size  # smaller batches win; the bigger ones used more memory
        return fake_measurement(v, cfg.batch_size, peak_memory_gib=cfg.batch_size / 100)

    spec = WorkloadSpec(model="mlp", image_size=8, num_classes=10, batch_size=16)
    opts = probe.ProbeOptions(spec=spec, accelerator="cpu", matmul_seconds=0.05,
                              skip=frozenset({"precision", "channels_last", "compile", "workers", "run_cpu"}))
    result = probe.run_probe(opts, measure_fn=measure)
    assert result.config.batch_size < 16
    assert result.peak_memory_gib == result.config.batch_size / 100


def test_normalise_makes_its_constants_once_per_device(monkeypatch):
    import torch

    from lightning_module.run import data

    x = torch.full((2, 3, 4, 4), 255, dtype=torch.uint8)
    first = data.normalise(x)
    assert first[0, 0, 0, 0].item() == pytest.approx((1 - 0.485) / 0.229, rel=1e-5)
    made = []
    real = torch.tensor
    monkeypatch.setattr(torch, "tensor", lambda *a, **k: made.append(a) or real(*a, **k))
    assert torch.equal(data.normalise(x), first)
    assert made == []  # no host-to-device copy of the statistics on every step


@pytest.mark.parametrize("devices", [1, 2])
def test_step_alarms_only_bound_a_single_rank(monkeypatch, devices):
    """One DDP rank cut short by its own alarm would leave the others waiting in an all-reduce."""
    from lightning_module.contract.options import MeasureSettings
    from lightning_module.contract.result import ProbeConfig, WorkloadSpec
    from lightning_module.run import measure

    seen = {}

    class Stop(Exception):
        pass

    def capture(*args, **kwargs):
        seen.update(kwargs)
        raise Stop  # before any Trainer or process group is made

    monkeypatch.setattr(measure, "StepTimer", capture)
    settings = MeasureSettings(WorkloadSpec(model="mlp", image_size=4, num_classes=10))
    cfg = ProbeConfig(accelerator="cpu", devices=devices, strategy="ddp", compile=True, batch_size=4)
    with pytest.raises(Stop):
        measure.measure(settings, cfg, slow_step_s=5.0)
    bounded = seen["first_step_limit"] is not None and seen["step_limit"] is not None
    assert bounded == (devices == 1)


def test_the_matmul_peak_is_not_below_what_a_linear_layer_reaches():
    """The peak is the bound for utilisation: a bf16 nn.Linear-shaped product must not beat it
    (on an AVX2-only CPU a bf16 a @ b is ~10x slower than the a @ b.T that layers run)."""
    import torch

    from lightning_module.run import peaks

    peak = peaks.matmul_peak_tflops("cpu", "bf16-mixed", seconds=0.3)
    x, w = torch.randn(512, 512, dtype=torch.bfloat16), torch.randn(512, 512, dtype=torch.bfloat16)
    torch.nn.functional.linear(x, w)
    t0, reps = time.perf_counter(), 0
    while time.perf_counter() - t0 < 0.3 or reps < 2:
        torch.nn.functional.linear(x, w)
        reps += 1
    linear = 2 * 512**3 * reps / (time.perf_counter() - t0) / 1e12
    assert peak is not None and peak > 0.4 * linear, (peak, linear)  # 0.4: two shared cores are noisy
