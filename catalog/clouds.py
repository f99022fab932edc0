"""Where the cloud-neutral catalog meets a cloud's folder: cloud -> the function that fetches its
live catalog. A second cloud is a sibling of catalog/aws/ whose fetcher fills the same InstanceType
fields (`cloud`, the hardware facts), and one entry in REFRESH."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from .models import Catalog

# cloud -> the module whose refresh(regions, families, ..., previous, on_warning) -> Catalog fetches
# it; imported on use, since boto3 is slow to import and only a refresh needs it.
REFRESH = {"aws": "catalog.aws.refresh"}


def refresher(cloud: str) -> Callable[..., Catalog]:
    return importlib.import_module(REFRESH[cloud]).refresh
