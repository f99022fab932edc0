"""The threads rung (contract/threads.py) and the quiet rule for emulated precision (contract/quiet.py),
on simulated measurements: no training, no wall times."""

from __future__ import annotations

import random

import pytest

from lightning_module.contract.ladder import LadderOptions, RungContended, RungMeasurement, race_lines, required_gain, run_ladder
from lightning_module.contract.quiet import held_quietly
from lightning_module.contract.result import Contention, ProbeConfig
from lightning_module.contract.threads import (
    THREADS_GAIN,
    busy_elsewhere,
    climb_threads,
    confirm_margin,
    free_cores,
    thread_counts,
)

# One other process busy on a 2-core machine, as the probe's baseline records it (contention.py).
BUSY = Contention(contended=True, steps=20, contended_steps=20, wait_share=0.4, others_share=0.5, cpus=2,
                  cores_in_use=2, own_load=2.0, load_average=3.0, reasons=["20 of 20 timed steps contended"])
QUIET = Contention(contended=False, steps=20, others_share=0.01, cpus=2, cores_in_use=2, own_load=2.0, load_average=2.0)
ONLY_THREADS = frozenset({"precision", "channels_last", "compile", "workers", "batch"})


def fake(speed, contention=None, log=None):
    def measure(rung, cfg):
        if log is not None:
            log.append((rung, cfg))
        v = speed(cfg)
        return RungMeasurement(v, v * 0.99, v * 1.01, steps_timed=10, contention=contention(cfg) if contention else None)

    return measure


def test_the_counts_are_the_free_cores_then_halvings():
    assert thread_counts(1) == (1,)
    assert thread_counts(2) == (2, 1)
    assert thread_counts(6) == (6, 4, 2, 1)
    assert thread_counts(8) == (8, 4, 2, 1)


def test_free_cores_leave_out_what_other_processes_kept_busy():
    assert busy_elsewhere(None) == 0 and busy_elsewhere(QUIET) == 0  # quiet: every core is the probe's
    assert busy_elsewhere(BUSY) == pytest.approx(1.0)
    assert free_cores(2, 2, BUSY) == 1 and free_cores(2, 2, QUIET) == 2
    # the load average beyond the probe's own counts when /proc/stat saw less (it lags, but it was there)
    loaded = BUSY.model_copy(update={"others_share": 0.1, "cpus": 8, "load_average": 5.0})
    assert free_cores(8, 8, loaded) == 5
    # hyper-threads: 3 busy logical CPUs of 16 on 8 cores are 1.5 cores, rounded to 2
    assert free_cores(8, 16, BUSY.model_copy(update={"others_share": 3 / 16, "cpus": 16, "load_average": None})) == 6
    assert free_cores(2, 2, BUSY.model_copy(update={"others_share": 1.0})) == 1  # never none


def busy_gan(cfg: ProbeConfig) -> float:
    """Issue 33's GAN beside one busy process on 2 cores: 403 samples/s at 2 threads, 13,486 at 1."""
    return 403.0 if (cfg.threads or 2) == 2 else 13486.0


def test_beside_a_busy_process_the_rung_picks_one_thread_and_later_rungs_build_on_it():
    log = []
    start = ProbeConfig(accelerator="cpu", batch_size=32, threads=2)
    opts = LadderOptions(skip=frozenset({"channels_last", "compile", "workers", "batch"}), vision=False,
                         thread_counts=lambda base: thread_counts(free_cores(2, 2, base.contention)))
    lad = run_ladder(start, fake(busy_gan, contention=lambda c: BUSY if c.threads == 2 else QUIET, log=log), opts)
    rungs = {r.rung: r for r in lad.rungs}
    assert [r.rung for r in lad.rungs][:2] == ["baseline", "threads=1"]
    assert rungs["threads=1"].kept and lad.best.config.threads == 1
    assert lad.best.samples_per_sec / lad.rungs[0].samples_per_sec == pytest.approx(13486 / 403)
    assert dict(log)["bf16"].threads == 1  # the precision rung is measured at the picked count


def test_on_a_quiet_machine_the_climb_stops_at_the_first_count_that_does_not_win():
    log = []
    start = ProbeConfig(accelerator="cpu", batch_size=32, threads=8)
    opts = LadderOptions(skip=ONLY_THREADS, thread_counts=lambda base: thread_counts(free_cores(8, 16, base.contention)))
    lad = run_ladder(start, fake(lambda c: 100.0 * c.threads ** 0.5, contention=lambda c: QUIET, log=log), opts)
    assert [n for n, _ in log] == ["baseline", "threads=4"]  # 2 and 1 not tried once 4 lost
    assert lad.best.config.threads == 8


def test_on_a_quiet_machine_counts_within_the_margin_keep_the_default_in_every_run():
    """Issue 33: on a quiet 2-vCPU machine TinyGAN's one and two threads race within the noise, and
    the pick flipped between runs with whichever read faster. Here one thread is truly 3% faster
    and each draw is off by 2% (sd): the old rule (beat the best beyond its own CI) picked one thread
    in about three runs of four; inside THREADS_GAIN the default is kept in (nearly) every run, and
    the rung says why."""
    rng = random.Random(8)
    start = ProbeConfig(accelerator="cpu", batch_size=64, threads=2)
    opts = LadderOptions(skip=ONLY_THREADS, thread_counts=lambda base: thread_counts(2))
    picks, notes = [], []
    for _ in range(200):
        lad = run_ladder(start, fake(lambda c: (10300.0 if c.threads == 1 else 10000.0) * rng.gauss(1, 0.02)), opts)
        picks.append(lad.best.config.threads)
        notes += [r.note for r in lad.rungs if r.rung == "threads=1" and not r.kept]
    assert picks.count(2) / len(picks) >= 0.97
    assert required_gain("threads=1", opts) == THREADS_GAIN and required_gain("bf16", opts) == 0.0
    assert race_lines("threads=1", 10000.0, opts) == (pytest.approx(10000.0 * (1 + THREADS_GAIN)), 10000.0)
    # Every run that kept two threads says why, but the few where one thread read slower beyond its noise (lost).
    said = [n for n in notes if n is not None]
    assert len(notes) == picks.count(2) and len(said) >= 0.9 * len(notes)
    assert all(n.startswith(f"inside the {THREADS_GAIN:.0%} margin of the best so far (2 threads") and "torch's default" in n
               for n in said)


def test_a_small_model_keeps_halving_while_fewer_threads_win():
    start = ProbeConfig(accelerator="cpu", batch_size=32, threads=8)
    opts = LadderOptions(skip=ONLY_THREADS, thread_counts=lambda base: thread_counts(8))
    lad = run_ladder(start, fake(lambda c: {8: 100.0, 4: 150.0, 2: 180.0, 1: 170.0}[c.threads]), opts)
    assert [r.rung for r in lad.rungs if r.rung.startswith("threads")] == ["threads=4", "threads=2", "threads=1"]
    assert lad.best.config.threads == 2


def test_more_threads_are_tried_only_where_the_baseline_ran_at_fewer_than_the_free_cores():
    tried = []

    def best():
        return lad_best[-1]

    from lightning_module.contract.result import RungResult

    base = RungResult(rung="baseline", config=ProbeConfig(accelerator="cpu", batch_size=8, threads=1), status="ok",
                      samples_per_sec=10.0, kept=True)
    lad_best = [base]

    def attempt(name, cfg):
        tried.append(name)
        v = 10.0 * cfg.threads if cfg.threads <= 2 else 15.0
        r = RungResult(rung=name, config=cfg, status="ok", samples_per_sec=v, kept=v > best().samples_per_sec)
        if r.kept:
            lad_best.append(r)
        return r

    climb_threads(best, attempt, thread_counts(4), baseline_threads=1)
    assert tried == ["threads=2", "threads=4"] and best().config.threads == 2


def test_the_rung_is_left_out_without_counts_or_a_known_baseline_count():
    lad = run_ladder(ProbeConfig(accelerator="cpu", batch_size=8), fake(busy_gan), LadderOptions(
        skip=ONLY_THREADS, thread_counts=lambda base: (2, 1)))
    assert not any(r.rung.startswith("threads") for r in lad.rungs)  # the baseline's count is not known
    lad = run_ladder(ProbeConfig(accelerator="cpu", batch_size=8, threads=2), fake(busy_gan),
                     LadderOptions(skip=ONLY_THREADS | {"threads"}, thread_counts=lambda base: (2, 1)))
    assert [(r.rung, r.status, r.error) for r in lad.rungs[1:2]] == [("threads", "skipped", "--skip threads")]


# ---------------------------------------------------------------------------------------------
# A precision the ISA emulates wins only on a quiet re-measurement


def m(v: float, contention: Contention | None) -> RungMeasurement:
    return RungMeasurement(v, v * 0.99, v * 1.01, steps_timed=10, contention=contention)


def test_an_emulated_rung_that_loses_is_not_measured_again():
    calls = []
    first = m(50.0, BUSY)
    assert held_quietly(first, lambda: calls.append(1) or m(500.0, QUIET), 100.0, "emulated") is first
    assert calls == []


def test_an_emulated_rung_that_won_contended_is_judged_on_its_quiet_re_measurement():
    again = iter([m(170.0, BUSY), m(60.0, QUIET)])
    out = held_quietly(m(176.0, BUSY), lambda: next(again), 100.0, "bf16 is emulated on this CPU")
    assert out.samples_per_sec == 60.0 and out.contention == QUIET  # the quiet draw: it loses to the best


def test_an_emulated_rung_never_measured_quietly_is_rejected_with_the_reason():
    calls = []
    with pytest.raises(RungContended, match=r"^rejected: bf16 is emulated on this CPU; it beat the best so far "
                                            r"\(176\.0 against 100\.0"):
        held_quietly(m(176.0, BUSY), lambda: calls.append(1) or m(176.0, BUSY), 100.0, "bf16 is emulated on this CPU")
    assert len(calls) == 2


@pytest.mark.parametrize("quiet_again,status,kept", [(False, "contended", False), (True, "ok", True)])
def test_the_probe_rejects_emulated_bf16_that_won_only_while_the_machine_was_busy(monkeypatch, quiet_again, status, kept):
    """Issue 33's "confirmed 1.76x" bf16 on an AVX2 CPU: the baseline measured busy, bf16 faster, busy too."""
    from factories import fake_measurement

    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import probe

    real = probe.hardware.fingerprint()
    monkeypatch.setattr(probe.hardware, "fingerprint",
                        lambda: real.model_copy(update={"isa_flags": ["avx2", "fma"], "cpu_manufacturer": "amd"}))
    seen = []

    def measure(rung, cfg):
        seen.append(rung)
        bf16 = cfg.precision == "bf16-mixed"
        busy = not (quiet_again and bf16 and seen.count(rung) > 1)
        return fake_measurement(176.0 if bf16 else 100.0, cfg.batch_size, contention=BUSY if busy else QUIET)

    spec = WorkloadSpec(model="mlp", image_size=8, num_classes=10, batch_size=32)
    opts = probe.ProbeOptions(spec=spec, accelerator="cpu", matmul_seconds=0.05, confirm_rounds=0, race=False,
                              skip=frozenset({"threads", "channels_last", "compile", "workers", "batch", "run_cpu"}))
    result = probe.run_probe(opts, measure_fn=measure)
    bf16 = next(r for r in result.ladder if r.rung == "bf16")
    assert (bf16.status, bf16.kept) == (status, kept)
    if not quiet_again:
        assert bf16.error.startswith("rejected: bf16 is emulated") and seen.count("bf16") == 3
        assert result.config.precision == "32-true"


THREAD_MODULE = '''
import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SEEN = []


class Counting(pl.LightningModule):
    def __init__(self, num_classes=10):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, num_classes))

    def training_step(self, batch, batch_idx):
        SEEN.append(torch.get_num_threads())  # the intra-op threads this step ran with
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.randn(64, 3, 4, 4), torch.arange(64) % 10), batch_size=4)
'''


def test_a_configuration_trains_with_its_threads_and_torchs_count_is_put_back(user_module):
    import torch

    from lightning_module.contract.options import MeasureSettings
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import measure

    user_module("threadwork", THREAD_MODULE)
    import threadwork

    measure.quiet_lightning()
    before = torch.get_num_threads()
    want = 1 if before > 1 else 2
    settings = MeasureSettings(WorkloadSpec(model="threadwork:Counting", image_size=4, num_classes=10),
                               warmup_steps=1, max_steps=4, max_seconds=5)
    m = measure.measure(settings, ProbeConfig(accelerator="cpu", batch_size=4, threads=want))
    assert set(threadwork.SEEN) == {want} and m.steps_timed >= 1
    assert m.contention is None or m.contention.cores_in_use == want  # the watch judges the threads in use
    assert torch.get_num_threads() == before


def test_the_probe_summary_says_the_threads_to_set():
    from advisor.render.probe import describe

    assert describe(ProbeConfig(accelerator="cpu", batch_size=8, threads=1)).endswith("1 thread (torch.set_num_threads(1))")
    assert "thread" not in describe(ProbeConfig(accelerator="cpu", batch_size=8))  # an older result: not known
    assert "thread" not in describe(ProbeConfig(accelerator="gpu", batch_size=8, threads=4))


def steady(sps: float, n: int = 200) -> RungMeasurement:
    from lightning_module.contract.reliability import summarise
    from lightning_module.contract.timing import Timing

    return summarise(Timing([32 / sps] * n, 1, 0.1, 32 / sps, "converged", [False] * n, QUIET), 32, 0.03)


@pytest.mark.parametrize("tuned_leg,threads,outcome", [(10500.0, 2, "lost"), (25000.0, 1, "held")])
def test_the_confirmation_asks_a_thread_count_for_the_same_margin(monkeypatch, tuned_leg, threads, outcome):
    """One thread read 20% faster in the ladder (one draw, beyond the margin); its A-B legs read 5%
    (paired, fresh): inside the margin, so the baseline's count is kept, the threads rung says why
    (the old rule: 'held', one thread, since the legs' CI lay above 1). A busy machine's 2.5x holds."""
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import probe

    monkeypatch.setattr(probe.torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(probe, "cpu_thread_counts", lambda hw: lambda base: (2, 1))

    def measure(rung, cfg):
        if rung == "confirm tuned":
            return steady(tuned_leg)
        return steady(12000.0 if cfg.threads == 1 else 10000.0)

    spec = WorkloadSpec(model="mlp", image_size=8, num_classes=10, batch_size=32)
    opts = probe.ProbeOptions(spec=spec, accelerator="cpu", matmul_seconds=0.05, confirm_rounds=1,
                              skip=frozenset({"precision", "channels_last", "compile", "workers", "batch", "run_cpu"}))
    result = probe.run_probe(opts, measure_fn=measure)
    rung = next(r for r in result.ladder if r.rung == "threads=1")
    assert rung.kept and result.config.threads == threads and result.confirmation.outcome == outcome
    assert ("inside the 10% margin" in (rung.note or "")) == (threads == 2)
    base = ProbeConfig(accelerator="cpu", batch_size=32, threads=2)
    assert confirm_margin(base, base.model_copy(update={"threads": 1})) == THREADS_GAIN
    assert confirm_margin(base, base.model_copy(update={"threads": 1, "precision": "bf16-mixed"})) == 0.0
    assert confirm_margin(base, base.model_copy(update={"precision": "bf16-mixed"})) == 0.0
