"""Your own model, end to end: each example in examples/ probed here, its recorded shape, the memory
fit's error on a batch size held out of the fit, and what recommend then says of it.

    python benchmarks/own_model.py                 # the three examples: a few minutes on a 2-core CPU
    python benchmarks/own_model.py --max-seconds 2

For each example: a probe without the ladder (the baseline at its own batch size, then the memory
fit's extra batch sizes), then the winner run again at 4x its batch for a few steps: the fit's
prediction there against the peak measured (target: within 10%). Then `recommend` with the probe's
result filed under --instance-type (default: a catalog type this machine's hardware can be), and the
notes of its first rows. On a CPU
the peaks are the process's RSS, mostly the Python/torch runtime: the per-sample part is small and
the error mostly says how steady the fixed part is. Last, the training-run callback's cost per step
(ThroughputCallback, as benchmarks/callback_overhead.py measures it). Timings need a quiet machine.

First it prints the host floor's check (advisor/estimate/host_floor.py): its constants derived again
from the H100 figures in advisor/data/host_floor.json, each fitted example's floor against its
measurement, the held-out example's, and a ResNet-50 step's floor (its ops counted here) at the
batches GPUs train it at. `--floor-only` prints just that (no probes, a few seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import replace

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

EXAMPLES = {
    "tinylm (its own loader)": ["--workload", "examples.tinylm:TinyLM", "--init-args", '{"d_model": 64, "layers": 2}'],
    "tabular (DataModule, LightningCLI config)": ["--config", "examples/tabular.yaml"],
    "recommender (sparse embedding tables, two optimizers)": [
        "--workload", "examples.recommender:Recommender", "--init-args", '{"users": 100000, "items": 20000}'],
}
TARGET = 0.10


def held_out(result_json: str, factor: int = 4) -> tuple[int, float, float | None]:
    """The winner at factor x its batch, a few steps: (batch, measured peak GiB, fitted GiB)."""
    from lightning_module.contract.options import MeasureSettings
    from lightning_module.contract.result import parse_result
    from lightning_module.run.measure import measure, quiet_lightning

    quiet_lightning()
    with open(result_json) as f:
        r = parse_result(f.read())
    spec = r.workload.model_copy(update={"batch_size": r.config.batch_size})  # the probe's own, optimizer included
    bs = r.config.batch_size * factor
    m = measure(replace(MeasureSettings(spec), warmup_steps=1, max_steps=3, target_ci=0.0),
                r.config.model_copy(update={"batch_size": bs}))
    return bs, m.peak_memory_gib, r.shape.memory.gib_at(bs) if r.shape.memory else None


def floor_check() -> None:
    """The host floor's constants from their measured figures, and how well they predict."""
    from advisor.estimate import host_floor as hf

    c, figures = hf.constants(), hf.measured_figures()
    step, op = hf.derive(figures["fitted_on"])
    print(f"host floor ({hf.FLOOR_PATH.name}): {c.step_host_s * 1e3:.3f} ms a step + {c.op_host_s * 1e6:.2f} us an op "
          f"[+ batch / loader samples/s with 0 workers]; derived again here: {step * 1e3:.3f} ms + {op * 1e6:.2f} us")
    for kind, rows in figures.items():
        for f in rows:
            floor = hf.floor_of(f)
            ratio = floor / f["samples_per_sec"]
            held = c.below >= ratio >= 1 / c.above
            print(f"  {kind:9s} {f['example'].split(' ')[0]:32s} batch {f['batch']:4d}, {f['ops_per_step']:3d} ops: "
                  f"floor {floor:9,.0f}/s, H100 measured {f['samples_per_sec']:9,.0f}/s, floor/measured {ratio:.3f}"
                  + ("" if kind == "fitted_on" else f" (band /{c.below:g}..x{c.above:g} holds it: {'yes' if held else 'NO'})"))
    host_floors(figures["fitted_on"][0])
    from lightning_module.contract.result import WorkloadSpec
    from lightning_module.run.measure import quiet_lightning
    from lightning_module.run.peaks import per_sample_counts
    from lightning_module.run.preview import preview

    quiet_lightning()
    spec = WorkloadSpec(model="resnet50", batch_size=4)
    *_, ops = per_sample_counts(spec, preview(spec).first_batch)
    if ops:
        at = ", ".join(f"{b}: {hf.HostFloor(ops, b).samples_per_sec:,.0f}/s" for b in (32, 64, 128, 256, 512))
        print(f"  resnet50 (torchvision, {ops} ops a step counted here): floor per GPU at batch {at}")


def host_floors(f: dict) -> None:
    """One example's floor on each sustained clock of the catalog's GPU hosts (host_speed's rule):
    the middle and its band; a host of uncatalogued clock at the reference's, its band wider."""
    from advisor.estimate import host_floor as hf
    from catalog.io import SNAPSHOT_PATH, load

    floor = hf.HostFloor(f["ops_per_step"], f["batch"],
                         f["pipeline_samples_per_sec_per_worker"] if f["num_workers"] == 0 else None)
    hosts: dict[float | None, list[str]] = {}
    for it in load(SNAPSHOT_PATH).instance_types.values():
        if it.accelerator_kind == "gpu":
            hosts.setdefault(it.cpu_clock_ghz, []).append(it.family)
    print(f"  {f['example'].split(' ')[0]} floor per GPU by its host's sustained clock:")
    for clock in sorted(hosts, key=lambda c: (c is None, c or 0.0)):
        mid, low, high = floor.on_host(clock)
        where = ", ".join(sorted(set(hosts[clock])))
        print(f"    {'unknown' if clock is None else f'{clock:g} GHz':8s} {mid:8,.0f}/s ({low:,.0f}-{high:,.0f})  {where}")


def machine_type() -> str | None:
    """A catalog type this machine can be (CPU vendor, vCPUs, GPUs), or None: the probe is then filed
    unlabelled, and recommend uses it as a measurement of its device off EC2."""
    from catalog.io import SNAPSHOT_PATH, load
    from lightning_module.contract.instance_label import contradictions
    from lightning_module.run.hardware import fingerprint

    hw = fingerprint()
    return next((name for name, it in sorted(load(SNAPSHOT_PATH).instance_types.items())
                 if not contradictions(it, hw) and it.accelerator_kind in ("none", "gpu")), None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-seconds", default="3")
    ap.add_argument("--instance-type", help="the label to file the probes under (default: the first catalog type "
                                             "this machine's hardware does not contradict)")
    ap.add_argument("--floor-only", action="store_true", help="print the host floor's check only")
    a = ap.parse_args()
    floor_check()
    if a.floor_only:
        return 0
    a.instance_type = a.instance_type or machine_type()
    print(f"probes filed as {a.instance_type}" if a.instance_type else "probes filed unlabelled (no catalog type "
          "matches this machine's hardware): recommend takes them as measurements of their device off EC2")
    label = ["--instance-type", a.instance_type] if a.instance_type else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))}
    advisor = [sys.executable, "-m", "advisor.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in EXAMPLES.items():
            out, db = os.path.join(tmp, "r.json"), os.path.join(tmp, f"{len(name)}.db")
            print(f"== {name}: advisor probe {' '.join(args)}")
            p = subprocess.run([*advisor, "probe", *args, "--no-tune", "--max-seconds", a.max_seconds,
                                *label, "--store", db, "--output", out],
                               cwd=ROOT, env=env, capture_output=True, text=True, check=False)
            if p.returncode:
                print(p.stderr.strip().splitlines()[-1])
                return 1
            with open(out) as f:
                shape = json.load(f)["shape"]
            for line in p.stdout.splitlines():
                if line.split(":")[0] in ("best", "workload", "memory fit", "intensity", "data pipeline"):
                    print("  " + line)
            bs, measured, fitted = held_out(out)
            if fitted is None:
                print(f"  held out: batch {bs}: {measured:.4f} GiB measured; "
                      f"no fit ({shape['memory'] and shape['memory']['note']})")
            else:
                err = abs(fitted - measured) / measured
                print(f"  held out: batch {bs}: fit {fitted:.4f} GiB, measured {measured:.4f} GiB: error {err:.1%} "
                      f"({'within' if err <= TARGET else 'OVER'} the {TARGET:.0%} target)")
            rec = subprocess.run([*advisor, "recommend", *args, "--budget", "100", "--deadline", "2d", "--samples",
                                  "1e9", "--store", db, "--format", "json", "--top", "3"],
                                 cwd=ROOT, env=env, capture_output=True, text=True, check=False)
            if rec.returncode:
                print("  recommend: " + rec.stderr.strip().splitlines()[-1])
                continue
            doc = json.loads(rec.stdout)
            rows, what = (doc["recommendations"], "recommend") if doc["recommendations"] else (
                doc["closest"], "recommend (nothing meets both; closest)")
            for row in rows[:3]:
                print(f"  {what}: {row['instance_type']} x{row['count']} {row['throughput_source']} "
                      f"{row['samples_per_sec']:,.0f}/s; notes: {'; '.join(row['notes']) or '-'}")
    # The training-run callback's cost per step (benchmarks/callback_overhead.py has the whole picture).
    from callback_overhead import hook_cost

    for step_s in (0.001, 0.01):
        median, mean, cpu, every = hook_cost(step_s, steps=int(2.0 / step_s))
        print(f"ThroughputCallback per step of {step_s * 1000:g} ms: wall median {median * 1e6:.1f} us, mean "
              f"{mean * 1e6:.1f} us; its own CPU time {cpu * 1e6:.1f} us ({cpu / step_s:.2%}); the machine looked "
              f"at every {every} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
