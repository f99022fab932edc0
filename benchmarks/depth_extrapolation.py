"""How far a model measured as shallower copies lands from the same model measured whole.

    python benchmarks/depth_extrapolation.py                 # the figure: minutes on a quiet CPU
    python benchmarks/depth_extrapolation.py --write         # ... and store it for the probe
    python benchmarks/depth_extrapolation.py --widths 16 --full-depths 6 --max-seconds 2 \\
        --rounds 3 --max-steps 8                             # a smoke run: a few minutes

For each model (examples/tinylm.py at each width and full depth) it times the shallow copies
(--depths) and the full model together, every depth once a round, back to back, for --rounds rounds
(run/shallow.py's time_rounds, the probe's own), fits step(L) = a + b x L on the shallow copies
alone (contract/extrapolate.py's fit_depths, the probe's own) and compares the extrapolated
samples/s and its 95% band with the full model's, timed in the same rounds: a whole model timed
minutes apart from its copies would measure the machine's drift, not the extrapolation. It also
runs the probe's --depths path end to end and compares its counts (FLOPs, ops, memory traffic,
parameters: exact) with a whole probe's.

Printed per model: the extrapolated samples/s's error against the whole model's, the band's ends
(as errors), whether the band covers the whole model's mean ("covered") or reaches its 95% CI
("overlaps"), and how far outside the band it landed. The figure the probe widens its band by is
the largest |error| of samples/s: on a quiet machine mostly what the line misses (a step that is
not quite linear in the depth), under load the noise as well, so larger than it need be;
--write stores it in lightning_module/contract/data/depth_extrapolation.json with how and where it
was measured (say "under load" with --note).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
from datetime import datetime, timezone

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def options(spec, depths, args):
    from lightning_module.contract.options import ProbeOptions

    return ProbeOptions(spec=spec, accelerator="cpu", devices=1, tune=False, target_ci=args.target_ci,
                        max_seconds=args.max_seconds, max_steps=args.max_steps, warmup_steps=2,
                        remeasure_rounds=0, confirm_rounds=0, matmul_seconds=0.05, depth_rounds=args.rounds,
                        depth_arg="layers" if depths else None, depths=depths)


def same_rounds(spec, depths, full, args):
    """The copies and the full model timed in the same rounds; the fit on the copies alone."""
    from lightning_module.contract.extrapolate import fit_depths
    from lightning_module.contract.result import ProbeConfig
    from lightning_module.run.measure import measure
    from lightning_module.run.shallow import time_rounds

    opts = options(spec, depths, args)
    config = ProbeConfig(accelerator="cpu", devices=1, num_nodes=1, strategy="auto", precision="32-true",
                         batch_size=spec.batch_size)
    rounds = time_rounds(opts, config, (*depths, full), lambda d, settings, label: measure(settings, config))
    fit = fit_depths([{d: r[d] for d in depths} for r in rounds.steps])
    whole = [r[full] for r in rounds.steps]
    return fit, whole


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--widths", default="32,64", help="d_model of each model (comma-separated)")
    ap.add_argument("--full-depths", default="4,8", help="full depths measured whole (comma-separated)")
    ap.add_argument("--depths", default="1,2,3", help="the shallow depths (two or more)")
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4, help="rounds of the copies and the full model")
    ap.add_argument("--max-seconds", type=float, default=8.0, help="timed seconds per depth, over all rounds")
    ap.add_argument("--max-steps", type=int, default=None, help="timed steps per depth per round at most")
    ap.add_argument("--target-ci", type=float, default=0.02)
    ap.add_argument("--no-probe-path", action="store_true", help="skip the probe's --depths path (the counts)")
    ap.add_argument("--write", action="store_true", help="store the figure for the probe")
    ap.add_argument("--note", default="", help="said with the figure (e.g. 'under load')")
    args = ap.parse_args()

    from lightning_module.contract.extrapolate import ERROR_FILE, parse_depths
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.contract.timing import t95
    from lightning_module.run.measure import quiet_lightning
    from lightning_module.run.probe import run_probe

    quiet_lightning()
    depths = parse_depths(args.depths)
    rows = []
    for width in (int(w) for w in args.widths.split(",")):
        for full in (int(d) for d in args.full_depths.split(",")):
            init = {"d_model": width, "heads": args.heads, "layers": full, "seq_len": args.seq_len, "vocab_size": 256,
                    "batch_size": 8}
            spec = WorkloadSpec(model="examples.tinylm:TinyLM", init_args=init, batch_size=8, batch_size_fixed=True)
            fit, whole = same_rounds(spec, depths, full, args)
            n = len(whole)
            w_mean = statistics.fmean(whole)
            w_half = t95(n - 1) * statistics.stdev(whole) / math.sqrt(n)
            step = fit.step_s(full)
            lo, hi = fit.band(full)
            # samples/s error (rate = samples / step): whole / extrapolated step - 1
            row = {"width": width, "full_depth": full, "seq_len": args.seq_len, "depths": list(depths),
                   "rounds": n, "samples_per_sec": w_mean / step - 1,
                   "band": [w_mean / hi - 1, w_mean / lo - 1],  # the band's ends as samples/s errors
                   "whole_ci": w_half / w_mean,
                   "covered": lo <= w_mean <= hi, "overlaps": lo - w_half <= w_mean <= hi + w_half,
                   # how far outside its band the extrapolated rate landed (0: covered)
                   "outside": max(0.0, w_mean / hi - 1, 1 - w_mean / lo) if not lo <= w_mean <= hi else 0.0,
                   "intercept_ms": fit.intercept_s * 1e3, "slope_ms": fit.slope_s * 1e3}
            if not args.no_probe_path:
                ext, who = run_probe(options(spec, depths, args)), run_probe(options(spec, None, args))

                def err(x, y):
                    return (x - y) / y if x is not None and y else None

                row.update({"flops_per_sample": err(ext.flops_per_sample, who.flops_per_sample),
                            "ops_per_step": err(ext.shape.ops_per_step, who.shape.ops_per_step),
                            "traffic": err(ext.shape.memory_traffic_bytes_per_sample,
                                           who.shape.memory_traffic_bytes_per_sample),
                            "parameters": err(ext.shape.parameters, who.shape.parameters),
                            "probe_path_samples_per_sec": err(ext.samples_per_sec, who.samples_per_sec)})
            rows.append(row)
            print(" ".join(f"{k}={v:+.3f}" if isinstance(v, float) else
                           f"{k}=[{v[0]:+.3f},{v[1]:+.3f}]" if k == "band" else f"{k}={v}" for k, v in row.items()),
                  flush=True)
    worst = max(abs(r["samples_per_sec"]) for r in rows)
    outside = max(r["outside"] for r in rows)
    print(f"samples/s over {len(rows)} models from depths {args.depths}, the full model timed in the same rounds: "
          f"median |error| {statistics.median(abs(r['samples_per_sec']) for r in rows):.3f}, largest {worst:.3f}; "
          f"band covered {sum(r['covered'] for r in rows)}/{len(rows)}, overlapped the whole's CI "
          f"{sum(r['overlaps'] for r in rows)}/{len(rows)}; largest share outside the band {outside:.3f}")
    for k in ("flops_per_sample", "ops_per_step", "traffic", "parameters", "probe_path_samples_per_sec"):
        vals = [abs(r[k]) for r in rows if r.get(k) is not None]
        if vals:
            print(f"largest |error| of {k}: {max(vals):.4f}")
    if args.write:
        when = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        doc = {"relative_error": round(worst, 4),
               "meaning": "the largest |error| of the extrapolated samples/s against the whole model timed in the "
                          "same rounds (derived: the rows' samples_per_sec); the probe widens its fitted band by it",
               "measured": f"benchmarks/depth_extrapolation.py {when}, {platform.processor() or platform.machine()}, "
                           f"{len(rows)} TinyLM models (d_model {args.widths}, full depths {args.full_depths}, "
                           f"sequence {args.seq_len}) from depths {args.depths} in {args.rounds} rounds"
                           + (f"; {args.note}" if args.note else ""),
               "rows": rows}
        ERROR_FILE.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {ERROR_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
