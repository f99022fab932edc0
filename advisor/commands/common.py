"""Options and loaders shared by several commands."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from catalog.io import SNAPSHOT_PATH, CatalogError, load
from catalog.models import Catalog

from ..errors import UserError
from ..output import warn
from ..paths import catalog_cache_path, default_store_path


def add_catalog_options(parser) -> None:
    parser.add_argument("--catalog", metavar="FILE", help="catalog file to read (default: the refreshed cache, else the shipped snapshot)")
    parser.add_argument("--max-age", type=float, default=30.0, metavar="DAYS", help="warn when the catalog is older than this (default 30)")


def catalog_path(args) -> Path:
    """--catalog FILE, else the cache written by 'catalog refresh', else the shipped snapshot."""
    if getattr(args, "catalog", None):
        return Path(args.catalog)
    cache = catalog_cache_path()
    return cache if cache.exists() else SNAPSHOT_PATH


def load_catalog(args) -> Catalog:
    try:
        cat = load(catalog_path(args))
    except CatalogError as e:
        raise UserError(str(e)) from None
    max_age = getattr(args, "max_age", 30.0)
    age_days = (datetime.now(timezone.utc) - cat.fetched_at).total_seconds() / 86400
    if max_age is not None and age_days > max_age:
        warn(
            f"catalog ({cat.source}, fetched {cat.fetched_at:%Y-%m-%d}) is {age_days:.0f} days old; "
            "prices change: run 'advisor catalog refresh' with AWS credentials"
        )
    return cat


def add_store_option(parser) -> None:
    parser.add_argument("--store", metavar="DB", help="results store (SQLite; default: the XDG data dir)")


def store_path(args) -> Path:
    return Path(args.store) if getattr(args, "store", None) else default_store_path()


def open_store(args):
    from ..store import ResultStore

    return ResultStore(store_path(args))
