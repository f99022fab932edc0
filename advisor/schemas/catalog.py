"""The catalog commands' documents: show, info, refresh."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from catalog.models import Market

from .base import DOC, Row, schema_field, version_field


class OfferRow(Row):
    """One offer of an instance type in a region and market, with the type's specs."""

    instance_type: str
    region: str
    market: Market
    usd_per_hour: float = Field(description="per instance; spot: the median over the region's zones")
    spot_min_usd: float | None = Field(description="spot: the cheapest zone's price")
    az_count: int | None = Field(description="spot: zones with a price")
    interruption: str | None = Field(description="spot: the Spot Instance Advisor bucket (<5%, ..., >20%)")
    interruption_bucket: int | None = Field(description="its index, 0 (<5%) to 4 (>20%)")
    savings_pct: float | None
    price_at: datetime | None = Field(description="when the price was read (spot: its timestamp)")
    family: str
    vcpus: int
    memory_gib: float
    arch: str
    cpu: str | None
    accelerator: str | None = Field(description="count x model, null for none")
    accelerator_kind: str | None
    accelerator_model: str | None
    accelerator_count: int
    accelerator_memory_gib: float | None = Field(description="per device")
    network_gbps: float | None
    network_up_to: bool
    efa: bool


class CatalogShowDocument(BaseModel):
    model_config = DOC
    schema_name: Literal["catalog-show"] = schema_field("catalog-show")
    schema_version: Literal[1] = version_field(1)
    offers: list[OfferRow]


class CatalogInfoDocument(BaseModel):
    model_config = DOC
    schema_name: Literal["catalog-info"] = schema_field("catalog-info")
    schema_version: Literal[1] = version_field(1)
    path: str
    source: str = Field(description="aws-api, snapshot or file")
    fetched_at: datetime
    age_days: float
    instance_types: int
    regions: list[str]
    offers: int
    on_demand_offers: int
    spot_offers: int
    provenance: str


class CatalogRefreshDocument(BaseModel):
    model_config = DOC
    schema_name: Literal["catalog-refresh"] = schema_field("catalog-refresh")
    schema_version: Literal[1] = version_field(1)
    path: str = Field(description="the catalog cache written")
    source: str
    fetched_at: datetime
    regions: list[str]
    instance_types: int
    offers: int
