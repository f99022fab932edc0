"""Options and loaders shared by several commands."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from catalog.io import SNAPSHOT_PATH, CatalogError, load
from catalog.models import Catalog

from .. import options as opt
from ..errors import UserError
from ..output import warn
from ..paths import catalog_cache_path, default_store_path


def add_catalog_options(parser) -> None:
    parser.add_argument("--catalog", type=opt.path, metavar="FILE", help="catalog file to read (default: the refreshed cache, else the shipped snapshot)")
    parser.add_argument("--max-age", type=opt.days, default=30.0, metavar="DAYS", help="warn when the catalog is older than this (default 30)")


def catalog_path(args) -> Path:
    """--catalog FILE, else the cache written by 'catalog refresh', else the shipped snapshot."""
    if getattr(args, "catalog", None):
        return Path(args.catalog)
    cache = catalog_cache_path()
    if cache.exists() and not cache.is_file():
        warn(f"catalog cache {cache} is not a file; using the shipped snapshot (remove it, then 'advisor catalog refresh')")
        return SNAPSHOT_PATH
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
    parser.add_argument("--store", type=opt.path, metavar="DB", help="results store (SQLite; default: the XDG data dir)")


def store_path(args) -> Path:
    return Path(args.store) if getattr(args, "store", None) else default_store_path()


def open_store(args, create: bool = True):
    """The store to write to (probe, import, pull; delete with create=False): created, with its
    folder, if missing."""
    from ..store import ResultStore

    return ResultStore(store_path(args), create=create)


def read_store(args):
    """The store to read, opened read-only; None when nothing was ever stored in the default
    place. A store named with --store or INSTANCE_ADVISOR_STORE must exist: a mistyped path is
    an error, not an empty store."""
    from ..store import ResultStore

    path = store_path(args)
    if not getattr(args, "store", None) and not os.environ.get("INSTANCE_ADVISOR_STORE") and not path.exists():
        return None
    return ResultStore(path, readonly=True)
