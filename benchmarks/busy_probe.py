"""A CPU probe quiet and beside a busy process (issue 33): does the stored figure hold?

    python benchmarks/busy_probe.py                # quiet, beside one busy process, quiet again: ~1 min
    python benchmarks/busy_probe.py --rounds 5     # five such brackets in turn, and how many met the target
    python benchmarks/busy_probe.py --burners 2    # beside two
    python benchmarks/busy_probe.py --quick        # a functional smoke: shorter rungs, no confirmation

It probes examples/gan.py's TinyGAN (issue 33's case: a GAN small enough that each op is short and
the intra-op threads' barriers decide its speed) on the CPU with `advisor probe`, as a user runs it,
into a results store of its own: once on the machine as it is, then with --burners processes
spinning in a Python busy loop beside it, then on the machine as it is again (the machine's own speed
drifts between probes a minute apart: the quiet figure is the geometric mean of the two either side).
It prints, for each run, the threads the ladder picked, the baseline's figure at torch's default
threads (what the probe stored before the threads rung),
the stored figure, the contention record and the bf16 rung's outcome, then the stored figure busy
against quiet (target: within 20%), and which CPU case it ran in: bf16 native (AVX512_BF16 / AMX /
Arm BF16) or emulated (AVX2 only; there bf16 must not win, busy or not).
The quiet run must be quiet: do not run it on a machine others are using.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

TARGET = 0.20  # the busy run's stored figure within 20% of the quiet run's
WORKLOAD = "examples.gan:TinyGAN"


def burn(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


def probe(args, store: str, out: str) -> dict:
    """`advisor probe` on the CPU, its result read back from --output (the figure it stored)."""
    argv = [sys.executable, "-m", "advisor", "probe", "--workload", WORKLOAD, "--accelerator", "cpu",
            "--store", store, "--output", out, "--skip", "compile,workers,batch",
            "--max-seconds", str(args.max_seconds), "--confirm-rounds", str(args.confirm_rounds)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run(argv, check=False, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"advisor probe exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    with open(out) as f:
        return json.load(f)


def report(label: str, r: dict) -> float:
    ladder = {x["rung"]: x for x in r["ladder"]}
    base = ladder["baseline"]
    c = r.get("contention") or {}
    bf16 = ladder.get("bf16")
    print(f"[{label}] threads picked: {r['config'].get('threads')} (baseline ran at {base['config'].get('threads')}: "
          f"{base['samples_per_sec']:,.0f} samples/s)")
    for name, x in ladder.items():
        if name.startswith("threads="):
            figure = f" {x['samples_per_sec']:,.0f} samples/s" if x["samples_per_sec"] else ""
            xc = x.get("contention") or {}
            steps = (f" ({x['steps_timed']} steps, {xc.get('contended_steps', 0)} contended, stopped {x.get('stop_reason')})"
                     if x["samples_per_sec"] else "")
            print(f"[{label}]   {name}: {x['status']}{figure}{steps}" + (" kept" if x["kept"] else "")
                  + (f" ({x['note']})" if x.get("note") else ""))
    conf = r.get("confirmation")
    if conf:
        # The stored figure is the pick's legs here (their clean steps), not the ladder's draw above.
        print(f"[{label}] A-B legs: baseline {', '.join(f'{v:,.0f}' for v in conf['baseline_samples_per_sec'])}, "
              f"pick {', '.join(f'{v:,.0f}' for v in conf['tuned_samples_per_sec'])} samples/s; held {conf['held']}")
    if bf16 is not None:
        print(f"[{label}] bf16 rung: {bf16['status']}" + (" kept" if bf16["kept"] else "")
              + (f" ({bf16['error']})" if bf16.get("error") else ""))
    others = f", others kept {c['others_share']:.0%} of its CPUs busy" if c.get("others_share") is not None else ""
    # Why the stored figure's timing stopped and, when the result is not reliable, every reason it gives
    # (a CI short of its target, a baseline that moved, contention): the figure is compared either way.
    print(f"[{label}] stored: {r['samples_per_sec']:,.0f} samples/s over {r['step_time']['n_steps']} steps "
          f"(stopped {r.get('stop_reason')}), {r['config']['precision']}, contended {bool(c.get('contended'))}{others}, "
          f"reliable {r['reliable']}" + (f" ({'; '.join(r.get('unreliable_reasons') or [])})" if not r["reliable"] else ""),
          flush=True)
    return float(r["samples_per_sec"])


def bracket(args) -> tuple[dict, dict, dict]:
    """A quiet probe, one beside --burners busy processes, and a quiet one again, into one store."""
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "results.db")
        quiet = probe(args, store, os.path.join(tmp, "quiet.json"))
        stop_at = time.time() + 600
        burners = [mp.Process(target=burn, args=(stop_at,), daemon=True) for _ in range(args.burners)]
        for b in burners:
            b.start()
        try:
            busy = probe(args, store, os.path.join(tmp, "busy.json"))
        finally:
            for b in burners:
                b.terminate()
                b.join()
        after = probe(args, store, os.path.join(tmp, "after.json"))
    return quiet, busy, after


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--burners", type=int, default=1, help="busy processes beside the second probe (default 1)")
    ap.add_argument("--max-seconds", type=float, default=4.0, help="each rung's timing limit (default 4)")
    ap.add_argument("--confirm-rounds", type=int, default=1, help="A-B rounds (default 1)")
    ap.add_argument("--rounds", type=int, default=1, help="quiet-busy-quiet brackets run in turn (default 1)")
    ap.add_argument("--quick", action="store_true", help="a functional smoke: 1 s rungs, no confirmation")
    args = ap.parse_args()
    if args.quick:
        args.max_seconds, args.confirm_rounds = 1.0, 0
    from catalog.accelerators import cpu_native_bf16

    t0 = time.perf_counter()
    aparts = []
    for i in range(args.rounds):
        quiet, busy, after = bracket(args)
        if i == 0:
            hw = quiet["hardware"]
            native = cpu_native_bf16(hw.get("isa_flags") or [], hw.get("cpu_manufacturer"))
            print(f"CPU: {hw.get('cpu_model')}, {hw.get('physical_cores')} cores / {hw.get('logical_cpus')} CPUs; "
                  "case: " + ("bf16 native (AVX512_BF16 / AMX / Arm BF16)" if native else "AVX2 only (bf16 emulated)"))
        label = f"round {i + 1}: " if args.rounds > 1 else ""
        q0 = report(f"{label}quiet, before", quiet)
        b = report(f"{label}beside {args.burners} busy process(es)", busy)
        q1 = report(f"{label}quiet, after", after)
        # The machine itself drifts between probes minutes apart (other tenants of the host, its clock):
        # the quiet figure is the geometric mean of the two quiet probes either side of the busy one.
        q = math.sqrt(q0 * q1)
        apart = abs(b - q) / q
        aparts.append(apart)
        print(f"{label}quiet probes before and after: {q0:,.0f} and {q1:,.0f} samples/s ({abs(q1 - q0) / q0:.0%} apart: "
              f"the machine's own drift); stored figure busy {b:,.0f} vs quiet {q:,.0f} samples/s: {apart:.0%} apart "
              f"(target <= {TARGET:.0%}: {'met' if apart <= TARGET else 'NOT met'})")
        if not native:
            won = [x["rung"] for r in (quiet, busy, after) for x in r["ladder"]
                   if x["rung"].startswith("bf16") and x["kept"]]
            print(f"{label}emulated bf16 kept: {'NO (as it should)' if not won else 'YES: ' + ', '.join(won)}")
    if args.rounds > 1:
        met = sum(a <= TARGET for a in aparts)
        print(f"busy vs quiet over {args.rounds} rounds: {', '.join(f'{a:.0%}' for a in aparts)} apart "
              f"(median {statistics.median(aparts):.0%}); target <= {TARGET:.0%} met in {met} of {args.rounds}")
    print(f"wall time: {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
