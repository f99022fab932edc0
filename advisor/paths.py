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
