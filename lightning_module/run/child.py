"""Measure one configuration in a child process, for what acts only at process start: the
run_cpu rung's preloaded allocator / OpenMP runtime and pinned cores, and torch_xla's
PJRT_DEVICE=CPU.

    python -m lightning_module.run.child REQUEST.json RESULT.json

The parent (`measure_in_child`) writes the request, starts the child with the environment, and
reads the result back: the RungMeasurement with its step timing, or the rung's status and reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, fields

from ..contract.ladder import RungError, RungMeasurement, classify
from ..contract.options import MeasureSettings
from ..contract.result import Contention, ProbeConfig, WorkloadSpec
from ..contract.timing import Timing

STARTUP_S = 120.0  # importing torch and lightning in a fresh process, on a busy machine


def _timing_to_json(t: Timing) -> dict:
    d = asdict(t)
    d["contention"] = t.contention.model_dump() if t.contention else None
    return d


def _timing_from_json(d: dict) -> Timing:
    d = dict(d)
    c = d.pop("contention", None)
    names = {f.name for f in fields(Timing)}
    return Timing(**{k: v for k, v in d.items() if k in names}, contention=Contention(**c) if c else None)


def measurement_to_json(m: RungMeasurement) -> dict:
    return {
        "samples_per_sec": m.samples_per_sec, "ci_low": m.ci_low, "ci_high": m.ci_high,
        "steps_timed": m.steps_timed, "compile_seconds": m.compile_seconds, "peak_memory_gib": m.peak_memory_gib,
        "remeasured": m.remeasured, "ci_target_met": m.ci_target_met,
        "samples_per_step": m.samples_per_step, "model_facts": m.model_facts, "stop_reason": m.stop_reason,
        "runtime_overhead": m.runtime_overhead, "rank_peaks": m.rank_peaks,
        "timing": _timing_to_json(m.extra) if isinstance(m.extra, Timing) else None,
    }


def measurement_from_json(d: dict) -> RungMeasurement:
    timing = _timing_from_json(d["timing"]) if d.get("timing") else None
    return RungMeasurement(
        samples_per_sec=d["samples_per_sec"], ci_low=d["ci_low"], ci_high=d["ci_high"],
        steps_timed=d["steps_timed"], compile_seconds=d.get("compile_seconds"),
        peak_memory_gib=d.get("peak_memory_gib"), extra=timing,
        contention=timing.contention if timing else None, remeasured=d.get("remeasured", 0),
        ci_target_met=d.get("ci_target_met"), samples_per_step=d.get("samples_per_step"),
        model_facts=d.get("model_facts"), stop_reason=d.get("stop_reason"),
        runtime_overhead=d.get("runtime_overhead"), rank_peaks=d.get("rank_peaks"),
    )


def child_environment(config: ProbeConfig, base: dict[str, str]) -> tuple[dict[str, str], list[int] | None]:
    """The environment and the cores to pin to, for a configuration measured in a child."""
    env, cores = dict(base), None
    if config.run_cpu:
        from . import run_cpu
        from .hardware import parse_cpuinfo, read_cpuinfo

        p = run_cpu.plan_here(parse_cpuinfo(read_cpuinfo())["cpu_manufacturer"])
        try:
            env = run_cpu.environment(config, p, env)
        except FileNotFoundError as e:
            raise RungError("not-installed", str(e)) from None
        cores = p.cores
    if config.xla:
        env.setdefault("PJRT_DEVICE", "CPU")
    # The child imports what the parent could: its own tree first, then the user's modules.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env, cores


def measure_in_child(settings: MeasureSettings, config: ProbeConfig, slow_step_s: float | None = None,
                     profile_dir: str | None = None, max_steps: int | None = None) -> RungMeasurement:
    env, cores = child_environment(config, dict(os.environ))
    request = {
        "settings": {**asdict(settings), "spec": settings.spec.model_dump()},
        "config": config.model_dump(), "slow_step_s": slow_step_s, "cores": cores,
        "profile_dir": profile_dir, "max_steps": max_steps,
    }
    # Past every bound measure() keeps itself (compilation, slow steps, the rung's time): a hang.
    # Margins, not measurements: 4x the rung's time covers its re-measurement and contended steps'
    # extension; 20 slow steps (30 s when none is known) the warm-up and the first step.
    limit = STARTUP_S + settings.compile_timeout + 4 * min(settings.max_seconds, 3600.0) + 20 * (slow_step_s or 30.0)
    with tempfile.TemporaryDirectory(prefix="advisor-child-") as tmp:
        req_path, out_path, log_path = (os.path.join(tmp, n) for n in ("request.json", "result.json", "child.log"))
        with open(req_path, "w") as f:
            json.dump(request, f)
        with open(log_path, "w") as log:
            proc = subprocess.Popen([sys.executable, "-m", "lightning_module.run.child", req_path, out_path],
                                    env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            try:
                proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                raise RungError("timeout", f"the child process measuring this rung ran past {limit:.0f} s") from None
            finally:
                if proc.poll() is None:  # a signal to the parent, or the timeout: the child goes too
                    proc.kill()
                    proc.wait()
        try:
            with open(out_path) as f:
                answer = json.load(f)
        except (OSError, ValueError):
            with open(log_path, errors="replace") as f:
                tail = [line.strip() for line in f.read().splitlines() if line.strip()]
            raise RungError("failed", f"the child process exited with status {proc.returncode}: "
                                      f"{tail[-1] if tail else 'no output'}") from None
    if not answer.get("ok"):
        raise RungError(answer.get("status", "failed"), answer.get("error", "unknown error"))
    return measurement_from_json(answer["measurement"])


def main(argv: list[str]) -> int:
    req_path, out_path = argv
    with open(req_path) as f:
        req = json.load(f)
    if req.get("cores"):
        os.sched_setaffinity(0, req["cores"])  # as run_cpu's numactl -C / taskset: before torch starts its threads
    # Imported only now: torch starts its threads when it is imported, on the cores set above.
    from .callbacks import profiler_callback
    from .measure import measure, quiet_lightning

    quiet_lightning()
    s = dict(req["settings"])
    settings = MeasureSettings(**{**s, "spec": WorkloadSpec(**s["spec"])})
    config = ProbeConfig(**req["config"])
    extra = []
    if req.get("profile_dir"):
        extra.append(profiler_callback(req["profile_dir"], config.accelerator))
    try:
        m = measure(settings, config, extra_callbacks=extra, max_steps=req.get("max_steps"),
                    slow_step_s=req.get("slow_step_s"))
        answer = {"ok": True, "measurement": measurement_to_json(m)}
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        status, why = classify(e)
        answer = {"ok": False, "status": status, "error": why}
    with open(out_path, "w") as f:
        json.dump(answer, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
