"""The catalog's data model: what instance types exist and what they cost, per region and market.

A catalog file is versioned JSON. Offers are stored per region as rows; `Catalog.offer_arrays()`
gives the column view the ranker vectorises over.
"""

from __future__ import annotations

import operator
from datetime import datetime, timedelta, timezone
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from safeio import one_line

# 2: `cloud` and the hardware facts (socket_vcpus, interconnect, host_link) became fields. Version 1
# files still load: Catalog._schema_1_facts fills the facts as AWS's fetcher writes them.
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, SCHEMA_VERSION)

AcceleratorKind = Literal["gpu", "neuron", "gaudi", "none"]
Market = Literal["on-demand", "spot"]
Arch = Literal["x86_64", "arm64"]
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


# Every number in a catalog file is checked for what it means: finite (NaN and inf are refused by
# allow_inf_nan=False on each model), the right sign, and in a plausible unit. The upper bounds sit
# well past the largest AWS type (u7in-32tb: 1,920 vCPUs, 32 TiB; 16 accelerators; 3,200 Gbit/s;
# B200: 180 GB) and well below the same figure in the wrong unit (MHz, MiB, Mbit/s, cents).
# Memory past these is a unit error (MiB or bytes read as GiB): one home for the catalog's and a
# probe result's bounds. A machine: 1 PiB; one accelerator: 4 TiB (24576 would be MiB).
MAX_MEMORY_GIB = 2**20
MAX_DEVICE_MEMORY_GIB = 4096
NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$"  # g6e.12xlarge, us-east-1, g6e: never "..", ".x", "-x"
Name = Annotated[str, Field(pattern=NAME_PATTERN)]
Text = Annotated[str, Field(max_length=200), AfterValidator(one_line)]  # a CPU or accelerator model name


class InstanceType(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    cloud: Name = "aws"  # whose fetcher described it (catalog/clouds.py)
    name: Name
    family: Name
    generation: int | None = Field(default=None, ge=1, le=100)
    vcpus: int = Field(gt=0, le=16384)
    physical_cores: int | None = Field(default=None, gt=0, le=16384)  # DefaultCores: c7a and Graviton run one thread per core
    memory_gib: float = Field(ge=0.1, le=MAX_MEMORY_GIB)  # GiB; the smallest type has 0.5
    arch: Arch
    cpu_manufacturer: Text | None = None
    cpu_model: Text | None = None
    cpu_clock_ghz: float | None = Field(default=None, ge=0.1, le=10)  # GHz; 3500 would be MHz
    accelerator_kind: AcceleratorKind = "none"
    accelerator_model: Text | None = None
    accelerator_count: int = Field(default=0, ge=0, le=1024)
    # per device (for a fractional GPU: its partition's); 24576 would be MiB
    accelerator_memory_gib: float | None = Field(default=None, ge=0.1, le=MAX_DEVICE_MEMORY_GIB)
    # Share of one device the instance gets: g6f/gr6f partition an L4 (GpuPartitionSize 0.125-0.5,
    # accelerator_count 1). None: whole devices.
    accelerator_fraction: float | None = Field(default=None, gt=0, lt=1, allow_inf_nan=False)
    # the sustained figure; "Up to 10 Gigabit" -> 10, up_to=True
    network_gbps: float | None = Field(default=None, ge=0.01, le=100_000)
    network_up_to: bool = False
    # What hours of all-reduce get (catalog.aws.describe.baseline_gbps): the instance's own figure when
    # it is a fixed one; for "Up to N Gigabit" the smaller of the cards' baseline and N
    # (c7i.2xlarge: 3.125 of "up to 12.5").
    network_baseline_gbps: float | None = Field(default=None, ge=0.01, le=100_000)
    efa: bool = False
    # DescribeInstanceTypes' SupportedUsageClasses ("on-demand", "spot", "capacity-block");
    # empty where the catalog's source did not say.
    usage_classes: list[str] = []
    # Hardware facts the cloud publishes per family but its instance-type API does not carry (AWS's:
    # catalog/aws/families.py), written by the fetcher; None where not known. socket_vcpus: vCPUs of
    # one CPU socket (a CPU estimate counts one). interconnect: the link between the instance's
    # devices (None for one device), GB/s per direction per device. host_link: each device's link to
    # the host CPU (None without accelerators), GB/s per direction.
    socket_vcpus: int | None = Field(default=None, gt=0, le=16384)
    interconnect: Text | None = None
    interconnect_gbs: float | None = Field(default=None, gt=0, le=10_000)  # B200's NVLink 5: 900; MB/s would be 1000x
    host_link: Text | None = None
    host_link_gbs: float | None = Field(default=None, gt=0, le=1_000)  # PCIe Gen5 x16: ~63; MB/s would be 1000x

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
        if self.physical_cores is not None and self.physical_cores > self.vcpus:
            raise ValueError(f"{self.name}: physical_cores {self.physical_cores} is more than vcpus {self.vcpus}")
        for link in ("interconnect", "host_link"):  # a link is its words and its figure, or neither
            if (getattr(self, link) is None) != (getattr(self, f"{link}_gbs") is None):
                raise ValueError(f"{self.name}: {link} and {link}_gbs must be given together")
        return self


# A price in USD per hour: finite (NaN, inf, 0 and negatives are file errors), and below
# $10,000/h (the dearest AWS type is a few hundred dollars an hour; more is cents, not USD).
# At least a millionth of a dollar an hour (the cheapest spot offers are ~$0.001/h; moto's stand-in
# spot price is $0.00001): a denormal "price" such as 5e-324 made samples per dollar infinite.
MIN_USD_PER_HOUR, MAX_USD_PER_HOUR = 1e-6, 10_000.0
Price = Annotated[float, Field(ge=MIN_USD_PER_HOUR, le=MAX_USD_PER_HOUR, allow_inf_nan=False)]
AzCount = Annotated[int, Field(ge=1, le=100)]
# The Spot Instance Advisor's "s": below 0 where spot costs more than on-demand (its 2025-06 file
# has p5.48xlarge in ca-central-1 at -62); past -100 (spot at twice on-demand) is not a saving figure.
SAVINGS_PCT_MIN, SAVINGS_PCT_MAX = -100.0, 100.0
SavingsPct = Annotated[float, Field(ge=SAVINGS_PCT_MIN, le=SAVINGS_PCT_MAX, allow_inf_nan=False)]


_TZINFO = operator.attrgetter("tzinfo")
# When a price was read: between AWS's launch and 2100 (checked by pydantic's core: 78,000 checks in
# Python cost several ms of the load budget). Not "in the past": a spot price stamped by AWS a
# second ahead of a slow local clock is fine.
PriceTime = Annotated[datetime, Field(ge=datetime(2006, 1, 1, tzinfo=timezone.utc),
                                      le=datetime(2100, 1, 1, tzinfo=timezone.utc))]


def utc(t: datetime, what: str = "time") -> datetime:
    """A time as UTC-aware: a file may omit the offset (read as UTC) or give another one; naive and
    aware times cannot be compared (TypeError), and ages must not depend on the writer's zone."""
    try:
        return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)
    except OverflowError:  # 0001-01-01T00:00+01:00 has no UTC equivalent
        raise ValueError(f"{what} {t.isoformat()} is out of range") from None


class Offer(BaseModel):
    """One price for one instance type in one region and market (the row view of RegionOffers).

    For spot, `usd_per_hour` is the median over the region's availability zones (what a
    user placing a request without picking a zone can expect); the minimum is kept beside it.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    instance_type: Name
    region: Name
    market: Market
    usd_per_hour: Price
    spot_min_usd: Price | None = None
    az_count: AzCount | None = None
    price_at: PriceTime | None = None
    interruption_bucket: int | None = Field(default=None, ge=0, le=4)
    savings_pct: SavingsPct | None = None

    @field_validator("price_at")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        return None if v is None else utc(v, "price_at")


OFFER_COLUMNS = ("instance_type", "market", "usd_per_hour", "spot_min_usd", "az_count", "price_at",
                 "interruption_bucket", "savings_pct")


class RegionOffers(BaseModel):
    """A region's offers as columns: a 1,300-type x 30-region catalog validated as rows took
    ~550 ms to load; as columns it stays well under the 150 ms target, and the ranker wants
    columns anyway."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    instance_type: list[Name] = []
    market: list[Market] = []
    # Prices are checked (positive, finite) by pydantic's core while parsing: a Python loop over
    # 78,000 prices cost ~15 ms of the 150 ms load budget.
    usd_per_hour: list[Price] = []
    spot_min_usd: list[Price | None] = []
    az_count: list[AzCount | None] = []
    price_at: list[PriceTime | None] = []
    interruption_bucket: list[Annotated[int, Field(ge=0, le=4)] | None] = []
    savings_pct: list[SavingsPct | None] = []

    @model_validator(mode="after")
    def _columns_ok(self) -> RegionOffers:
        n = len(self.instance_type)
        for col in OFFER_COLUMNS:
            if len(getattr(self, col)) != n:
                raise ValueError(f"offer column {col} has {len(getattr(self, col))} entries, expected {n}")
        # A naive time (no offset) is read as UTC; the test runs in C (map/filter), since a
        # Python-level check of 78,000 times cost ~5 ms and utcoffset() on each ~80 ms.
        if None in map(_TZINFO, filter(None, self.price_at)):
            self.price_at = [None if t is None else utc(t, "price_at") for t in self.price_at]
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


# Where the numbers come from, in prose: a few KiB in practice; 1 MiB is past any honest one.
PROVENANCE_MAX_CHARS = 2**20


class Catalog(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    schema_version: int
    cloud: Name = "aws"  # every instance type's cloud (catalog/clouds.py)
    source: Source
    fetched_at: datetime
    provenance: str = Field(default="", max_length=PROVENANCE_MAX_CHARS)
    regions: list[Name]
    instance_types: dict[Name, InstanceType]
    offers: dict[Name, RegionOffers]  # region -> offers, as columns

    @field_validator("schema_version")
    @classmethod
    def _version_ok(cls, v: int) -> int:
        if v not in READABLE_VERSIONS:
            raise ValueError(
                f"catalog schema_version {v} is not supported (this advisor reads version "
                f"{SCHEMA_VERSION}); run 'advisor catalog refresh' or rebuild the file"
            )
        return v

    @field_validator("fetched_at")
    @classmethod
    def _fetched_utc(cls, v: datetime) -> datetime:
        v = utc(v, "fetched_at")
        # A date in the future would make any catalog look fresh (and never warn about its age).
        if v > datetime.now(timezone.utc) + timedelta(days=1):
            raise ValueError(f"fetched_at {v:%Y-%m-%d %H:%M} UTC is in the future")
        return v

    @model_validator(mode="after")
    def _offers_refer_to_known_types(self) -> Catalog:
        for key, it in self.instance_types.items():
            if it.name != key:  # the ranker looks types up by the name an offer gives
                raise ValueError(f"instance_types[{key!r}] describes {it.name!r}")
            if it.cloud != self.cloud:
                raise ValueError(f"instance_types[{key!r}] is of cloud {it.cloud!r}, the catalog of {self.cloud!r}")
        known = self.instance_types.keys()
        for region, ro in self.offers.items():
            unknown = set(ro.instance_type) - known
            if unknown:
                raise ValueError(f"offers in {region} name unknown instance type {min(unknown)}")
        return self

    @model_validator(mode="after")
    def _schema_1_facts(self) -> Catalog:
        """Version 1 had no hardware-fact fields, and only AWS wrote it: its types get the facts
        AWS's fetcher writes now, so a cached catalog estimates as before without a refresh (which
        needs credentials and minutes) for facts that depend on the family alone."""
        if self.schema_version == 1:
            from .aws.families import facts

            for it in self.instance_types.values():
                for field, value in facts(it.family, it.accelerator_kind, it.accelerator_count).items():
                    setattr(it, field, value)
            self.schema_version = SCHEMA_VERSION
        return self

    def iter_offers(self, region: str | None = None):
        """Row view, built without re-validation (the columns were validated on load)."""
        for r, ro in self.offers.items():
            if region is not None and r != region:
                continue
            for i in range(len(ro)):
                yield Offer.model_construct(region=r, **{c: getattr(ro, c)[i] for c in OFFER_COLUMNS})
