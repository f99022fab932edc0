"""The catalog's data model: what instance types exist and what they cost, per region and market.

A catalog file is versioned JSON. Offers are stored per region as rows; `Catalog.offer_arrays()`
gives the column view the ranker vectorises over.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SCHEMA_VERSION = 1

AcceleratorKind = Literal["gpu", "neuron", "gaudi", "none"]
Market = Literal["on-demand", "spot"]
Source = Literal["aws-api", "snapshot", "file"]

# The Spot Instance Advisor's frequency-of-interruption buckets: share of capacity reclaimed
# over the trailing month, as (low, high) fractions. Bucket 4 is ">20%" with no upper end from
# AWS: we close it at 30% so that its midpoint is the 25% the advisor uses for ">20%"; that 30%
# (the pessimistic deadline check's rate) is our assumption, not an AWS figure.
INTERRUPTION_BUCKETS: tuple[tuple[float, float], ...] = (
    (0.0, 0.05),
    (0.05, 0.10),
    (0.10, 0.15),
    (0.15, 0.20),
    (0.20, 0.30),
)
INTERRUPTION_LABELS = ("<5%", "5-10%", "10-15%", "15-20%", ">20%")

# Families AWS sells mostly by reservation (Capacity Blocks for ML, On-Demand Capacity
# Reservations), whether or not a catalog's source lists "capacity-block" for them; p6 covers
# every p6 family (p6-b200, p6-b300, p6e-gb200).
RESERVATION_FAMILIES = frozenset({"p4d", "p4de", "p5", "p5e", "p5en"})
RESERVATION_NOTE = "usually needs a Capacity Block or reservation"


class InstanceType(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    family: str
    generation: int | None = None
    vcpus: int = Field(gt=0)
    physical_cores: int | None = Field(default=None, gt=0)  # DefaultCores: c7a and Graviton run one thread per core
    memory_gib: float = Field(gt=0)
    arch: Literal["x86_64", "arm64"]
    cpu_manufacturer: str | None = None
    cpu_model: str | None = None
    cpu_clock_ghz: float | None = None
    accelerator_kind: AcceleratorKind = "none"
    accelerator_model: str | None = None
    accelerator_count: int = Field(default=0, ge=0)
    accelerator_memory_gib: float | None = None  # per device (for a fractional GPU: its partition's)
    # Share of one device the instance gets: g6f/gr6f partition an L4 (GpuPartitionSize 0.125-0.5,
    # accelerator_count 1). None: whole devices.
    accelerator_fraction: float | None = Field(default=None, gt=0, lt=1, allow_inf_nan=False)
    network_gbps: float | None = None  # the sustained figure; "Up to 10 Gigabit" -> 10, up_to=True
    network_up_to: bool = False
    # What hours of all-reduce get (catalog.describe.baseline_gbps): the instance's own figure when
    # it is a fixed one; for "Up to N Gigabit" the smaller of the cards' baseline and N
    # (c7i.2xlarge: 3.125 of "up to 12.5").
    network_baseline_gbps: float | None = None
    efa: bool = False
    # DescribeInstanceTypes' SupportedUsageClasses ("on-demand", "spot", "capacity-block");
    # empty where the catalog's source did not say.
    usage_classes: list[str] = []

    @property
    def sold_by_reservation(self) -> bool:
        """AWS sells this type through Capacity Blocks (it says so in SupportedUsageClasses), or it
        is of a class (p4d, p5, p5e, p5en, p6) whose capacity goes mostly to Capacity Blocks and
        reservations: an on-demand or spot request for it usually finds none."""
        return "capacity-block" in self.usage_classes or self.family in RESERVATION_FAMILIES \
            or self.family.startswith("p6")

    @model_validator(mode="after")
    def _accelerator_consistent(self) -> InstanceType:
        if (self.accelerator_kind == "none") != (self.accelerator_count == 0):
            raise ValueError(
                f"{self.name}: accelerator_kind {self.accelerator_kind!r} does not match "
                f"accelerator_count {self.accelerator_count}"
            )
        return self


# A price in USD per hour: positive and finite (NaN, inf, 0 and negatives are file errors).
Price = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Offer(BaseModel):
    """One price for one instance type in one region and market (the row view of RegionOffers).

    For spot, `usd_per_hour` is the median over the region's availability zones (what a
    user placing a request without picking a zone can expect); the minimum is kept beside it.
    """

    model_config = ConfigDict(extra="forbid")

    instance_type: str
    region: str
    market: Market
    usd_per_hour: Price
    spot_min_usd: Price | None = None
    az_count: int | None = None
    price_at: datetime | None = None
    interruption_bucket: int | None = Field(default=None, ge=0, le=4)
    savings_pct: float | None = None


OFFER_COLUMNS = ("instance_type", "market", "usd_per_hour", "spot_min_usd", "az_count", "price_at",
                 "interruption_bucket", "savings_pct")


class RegionOffers(BaseModel):
    """A region's offers as columns: a 1,300-type x 30-region catalog validated as rows took
    ~550 ms to load; as columns it stays well under the 150 ms target, and the ranker wants
    columns anyway."""

    model_config = ConfigDict(extra="forbid")

    instance_type: list[str] = []
    market: list[Market] = []
    # Prices are checked (positive, finite) by pydantic's core while parsing: a Python loop over
    # 78,000 prices cost ~15 ms of the 150 ms load budget.
    usd_per_hour: list[Price] = []
    spot_min_usd: list[Price | None] = []
    az_count: list[int | None] = []
    price_at: list[datetime | None] = []
    interruption_bucket: list[Annotated[int, Field(ge=0, le=4)] | None] = []
    savings_pct: list[float | None] = []

    @model_validator(mode="after")
    def _columns_ok(self) -> RegionOffers:
        n = len(self.instance_type)
        for col in OFFER_COLUMNS:
            if len(getattr(self, col)) != n:
                raise ValueError(f"offer column {col} has {len(getattr(self, col))} entries, expected {n}")
        return self

    def __len__(self) -> int:
        return len(self.instance_type)

    def append(self, offer: Offer) -> None:
        for col in OFFER_COLUMNS:
            getattr(self, col).append(getattr(offer, col))

    @classmethod
    def from_offers(cls, offers: list[Offer]) -> RegionOffers:
        ro = cls()
        for o in offers:
            ro.append(o)
        return ro


class Catalog(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int
    source: Source
    fetched_at: datetime
    provenance: str = ""
    regions: list[str]
    instance_types: dict[str, InstanceType]
    offers: dict[str, RegionOffers]  # region -> offers, as columns

    @field_validator("schema_version")
    @classmethod
    def _version_ok(cls, v: int) -> int:
        if v != SCHEMA_VERSION:
            raise ValueError(
                f"catalog schema_version {v} is not supported (this advisor reads version "
                f"{SCHEMA_VERSION}); run 'advisor catalog refresh' or rebuild the file"
            )
        return v

    @model_validator(mode="after")
    def _offers_refer_to_known_types(self) -> Catalog:
        known = self.instance_types.keys()
        for region, ro in self.offers.items():
            unknown = set(ro.instance_type) - known
            if unknown:
                raise ValueError(f"offers in {region} name unknown instance type {min(unknown)}")
        return self

    def iter_offers(self, region: str | None = None):
        """Row view, built without re-validation (the columns were validated on load)."""
        for r, ro in self.offers.items():
            if region is not None and r != region:
                continue
            for i in range(len(ro)):
                yield Offer.model_construct(region=r, **{c: getattr(ro, c)[i] for c in OFFER_COLUMNS})
