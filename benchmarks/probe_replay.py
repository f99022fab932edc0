"""The full and the raced ladder replayed on a fake clock (issue 32): the probe's real decision code
(run_probe: the ladder, the race, the re-measurement, the A-B confirmation, the stopwatch and its
settling) fed simulated step times, over many seeds. Every figure it prints is SIMULATED.

    python benchmarks/probe_replay.py                 # 40 seeds, ResNet-50 224 px on a 2-core AVX2 EPYC
    python benchmarks/probe_replay.py --seeds 5       # a quick look

Each configuration's steps are drawn around the mean step time of the QUIET run of 2026-11-29
(`benchmarks/probe_ladder.py --mode race`, ResNet-50 at 224 px, batch 32, AVX2-only EPYC, 2 cores;
its per-rung figures are in QUIET below, with where each comes from), with lognormal noise whose
spread is derived from that run's CIs (the median of the CVs back-computed from each kept or
measured rung's +-CI and step count). Configurations that run did not measure are derived from
the ones it did (each says how). Set-up seconds, a cold rung's first step and torch.compile's
first step are taken from the same run's per-measurement seconds.

For each seed it prints nothing; at the end: the raced / full simulated seconds (median and
quartiles over the seeds), how often the two picks' true throughputs lie within 3% of each other,
and how often each ladder's pick is within 3% of the best configuration in the table.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
from dataclasses import dataclass, field

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lightning_module.contract.timing import t95  # after the checkout is on the path

# The quiet run of 2026-11-29 (`benchmarks/probe_ladder.py --mode race`, its 787 s raced against
# 1,166 s full; the per-rung lines of its output, quoted in issue 32's closing note of that day and
# summarised in README.md): (samples/s, +-CI as a fraction, timed steps) of each rung read,
# full and raced ladder; channels_last on from "channels_last" on, 2 threads, fp32 unless named.
QUIET = {
    # key: (channels_last, compile, workers, threads, batch) -> readings
    (False, False, 0, 2, 32): [(2.88, 0.047, 7), (2.74, 0.023, 9)],  # baseline, full and raced
    (False, False, 0, 1, 32): [(1.58, 0.095, 4), (1.54, 0.047, 5)],  # threads=1
    (True, False, 0, 2, 32): [(3.67, 0.077, 9), (3.79, 0.106, 5)],  # channels_last
    (True, True, 0, 2, 32): [(3.07, 0.062, 6), (3.53, 0.059, 11)],  # compile
    (True, False, 2, 2, 32): [(2.93, 0.067, 3), (2.62, 0.067, 3)],  # workers=2
    (True, False, 0, 2, 64): [(2.76, 0.118, 5), (2.40, 0.100, 3)],  # batch=64
    (True, False, 0, 2, 16): [(3.92, 0.055, 12), (3.78, 0.025, 13)],  # batch=16
    (True, False, 0, 2, 8): [(4.08, 0.035, 21), (3.51, 0.029, 9)],  # batch=8
    (True, False, 0, 2, 4): [(3.52, 0.029, 16)],  # batch=4 (full only)
    (True, True, 0, 2, 8): [(3.40, 0.035, 9)],  # compile@batch=8
    (True, False, 2, 2, 8): [(3.59, 0.028, 6)],  # workers=2@batch=8
}
BF16_STEP_S = 33.3  # the full ladder's bf16 step ran past 33.3 s (3x the best) and was stopped: at least that
SETUP_S = {"cold": 0.9, "warm": 0.4, "workers": 2.0}  # the runs' set-up seconds (medians of its per-measurement lines)
FIRST_STEP = 1.25  # a cold rung's first step over a steady one: baseline 12.0 s against ~9.4 s (raced run)
COMPILE_S = 95.0  # torch.compile's first step less a steady one: the full run's compile warm-up 104.2 s over 2 steps
# ... and with its graphs cached (the same shapes compiled before: torch's FX-graph cache): the
# raced run's compile warm-up 15.6 s over 2 steps of ~9 s, after the full run had compiled them
COMPILE_CACHED_S = 6.0
WORKERS_START_S = 10.0  # starting 2 loader workers: workers=2's first step ran ~10 s over its steady ones


def step_cv() -> float:
    """Derived: each reading's CV per step from its 95% CI, half = t95(n-1) cv / sqrt(n); the median."""
    cvs = [ci * math.sqrt(n) / t95(n - 1) for rs in QUIET.values() for _, ci, n in rs if n >= 3]
    return statistics.median(cvs)


def true_speed(cl: bool, comp: bool, workers: int, threads: int, batch: int, bf16: bool) -> float:
    """samples/s of a configuration: the mean of the quiet run's readings where it read it, else
    derived from the nearest that it read (each line says how)."""
    if bf16:
        return batch / BF16_STEP_S
    key = (cl, comp, workers, threads, batch)
    if key in QUIET:
        return statistics.fmean(s for s, _, _ in QUIET[key])
    if threads == 1:  # derived: threads=1 at 32 read ~0.56x two threads at 32; the same share elsewhere
        share = true_speed(False, False, 0, 1, 32, False) / true_speed(False, False, 0, 2, 32, False)
        return share * true_speed(cl, comp, workers, 2, batch, False)
    if not cl and (comp or workers or batch != 32):  # derived: channels_last's gain at 32 applies alike
        return true_speed(True, comp, workers, threads, batch, False) * true_speed(False, False, 0, 2, 32, False) \
            / true_speed(True, False, 0, 2, 32, False)
    if comp or workers:  # derived: compile's / workers' factor at the nearest batch read (32 or 8)
        near = 8 if batch <= 16 else 32
        factor = true_speed(cl, comp, workers, threads, near, False) / true_speed(cl, False, 0, threads, near, False)
        return factor * true_speed(cl, False, 0, threads, batch, False)
    # derived: below 4 and above 64 the curve goes on falling as it fell from 8 to 4 and from 32 to 64
    if batch < 4:
        fell = true_speed(True, False, 0, 2, 4, False) / true_speed(True, False, 0, 2, 8, False)
        return true_speed(cl, False, 0, threads, batch * 2, False) * fell
    fell = true_speed(True, False, 0, 2, 64, False) / true_speed(True, False, 0, 2, 32, False)
    return true_speed(cl, False, 0, threads, batch // 2, False) * fell


def speed_of(cfg) -> float:
    return true_speed(cfg.channels_last, cfg.compile, cfg.num_workers, cfg.threads or 2, cfg.batch_size,
                      cfg.precision != "32-true")


@dataclass
class Clock:
    now: float = 0.0


@dataclass
class Simulated:
    """probe.measure_anywhere on simulated steps: a real Stopwatch (settling, race, stopping rule),
    fed step times drawn around the configuration's mean, on the fake clock."""

    rng: random.Random
    clock: Clock
    cv: float
    prev: object = None
    compiled: set = field(default_factory=set)  # batch sizes compiled before (cached graphs)

    def __call__(self, settings, cfg, **kw):
        from lightning_module.contract.ladder import CompileTimeout, RungTooSlow
        from lightning_module.contract.race import Race
        from lightning_module.contract.reliability import summarise
        from lightning_module.contract.timing import Stopwatch
        from lightning_module.contract.warm import keeps, settle_from
        from lightning_module.run.measure import SLOW_FACTOR

        warm = keeps(self.prev, cfg, True) is not None
        self.prev = cfg
        per_step = cfg.batch_size
        mean = per_step / speed_of(cfg)
        self.clock.now += SETUP_S["warm" if warm else "workers" if cfg.num_workers else "cold"]
        warmup = settings.warmup_steps + (1 if cfg.compile else 0)
        # as measure.measure builds it (a tree from before the race's prior replays too: --tree)
        prior = getattr(settings, "race_prior", None)
        race = (Race(settings.race_threshold, per_step, floor=settings.race_floor,
                     **({"prior": tuple(prior)} if prior else {}))
                if settings.race_threshold else None)
        sw = Stopwatch(warmup, settings.target_ci, settings.max_seconds, settings.max_steps, race=race,
                       settle_from=settle_from(warm, cfg.compile), look_s=getattr(settings, "look_s", None))
        cap = kw.get("max_steps") or ((sw.warmup_steps + settings.max_steps) if settings.max_steps else None)
        slow, first_s = kw.get("slow_step_s"), kw.get("first_step_s")
        first_limit = (settings.compile_timeout if cfg.compile else first_s if first_s is not None
                       else SLOW_FACTOR * slow if slow else None)
        sw.start(self.clock.now)
        while True:
            d = mean * math.exp(self.rng.gauss(0, self.cv))
            if sw.steps == 0:
                compile_s = COMPILE_CACHED_S if cfg.batch_size in self.compiled else COMPILE_S
                if cfg.compile:
                    self.compiled.add(cfg.batch_size)
                d = d * (1 if warm else FIRST_STEP) + (compile_s if cfg.compile else 0.0) \
                    + (WORKERS_START_S if cfg.num_workers and not warm else 0.0)
            limit = first_limit if sw.steps == 0 else slow
            if limit is not None and d > limit:
                self.clock.now += limit
                raise (CompileTimeout if cfg.compile and sw.steps == 0 else RungTooSlow)(f"step past {limit:.1f} s")
            self.clock.now += d
            sw.step(self.clock.now)
            reason = sw.stop_reason(self.clock.now)
            if reason is None and cap is not None and sw.steps >= cap:
                reason = "max-steps"
            if reason is not None:
                sw.timing.reason = reason
                t = sw.timing
                if not t.step_times:
                    t.step_times.append(d)
                return summarise(t, per_step, settings.target_ci, peak_memory_gib=1.0 + 0.1 * cfg.batch_size)


def replay(race: bool, seed: int, cv: float, max_seconds: float = 20.0):
    """One probe on the fake clock: (result, simulated seconds, RungSeconds)."""
    import probe_seconds

    from lightning_module.contract.options import ProbeOptions
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run import probe

    clock = Clock()
    sim = Simulated(random.Random(seed), clock, cv)
    real_anywhere, real_fp = probe.measure_anywhere, probe.hardware.fingerprint
    hw = real_fp()
    probe.measure_anywhere = sim
    probe.hardware.fingerprint = lambda: hw.model_copy(update={"isa_flags": ["avx2", "fma"], "cpu_manufacturer": "amd",
                                                                "physical_cores": 2})
    try:
        # a small convolutional model to preflight (channels_last applies); its steps are simulated
        spec = WorkloadSpec(model="resnet18", image_size=32, num_classes=10, batch_size=32)
        opts = ProbeOptions(spec=spec, accelerator="cpu", matmul_seconds=0.01, max_seconds=max_seconds, warmup_steps=2,
                            compile_timeout=150.0, confirm_rounds=2, remeasure_rounds=1, race=race,
                            skip=frozenset({"run_cpu"}))
        with probe_seconds.RungSeconds(clock=lambda: clock.now) as seconds:
            result = probe.run_probe(opts)
    finally:
        probe.measure_anywhere, probe.hardware.fingerprint = real_anywhere, real_fp
    return result, clock.now, seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--verbose", action="store_true", help="each seed's picks and seconds")
    args = ap.parse_args()
    import logging

    logging.disable(logging.WARNING)
    from lightning_module.run import measure

    measure.quiet_lightning()
    cv = step_cv()
    best = max(true_speed(cl, c, w, 2, b, False) for (cl, c, w, _, b) in QUIET)
    ratios, gaps, agree, full_ok, raced_ok, kinds = [], [], 0, 0, 0, {"full": [], "raced": []}
    for seed in range(args.seeds):
        (rf, sf, kf), (rr, sr, kr) = replay(False, seed, cv), replay(True, seed, cv)
        vf, vr = speed_of(rf.config), speed_of(rr.config)
        ratios.append(sr / sf)
        gaps.append(abs(vr - vf) / vf)
        agree += gaps[-1] <= 0.03
        full_ok += vf >= 0.97 * best
        raced_ok += vr >= 0.97 * best
        kinds["full"].append(kf.totals())
        kinds["raced"].append(kr.totals())
        if args.verbose:
            print(f"seed {seed}: full {sf:6.0f} s -> {rf.config.batch_size:>3} cl={rf.config.channels_last} "
                  f"({vf:.2f}/s); raced {sr:6.0f} s -> {rr.config.batch_size:>3} cl={rr.config.channels_last} "
                  f"({vr:.2f}/s); ratio {sr / sf:.2f}", flush=True)
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [ratios[0]] * 3
    n = args.seeds
    print(f"SIMULATED replay of the quiet run of 2026-11-29 (ResNet-50 224 px, 2-core AVX2 EPYC), {n} seeds, "
          f"step CV {cv:.1%} (derived from that run's CIs):")
    for label in ("full", "raced"):
        tot = {k: statistics.median(t.get(k, 0.0) for t in kinds[label]) for k in ("setup", "warm-up", "timed")}
        print(f"  {label}: median seconds by kind: " + ", ".join(f"{k} {v:.0f}" for k, v in tot.items()))
    print(f"  raced / full simulated seconds: median {q[1]:.2f} (quartiles {q[0]:.2f}-{q[2]:.2f}; target <= 0.33)")
    print(f"  picks' true throughputs within 3% of each other: {agree}/{n} ({agree / n:.0%}); "
          f"within 3% of the table's best ({best:.2f}/s): full {full_ok}/{n}, raced {raced_ok}/{n}; "
          f"the picks' gap: median {statistics.median(gaps):.1%}, largest {max(gaps):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
