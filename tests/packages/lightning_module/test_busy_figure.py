"""The figure a probe stores beside a busy process (issue 33): from the steps nothing slowed, in the
configuration it recommends, its loader workers on the CPUs left free, and never taken for a quiet
figure. Simulated readings and step times: no training, no wall times."""

from __future__ import annotations

import pytest

from lightning_module.contract.contention import ContentionMeter, Reading
from lightning_module.contract.ladder import LadderOptions, RungMeasurement, run_ladder
from lightning_module.contract.race import Race
from lightning_module.contract.reliability import summarise
from lightning_module.contract.result import Contention, ProbeConfig
from lightning_module.contract.threads import free_cpus
from lightning_module.contract.timing import Stopwatch, Timing, usable_steps

BATCH = 64
# One other process busy on a 2-CPU machine, as a baseline at two threads records it (contention.py).
BUSY = Contention(contended=True, steps=20, contended_steps=20, wait_share=0.4, others_share=0.5, cpus=2,
                  cores_in_use=2, own_load=2.0, load_average=3.0, reasons=["20 of 20 timed steps contended"])
QUIET = Contention(contended=False, steps=20, others_share=0.01, cpus=2, cores_in_use=2, own_load=2.0, load_average=2.0)


class Clock:
    """Readings of one training thread on a 2-CPU machine: each step runs `wall` seconds, waits
    `wait` of them for a CPU, and other processes keep `others` CPU-seconds per second busy."""

    def __init__(self):
        self.t = self.cpu = self.wait = self.busy = 0.0

    def step(self, wall: float, wait: float = 0.0, others: float = 0.0) -> Reading:
        self.t += wall
        self.cpu += wall - wait
        self.wait += wait
        self.busy += (wall - wait) + others * wall
        return self.now()

    def now(self) -> Reading:
        return Reading(self.t, self.cpu, run=self.cpu, wait=self.wait, busy=self.busy)


def test_a_raced_rung_s_figure_comes_from_the_clean_steps_its_verdict_was_reached_on():
    """Issue 33's smoke: the threads rung stopped 'won' after 7 steps, 4 of them contended, and its
    figure was the mean of all 7: the race had set the 4 aside, the figure had not. The verdict
    waits for a second of clean steps (timing.MIN_TIMED_SECONDS): 200 of 5 ms."""
    clock = Clock()
    w = Stopwatch(warmup_steps=1, target_ci=0.03, max_seconds=60.0, meter=ContentionMeter(1, 2),
                  race=Race(threshold=4000.0, samples_per_step=BATCH))
    w.start(0.0, clock.now())
    r = clock.step(0.005)
    w.step(r.wall, r)  # the warm-up step
    reason = None
    for i in range(1000):
        # every other step queued for a CPU for 80% of its 25 ms; the others ran alone in 5 ms
        r = clock.step(0.025, wait=0.02, others=1.0) if i % 2 == 0 else clock.step(0.005)
        w.step(r.wall, r)
        if (reason := w.stop_reason(r.wall)) is not None:
            break
    clean = w.timing.contended.count(False)
    assert reason == "won" and clean in (200, 201)  # decided on a second of clean steps
    assert w.timing.contended.count(True) == clean  # as many contended steps, set aside
    w.timing.reason = reason
    m = summarise(w.timing, BATCH, 0.03)
    assert m.samples_per_sec == pytest.approx(BATCH / 0.005)  # the clean steps' figure, not every step's
    # With one clean step there is no spread to go by: every step counts (and the rung is contended).
    t = Timing([0.025, 0.005, 0.025], 1, 0.005, 0.005, "time-limit", [True, False, True])
    assert len(usable_steps(t)) == 3


def test_one_configuration_has_one_figure_however_few_of_its_steps_ran_clean():
    """Issue 33 under load: the threads rung had 2 clean steps of 358 and reported every step's
    mean (2,856 samples/s), the confirmation leg of the same configuration had 9 of 261 and
    reported the clean ones' (9,997): how many steps happened to be clean decided the figure."""
    def rung(clean: int, contended: int) -> float:
        times = [BATCH / 10000.0] * clean + [BATCH / 2500.0] * contended
        flags = [False] * clean + [True] * contended
        return summarise(Timing(times, 1, 0.1, times[0], "time-limit", flags), BATCH, 0.03).samples_per_sec

    assert rung(2, 356) == pytest.approx(10000.0) and rung(9, 252) == pytest.approx(10000.0)
    assert rung(1, 100) < 2600.0  # one clean step: no spread, so every step (flagged contended)


def test_clean_steps_beside_a_busy_neighbour_are_not_a_quiet_figure():
    """One thread on the CPU a busy process leaves free: no step waits for a CPU, but the figure ran
    beside the neighbour (shared caches, memory, maybe one core's two hyper-threads)."""
    clock, m = Clock(), ContentionMeter(cores_in_use=1, cpus=2)
    a = clock.now()
    for _ in range(20):
        b = clock.step(0.005, others=1.0)  # the neighbour keeps the other CPU busy all along
        m.add(a, b)
        a = b
    c = m.record(load_average=2.0, own_load=1)
    assert c.contended_steps == 0 and c.others_share == pytest.approx(0.5)
    assert c.contended and c.reasons == [("other processes kept 50% of its CPUs busy while it ran (their effect "
                                          "through shared caches, memory bandwidth or a shared core is not measured)")]
    clock, m = Clock(), ContentionMeter(cores_in_use=1, cpus=2)
    a = clock.now()
    for _ in range(20):
        b = clock.step(0.005, others=0.04)  # a quiet machine's background: 2% of the two CPUs
        m.add(a, b)
        a = b
    assert not m.record(load_average=1.0, own_load=1).contended


def fake(speed, contention, log):
    def measure(rung, cfg):
        log.append((rung, cfg))
        v = speed(cfg)
        return RungMeasurement(v, v * 0.99, v * 1.01, steps_timed=10, contention=contention(cfg))

    return measure


@pytest.mark.parametrize("baseline,tried", [(BUSY, []), (QUIET, ["workers=2"])])
def test_loader_workers_are_tried_only_on_the_cpus_others_leave_free(baseline, tried):
    """Beside one busy process on 2 CPUs, two workers and the training thread would share the one CPU left."""
    log = []
    start = ProbeConfig(accelerator="cpu", batch_size=32, threads=1)
    opts = LadderOptions(skip=frozenset({"threads", "precision", "channels_last", "compile", "batch"}), vision=False,
                         worker_counts=(2,), free_cpus=lambda base: free_cpus(2, base.contention))
    lad = run_ladder(start, fake(lambda c: 100.0 + c.num_workers, lambda c: baseline, log), opts)
    assert [n for n, _ in log if n.startswith("workers")] == tried
    if not tried:
        (rung,) = [r for r in lad.rungs if r.rung == "workers"]
        assert rung.status == "skipped" and rung.error.startswith("1 CPU(s) free of other processes' load")
    assert free_cpus(8, BUSY) == 7 and free_cpus(2, None) == 2 and free_cpus(1, BUSY) == 1


def timed(sps: float, clean: int, contended: int, contention: Contention, contended_sps: float | None = None):
    """A measurement (as summarise makes it) of `clean` steps at `sps` and `contended` steps at
    `contended_sps` (a tenth of it unless given)."""
    slow = BATCH / (contended_sps or sps / 10)
    times, flags = [slow] * contended + [BATCH / sps] * clean, [True] * contended + [False] * clean
    return summarise(Timing(times, 1, 0.1, times[0], "time-limit", flags, contention), BATCH, 0.03)


def test_the_stored_figure_is_the_pick_s_own_at_its_threads_from_its_clean_steps(monkeypatch):
    """Issue 33's busy GAN: the baseline at torch's two threads beside a busy process, one thread
    picked; the confirmation's legs of the pick train at one thread, and what is stored is their
    clean steps' figure, in the configuration stored."""
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import probe

    monkeypatch.setattr(probe.torch, "get_num_threads", lambda: 2)  # torch's default on 2 cores, wherever this runs
    monkeypatch.setattr(probe, "cpu_thread_counts", lambda hw: lambda base: (2, 1))
    log = []
    one = Contention(contended=True, steps=12, contended_steps=4, wait_share=0.05, others_share=0.02, cpus=2,
                     cores_in_use=1, own_load=1.0, load_average=1.5)

    def measure(rung, cfg):
        log.append((rung, cfg.threads))
        if cfg.threads == 2:
            return timed(400.0, 0, 12, BUSY, contended_sps=400.0)  # every step waits at the barrier for a descheduled thread
        return timed(13000.0 if rung.startswith("confirm") else 11000.0, 8, 4, one)

    spec = WorkloadSpec(model="mlp", image_size=8, num_classes=10, batch_size=BATCH)
    opts = probe.ProbeOptions(spec=spec, accelerator="cpu", matmul_seconds=0.05, confirm_rounds=2,
                              skip=frozenset({"precision", "channels_last", "compile", "workers", "batch", "run_cpu"}))
    result = probe.run_probe(opts, measure_fn=measure)
    assert result.config.threads == 1 and result.confirmation.held
    legs = [t for r, t in log if r == "confirm tuned"]
    assert set(legs) == {1}  # the pick's legs trained at its own count (a raced confirmation: 1 round or 2)
    assert {t for r, t in log if r == "confirm baseline"} == {2}
    assert result.samples_per_sec == pytest.approx(13000.0)  # its legs' clean steps, none of the contended
    assert result.step_time.n_steps == 8 * len(legs)


def test_a_quiet_leg_that_ran_out_of_time_short_of_its_ci_is_never_a_reliable_figure(monkeypatch):
    """Issue 33: a quiet run stored a 1-thread A-B leg's figure. A leg may stop on its CI only after
    a second of steps (timing.MIN_TIMED_SECONDS); one that reaches its budget short of the target is
    still what the probe stores for its configuration, and the result then says it is not reliable
    and why, quiet or not."""
    import random

    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import probe

    monkeypatch.setattr(probe.torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(probe, "cpu_thread_counts", lambda hw: lambda base: (2, 1))
    rng = random.Random(9)

    def measure(rung, cfg):
        if rung == "confirm tuned":  # swings too wide for +-3% in its budget: stopped at its time limit
            times = [BATCH / 12000.0 * rng.choice([0.5, 1.5]) for _ in range(40)]
            return summarise(Timing(times, 1, 0.1, times[0], "time-limit", [False] * 40, QUIET), BATCH, 0.03)
        sps = 12000.0 if cfg.threads == 1 else 10000.0
        return summarise(Timing([BATCH / sps] * 200, 1, 0.1, BATCH / sps, "converged", [False] * 200, QUIET), BATCH, 0.03)

    spec = WorkloadSpec(model="mlp", image_size=8, num_classes=10, batch_size=BATCH)
    opts = probe.ProbeOptions(spec=spec, accelerator="cpu", matmul_seconds=0.05, confirm_rounds=1,
                              skip=frozenset({"precision", "channels_last", "compile", "workers", "batch", "run_cpu"}))
    result = probe.run_probe(opts, measure_fn=measure)
    assert result.config.threads == 1 and not result.contention.contended  # quiet, the pick kept ...
    assert result.stop_reason == "time-limit" and result.step_time.n_steps == 40  # ... from the leg short of its CI
    assert not result.reliable and any("wider than the ±3% target" in r for r in result.unreliable_reasons)
