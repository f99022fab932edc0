"""The sharded step-time model (advisor/estimate/sharded.py) against the published sharded
decoder-LLM rows of advisor/data/reference_measurements.json: llm_fit.py's scale-out part.

The rows name a GPU (H100 80GB, A100 40/80GB) in 8-GPU nodes, not an instance type: their links are
taken from the catalog's 8-GPU AWS type with that GPU (p5.48xlarge, p4de.24xlarge, p4d.24xlarge),
an assumption, since the published platform is not AWS. FLOPs per token: 6N + 12 L d s (+ a third
of each with activation checkpointing), L and d from the rows' llm-foundry yamls
(advisor/data/reference_model_shapes.json; the parameter count they give must match the row's).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from advisor.estimate import sharded
from catalog import accelerators as acc
from catalog.io import load

ROOT = Path(__file__).resolve().parents[1]
TYPE_OF = {("H100", 80): "p5.48xlarge", ("A100", 80): "p4de.24xlarge", ("A100", 40): "p4d.24xlarge"}
KIND_OF = {"fsdp-full-shard": sharded.FULL_SHARD, "fsdp-shard-grad-op": sharded.GRAD_SHARD}
MEDIAN_TARGET, COVERAGE_TARGET = 0.15, 0.80


def rows_and_cases():
    from advisor.estimate.strategy import device_of
    cat = load(ROOT / "catalog" / "data" / "snapshot.json")
    data = json.loads((ROOT / "advisor" / "data" / "reference_measurements.json").read_text())
    out = []
    for r in data["measurements"]:
        kind = KIND_OF.get(r.get("strategy") or "")
        if kind is None or r.get("family") != "decoder-lm" or not r.get("tokens_per_sec"):
            continue
        dev = device_of(cat.instance_types[TYPE_OF[(r["device"], r["device_memory_gib"])]])
        n = r["gpus"] * r["nodes"]
        shape = sharded.reference_model_shapes()[r["model"]]
        L, d = shape["n_layers"], shape["d_model"]
        counted = L * (12 * d * d + 13 * d) + (shape["vocab"] + shape["max_seq_len"]) * d + 2 * d
        if counted != r["parameters"]:
            raise ValueError(f"{r['id']}: the yaml's shape counts {counted:,} parameters, the row {r['parameters']:,}")
        flops = sharded.training_flops_per_token(r["parameters"], L, d, r["tokens_per_sample"],
                                                 checkpointing=bool(r.get("activation_checkpointing")))
        case = sharded.Case(kind, n, r["gpus"], r["batch_per_device"] * r["tokens_per_sample"],
                            r.get("grad_accumulation") or 1, flops, dev.peak_tflops * 1e12,
                            2.0 * r["parameters"], 2.0 * r["parameters"],
                            sharded.link_bytes_per_s(r["gpus"], r["nodes"], dev.interconnect_gbs, dev.network_gbps),
                            L * d * (4.0 / 3.0 if r.get("activation_checkpointing") else 1.0),
                            acc.lookup(r["device"], r["device_memory_gib"]).bandwidth_gbs * 1e9)
        out.append((r, case, r["tokens_per_sec"] / n))
    return out


def bands_by_reach(rows, loo) -> dict[str, list[float]]:
    """The leave-one-out errors of the rows inside one instance and of those across several."""
    out: dict[str, list[float]] = {sharded.ONE_INSTANCE: [], sharded.SEVERAL_INSTANCES: []}
    for (_, c, _), e in zip(rows, loo):
        out[sharded.reach(c.devices, c.per_instance)].append(e)
    return out


def scale_out_part() -> bool:
    rows = rows_and_cases()
    cases, ys = [c for _, c, _ in rows], [y for _, _, y in rows]
    mfu, overlap, width = sharded.fit(cases, ys)
    loo = sharded.leave_one_out(cases, ys)
    low, high = sharded.band(loo)
    print(f"scale-out: per-GPU tokens/s, sharded model (MFU {mfu}, overlap {overlap}, memory-bound {width:g} bytes a token "
          f"per n_layers x d_model, fitted on all {len(rows)} rows) "
          "against published; LOO = predicted with the constants fitted on the other rows")
    print(f"{'row':<52} {'gpus':>4} {'published':>9} {'predicted':>9} {'LOO err':>8} in band")
    covered = 0
    for (r, c, y), e in zip(rows, loo):
        pred = y * (1 + e)
        inside = pred * low <= y <= pred * high
        covered += inside
        print(f"{r['id'][:52]:<52} {c.devices:>4} {y:>9.0f} {pred:>9.0f} {e:>+8.1%} {'yes' if inside else 'NO'}")
    med = statistics.median(abs(e) for e in loo)
    cov = covered / len(rows)
    print(f"\n{len(rows)} rows: LOO median |error| {med:.1%} (target <= {MEDIAN_TARGET:.0%}); "
          f"band x[{low:.3f}, {high:.3f}] "
          f"from the LOO residuals covers {cov:.0%} (target >= {COVERAGE_TARGET:.0%}; "
          "in-sample: the band is drawn from these residuals)")
    for name, group in bands_by_reach(rows, loo).items():
        b = sharded.band(group)
        print(f"  {name.replace('_', ' ')}: {len(group)} rows, LOO median |error| "
              f"{statistics.median(abs(e) for e in group):.1%}, band x[{b[0]:.3f}, {b[1]:.3f}] "
              "(the band recommend puts on a plan of this reach)")
    torchtitan_check()
    return med <= MEDIAN_TARGET and cov >= COVERAGE_TARGET


def torchtitan_check() -> None:
    """torchtitan's published FSDP2 runs (advisor/data/llm_throughput.json), which the fit never saw,
    predicted by recommend's own path (strategy.case_of -> sharded.predict) on the catalog type with
    that GPU (TYPE_OF, its links as the rows above assume): selective activation checkpointing lies
    between none and full, so both are printed."""
    from dataclasses import replace

    from advisor.estimate.memory import Training
    from advisor.estimate.strategy import case_of, device_of
    from lightning_module.contract.transformer_shape import parse_shape

    cat = load(ROOT / "catalog" / "data" / "snapshot.json")
    data = json.loads((ROOT / "advisor" / "data" / "llm_throughput.json").read_text())["torchtitan_checks"]
    print("\ncheck, out of sample: torchtitan's published FSDP2 runs (advisor/data/llm_throughput.json) by recommend's "
          "path; selective checkpointing lies between none and full")
    print(f"{'row':<46} {'gpus':>4} {'published':>9} {'no AC':>7} {'full AC':>7} {'published / predicted':>22}"
          f"  {'compute only':>12}")
    for r in data["rows"]:
        dev = device_of(cat.instance_types[TYPE_OF[(r["device"], r["device_memory_gib"])]])
        if r.get("hbm_gbs"):
            dev = replace(dev, hbm_gbs=r["hbm_gbs"])
        shape, n = parse_shape(r["model"]), r["gpus"] * r["nodes"]
        got = [sharded.predict(case_of(dev, shape, Training(checkpointing=ac), r["seq_len"], "fsdp", r["nodes"],
                                       r["batch_per_device"], r["batch_per_device"] * r["seq_len"] * n)) for ac in (False, True)]
        pred = [p.tokens_per_sec for p in got]
        y = r["tokens_per_sec_per_gpu"]
        print(f"{r['id'][:46]:<46} {n:>4} {y:>9,.0f} {pred[0]:>7,.0f} {pred[1]:>7,.0f} "
              f"{y / pred[0]:>10.2f} to {y / pred[1]:.2f}  {y / (pred[0] / got[0].efficiency):>5.2f} to "
              f"{y / (pred[1] / got[1].efficiency):.2f}")
    b = sharded.fitted()["bands"]
    print(f"(compute only: published / the prediction without its exposed communication. The fit's bands on a prediction: "
          f"x[{b['one_instance']['low']:.2f}, {b['one_instance']['high']:.2f}] inside one instance, "
          f"x[{b['several_instances']['low']:.2f}, {b['several_instances']['high']:.2f}] across several; the H100 rows ran "
          "at 500 W with HBM2e, a lower peak than the catalog's SXM figure the check takes; the A100 rows' network is the "
          "p4de.24xlarge stand-in's)")
