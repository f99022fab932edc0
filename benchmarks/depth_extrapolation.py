"""How far a model measured as two shallower copies lands from the same model measured whole.

    python benchmarks/depth_extrapolation.py                 # the figure: minutes on a quiet CPU
    python benchmarks/depth_extrapolation.py --write         # ... and store it for the probe
    python benchmarks/depth_extrapolation.py --widths 16 --full-depths 4 --max-seconds 0.3 \\
        --max-steps 5                                        # a smoke run: under a minute

For each model (examples/tinylm.py at each width and full depth) it probes the baseline whole and
with --depth-arg layers --depths 1,2 (the probe's own path, run/shallow.py), and compares step
time (samples/s), FLOPs, ops and memory traffic per sample. The figure the probe widens an
extrapolated CI by is the largest |error| of samples/s seen (each side); --write stores it in
lightning_module/contract/data/depth_extrapolation.json with how and where it was measured. Run it
on a quiet machine: it times things, and a contended run makes the figure larger than it is.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from datetime import datetime, timezone

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def probe(spec, depths, args):
    from lightning_module.contract.options import ProbeOptions
    from lightning_module.run.probe import run_probe

    opts = ProbeOptions(spec=spec, accelerator="cpu", devices=1, tune=False, target_ci=args.target_ci,
                        max_seconds=args.max_seconds, max_steps=args.max_steps, warmup_steps=2,
                        remeasure_rounds=0, confirm_rounds=0, matmul_seconds=0.05,
                        depth_arg="layers" if depths else None, depths=depths)
    return run_probe(opts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--widths", default="32,64", help="d_model of each model (comma-separated)")
    ap.add_argument("--full-depths", default="4,8", help="full depths measured whole (comma-separated)")
    ap.add_argument("--depths", default="1,2", help="the two shallow depths")
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--max-seconds", type=float, default=5.0)
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--target-ci", type=float, default=0.02)
    ap.add_argument("--write", action="store_true", help="store the figure for the probe")
    ap.add_argument("--note", default="", help="said with the figure (e.g. 'under load')")
    args = ap.parse_args()

    from lightning_module.contract.extrapolate import ERROR_FILE
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run.measure import quiet_lightning

    quiet_lightning()
    a, b = (int(x) for x in args.depths.split(","))
    rows = []
    for width in (int(w) for w in args.widths.split(",")):
        for full in (int(d) for d in args.full_depths.split(",")):
            init = {"d_model": width, "heads": 2, "layers": full, "seq_len": args.seq_len, "vocab_size": 256,
                    "batch_size": 8}
            spec = WorkloadSpec(model="examples.tinylm:TinyLM", init_args=init, batch_size=8, batch_size_fixed=True)
            whole, ext = probe(spec, None, args), probe(spec, (a, b), args)

            def err(x, y):
                return (x - y) / y if x is not None and y else None

            row = {"width": width, "full_depth": full, "depths": [a, b],
                   "samples_per_sec": err(ext.samples_per_sec, whole.samples_per_sec),
                   "flops_per_sample": err(ext.flops_per_sample, whole.flops_per_sample),
                   "ops_per_step": err(ext.shape.ops_per_step, whole.shape.ops_per_step),
                   "traffic": err(ext.shape.memory_traffic_bytes_per_sample, whole.shape.memory_traffic_bytes_per_sample),
                   "parameters": err(ext.shape.parameters, whole.shape.parameters),
                   "whole_ci": whole.samples_per_sec_ci[1] / whole.samples_per_sec - 1}
            rows.append(row)
            print(" ".join(f"{k}={v:+.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    worst = max(abs(r["samples_per_sec"]) for r in rows)
    print(f"largest |error| of samples/s: {worst:.3f} over {len(rows)} models (depths {a},{b})")
    for k in ("flops_per_sample", "ops_per_step", "traffic", "parameters"):
        vals = [abs(r[k]) for r in rows if r[k] is not None]
        if vals:
            print(f"largest |error| of {k}: {max(vals):.4f}")
    if args.write:
        when = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        doc = {"relative_error": round(worst, 4),
               "measured": f"benchmarks/depth_extrapolation.py {when}, {platform.processor() or platform.machine()}, "
                           f"{len(rows)} TinyLM models (d_model {args.widths}, full depths {args.full_depths}) "
                           f"from depths {a},{b}" + (f"; {args.note}" if args.note else ""),
               "rows": rows}
        ERROR_FILE.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {ERROR_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
