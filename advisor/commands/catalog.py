"""`advisor catalog show|info|refresh`: what instance types exist and what they cost."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import get_args

from catalog.aws.regions import DEFAULT_REGIONS
from catalog.models import Market

from .. import options as opt
from ..errors import AdvisorError
from ..output import add_format_option, emit, safe_text, warn
from .common import (
    add_catalog_options,
    add_list_option,
    add_type_filter_options,
    catalog_path,
    load_catalog,
    type_filter,
)

PROVENANCE_SHOWN = 1800  # characters of the provenance a table shows (wrapped, it fits a cell); json has it whole
SHOW_COLUMNS = ("instance_type", "region", "market", "usd_per_hour", "vcpus", "memory_gib", "accelerator",
                "network_gbps", "efa", "interruption")
# The table people read: EFA said in the network cell ("400, EFA"), so the table fits 100 columns.
TABLE_COLUMNS = tuple(c for c in SHOW_COLUMNS if c != "efa")


def register(sub) -> None:
    p = sub.add_parser("catalog", help="instance types, prices and spot statistics")
    csub = p.add_subparsers(dest="catalog_command", required=True, metavar="SUBCOMMAND",
                            parser_class=type(p))

    show = csub.add_parser(
        "show", help="list instance types with their offers",
        description="One row per offer (instance type, region, market) of the catalog in use, with its price, "
                    "vCPUs, memory, accelerators, network and spot interruption rate; the same filters as "
                    "recommend.",
        epilog="Example: advisor catalog show --family g5,g6 --region us-east-1 --market spot")
    add_list_option(show, "--region", metavar="R", help="only these regions")
    add_type_filter_options(show)
    show.add_argument("--market", choices=get_args(Market), help="only this market")
    add_catalog_options(show)
    add_format_option(show)
    show.set_defaults(func=cmd_show)

    info = csub.add_parser(
        "info", help="where the catalog in use comes from, its age and size",
        description="The catalog file in use (the refreshed cache, else the shipped snapshot, or --catalog), "
                    "where its figures come from, when it was fetched and how many types, regions and offers it has.",
        epilog="Example: advisor catalog info --format json")
    add_catalog_options(info)
    add_format_option(info)
    info.set_defaults(func=cmd_info)

    ref = csub.add_parser(
        "refresh", help="rebuild the catalog cache from the AWS APIs (needs credentials)",
        description="Fetch instance types (DescribeInstanceTypes), on-demand prices (the Pricing API), spot "
                    "prices and the Spot Instance Advisor's interruption rates for the regions asked for, and "
                    "replace the catalog cache with them; a failure leaves the cache as it was.",
        epilog="Example: advisor catalog refresh --region us-east-1,eu-west-1 --family g5,g6")
    add_list_option(ref, "--region", metavar="R", aliases=("--regions",),
                    help=f"regions to fetch (default {', '.join(DEFAULT_REGIONS)}); "
                         "'all': every region the account has enabled")
    add_list_option(ref, "--family", metavar="F", aliases=("--families",),
                    help="only these instance families (default: every type offered)")
    ref.add_argument("--spot-advisor", type=opt.path, metavar="FILE",
                     help="a saved copy of the Spot Instance Advisor JSON (default: fetched from AWS's public URL)")
    add_format_option(ref)
    ref.set_defaults(func=cmd_refresh)


def cmd_show(args) -> int:
    from catalog.models import INTERRUPTION_LABELS

    cat = load_catalog(args)
    wanted = type_filter(args)
    wanted.check(cat, args.region)

    rows = []
    for region in args.region or cat.regions:
        for o in cat.iter_offers(region):
            it = cat.instance_types[o.instance_type]
            if (args.market and o.market != args.market) or not wanted(it):
                continue
            acc = f"{it.accelerator_count}x {it.accelerator_model}" if it.accelerator_count else ""
            rows.append({
                "instance_type": it.name,
                "region": o.region,
                "market": o.market,
                "usd_per_hour": o.usd_per_hour,
                "spot_min_usd": o.spot_min_usd,
                "az_count": o.az_count,
                "interruption": INTERRUPTION_LABELS[o.interruption_bucket] if o.interruption_bucket is not None else None,
                "interruption_bucket": o.interruption_bucket,
                "savings_pct": o.savings_pct,
                "price_at": o.price_at,
                "family": it.family,
                "vcpus": it.vcpus,
                "memory_gib": it.memory_gib,
                "arch": it.arch,
                "cpu": it.cpu_model,
                "accelerator": acc or None,
                "accelerator_kind": it.accelerator_kind,
                "accelerator_model": it.accelerator_model,
                "accelerator_count": it.accelerator_count,
                "accelerator_memory_gib": it.accelerator_memory_gib,
                "network_gbps": _network_cell(it) if args.format in ("table", "markdown") else it.network_gbps,
                "network_up_to": it.network_up_to,
                "efa": it.efa,
            })
    # Within a family, by size (vCPUs), so g6e.2xlarge comes before g6e.12xlarge.
    rows.sort(key=lambda r: (r["region"], r["family"], r["vcpus"], r["instance_type"], r["market"]))
    if args.format == "json":
        from .. import schemas

        schemas.write("catalog-show", offers=rows)
        return 0
    if not rows and args.format in ("table", "markdown"):
        warn("no offer in this catalog matches these filters")
        return 0
    emit(rows, args.format, columns=SHOW_COLUMNS if args.format == "csv" else TABLE_COLUMNS)
    return 0


def _network_cell(it) -> str:
    gbps = "" if not it.network_gbps else f"up to {it.network_gbps:g}" if it.network_up_to else f"{it.network_gbps:g}"
    return ", ".join(p for p in (gbps, "EFA" if it.efa else "") if p)


def cmd_info(args) -> int:
    cat = load_catalog(args)
    now = datetime.now(timezone.utc)
    markets = {"on-demand": 0, "spot": 0}
    for ro in cat.offers.values():
        for m in ro.market:
            markets[m] += 1
    info = {
        "path": str(catalog_path(args)),
        "source": cat.source,
        "fetched_at": cat.fetched_at,
        "age_days": round((now - cat.fetched_at).total_seconds() / 86400, 1),
        "instance_types": len(cat.instance_types),
        "regions": cat.regions,
        "offers": sum(markets.values()),
        "on_demand_offers": markets["on-demand"],
        "spot_offers": markets["spot"],
        "provenance": cat.provenance,
    }
    if args.format == "json":
        from .. import schemas

        schemas.write("catalog-info", **info)
        return 0
    info["fetched_at"] = cat.fetched_at.isoformat()
    info["regions"] = f"{len(cat.regions)}: {', '.join(cat.regions)}"
    # Bounded before the table wraps it: textwrap is quadratic in the text's length (58 s at 16 MB).
    info["provenance"] = safe_text(cat.provenance, PROVENANCE_SHOWN)
    emit([{"field": k, "value": v} for k, v in info.items()], args.format, columns=("field", "value"))
    return 0


def cmd_refresh(args) -> int:
    from catalog.clouds import refresher
    from catalog.io import CatalogError, load
    from safeio import check_writable, save_atomic

    from ..paths import catalog_cache_path

    regions = args.region or None
    if regions and "all" in regions and regions != ["all"]:
        raise AdvisorError("--region all cannot be combined with other regions")
    families = args.family or None
    path = check_writable(catalog_cache_path(), "catalog cache")  # before minutes of API calls
    try:  # the catalog being replaced: its interruption buckets stay if the advisor fetch fails
        previous = load(catalog_path(args))
    except CatalogError:
        previous = None
    # Everything is fetched and validated before anything is written: a failure leaves the
    # previous cache as it was. AWS is the only cloud (--region and --spot-advisor are its terms).
    cat = refresher("aws")(regions=regions, families=families, spot_advisor_file=args.spot_advisor,
                           previous=previous, on_warning=warn)
    save_atomic(cat, path)
    done = {
        "path": str(path),
        "source": cat.source,
        "fetched_at": cat.fetched_at,
        "regions": cat.regions,
        "instance_types": len(cat.instance_types),
        "offers": sum(len(ro) for ro in cat.offers.values()),
    }
    if args.format == "json":
        from .. import schemas

        schemas.write("catalog-refresh", **done)
        return 0
    row = done | {"fetched_at": cat.fetched_at.isoformat(), "regions": ", ".join(cat.regions)}
    if args.format == "csv":  # one row, for a script
        emit([row], "csv")
    else:  # one record, as 'catalog info' prints it: the path and the time stay whole at any width
        emit([{"field": k, "value": v} for k, v in row.items()], args.format, ("field", "value"))
    return 0
