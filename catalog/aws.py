"""Live catalog refresh through the AWS APIs (boto3).

Reads DescribeInstanceTypes (specs), DescribeInstanceTypeOfferings (which types each region
offers), the Pricing API (Linux on-demand $/h) and DescribeSpotPriceHistory (current spot price
per AZ), plus an optional copy of the Spot Instance Advisor JSON for interruption buckets.
Every call goes through a paginator and botocore's retry configuration. Any AWS failure becomes
one CatalogError line; nothing is written unless the whole refresh succeeded.
"""

from __future__ import annotations

import logging
import math
import re
import statistics
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .describe import family_of, instance_type_from_describe
from .io import CatalogError, parse_json, read_json_file
from .models import (
    MAX_USD_PER_HOUR,
    MIN_USD_PER_HOUR,
    SAVINGS_PCT_MAX,
    SAVINGS_PCT_MIN,
    SCHEMA_VERSION,
    Catalog,
    InstanceType,
    Offer,
    RegionOffers,
)

log = logging.getLogger(__name__)

DEFAULT_REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
# The Pricing API has endpoints in us-east-1 and a few others; us-east-1 serves every region.
PRICING_REGION = "us-east-1"
MAX_ATTEMPTS = 8  # botocore's adaptive mode backs off and rate-limits between attempts
IAM_ACTIONS = ("ec2:DescribeInstanceTypes", "ec2:DescribeInstanceTypeOfferings",
               "ec2:DescribeSpotPriceHistory", "pricing:GetProducts")

_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "AuthFailure",
           "UnrecognizedClientException", "InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException",
           "SignatureDoesNotMatch", "OptInRequired"}
_THROTTLED = {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException",
              "RequestThrottled", "RequestThrottledException"}


def _config():
    from botocore.config import Config

    return Config(retries={"mode": "adaptive", "max_attempts": MAX_ATTEMPTS}, connect_timeout=10, read_timeout=60)


def ec2_client(session, region: str):
    return session.client("ec2", region_name=region, config=_config())


def pricing_client(session):
    return session.client("pricing", region_name=PRICING_REGION, config=_config())


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
    attrs = (doc.get("product") or {}).get("attributes") or {}
    itype = attrs.get("instanceType")
    if not itype:
        return None
    for term in ((doc.get("terms") or {}).get("OnDemand") or {}).values():
        for dim in (term.get("priceDimensions") or {}).values():
            if dim.get("unit") != "Hrs":
                continue
            usd = (dim.get("pricePerUnit") or {}).get("USD")
            try:
                price = float(usd)
            except (TypeError, ValueError):
                continue
            if MIN_USD_PER_HOUR <= price <= MAX_USD_PER_HOUR:  # NaN fails both
                return itype, price
    return None


def spot_stats(history: Iterable[dict[str, Any]], region: str | None = None) -> dict[str, dict[str, Any]]:
    """SpotPriceHistory entries -> per type {min, median, az_count, timestamp}, using only the
    latest price of each (type, AZ): history can hold older prices for the same zone.

    With `region`, only its regular zones count ("us-east-1a", not the opt-in Local Zone
    "us-east-1-bos-1a", whose spot prices can sit above on-demand: not what a plain request gets)."""
    regular = re.compile(re.escape(region) + "[a-z]") if region else None
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for h in history:
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


SPOT_ADVISOR_MAX_BYTES = 64 * 2**20  # the public file is a few MB


def load_spot_advisor(path: str | Path) -> dict[str, dict[str, dict[str, int]]]:
    """The public Spot Instance Advisor JSON -> {region: {type: {"s": savings %, "r": bucket}}}
    (Linux only)."""
    path = Path(path)
    doc = read_json_file(path, "spot advisor file", SPOT_ADVISOR_MAX_BYTES, CatalogError)
    advisor = doc.get("spot_advisor") if isinstance(doc, dict) else None
    if not isinstance(advisor, dict):
        raise CatalogError(f"spot advisor file {path} has no 'spot_advisor' object (expected the Spot Instance Advisor JSON)")
    out: dict[str, dict[str, dict[str, int]]] = {}
    for region, by_os in advisor.items():
        linux = by_os.get("Linux") if isinstance(by_os, dict) else None
        if not isinstance(linux, dict):
            continue
        clean = {}
        for itype, v in linux.items():
            r, s = (v.get("r"), v.get("s")) if isinstance(v, dict) else (None, None)
            if isinstance(r, int) and 0 <= r <= 4:
                ok = isinstance(s, (int, float)) and not isinstance(s, bool) and SAVINGS_PCT_MIN <= s <= SAVINGS_PCT_MAX
                clean[itype] = {"r": r, "s": s if ok else None}
        out[region] = clean
    return out


# ---------------------------------------------------------------------------------------------
# Calls


def _aws_error(e: Exception, what: str) -> CatalogError:
    """One line that says what failed and what to do; never credentials."""
    from botocore.exceptions import (
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
        ReadTimeoutError,
    )

    if isinstance(e, (NoCredentialsError, PartialCredentialsError)):
        return CatalogError("no AWS credentials found (configure a profile, environment variables or an instance role); the previous catalog is kept")
    if isinstance(e, ClientError):
        err = e.response.get("Error", {})
        code, msg = err.get("Code", "?"), " ".join(str(err.get("Message", "")).split())[:200]
        if code in _DENIED:
            return CatalogError(f"AWS denied {what} ({code}); the refresh needs IAM permissions {', '.join(IAM_ACTIONS)}; the previous catalog is kept")
        if code in _THROTTLED:
            return CatalogError(f"AWS throttled {what} after {MAX_ATTEMPTS} attempts ({code}); try again later or with fewer --regions; the previous catalog is kept")
        return CatalogError(f"AWS error in {what}: {code}: {msg}; the previous catalog is kept")
    if isinstance(e, (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError)):
        return CatalogError(f"cannot reach AWS for {what} ({type(e).__name__}); check the network; the previous catalog is kept")
    if isinstance(e, NoRegionError):
        return CatalogError("no AWS region configured; pass --regions")
    return CatalogError(f"AWS call {what} failed: {type(e).__name__}: {' '.join(str(e).split())[:200]}; the previous catalog is kept")


def _paginate(client, operation: str, result_key: str, what: str, **kwargs) -> list[Any]:
    from botocore.exceptions import BotoCoreError, ClientError

    out: list[Any] = []
    try:
        for page in client.get_paginator(operation).paginate(**kwargs):
            out.extend(page.get(result_key, []))
    except (BotoCoreError, ClientError) as e:
        raise _aws_error(e, what) from None
    return out


def fetch_instance_types(ec2, families: Iterable[str] | None = None) -> dict[str, InstanceType]:
    # The instance-type filter takes wildcards ("g5.*"): with --families only those pages come back.
    kwargs = {"Filters": [{"Name": "instance-type", "Values": [f"{f}.*" for f in sorted(families)]}]} if families else {}
    records = _paginate(ec2, "describe_instance_types", "InstanceTypes", "ec2:DescribeInstanceTypes", **kwargs)
    types = {}
    for rec in records:
        it = instance_type_from_describe(rec)
        if it is not None:
            types[it.name] = it
    return types


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


def refresh(regions: Iterable[str] | None = None, families: Iterable[str] | None = None,
            spot_advisor: str | Path | None = None, session=None) -> Catalog:
    """Build a Catalog from the live APIs. Raises CatalogError (one line) on any failure."""
    import boto3

    session = session or boto3.session.Session()
    regions = validate_regions(regions or DEFAULT_REGIONS, session)
    fams = {f.strip() for f in families if f.strip()} if families else None
    advisor = load_spot_advisor(spot_advisor) if spot_advisor else None
    now = datetime.now(timezone.utc)

    pricing = pricing_client(session)
    all_types: dict[str, InstanceType] = {}
    offers: dict[str, list[Offer]] = {}
    for region in regions:
        ec2 = ec2_client(session, region)
        # Each region describes the types it has; the union covers types only some regions offer.
        all_types.update(fetch_instance_types(ec2, fams))
        offered = fetch_offered_types(ec2, region)
        wanted = sorted(t for t in offered if t in all_types and (fams is None or family_of(t) in fams))
        od = fetch_on_demand_prices(pricing, region)
        spot = fetch_spot(ec2, region, wanted, now) if wanted else {}
        adv = (advisor or {}).get(region, {})
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
    if fams is not None:
        unknown = sorted(fams - {family_of(t) for t in all_types})
        if unknown:
            raise CatalogError(f"unknown instance family {unknown[0]!r}: DescribeInstanceTypes lists no such family")
    used = {o.instance_type for rows in offers.values() for o in rows}
    if not used:
        # An empty answer is no reason to replace a catalog that has prices.
        raise CatalogError(f"AWS returned no prices for {', '.join(regions)}; the previous catalog is kept")
    provenance = (
        f"AWS APIs at {now:%Y-%m-%d %H:%M} UTC: DescribeInstanceTypes, DescribeInstanceTypeOfferings, "
        "Pricing GetProducts (Linux, shared tenancy, on-demand), DescribeSpotPriceHistory (Linux/UNIX, "
        "current price per AZ; usd_per_hour = median over AZs)"
        + (f"; interruption buckets from the Spot Instance Advisor file {Path(spot_advisor).name}" if spot_advisor else "")
        + (f"; families {', '.join(sorted(fams))}" if fams else "")
    )
    return Catalog(
        schema_version=SCHEMA_VERSION,
        source="aws-api",
        fetched_at=now,
        provenance=provenance,
        regions=list(regions),
        instance_types={n: all_types[n] for n in sorted(used)},
        offers={r: RegionOffers.from_offers(rows) for r, rows in offers.items()},
    )
