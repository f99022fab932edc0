"""Reading and writing catalogs. The generic readers and writers (bounded reads, the safe JSON
parser, atomic writes) are safeio's; what is here knows the catalog's shape."""

from __future__ import annotations

import gc
from pathlib import Path

from pydantic import ValidationError

from safeio import decode_text, first_error, parse_json, read_bytes

from .models import READABLE_VERSIONS, SCHEMA_VERSION, Catalog

SNAPSHOT_PATH = Path(__file__).parent / "data" / "snapshot.json"


class CatalogError(ValueError):
    """A catalog that cannot be read or built; the message is one line for the user."""


# A full 30-region catalog is a few MB. Anything past this is not one of our files, and reading it
# whole would only cost memory.
CATALOG_MAX_BYTES = 256 * 2**20


def load(path: str | Path) -> Catalog:
    return loads(read_bytes(path, "catalog file", CATALOG_MAX_BYTES, CatalogError), where=str(path))


def loads(text: str | bytes, where: str = "catalog") -> Catalog:
    # Validate straight from JSON (pydantic's parser is about twice as fast as json.loads +
    # validate); only a file that fails is parsed again, to say in one line what is wrong.
    # A full catalog allocates hundreds of thousands of acyclic objects; the cyclic collector
    # would run many passes over them mid-parse (about a third of the load time), for nothing.
    text = decode_text(text, where, CatalogError)  # the one text rule, before either parser
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return Catalog.model_validate_json(text)
    except ValidationError as e:
        first = first_error(e)
    finally:
        if gc_was_enabled:
            gc.enable()
    try:
        data = parse_json(text, where, CatalogError)
    except CatalogError as e:
        raise CatalogError(f"{e}; refresh it with 'advisor catalog refresh' or pass another --catalog") from None
    if not isinstance(data, dict) or "schema_version" not in data:
        raise CatalogError(f"{where} is not an instance-advisor catalog (no schema_version)")
    if data["schema_version"] not in READABLE_VERSIONS:
        raise CatalogError(
            f"{where} has catalog schema_version {data['schema_version']!r}, this advisor reads "
            f"{SCHEMA_VERSION}; run 'advisor catalog refresh' to rebuild it"
        )
    raise CatalogError(f"{where}: invalid catalog at {first.at}{_offer_name(data, first.loc)}: {first.msg}")


def _offer_name(data: dict, loc: tuple) -> str:
    """' (g5.xlarge spot)' for an error inside an offer column, so the user sees which offer."""
    if len(loc) != 4 or loc[0] != "offers" or not isinstance(loc[3], int):
        return ""
    try:
        ro = data["offers"][loc[1]]
        return f" ({ro['instance_type'][loc[3]]} {ro['market'][loc[3]]})"
    except (KeyError, IndexError, TypeError):
        return ""
