"""`advisor catalog show|info|refresh`: what instance types exist and what they cost."""

from __future__ import annotations

from datetime import datetime, timezone

from catalog.aws import DEFAULT_REGIONS

from ..errors import UserError
from ..output import add_format_option, emit, warn
from .common import add_catalog_options, catalog_path, load_catalog

SHOW_COLUMNS = ("instance_type", "region", "market", "usd_per_hour", "vcpus", "memory_gib", "accelerator",
                "network_gbps", "efa", "interruption")


def register(sub) -> None:
    p = sub.add_parser("catalog", help="instance types, prices and spot statistics")
    csub = p.add_subparsers(dest="catalog_command", required=True, metavar="SUBCOMMAND",
                            parser_class=type(p))

    show = csub.add_parser("show", help="list instance types with their offers")
    show.add_argument("--family", metavar="F[,F...]", help="only these families (e.g. g5,p4d)")
    show.add_argument("--region", metavar="R[,R...]", help="only these regions")
    show.add_argument("--accelerator", metavar="NAME",
                      help="only this accelerator (e.g. A10G, 'NVIDIA L40S', H100) or kind (gpu, neuron, gaudi, none)")
    show.add_argument("--market", choices=("on-demand", "spot"), help="only this market")
    add_catalog_options(show)
    add_format_option(show)
    show.set_defaults(func=cmd_show)

    info = csub.add_parser("info", help="where the catalog in use comes from, its age and size")
    add_catalog_options(info)
    add_format_option(info)
    info.set_defaults(func=cmd_info)

    ref = csub.add_parser("refresh", help="rebuild the catalog cache from the AWS APIs (needs credentials)")
    ref.add_argument("--regions", nargs="+", metavar="R",
                     help=f"regions (space or comma separated; default {' '.join(DEFAULT_REGIONS)}); "
                          "'all': every region the account has enabled")
    ref.add_argument("--families", metavar="F[,F...]", help="only these families (default: every type offered)")
    ref.add_argument("--spot-advisor", metavar="FILE",
                     help="a saved copy of the Spot Instance Advisor JSON (default: fetched from AWS's public URL)")
    add_format_option(ref)
    ref.set_defaults(func=cmd_refresh)


def _split(values: str | list[str] | None) -> list[str]:
    if not values:
        return []
    if isinstance(values, str):
        values = [values]
    return [x.strip() for v in values for x in v.split(",") if x.strip()]


def _accelerator_filter(name: str):
    """A predicate on InstanceType for --accelerator; unknown names are a user error."""
    from catalog.accelerators import lookup

    kinds = {"gpu", "neuron", "gaudi", "none", "cpu"}
    low = name.strip().lower()
    if low in kinds:
        kind = "none" if low == "cpu" else low
        return lambda it: it.accelerator_kind == kind
    spec = lookup(name)
    if spec is None:
        base = name.strip().upper()  # "A100" or "V100" without a size: every variant
        if base in ("A100", "V100"):
            return lambda it: (it.accelerator_model or "").upper().startswith(base + "-")
        raise UserError(f"unknown accelerator {name!r} (e.g. T4, A10G, L4, L40S, A100, H100, H200, Trainium; or gpu, neuron, gaudi, none)")
    return lambda it: it.accelerator_model == spec.key


def cmd_show(args) -> int:
    from catalog.models import INTERRUPTION_LABELS

    cat = load_catalog(args)
    families = _split(args.family)
    regions = _split(args.region)
    known_fams = {it.family for it in cat.instance_types.values()}
    for f in families:
        if f not in known_fams:
            raise UserError(f"unknown instance family {f!r} in this catalog (e.g. {', '.join(sorted(known_fams)[:6])})")
    for r in regions:
        if r not in cat.offers:
            raise UserError(f"unknown region {r!r} in this catalog (it has {', '.join(cat.regions)})")
    acc_ok = _accelerator_filter(args.accelerator) if args.accelerator else None

    rows = []
    for region in regions or cat.regions:
        for o in cat.iter_offers(region):
            it = cat.instance_types[o.instance_type]
            if families and it.family not in families:
                continue
            if args.market and o.market != args.market:
                continue
            if acc_ok and not acc_ok(it):
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
                "accelerator": acc,
                "accelerator_kind": it.accelerator_kind,
                "accelerator_model": it.accelerator_model,
                "accelerator_count": it.accelerator_count,
                "accelerator_memory_gib": it.accelerator_memory_gib,
                "network_gbps": (f"up to {it.network_gbps:g}" if it.network_up_to and it.network_gbps else it.network_gbps)
                if args.format in ("table", "markdown") else it.network_gbps,
                "network_up_to": it.network_up_to,
                "efa": it.efa,
            })
    # Within a family, by size (vCPUs), so g6e.2xlarge comes before g6e.12xlarge.
    rows.sort(key=lambda r: (r["region"], r["family"], r["vcpus"], r["instance_type"], r["market"]))
    emit(rows, args.format, columns=None if args.format == "json" else SHOW_COLUMNS)
    return 0


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
        "fetched_at": cat.fetched_at.isoformat(),
        "age_days": round((now - cat.fetched_at).total_seconds() / 86400, 1),
        "instance_types": len(cat.instance_types),
        "regions": len(cat.regions),
        "region_names": cat.regions,
        "offers": sum(markets.values()),
        "on_demand_offers": markets["on-demand"],
        "spot_offers": markets["spot"],
        "provenance": cat.provenance,
    }
    if args.format == "json":
        emit([info], "json")
        return 0
    if args.format == "table":
        import textwrap

        info["provenance"] = textwrap.fill(cat.provenance, width=100)
    emit([{"field": k, "value": v} for k, v in info.items()], args.format, columns=("field", "value"))
    return 0


def cmd_refresh(args) -> int:
    from catalog import aws
    from catalog.io import CatalogError, load, save_atomic

    from ..paths import catalog_cache_path

    regions = _split(args.regions) or None
    if regions and "all" in regions and regions != ["all"]:
        raise UserError("--regions all cannot be combined with other regions")
    families = _split(args.families) or None
    path = catalog_cache_path()
    try:  # the catalog being replaced: its interruption buckets stay if the advisor fetch fails
        previous = load(catalog_path(args))
    except CatalogError:
        previous = None
    # Everything is fetched and validated before anything is written: a failure leaves the
    # previous cache as it was.
    cat = aws.refresh(regions=regions, families=families, spot_advisor_file=args.spot_advisor,
                      previous=previous, on_warning=warn)
    save_atomic(cat, path)
    emit([{
        "path": str(path),
        "source": cat.source,
        "fetched_at": cat.fetched_at.isoformat(),
        "regions": ", ".join(cat.regions),
        "instance_types": len(cat.instance_types),
        "offers": sum(len(ro) for ro in cat.offers.values()),
    }], args.format)
    return 0
