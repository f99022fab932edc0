"""A disk cache of the cross-device model (model.build: the anchor fit, the n-GPU scaling, the
leave-one-device-out band calibration and the points), so that `advisor recommend` does not refit
18 times per run (~0.1 s of a command meant to answer in well under a second).

The key is a SHA-256 of everything build() reads, so a stale entry is never a hit:
- the reference file's bytes (the very bytes the rows were parsed from) and the name it is
  shown by (the model's `origin`);
- the catalog's instance types that CPU rows take their peaks from (points._row_device), in full,
  and catalog/data/accelerators.json;
- the source of every module the model is computed by (a changed formula is another key), this
  file's FORMAT, and the numpy, Python and CPU (the SIMD features numpy dispatches on) it ran on.
An entry that cannot be read, does not parse, fails its checksum or has an unexpected shape is
a miss: the model is rebuilt and the entry rewritten. A cache dir that cannot be written is
skipped silently (the model is then built on every run, as before).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import platform
import sys
from pathlib import Path

import numpy as np

from catalog import accelerators as acc
from catalog.io import FileError, parse_json, read_bytes, write_atomic

from ..paths import cache_dir
from .calibrate import Efficiency
from .fit import Fit
from .model import Bands, CrossDeviceModel, build
from .points import Device, Point

log = logging.getLogger(__name__)

FORMAT = 1  # the entry's layout below; the key covers it
KEEP = 8  # entries kept (a team's own reference files each have theirs); the oldest go first
MAX_BYTES = 16 * 2**20
# The modules whose code computes the model (or the rows and devices it is computed from).
SOURCES = ("advisor.estimate.model", "advisor.estimate.fit", "advisor.estimate.calibrate",
           "advisor.estimate.points", "advisor.estimate.cache", "advisor.references", "catalog.accelerators",
           "catalog.hardware", "catalog.models", "lightning_module.workload_facts")


def folder() -> Path:
    return cache_dir() / "cross-device-model"


def cached_build(rows, catalog, origin: str, reference_digest: str) -> CrossDeviceModel:
    """model.build(rows, catalog, origin), from the cache when an entry for exactly these inputs
    exists; `reference_digest` is the SHA-256 of the bytes `rows` were parsed from."""
    try:
        k = key(rows, catalog, origin, reference_digest)
    except (OSError, ValueError, AttributeError, TypeError) as e:  # a source file not on disk, say
        log.info("cross-device model not cached (%s)", e)
        return build(rows, catalog, origin)
    path = folder() / f"{k}.json"
    model = _read(path, k)
    if model is not None:
        return model
    model = build(rows, catalog, origin)
    _write(path, k, model)
    return model


def key(rows, catalog, origin: str, reference_digest: str) -> str:
    h = hashlib.sha256()

    def part(label: str, data: bytes | str) -> None:
        data = data.encode() if isinstance(data, str) else data
        h.update(f"{label}:{len(data)}:".encode())
        h.update(data)

    part("format", str(FORMAT))
    part("origin", origin)
    part("references", reference_digest)
    # What points._row_device reads from the catalog: the instance types of CPU rows.
    for name in sorted({m.instance_type for m in rows if m.device == "cpu" and m.instance_type}):
        it = catalog.instance_types.get(name) if catalog is not None else None
        part(f"instance_type {name}", it.model_dump_json() if it is not None else "absent")
    part("accelerators", read_bytes(acc.DATA_PATH, "accelerator table", MAX_BYTES))
    for name in SOURCES:
        part(name, Path(importlib.import_module(name).__file__).read_bytes())
    features = getattr(getattr(np, "_core", None), "_multiarray_umath", None)
    features = getattr(features, "__cpu_features__", {})
    part("runtime", f"{np.__version__} {sys.version} {platform.machine()} "
                    f"{sorted(f for f, on in features.items() if on)}")
    return h.hexdigest()


def _read(path: Path, k: str) -> CrossDeviceModel | None:
    try:
        entry = parse_json(read_bytes(path, "cached model", MAX_BYTES), f"cached model {path}")
        body = entry["model"]
        if entry["key"] != k or entry["sha256"] != _digest(body):
            raise ValueError("another key, or not the bytes that were written")
        return from_json(body)
    except FileError:  # none yet, unreadable, not JSON
        return None
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        log.info("cached model %s not used (%s): rebuilding it", path, e)
        return None


def _write(path: Path, k: str, model: CrossDeviceModel) -> None:
    body = to_json(model)
    try:
        write_atomic(path, json.dumps({"key": k, "sha256": _digest(body), "model": body}))
        old = sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)[KEEP:]
        for p in old:
            p.unlink()
    except (FileError, OSError) as e:  # a read-only or full cache dir: built again next time
        log.info("cached model not written (%s)", e)


def _digest(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


# -- the model as JSON: every number exactly (repr round-trips a float), ints stay ints ------------

def _device(d: Device) -> dict:
    return {"key": d.key, "group": d.group, "kind": d.kind, "vendor": d.vendor, "peak": d.peak,
            "bandwidth": d.bandwidth, "bytes_factor": d.bytes_factor}


def to_json(m: CrossDeviceModel) -> dict:
    f, e, b = m.fit, m.efficiency, m.bands
    return {
        "origin": m.origin,
        "fit": {"theta_m": f.theta_m, "theta_o": f.theta_o, "sigma": f.sigma, "kappa": f.kappa, "level": f.level,
                "resid": {g: list(v) for g, v in f.resid.items()},
                "devices": {k: _device(d) for k, d in f.devices.items()}, "rows": f.rows, "rms": f.rms},
        "efficiency": {"loss_per_doubling": e.loss_per_doubling, "pairs": [list(p) for p in e.pairs]},
        "bands": dict(vars(b)),
        "points": [{**vars(p), "device": _device(p.device)} for p in m.points],
        "skipped": [list(s) for s in m.skipped],
    }


def from_json(body: dict) -> CrossDeviceModel:
    f = body["fit"]
    fit = Fit(f["theta_m"], f["theta_o"], f["sigma"], dict(f["kappa"]), dict(f["level"]),
              {g: (float(mean), int(n)) for g, (mean, n) in f["resid"].items()},
              {k: Device(**d) for k, d in f["devices"].items()}, f["rows"], f["rms"])
    e = body["efficiency"]
    eff = Efficiency(e["loss_per_doubling"], [(a, b, n, x) for a, b, n, x in e["pairs"]])
    points = [Point(**{**p, "device": Device(**p["device"])}) for p in body["points"]]
    skipped = [(row, why) for row, why in body["skipped"]]
    return CrossDeviceModel(fit, eff, Bands(**body["bands"]), points, skipped, body["origin"])
