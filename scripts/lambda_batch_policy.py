#!/usr/bin/env python3
"""Record on Lambda's rows that each GPU ran its own batch, and which batch (from the suite's own table).

Lambda's deeplearning-benchmark sets every workload's batch by the GPU's memory (its
pytorch/scripts/config_v1/config_pytorch_<N>GB.sh files, one per memory size), and publishes the
batches beside the throughputs: pytorch/pytorch-train-bs-fp16.csv, the same rows and columns as
pytorch/pytorch-train-throughput-fp16.csv, each cell the global batch of that run (per GPU: over
num_gpu). So a device ratio read in that table is a device gain times a batch gain: Tacotron 2
runs 48 a step on a V100-16GB and 256 on an A100-80GB. This script writes, on each fp16 row of the
suite's tables, batch_policy "per-device", batch_per_device and batch_source (the cell it was read
in). A row the batch table does not list (LambdaCloud A10, H100 SXM5, 4x/8x RTX 6000 Ada) takes
the batch of the table's rows of its memory size at its per-GPU figure, where those all agree (the
suite's rule: one config per memory size), and its batch_source says so; where they disagree, or
no row of its size is listed, the batch is left unknown.

The table is copied below from the source at its commit (read with the project's reference
reader, lambdal/deeplearning-benchmark pytorch/pytorch-train-bs-fp16.csv at 08d77c41c42f).
Re-running it rewrites the same values (idempotent).

    .venv/bin/python scripts/lambda_batch_policy.py
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "advisor" / "data" / "reference_measurements.json"
REPO = "lambdal/deeplearning-benchmark"
BS_PATH, BS_COMMIT = "pytorch/pytorch-train-bs-fp16.csv", "08d77c41c42f48de5598b48c77f3fbd1b6252348"
THROUGHPUT_PATH = "pytorch/pytorch-train-throughput-fp16.csv"
HEADER = ("name_gpu,num_gpu,watt,price,ssd,bert_base_squad,bert_large_squad,gnmt,ncf,resnet50,tacotron2,"
          "transformerxlbase,transformerxllarge,waveglow")
BS_CSV = HEADER + """
Quadro RTX 8000,1,260,6037.5,256,192,64,968,10000000,928,148,64,32,32
LambdaCloud V100 16GB,1,300,9937.5,96,48,16,256,2560000,256,48,12,4,8
RTX 3090,1,350,2750,140,96,28,464,4278184,448,88,24,8,18
Lambda Cloud A100 40GB PCIe,1,250,10437.5,224,160,48,800,7500000,720,144,52,24,24
A100 80GB PCIe,1,300,13287.5,448,320,112,1520,10000000,1280,256,104,48,48
A100 80GB SXM4,1,400,16250,448,320,112,1520,10000000,1280,256,104,48,48
Ada A6000,1,300,7680,256,192,64,968,10000000,928,148,64,32,32
RTX A6000,1,300,4437.5,256,192,64,968,10000000,928,148,64,32,32
RTX 4090,1,450,2125,140,96,28,464,4278184,448,88,24,8,18
H100 80GB PCIe Gen5,1,310,30918,448,320,112,1520,10000000,1280,256,104,48,48
LambdaCloud 2x V100 16GB,2,600,19875.0,192,96,32,512,5120000,512,96,32,8,16
2x Ada A6000,2,600,15360,512,384,128,1936,20000000,1856,296,128,64,64
2x RTX A6000,2,600,8875.0,512,384,128,1936,20000000,1856,296,128,64,64
2x RTX 3090,2,700,5500,280,192,56,928,10000000,896,176,48,16,36
2x RTX 4090,2,900,4250,280,192,56,928,10000000,896,176,48,16,36
2x A100 80GB PCIe,2,600,26575.0,896,640,224,3040,20000000,2560,512,208,96,96
2x A100 80GB SXM4,2,800,32500,896,640,224,3040,20000000,2560,512,208,96,96
2x H100 80GB PCIe Gen5,2,620,61836,896,640,224,3040,20000000,2560,512,208,96,96
LambdaCloud 4xV100 16GB,4,1200,39750.0,384,192,64,1024,10240000,1024,192,64,16,32
4x A100 80GB SXM4,4,1600,65000,1792,1280,448,6080,40000000,5120,1024,416,192,192
4x H100 80GB PCIe Gen5,4,1240,123672,1792,1280,448,6080,40000000,5120,1024,416,192,192
LambdaCloud 8xV100 16GB,8,2400,79500.0,768,384,128,2048,20480000,2048,384,128,32,64
8x A100 80GB SXM4,8,3200,130000,3584,2560,896,12160,80000000,10240,2048,832,384,384
8x H100 80GB PCIe Gen5,8,2480,247344,3584,2560,896,12160,80000000,10240,2048,832,384,384
"""
# The throughput table's row names that the batch table spells otherwise.
SPELLING = {"LambdaCloud A100 40GB PCIe": "Lambda Cloud A100 40GB PCIe", "RTX 6000 Ada": "Ada A6000",
            "2x RTX 6000 Ada": "2x Ada A6000"}
COLUMN = {"ssd300": "ssd", "bert-base": "bert_base_squad", "bert-large": "bert_large_squad", "gnmt": "gnmt",
          "ncf": "ncf", "resnet50": "resnet50", "tacotron2": "tacotron2", "transformer-xl-base": "transformerxlbase",
          "transformer-xl-large": "transformerxllarge", "waveglow": "waveglow"}
# Lambda's earlier tables, whose rows already carry the per-GPU batch read from the batch table
# beside them at the row's own commit (their notes say so): the same rule, recorded here.
EARLIER = {"pytorch-train-throughput-fp16.csv": "pytorch-train-bs-fp16.csv",
           "pytorch/csv_v1_v2/pytorch-train-throughput-fp16.csv": "pytorch/csv_v1_v2/pytorch-train-bs-fp16.csv"}
EARLIER_COMMIT = {"pytorch/csv_v1_v2/pytorch-train-bs-fp16.csv": "848edec1b8fdffc9007944722ae6f982e191776b"}
POLICY = "per-device"


def batch_table() -> dict[str, dict[str, str]]:
    return {r["name_gpu"]: r for r in csv.DictReader(io.StringIO(BS_CSV))}


def listed_batch(table: dict[str, dict[str, str]], row: dict) -> tuple[int | None, str | None, int]:
    """(per-GPU batch, the batch table's row name, GPUs) of a throughput row the batch table lists."""
    m = re.match(r"row '([^']+)' \(num_gpu (\d+)\), column (\w+)", row["source"]["where"])
    name, gpus = m[1], int(m[2])
    # The same machine at the same GPU count (the 8-GPU run of a name is listed as "8x <name>").
    listed = next((table[n] for n in (SPELLING.get(name, name), f"{gpus}x {name}")
                   if n in table and int(table[n]["num_gpu"]) == gpus), None)
    if listed is None:
        return None, None, gpus
    return int(float(listed[COLUMN[row["model"]]])) // gpus, listed["name_gpu"], gpus


def memory_classes(table: dict[str, dict[str, str]], rows: list[dict]) -> dict[tuple[float, str], dict[str, int]]:
    """(memory GiB, model) -> {listed row name: per-GPU batch}: what the suite ran on each memory size."""
    out: dict[tuple[float, str], dict[str, int]] = {}
    for r in rows:
        if r["source"].get("path") == THROUGHPUT_PATH and r["precision"] == "16-mixed":
            batch, name, _ = listed_batch(table, r)
            if batch is not None:
                out.setdefault((r["device_memory_gib"], r["model"]), {})[name] = batch
    return out


def update(rows: list[dict]) -> int:
    table = batch_table()
    classes = memory_classes(table, rows)
    changed = 0
    for r in rows:
        src = r["source"]
        if src.get("repo") != REPO or r["precision"] != "16-mixed":
            continue
        path = src.get("path")
        if path in EARLIER:
            if r.get("batch_per_device") is None:
                continue
            bs_path = EARLIER[path]
            new = {"batch_policy": POLICY, "batch_source": {
                "repo": REPO, "path": bs_path, "commit": EARLIER_COMMIT.get(bs_path, src["commit"]),
                "where": f"the row's global batch over its {r['gpus']} GPU(s), as its notes say"}}
        elif path == THROUGHPUT_PATH:
            batch, listed, gpus = listed_batch(table, r)
            col = COLUMN[r["model"]]
            gib = r["device_memory_gib"]
            if listed is not None:
                where = (f"row '{listed}' (num_gpu {gpus}), column {col}: {batch * gpus} "
                         f"(the run's global batch; per GPU {batch})")
            else:
                same = classes.get((gib, r["model"]), {})
                batch = next(iter(set(same.values()))) if len(set(same.values())) == 1 else None
                if batch is None:
                    where = f"no row for this machine, and the {gib:g} GB cards' rows do not agree on column {col}: unknown"
                else:
                    where = (f"no row for this machine: derived, the per-GPU batch every listed {gib:g} GB card runs in "
                             f"column {col} ({', '.join(sorted(same))}); the suite sets the batch by memory "
                             "(pytorch/scripts/config_v1/config_pytorch_<N>GB.sh)")
            new = {"batch_policy": POLICY, "batch_source": {"repo": REPO, "path": BS_PATH, "commit": BS_COMMIT,
                                                             "where": where}}
            if batch is not None:
                new["batch_per_device"] = batch
        else:
            continue
        before = {k: r.get(k) for k in new}
        if before != new:
            changed += 1
        _place(r, new)
    return changed


def _place(row: dict, new: dict) -> None:
    """Set the fields, batch_per_device beside precision (where the schema lists it), the policy after it."""
    items = [(k, v) for k, v in row.items() if k not in ("batch_per_device", "batch_policy", "batch_source")]
    out, done = [], False
    batch = new.get("batch_per_device", row.get("batch_per_device"))
    for k, v in items:
        out.append((k, v))
        if k == "precision" and not done:
            if batch is not None:
                out.append(("batch_per_device", batch))
            out += [("batch_policy", new["batch_policy"]), ("batch_source", new["batch_source"])]
            done = True
    row.clear()
    row.update(out)


def main() -> int:
    data = json.loads(DATA.read_text())
    n = update(data["measurements"])
    DATA.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    print(f"{n} rows updated in {DATA.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
