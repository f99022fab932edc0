"""`advisor references list`: the published training throughputs the estimates rest on.
`advisor references check`: how well the estimator predicts each device it has not seen."""

from __future__ import annotations

from ..errors import AdvisorError
from ..output import add_format_option, emit, say
from .common import add_list_option

# The table's summary (json and csv carry every field); the source, with the date, prints under
# the table when the terminal is narrow.
LIST_COLUMNS = ("id", "device", "model", "precision", "stack", "batch", "samples/s", "per device", "source")


def register(sub) -> None:
    p = sub.add_parser("references", help="the published training throughputs estimates are built on")
    rsub = p.add_subparsers(dest="references_command", required=True, metavar="ACTION",
                            parser_class=type(p))

    lp = rsub.add_parser(
        "list", help="print the reference dataset (or a team's own file in its schema)",
        description="The published training throughputs the estimates are fitted on, each with its device, "
                    "model, precision, batch and source; json and csv carry every field.",
        epilog="Example: advisor references list --accelerator A100,H100 --model resnet50")
    add_list_option(lp, "--accelerator", metavar="D", aliases=("--device",), normalise=str.strip,
                    help="only rows on these devices (e.g. A100,H100,cpu; case-insensitive)")
    add_list_option(lp, "--model", metavar="M", normalise=str.strip, help="only these models (e.g. resnet50,bert-large)")
    add_references_option(lp)
    add_format_option(lp)
    lp.set_defaults(func=handle_list)

    cp = rsub.add_parser(
        "check", help="leave-one-device-out: predict each device from the others, against its published figures",
        description="Hold out each device model in turn, fit the estimator on the rest, and predict the held-out "
                    "rows: prediction, published figure, error and whether the calibrated band covered it; then "
                    "the median |error| and the coverage. The probe case predicts a device from one row of "
                    "another device in the same benchmark suite.",
        epilog="Example: advisor references check --rows")
    cp.add_argument("--rows", action="store_true", help="one line per held-out row instead of per device")
    cp.add_argument("--probe", action="store_true", help="the single-probe case instead of the model alone")
    add_references_option(cp)
    add_format_option(cp)
    cp.set_defaults(func=handle_check)


def add_references_option(parser) -> None:
    parser.add_argument("--references", metavar="FILE",
                        help="a reference file in the same schema (default: the shipped dataset)")


def load(args):
    """The dataset --references names (default: the shipped one); a bad file is a one-line error."""
    from ..estimate.references import load_references

    return load_references(getattr(args, "references", None))


def handle_list(args) -> int:
    refs = load(args)
    devices, models = args.accelerator, args.model
    _check_known("device", devices, {m.device for m in refs.measurements})
    _check_known("model", models, {m.model for m in refs.measurements})
    rows = refs.select(devices, models)
    if args.format == "json":
        from .. import schemas

        schemas.write("references-list", references=[{**m.model_dump(), "workload_id": m.workload_id} for m in rows])
    elif args.format == "csv":
        emit([_flat(m) for m in rows], "csv")
    else:
        emit([_short(m) for m in rows], args.format, columns=LIST_COLUMNS, notes="source")
    return 0


def _check_known(what: str, wanted: list[str], have: set[str]) -> None:
    known = {h.lower() for h in have}
    unknown = [w for w in wanted if w.lower() not in known]
    if unknown:
        raise AdvisorError(f"no reference rows for {what} {', '.join(map(repr, unknown))} "
                        f"(the dataset has: {', '.join(sorted(have, key=str.lower))})")


def _short(m) -> dict:
    device = " ".join(p for p in (m.device, m.device_variant) if p)
    return {
        "id": m.id, "device": f"{m.devices}x {device}" if m.devices > 1 else device,
        "model": m.model, "precision": m.precision, "stack": m.stack, "batch": m.batch_per_device,
        "samples/s": m.samples_per_sec, "per device": m.per_device_sps,
        "source": "; ".join(p for p in (m.source.label() + (" (derived)" if m.derived else ""),
                                        m.source_date.isoformat()[:7] if m.source_date else None) if p),
    }


def _flat(m) -> dict:
    """Every field on one CSV row: the source's fields become source_url, source_repo, ..."""
    d = m.model_dump(mode="json")
    src = d.pop("source")
    batch_src = d.pop("batch_source") or {}
    d["workload_id"] = m.workload_id
    d.update({f"source_{k}": v for k, v in src.items()})
    d.update({f"batch_source_{k}": batch_src.get(k) for k in src})  # the same columns on every row
    return d


CHECK_DEVICE_COLUMNS = ("device", "rows", "median predicted/published", "median |error|", "covered", "extrapolation")
CHECK_ROW_COLUMNS = ("device", "row", "workload", "stack", "published", "predicted", "band", "error", "covered")


def handle_check(args) -> int:
    from catalog.io import SNAPSHOT_PATH
    from catalog.io import load as load_catalog_file

    from ..estimate.evaluate import check
    from ..estimate.model import build
    from ..records import to_record

    refs = load(args)
    # CPU rows need their instance's cores x clock x ISA: the shipped catalog's facts.
    model = build(refs.measurements, load_catalog_file(SNAPSHOT_PATH),
                  "builtin" if args.references is None else args.references)
    result = check(model)
    rows = result.probe_rows if args.probe else result.rows
    summary = result.summary(probe=args.probe)
    if args.format == "json":
        from .. import schemas

        schemas.write("references-check", model=model.describe(), held_out="probe" if args.probe else "device",
                      summary=summary, other_summary=result.summary(probe=not args.probe),
                      devices=result.per_device(args.probe), rows=[to_record(r) for r in rows],
                      not_counted=[to_record(r) for r in result.not_estimable],
                      not_fitted=[{"id": i, "why": w} for i, w in result.skipped])
        return 0
    if args.format == "csv":
        emit([to_record(r) for r in rows], "csv")
        return 0
    if args.rows:
        emit([_check_row(r) for r in rows], args.format, columns=CHECK_ROW_COLUMNS)
    else:
        emit([{"device": d["device"], "rows": d["rows"], "median predicted/published": f"{d['median_ratio']:.2f}",
               "median |error|": f"{d['median_abs_error']:.0%}", "covered": f"{d['covered']:.0%}",
               "extrapolation": d["extrapolation"]} for d in result.per_device(args.probe)],
             args.format, columns=CHECK_DEVICE_COLUMNS)
    what = "single probe (one row of another device in the same suite)" if args.probe else "leave-one-device-out"
    print()
    say(f"{what}: {summary['rows']} held-out rows on {summary['devices']} devices; "
          f"median |error| {summary['median_abs_error']:.1%} (devices weighted equally; "
          f"{summary['median_abs_error_rows']:.1%} over rows); band coverage {summary['coverage']:.0%} "
          f"(target >= 80%); worst device {summary['worst_device']} ({summary['worst_median_abs_error']:.0%})")
    if result.not_estimable and not args.probe:
        lost = sorted({r.device for r in result.not_estimable})
        say(f"not counted (no other anchor of their kind to fit on): {', '.join(lost)}")
    say(f"{len(result.skipped)} of {len(refs.measurements)} rows are not fitted "
          "(other framework or precision, no peak figures, multi-node, MLPerf ceilings): "
          "'references check --format json' lists why")
    return 0


def _check_row(r) -> dict:
    return {"device": r.key, "row": r.row, "workload": r.workload, "stack": r.stack,
            "published": f"{r.published:,.0f}", "predicted": f"{r.predicted:,.0f}",
            "band": f"{r.low:,.0f}-{r.high:,.0f}", "error": f"{r.error:+.0%}", "covered": "yes" if r.covered else "no"}
