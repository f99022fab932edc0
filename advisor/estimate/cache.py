"""A disk cache of the cross-device model (model.build: the anchor fit, the n-GPU scaling, the
leave-one-device-out band calibration and the points) and of the reference rows recommend reads
directly (those on an AWS instance type), so that `advisor recommend` neither refits 18 times
nor parses and validates the whole reference file on every run (~0.12 s of a command meant to
answer in well under a second).

An entry is found by a SHA-256 of everything build() reads, so a stale entry is never a hit:
- the reference file's bytes (the very bytes that are parsed on a miss) and the name it is shown
  by (the model's `origin`);
- catalog/data/accelerators.json;
- the source of every module the model and the rows are computed by (a changed formula or schema
  is another key), this file's FORMAT, and the numpy, Python and CPU (the SIMD features numpy
  dispatches on) it ran on;
and the entry itself holds, in full, the catalog's instance types that the CPU rows take their
peaks from (points._row_device): another catalog with other facts for them is a miss.
An entry that cannot be read, does not parse, fails its checksum or has an unexpected shape is
a miss: the file is parsed, the model rebuilt and the entry rewritten. A cache dir that cannot be
written is skipped silently (everything is then computed on every run, as before). A hit is only
ever an entry written after these very bytes were parsed and validated by this very code.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import platform
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np

from catalog import accelerators as acc
from safeio import FileError, parse_json, read_bytes, write_atomic

from ..paths import cache_dir
from . import references, shapes
from .calibrate import Efficiency
from .fit import Fit
from .model import Bands, CrossDeviceModel, build
from .points import Device, Point
from .references import Measurement

log = logging.getLogger(__name__)

FORMAT = 3  # the entry's layout below; the key covers it
KEEP = 8  # entries kept (a team's own reference files each have theirs); the oldest go first
MAX_BYTES = 16 * 2**20
# The modules whose code computes the model (or the rows and devices it is computed from).
SOURCES = ("advisor.estimate.model", "advisor.estimate.fit", "advisor.estimate.calibrate",
           "advisor.estimate.points", "advisor.estimate.cache", "advisor.estimate.references", "advisor.estimate.shapes",
           "advisor.estimate.split",
           "catalog.accelerators",
           "catalog.hardware", "catalog.models", "lightning_module.contract.workload_facts")


def folder() -> Path:
    return cache_dir() / "cross-device-model"


def model_for(path: Path, origin: str, catalog) -> tuple[CrossDeviceModel, list[Measurement]]:
    """(model.build(rows of the reference file at `path`, catalog, origin), the file's rows on an
    AWS instance type), from the cache when an entry for exactly these inputs exists. A file that
    cannot be read or parsed raises ReferenceFileError, one that cannot be fitted ValueError, as
    without the cache."""
    text = references.file_bytes(path)
    try:
        k = key(hashlib.sha256(text).hexdigest(), origin)
    except (OSError, ValueError, AttributeError, TypeError) as e:  # a source file not on disk, say
        log.info("cross-device model not cached (%s)", e)
        k = None
    entry = folder() / f"{k}.json"
    if k is not None and (hit := _read(entry, k, catalog)) is not None:
        return hit
    rows = references.parse_file(path, text).measurements
    model = build(rows, catalog, origin)
    on_types = [m for m in rows if m.instance_type]
    if k is not None:
        _write(entry, k, model, on_types, _catalog_facts(rows, catalog))
    return model, on_types


def key(reference_digest: str, origin: str) -> str:
    h = hashlib.sha256()

    def part(label: str, data: bytes | str) -> None:
        data = data.encode() if isinstance(data, str) else data
        h.update(f"{label}:{len(data)}:".encode())
        h.update(data)

    part("format", str(FORMAT))
    part("origin", origin)
    part("references", reference_digest)
    part("accelerators", read_bytes(acc.DATA_PATH, "accelerator table", MAX_BYTES))
    part("intensity", read_bytes(shapes.INTENSITY_PATH, "workload intensity table", MAX_BYTES))
    for name in SOURCES:
        part(name, Path(importlib.import_module(name).__file__).read_bytes())
    features = getattr(getattr(np, "_core", None), "_multiarray_umath", None)
    features = getattr(features, "__cpu_features__", {})
    part("runtime", f"{np.__version__} {sys.version} {platform.machine()} "
                    f"{sorted(f for f, on in features.items() if on)}")
    return h.hexdigest()


def _catalog_facts(rows, catalog) -> dict[str, str]:
    """What points._row_device reads from the catalog: the instance types of the CPU rows, whole."""
    names = sorted({m.instance_type for m in rows if m.device == "cpu" and m.instance_type})
    return _facts_of(names, catalog)


def _facts_of(names, catalog) -> dict[str, str]:
    its = catalog.instance_types if catalog is not None else {}
    return {name: its[name].model_dump_json() if name in its else "absent" for name in names}


def _read(path: Path, k: str, catalog) -> tuple[CrossDeviceModel, list[Measurement]] | None:
    try:
        entry = parse_json(read_bytes(path, "cached model", MAX_BYTES), f"cached model {path}")
        body = {part: entry[part] for part in ("model", "catalog", "rows")}
        if entry["key"] != k or entry["sha256"] != _digest(body):
            raise ValueError("another key, or not the bytes that were written")
        if body["catalog"] != _facts_of(list(body["catalog"]), catalog):
            raise ValueError("another catalog: the CPU rows' instance types differ")
        return from_json(body["model"]), [Measurement.model_validate(m) for m in body["rows"]]
    except FileError:  # none yet, unreadable, not JSON
        return None
    except (KeyError, TypeError, ValueError, AttributeError) as e:  # ValidationError is a ValueError
        log.info("cached model %s not used (%s): rebuilding it", path, e)
        return None


def _write(path: Path, k: str, model: CrossDeviceModel, rows: list[Measurement], facts: dict[str, str]) -> None:
    body = {"model": to_json(model), "catalog": facts, "rows": [m.model_dump(mode="json") for m in rows]}
    try:
        write_atomic(path, json.dumps({"key": k, "sha256": _digest(body), **body}))
        old = sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)[KEEP:]
        for p in old:
            p.unlink()
    except (FileError, OSError) as e:  # a read-only or full cache dir: built again next time
        log.info("cached model not written (%s)", e)


def _digest(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


# -- the model as JSON: every number exactly (repr round-trips a float), ints stay ints ------------

def _device(d: Device) -> dict:
    return dict(vars(d))  # every field, as from_json reads it back with Device(**d)


def _fit_json(f: Fit) -> dict:
    """Every field of the Fit, by name: a field added to Fit is carried without a change here."""
    out = {}
    for name in (x.name for x in fields(Fit)):
        v = getattr(f, name)
        if name == "devices":
            v = {k: _device(d) for k, d in v.items()}
        elif isinstance(v, dict):
            v = {k: list(x) if isinstance(x, tuple) else x for k, x in v.items()}
        out[name] = v
    return out


def _fit_from_json(f: dict) -> Fit:
    args = {}
    for name in (x.name for x in fields(Fit)):
        v = f[name]  # a field missing from the entry is a KeyError: a miss, rebuilt
        if name == "devices":
            v = {k: Device(**d) for k, d in v.items()}
        elif isinstance(v, dict):
            v = {k: tuple(x) if isinstance(x, list) else x for k, x in v.items()}
        args[name] = v
    return Fit(**args)


def to_json(m: CrossDeviceModel) -> dict:
    f, e, b = m.fit, m.efficiency, m.bands
    return {
        "origin": m.origin, "shape": m.shape,
        "fit": _fit_json(f),
        "efficiency": {"loss_per_doubling": e.loss_per_doubling, "pairs": [list(p) for p in e.pairs]},
        "bands": dict(vars(b)),
        "points": [{**vars(p), "device": _device(p.device)} for p in m.points],
        "skipped": [list(s) for s in m.skipped],
    }


def from_json(body: dict) -> CrossDeviceModel:
    fit = _fit_from_json(body["fit"])
    e = body["efficiency"]
    eff = Efficiency(e["loss_per_doubling"], [(a, b, n, x) for a, b, n, x in e["pairs"]])
    points = [Point(**{**p, "device": Device(**p["device"])}) for p in body["points"]]
    skipped = [(row, why) for row, why in body["skipped"]]
    return CrossDeviceModel(fit, eff, Bands(**body["bands"]), points, skipped, body["origin"], body["shape"])
