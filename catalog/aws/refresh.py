"""Live catalog refresh through the AWS APIs (boto3).

Reads DescribeInstanceTypes (specs), DescribeInstanceTypeOfferings (which types each region
offers), the Pricing API (Linux on-demand $/h) and DescribeSpotPriceHistory (current spot price
per AZ), plus the Spot Instance Advisor data (catalog/aws/spot_advisor.py) for interruption buckets.
Every call goes through a paginator and catalog/aws/call.py (bounded timeouts, retries, a deadline
for the whole refresh). Any AWS failure becomes one CatalogError line; nothing is written unless
the whole refresh succeeded.
"""

from __future__ import annotations

import logging
import math
import re
import statistics
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from safeio import first_error, parse_json

from ..io import CatalogError
from ..models import (
    MAX_USD_PER_HOUR,
    MIN_USD_PER_HOUR,
    SCHEMA_VERSION,
    Catalog,
    InstanceType,
    Offer,
    RegionOffers,
)
from . import call, spot_advisor
from .describe import family_of, instance_type_from_describe
from .regions import DEFAULT_REGIONS

log = logging.getLogger(__name__)

# The Pricing API has endpoints in us-east-1 and a few others; us-east-1 serves every region.
PRICING_REGION = "us-east-1"
IAM_ACTIONS = ("ec2:DescribeInstanceTypes", "ec2:DescribeInstanceTypeOfferings",
               "ec2:DescribeSpotPriceHistory", "pricing:GetProducts", "ec2:DescribeRegions (for --regions all)")
# The whole refresh may take this long per region before it gives up (keeping the previous
# catalog): a full region is a few dozen paged calls, a minute or two on a normal network.
SECONDS_PER_REGION = 300


def ec2_client(session, region: str, deadline: call.Deadline | None = None):
    # adaptive: botocore backs off and rate-limits between attempts when throttled
    return call.make_client("ec2", region, session=session, deadline=deadline, mode="adaptive")


def pricing_client(session, deadline: call.Deadline | None = None):
    return call.make_client("pricing", PRICING_REGION, session=session, deadline=deadline, mode="adaptive")


def known_regions(session=None) -> set[str]:
    """Region names botocore's bundled endpoint data knows for EC2 (commercial and GovCloud)."""
    import boto3

    session = session or boto3.session.Session()
    regions: set[str] = set()
    for partition in ("aws", "aws-us-gov"):
        regions.update(session.get_available_regions("ec2", partition_name=partition))
    return regions


def validate_regions(regions: Iterable[str], session=None) -> list[str]:
    regions = list(dict.fromkeys(r.strip() for r in regions if r.strip()))
    if not regions:
        raise CatalogError("no regions given")
    known = known_regions(session)
    bad = [r for r in regions if r not in known]
    if bad:
        raise CatalogError(f"unknown AWS region {bad[0]!r} (known: e.g. us-east-1, us-west-2, eu-west-1)")
    return regions


# ---------------------------------------------------------------------------------------------
# Parsing the pieces (pure functions, tested without AWS)


def parse_price_list_item(item: str | dict) -> tuple[str, float] | None:
    """One Pricing API PriceList entry (a JSON string) -> (instance type, USD/h), or None when
    it is no usable hourly price (zero, not USD, unit other than Hrs)."""
    doc = parse_json(item, "PriceList entry", CatalogError) if isinstance(item, str) else item
    # Checked level by level: an entry of another shape is no price, never an AttributeError.
    itype = _obj(_obj(_obj(doc).get("product")).get("attributes")).get("instanceType")
    if not isinstance(itype, str) or not itype:
        return None
    for term in _obj(_obj(_obj(doc).get("terms")).get("OnDemand")).values():
        for dim in _obj(_obj(term).get("priceDimensions")).values():
            if _obj(dim).get("unit") != "Hrs":
                continue
            usd = _obj(dim.get("pricePerUnit")).get("USD")
            try:
                price = float(usd)
            except (TypeError, ValueError):
                continue
            if MIN_USD_PER_HOUR <= price <= MAX_USD_PER_HOUR:  # NaN fails both
                return itype, price
    return None


def _obj(v) -> dict:
    return v if isinstance(v, dict) else {}


def spot_stats(history: Iterable[dict[str, Any]], region: str | None = None) -> dict[str, dict[str, Any]]:
    """SpotPriceHistory entries -> per type {min, median, az_count, timestamp}, using only the
    latest price of each (type, AZ): history can hold older prices for the same zone.

    With `region`, only its regular zones count ("us-east-1a", not the opt-in Local Zone
    "us-east-1-bos-1a", whose spot prices can sit above on-demand: not what a plain request gets)."""
    regular = re.compile(re.escape(region) + "[a-z]") if region else None
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for h in history:
        h = _obj(h)
        if not str(h.get("ProductDescription", "")).startswith("Linux/UNIX"):
            continue
        if regular is not None and not regular.fullmatch(str(h.get("AvailabilityZone", ""))):
            continue
        try:
            price = float(h["SpotPrice"])
        except (KeyError, TypeError, ValueError):
            continue
        if not MIN_USD_PER_HOUR <= price <= MAX_USD_PER_HOUR:  # NaN fails too
            continue
        if not isinstance(h.get("InstanceType"), str):
            continue
        ts = h.get("Timestamp")  # botocore parses it to a datetime
        if not isinstance(ts, datetime):
            ts = datetime.min
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=timezone.utc)
        key = (h["InstanceType"], h["AvailabilityZone"])
        if key not in latest or ts > latest[key][0]:
            latest[key] = (ts, price)
    per_type: dict[str, list[tuple[datetime, float]]] = {}
    for (itype, _az), v in latest.items():
        per_type.setdefault(itype, []).append(v)
    out = {}
    for itype, vals in per_type.items():
        prices = [p for _, p in vals]
        stamps = [t for t, _ in vals if t.year > 1]
        out[itype] = {"min": min(prices), "median": statistics.median(prices), "az_count": len(prices),
                      "timestamp": max(stamps) if stamps else None}
    return out


# ---------------------------------------------------------------------------------------------
# Calls


def _aws_error(e: BaseException, what: str) -> CatalogError:
    """One line that says what failed and what to do; never credentials."""
    line = call.explain(e, what, denied_hint=f"the refresh needs IAM permissions {', '.join(IAM_ACTIONS)}")
    return CatalogError(f"{line}; the previous catalog is kept")


def _paginate(client, operation: str, result_key: str, what: str, **kwargs) -> list[Any]:
    out: list[Any] = []
    try:
        for page in client.get_paginator(operation).paginate(**kwargs):
            out.extend(page.get(result_key, []))
    except call.errors() as e:
        raise _aws_error(e, what) from None
    return out


def fetch_instance_types(ec2, families: Iterable[str] | None = None) -> dict[str, InstanceType]:
    # The instance-type filter takes wildcards ("g5.*"): with --families only those pages come back.
    kwargs = {"Filters": [{"Name": "instance-type", "Values": [f"{f}.*" for f in sorted(families)]}]} if families else {}
    records = _paginate(ec2, "describe_instance_types", "InstanceTypes", "ec2:DescribeInstanceTypes", **kwargs)
    types = {}
    for rec in records:
        try:
            it = instance_type_from_describe(rec)
        except ValidationError as e:
            first = first_error(e)
            raise CatalogError(f"DescribeInstanceTypes answered {_name(rec)} with a value the catalog cannot hold at "
                               f"{first.at}: {first.msg}; the previous catalog is kept") from None
        except (KeyError, TypeError, AttributeError, ValueError) as e:  # a record of another shape
            raise CatalogError(f"DescribeInstanceTypes answered {_name(rec)} in another shape ({type(e).__name__}: "
                               f"{e}); the previous catalog is kept") from None
        if it is not None:
            types[it.name] = it
    return types


def _name(rec) -> str:
    name = rec.get("InstanceType") if isinstance(rec, dict) else None
    return repr(name)[:80] if name is not None else "a record with no InstanceType"


def fetch_offered_types(ec2, region: str) -> set[str]:
    rows = _paginate(ec2, "describe_instance_type_offerings", "InstanceTypeOfferings",
                     f"ec2:DescribeInstanceTypeOfferings in {region}", LocationType="region")
    return {r["InstanceType"] for r in rows}


def fetch_on_demand_prices(pricing, region: str) -> dict[str, float]:
    filters = [
        {"Type": "TERM_MATCH", "Field": f, "Value": v}
        for f, v in (
            ("operatingSystem", "Linux"),
            ("tenancy", "Shared"),
            ("preInstalledSw", "NA"),
            ("capacitystatus", "Used"),
            ("licenseModel", "No License required"),
            ("marketoption", "OnDemand"),
            ("regionCode", region),
        )
    ]
    items = _paginate(pricing, "get_products", "PriceList", f"pricing:GetProducts for {region}",
                      ServiceCode="AmazonEC2", Filters=filters, FormatVersion="aws_v1")
    prices: dict[str, float] = {}
    for item in items:
        try:
            parsed = parse_price_list_item(item)
        except (CatalogError, AttributeError, TypeError):
            log.debug("skipping an unreadable PriceList entry")
            continue
        if parsed is None:
            continue
        itype, price = parsed
        # The filters leave one Linux/shared row per type; should AWS ever return two, the
        # cheaper is the one a plain RunInstances gets.
        prices[itype] = min(price, prices.get(itype, math.inf))
    return prices


def fetch_spot(ec2, region: str, types: list[str], now: datetime) -> dict[str, dict[str, Any]]:
    history: list[dict[str, Any]] = []
    # Passing StartTime=now returns the price in effect now for each AZ; the type list is sent
    # in chunks to keep requests small.
    for i in range(0, len(types), 100):
        history += _paginate(ec2, "describe_spot_price_history", "SpotPriceHistory",
                             f"ec2:DescribeSpotPriceHistory in {region}",
                             InstanceTypes=types[i:i + 100], ProductDescriptions=["Linux/UNIX"], StartTime=now)
    return spot_stats(history, region)


def enabled_regions(session) -> list[str]:
    """The regions this account has enabled (DescribeRegions without AllRegions), for --regions all."""
    try:
        ec2 = call.make_client("ec2", session.region_name or "us-east-1", session=session)
        resp = ec2.describe_regions(AllRegions=False)
    except call.errors() as e:
        raise _aws_error(e, "ec2:DescribeRegions (--regions all)") from None
    regions = sorted(r["RegionName"] for r in resp.get("Regions", []) if r.get("RegionName"))
    if not regions:
        raise CatalogError("ec2:DescribeRegions listed no enabled region; pass --regions")
    return regions


def refresh(regions: Iterable[str] | None = None, families: Iterable[str] | None = None,
            spot_advisor_file: str | Path | None = None, session=None, previous: Catalog | None = None,
            on_warning: Callable[[str], None] = log.warning) -> Catalog:
    """Build a Catalog from the live APIs. Raises CatalogError (one line) on any failure.

    Interruption buckets come from `spot_advisor_file` when given, else from the public Spot
    Instance Advisor file; when that fetch fails they are kept from `previous` (the catalog being
    replaced), with a warning. `regions` ["all"] means every region the account has enabled."""
    import boto3

    try:
        session = session or boto3.session.Session()
    except call.errors() as e:  # AWS_PROFILE names no profile
        raise _aws_error(e, "AWS configuration") from None
    regions = list(regions or DEFAULT_REGIONS)
    regions = enabled_regions(session) if regions == ["all"] else validate_regions(regions, session)
    fams = {f.strip() for f in families if f.strip()} if families else None
    advisor = spot_advisor.load(spot_advisor_file) if spot_advisor_file else None  # a bad file fails first
    now = datetime.now(timezone.utc)
    deadline = call.Deadline(SECONDS_PER_REGION * len(regions))

    try:
        pricing = pricing_client(session, deadline)
        ec2s = {region: ec2_client(session, region, deadline) for region in regions}
    except call.errors() as e:  # credentials are resolved here: missing or partial ones
        raise _aws_error(e, "connecting to AWS") from None
    all_types: dict[str, InstanceType] = {}
    prices: dict[str, tuple[list[str], dict[str, float], dict[str, dict[str, Any]]]] = {}
    for region, ec2 in ec2s.items():
        # Each region describes the types it has; the union covers types only some regions offer.
        all_types.update(fetch_instance_types(ec2, fams))
        offered = fetch_offered_types(ec2, region)
        wanted = sorted(t for t in offered if t in all_types and (fams is None or family_of(t) in fams))
        od = fetch_on_demand_prices(pricing, region)
        prices[region] = (wanted, od, fetch_spot(ec2, region, wanted, now) if wanted else {})
    if advisor is None:
        advisor, advisor_note = _fetched_buckets(previous, on_warning, now)
    else:
        advisor_note = f"the Spot Instance Advisor file {Path(spot_advisor_file).name}"
    try:
        offers = _offers(prices, advisor, now)
    except ValidationError as e:
        raise _shape_error(e) from None
    if fams is not None:
        unknown = sorted(fams - {family_of(t) for t in all_types})
        if unknown:
            raise CatalogError(f"unknown instance family {unknown[0]!r}: DescribeInstanceTypes lists no such family")
    used = {o.instance_type for rows in offers.values() for o in rows}
    if not used:
        # An empty answer is no reason to replace a catalog that has prices.
        raise CatalogError(f"AWS returned no prices for {', '.join(regions)}; the previous catalog is kept")
    spot_offers = [o for rows in offers.values() for o in rows if o.market == "spot"]
    bucketed = sum(o.interruption_bucket is not None for o in spot_offers)
    if spot_advisor_file and spot_offers and not bucketed:
        # The user asked for buckets from this file and it gives none: a file of other regions or
        # types, not a reason to write a catalog whose provenance names it.
        raise CatalogError(f"spot advisor file {spot_advisor_file} has interruption buckets for none of the "
                           f"{len(spot_offers)} spot offers in {', '.join(regions)}; the previous catalog is kept")
    advisor_note = (f"interruption buckets for {bucketed} of {len(spot_offers)} spot offers from {advisor_note}"
                    if bucketed else f"no interruption buckets ({advisor_note} has none for these offers)")
    provenance = (
        f"AWS APIs at {now:%Y-%m-%d %H:%M} UTC: DescribeInstanceTypes, DescribeInstanceTypeOfferings, "
        "Pricing GetProducts (Linux, shared tenancy, on-demand), DescribeSpotPriceHistory (Linux/UNIX, "
        "current price per AZ; usd_per_hour = median over AZs); socket sizes and GPU links per family from "
        "catalog/aws/families.py"
        + f"; {advisor_note}"
        + (f"; families {', '.join(sorted(fams))}" if fams else "")
    )
    try:  # the whole catalog checked, as any catalog file is, before the caller writes it
        return Catalog(
            schema_version=SCHEMA_VERSION,
            cloud="aws",
            source="aws-api",
            fetched_at=now,
            provenance=provenance,
            regions=list(regions),
            instance_types={n: all_types[n] for n in sorted(used)},
            offers={r: RegionOffers.from_offers(rows) for r, rows in offers.items()},
        )
    except ValidationError as e:
        raise _shape_error(e) from None


def _shape_error(e: ValidationError) -> CatalogError:
    first = first_error(e)
    return CatalogError(f"AWS answered with a value the catalog cannot hold at {first.at}: {first.msg}; "
                        "the previous catalog is kept")


def _offers(prices, advisor: spot_advisor.Buckets, now: datetime) -> dict[str, list[Offer]]:
    """Each region's on-demand and spot offers, with the advisor file's bucket and savings."""
    offers: dict[str, list[Offer]] = {}
    for region, (wanted, od, spot) in prices.items():
        adv = advisor.get(region, {})
        rows: list[Offer] = []
        for t in wanted:
            if t in od:
                rows.append(Offer(instance_type=t, region=region, market="on-demand", usd_per_hour=od[t], price_at=now))
            if t in spot:
                s, a = spot[t], adv.get(t, {})
                rows.append(Offer(instance_type=t, region=region, market="spot", usd_per_hour=s["median"],
                                  spot_min_usd=s["min"], az_count=s["az_count"], price_at=s["timestamp"] or now,
                                  interruption_bucket=a.get("r"), savings_pct=a.get("s")))
        offers[region] = rows
        log.info("%s: %d types offered, %d offers", region, len(wanted), len(rows))
    return offers


def _fetched_buckets(previous: Catalog | None, on_warning: Callable[[str], None],
                     now: datetime) -> tuple[spot_advisor.Buckets, str]:
    """The public Spot Instance Advisor buckets, or the previous catalog's when the fetch fails."""
    try:
        return spot_advisor.fetch(), f"the Spot Instance Advisor data {spot_advisor.url()} fetched at {now:%Y-%m-%d %H:%M} UTC"
    except CatalogError as e:
        kept = spot_advisor.from_catalog(previous)
        if not kept:
            on_warning(f"{e}; the new catalog has no interruption buckets (pass --spot-advisor FILE to add them)")
            return {}, f"the Spot Instance Advisor fetch, which failed: {e}"
        on_warning(f"{e}; keeping the interruption buckets of the previous catalog ({previous.source}, "
                   f"fetched {previous.fetched_at:%Y-%m-%d})")
        return kept, (f"the previous catalog ({previous.source}, fetched {previous.fetched_at:%Y-%m-%d}), kept "
                      "because the Spot Instance Advisor fetch failed")
