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
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from catalog.models import Catalog
from safeio import decode_text, parse_json, read_bytes

from ..errors import AdvisorError

MAX_BYTES = 1 << 20  # a price file is a few lines; past a MiB it is not one
MAX_USD_PER_HOUR = 10_000.0  # the catalog's own bound on an hourly price

Market = Literal["on-demand", "spot"]
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
    percent: float = Field(ge=0, lt=100)


class Override(_Rule):
    instance_type: Text
    usd_per_hour: float = Field(ge=0, le=MAX_USD_PER_HOUR)


class Reserved(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, defer_build=True)

    instance_type: Text
    region: Text | None = None  # None: in every region (a Savings Plan-like pool is a discount instead)
    count: int = Field(ge=1, le=10_000)


class PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    discounts: list[Discount] = []
    overrides: list[Override] = []
    reserved: list[Reserved] = []


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
                              if r.instance_type.lower() == name.lower() and (r.region is None or r.region.lower() == region.lower()))
        return price, free

    def describe(self) -> str:
        d = self.doc
        return (f"prices from {self.source} ({len(d.discounts)} discounts, {len(d.overrides)} overrides, "
                f"{len(d.reserved)} reserved)")


def load_prices(path: str | Path) -> Prices:
    """Read and check a price file (.yaml/.yml or .json); one AdvisorError line when it is bad."""
    path = Path(path)
    where = f"price file {path}"
    raw = read_bytes(path, "price file", MAX_BYTES, AdvisorError)
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise AdvisorError(f"{where}: reading YAML needs PyYAML (pip install pyyaml), or write the file as "
                               ".json") from None
        text = decode_text(raw, where, AdvisorError)  # the one text rule: UTF-8, a BOM allowed
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            at = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
            raise AdvisorError(f"{where}: not valid YAML ({getattr(e, 'problem', None) or 'syntax error'}{at})") from None
    elif path.suffix.lower() == ".json":
        doc = parse_json(raw, where, AdvisorError)
    else:
        raise AdvisorError(f"{where}: give a .yaml, .yml or .json file")
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise AdvisorError(f"{where}: expected a mapping with discounts, overrides and/or reserved")
    try:
        return Prices(PriceFile.model_validate(doc), str(path))
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) if isinstance(p, str) else f"#{p + 1}" for p in err["loc"])
        raise AdvisorError(f"{where}: {loc}: {err['msg']}") from None
