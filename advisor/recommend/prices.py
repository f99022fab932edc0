"""The user's own prices (`advisor recommend --prices FILE`): what the team pays, not the list price.

A YAML or JSON file with three optional lists:

    discounts:       # a share off the list price where every given key matches (family, instance_type,
      - {family: p4d, percent: 28}            # region, market); several that match all apply, one
      - {market: on-demand, percent: 6}       # after the other (an EDP on top of a Savings Plan)
    overrides:       # a fixed $/h per instance (private pricing): replaces the list price and its
      - {instance_type: g5.2xlarge, usd_per_hour: 0.81}  # discounts; region and market narrow it
    reserved:        # capacity already paid for (a reservation, a Capacity Block): the first
      - {instance_type: p4d.24xlarge, region: us-east-1, count: 2}  # `count` on-demand instances
                                                                      # cost 0, more are priced

Every key is checked against the catalog (an unknown family, type or region is a typo) and every
number against what it can mean; a bad file is one AdvisorError line. The ranking reads the result
as an offer's price and, for reserved capacity, the number of instances it gets free.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from catalog.models import Catalog, Market
from safeio import check_name, first_error, mapping, read_document_file

from ..errors import AdvisorError

MAX_BYTES = 1 << 20  # a price file is a few lines; past a MiB it is not one
MAX_USD_PER_HOUR = 10_000.0  # the catalog's own bound on an hourly price
# A tenth of a cent an hour: below any instance's price (the cheapest spot offers are cents), and
# a floor that keeps the price's log (the plot's and the page's axes) finite. Capacity paid for
# already is `reserved`, not a price of 0.
MIN_USD_PER_HOUR = 0.001
MAX_RULES = 10_000  # a price file lists families and types: more rules than the catalog has offers is not one

# What each number can mean, said with pydantic's complaint about it (a YAML `yes` is a boolean).
REASONS = {
    "usd_per_hour": f" (a price is a number from ${MIN_USD_PER_HOUR} to ${MAX_USD_PER_HOUR:,.0f} an hour; "
                    "capacity already paid for goes under reserved)",
    "percent": " (a discount is a number of percent, 0 or more and below 100; true/yes is not one)",
    "count": " (a whole number of instances, 1 to 10,000; true/yes is not one)",
}

Text = Annotated[str, Field(min_length=1, max_length=200)]


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, defer_build=True)

    family: Text | None = None
    instance_type: Text | None = None
    region: Text | None = None
    market: Market | None = None

    def matches(self, family: str, instance_type: str, region: str, market: str) -> bool:
        return all(want is None or want.lower() == have.lower() for want, have in
                   ((self.family, family), (self.instance_type, instance_type), (self.region, region),
                    (self.market, market)))


class Discount(_Rule):
    percent: float = Field(strict=True, ge=0, lt=100)  # strict: `true` (or YAML `yes`) is not 1%


class Override(_Rule):
    instance_type: Text
    usd_per_hour: float = Field(strict=True, ge=MIN_USD_PER_HOUR, le=MAX_USD_PER_HOUR)


class Reserved(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, defer_build=True)

    instance_type: Text
    region: Text | None = None  # None: in every region (a Savings Plan-like pool is a discount instead)
    count: int = Field(strict=True, ge=1, le=10_000)


class PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    discounts: list[Discount] = Field(default=[], max_length=MAX_RULES)
    overrides: list[Override] = Field(default=[], max_length=MAX_RULES)
    reserved: list[Reserved] = Field(default=[], max_length=MAX_RULES)


class Prices:
    """A checked price file, applied to the catalog's offers."""

    def __init__(self, doc: PriceFile, source: str):
        self.doc, self.source = doc, source

    def check(self, catalog: Catalog) -> None:
        """Every family, instance type and region the file names is one the catalog knows."""
        families = {it.family.lower() for it in catalog.instance_types.values()}
        types = {n.lower() for n in catalog.instance_types}
        regions = {r.lower() for r in catalog.offers}
        for kind, rules in (("discounts", self.doc.discounts), ("overrides", self.doc.overrides),
                            ("reserved", self.doc.reserved)):
            for n, r in enumerate(rules, 1):
                for key, known in (("family", families), ("instance_type", types), ("region", regions)):
                    v = getattr(r, key, None)
                    if v is not None and v.lower() not in known:
                        raise AdvisorError(f"{self.source}: {kind} #{n}: {key} {v!r} is not in the catalog "
                                           f"(check the spelling; 'advisor catalog show' lists what it has)")

    def apply(self, family: list[str], instance_type: list[str], region: str, market: list[str],
              usd_per_hour: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the price paid per instance-hour, instances already paid for) of each offer of one region."""
        price = np.array(usd_per_hour, dtype=float)
        free = np.zeros(len(price), dtype=np.int64)
        for i, (fam, name, mkt) in enumerate(zip(family, instance_type, market)):
            over = next((o for o in reversed(self.doc.overrides) if o.matches(fam, name, region, mkt)), None)
            if over is not None:  # the price they pay: no discount on top
                price[i] = over.usd_per_hour
            else:
                for d in self.doc.discounts:
                    if d.matches(fam, name, region, mkt):
                        price[i] *= 1 - d.percent / 100
            if mkt == "on-demand":
                free[i] = sum(r.count for r in self.doc.reserved
                              if r.instance_type.lower() == name.lower()
                              and (r.region is None or r.region.lower() == region.lower()))
        # Discounts stacked on discounts can take a price toward 0 (and its log, on the plot's axis,
        # to -inf): no price paid goes below the floor, or below the list price where that is lower.
        np.maximum(price, np.minimum(usd_per_hour, MIN_USD_PER_HOUR), out=price)
        return price, free

    def describe(self) -> str:
        d = self.doc
        return (f"prices from {self.source} ({len(d.discounts)} discounts, {len(d.overrides)} overrides, "
                f"{len(d.reserved)} reserved)")


def load_prices(path: str | Path) -> Prices:
    """Read and check a price file (.yaml/.yml or .json); one AdvisorError line when it is bad."""
    path = check_name(path, "price file", AdvisorError)  # its name is printed into the page: UTF-8 only
    where = f"price file {path}"
    doc = read_document_file(path, "price file", MAX_BYTES, AdvisorError)  # limits: size, depth, no aliases
    doc = mapping({} if doc is None else doc, where, AdvisorError,
                  "a mapping with discounts, overrides and/or reserved")
    try:
        return Prices(PriceFile.model_validate(doc), str(path))
    except ValidationError as e:
        first = first_error(e)
        loc = ".".join(str(p) if isinstance(p, str) else f"#{p + 1}" for p in first.loc)  # rules count from 1
        why = REASONS.get(str(first.loc[-1]), "") if first.kind != "extra_forbidden" else ""
        raise AdvisorError(f"{where}: {loc}: {first.msg}{why}") from None
