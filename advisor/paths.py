"""Where the advisor keeps its files: XDG cache and data dirs, overridable by environment."""

from __future__ import annotations

import os
from pathlib import Path

APP = "instance-advisor"


def cache_dir() -> Path:
    if d := os.environ.get("INSTANCE_ADVISOR_CACHE_DIR"):
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / APP


def data_dir() -> Path:
    if d := os.environ.get("INSTANCE_ADVISOR_DATA_DIR"):
        return Path(d)
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / APP


def catalog_cache_path() -> Path:
    return cache_dir() / "catalog.json"


def default_store_path() -> Path:
    if p := os.environ.get("INSTANCE_ADVISOR_STORE"):
        return Path(p)
    return data_dir() / "results.sqlite"


def catalog_file(given: str | Path | None = None) -> tuple[Path, str | None]:
    """The catalog the advisor reads: `given` when set, else the cache 'advisor catalog refresh'
    wrote, else the snapshot shipped with the package; and a warning when the cache is there but
    is not a file."""
    from catalog.io import SNAPSHOT_PATH

    if given:
        return Path(given), None
    cache = catalog_cache_path()
    if cache.is_file():  # one stat on the start-up path
        return cache, None
    if cache.exists():
        return SNAPSHOT_PATH, (f"catalog cache {cache} is not a file; using the shipped snapshot (remove it, then "
                               "'advisor catalog refresh')")
    return SNAPSHOT_PATH, None


def load_catalog(path: str | Path | None = None):
    """The catalog at `path`, else the one catalog_file() picks (catalog.io.CatalogError when it
    cannot be read)."""
    from catalog.io import load

    return load(catalog_file(path)[0])
