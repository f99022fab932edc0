"""Reading and writing catalog files: one-line errors for bad files, atomic writes."""

from __future__ import annotations

import gc
import json
import os
import tempfile
from pathlib import Path

from pydantic import BaseModel, ValidationError

from .models import SCHEMA_VERSION, Catalog

SNAPSHOT_PATH = Path(__file__).parent / "data" / "snapshot.json"


class CatalogError(ValueError):
    """A catalog that cannot be read or built; the message is one line for the user."""


def load(path: str | Path) -> Catalog:
    path = Path(path)
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        raise CatalogError(f"catalog file {path} does not exist") from None
    except OSError as e:
        raise CatalogError(f"catalog file {path}: {e.strerror or e}") from None
    return loads(text, where=str(path))


def loads(text: str | bytes, where: str = "catalog") -> Catalog:
    # Validate straight from JSON (pydantic's parser is about twice as fast as json.loads +
    # validate); only a file that fails is parsed again, to say in one line what is wrong.
    # A full catalog allocates hundreds of thousands of acyclic objects; the cyclic collector
    # would run many passes over them mid-parse (about a third of the load time), for nothing.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return Catalog.model_validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
    finally:
        if gc_was_enabled:
            gc.enable()
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        msg = getattr(e, "msg", str(e))
        raise CatalogError(
            f"{where} is not valid JSON ({msg}); refresh it with 'advisor catalog refresh' or pass another --catalog"
        ) from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise CatalogError(f"{where} is not an instance-advisor catalog (no schema_version)")
    if data["schema_version"] != SCHEMA_VERSION:
        raise CatalogError(
            f"{where} has catalog schema_version {data['schema_version']!r}, this advisor reads "
            f"{SCHEMA_VERSION}; run 'advisor catalog refresh' to rebuild it"
        )
    loc = ".".join(str(p) for p in first["loc"]) or "(top)"
    raise CatalogError(f"{where}: invalid catalog at {loc}{_offer_name(data, first['loc'])}: {first['msg']}")


def _offer_name(data: dict, loc: tuple) -> str:
    """' (g5.xlarge spot)' for an error inside an offer column, so the user sees which offer."""
    if len(loc) != 4 or loc[0] != "offers" or not isinstance(loc[3], int):
        return ""
    try:
        ro = data["offers"][loc[1]]
        return f" ({ro['instance_type'][loc[3]]} {ro['market'][loc[3]]})"
    except (KeyError, IndexError, TypeError):
        return ""


def save_atomic(model: BaseModel, path: str | Path, indent: int | None = None) -> None:
    """Write a pydantic model (a catalog, a launch manifest) as JSON to a temporary file beside the
    target, then rename: a crash never leaves half a file. `indent` is for files people read or
    keep in git (the shipped snapshot, run manifests), where readable diffs matter."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(model.model_dump_json(indent=indent))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
