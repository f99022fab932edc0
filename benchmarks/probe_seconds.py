"""Where a probe's seconds go, rung by rung (issue 32's benchmark): each measurement the probe makes
(a rung, its one-step check, a re-measurement, an A-B confirmation leg, a memory-fit run) timed
from outside and split into set-up (model and Trainer built, or a child process started: torch
imported, the model built), warm-up (to settle.py's change-point, the compile step included) and
timed steps; what is left of the probe's wall time (FLOP counting, matmul peaks, assembling) is
"outside".

    with RungSeconds() as seconds:
        result = probe.run_probe(opts)
    seconds.report("raced", wall)

It wraps `lightning_module.run.probe.measure_anywhere`, the one door every measurement passes.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass


@dataclass
class Call:
    label: str
    child: bool  # run_cpu / xla: a child process (torch imported, model built again)
    wall: float
    warmup: float = 0.0
    timed: float = 0.0
    steps: int = 0
    warmup_steps: int = 0
    stop: str | None = None
    failed: str | None = None

    @property
    def setup(self) -> float:
        return max(0.0, self.wall - self.warmup - self.timed)


class RungSeconds:
    def __init__(self, clock=time.perf_counter):
        self.calls: list[Call] = []
        self.clock = clock  # a simulated replay's fake clock (probe_replay.py); the wall clock otherwise

    def __enter__(self):
        from lightning_module.run import probe

        self._probe, self._orig = probe, probe.measure_anywhere

        def timed(settings, config, **kw):
            label = kw.get("label") or ("memory" if not kw.get("profile_dir") else "profile")
            child = bool(config.run_cpu or config.xla)
            t0 = self.clock()
            try:
                m = self._orig(settings, config, **kw)
            except BaseException as e:
                self.calls.append(Call(label, child, self.clock() - t0, failed=type(e).__name__))
                raise
            call = Call(label, child, self.clock() - t0, steps=m.steps_timed, stop=m.stop_reason)
            t = m.extra
            if t is not None and hasattr(t, "step_times"):
                call.warmup, call.timed, call.warmup_steps = t.warmup_seconds, sum(t.step_times), t.warmup_steps
            self.calls.append(call)
            return m

        probe.measure_anywhere = timed
        return self

    def __exit__(self, *exc):
        self._probe.measure_anywhere = self._orig
        return False

    def totals(self) -> dict[str, float]:
        out = defaultdict(float)
        for c in self.calls:
            out["setup (child process)" if c.child else "setup"] += c.setup
            out["warm-up"] += c.warmup
            out["timed"] += c.timed
        return dict(out)

    def report(self, label: str, wall: float) -> None:
        """One line per measurement, then the totals by kind and by where in the probe."""
        print(f"  [{label}] seconds per measurement (set-up / warm-up (steps) / timed (steps), stop):")
        for c in self.calls:
            what = f"failed: {c.failed}" if c.failed else c.stop or "?"
            print(f"  [{label}]   {c.label:<24}{' child' if c.child else '      '} {c.wall:7.1f} s = "
                  f"{c.setup:6.1f} / {c.warmup:6.1f} ({c.warmup_steps}) / {c.timed:6.1f} ({c.steps}), {what}")
        inside = sum(c.wall for c in self.calls)
        by_part = defaultdict(float)
        for c in self.calls:
            by_part["confirmation" if c.label.startswith("confirm") else "memory fit" if c.label == "memory"
                    else "ladder"] += c.wall
        parts = ", ".join(f"{k} {v:.0f} s ({v / wall:.0%})" for k, v in by_part.items())
        kinds = ", ".join(f"{k} {v:.0f} s ({v / wall:.0%})" for k, v in self.totals().items())
        print(f"  [{label}] of {wall:.0f} s: {parts}, outside measurements {wall - inside:.0f} s "
              f"({(wall - inside) / wall:.0%}); by kind: {kinds}", flush=True)
