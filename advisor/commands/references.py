"""`advisor references list`: the published training throughputs the estimates rest on."""

from __future__ import annotations

from ..errors import UserError
from ..output import add_format_option, emit

LIST_COLUMNS = ("id", "device", "GiB", "devices", "instance_type", "model", "precision", "batch", "pipeline",
                "format", "stack", "samples/s", "per device", "date", "source")


def register(sub) -> None:
    p = sub.add_parser("references", help="the published training throughputs estimates are built on")
    rsub = p.add_subparsers(dest="references_command", required=True, metavar="ACTION",
                            parser_class=type(p))

    lp = rsub.add_parser("list", help="print the reference dataset (or a team's own file in its schema)")
    lp.add_argument("--device", metavar="D[,D...]", help="only these accelerators (e.g. A100,H100,cpu; case-insensitive)")
    lp.add_argument("--model", metavar="M[,M...]", help="only these models (e.g. resnet50,bert-large)")
    add_references_option(lp)
    add_format_option(lp)
    lp.set_defaults(func=handle_list)


def add_references_option(parser) -> None:
    parser.add_argument("--references", metavar="FILE",
                        help="a reference file in the same schema (default: the shipped dataset)")


def load(args):
    """The dataset --references names (default: the shipped one); a bad file is a one-line error."""
    from ..references import load_references

    return load_references(getattr(args, "references", None))


def _split(value: str | None) -> list[str]:
    return [x.strip() for x in (value or "").split(",") if x.strip()]


def handle_list(args) -> int:
    refs = load(args)
    devices, models = _split(args.device), _split(args.model)
    _check_known("device", devices, {m.device for m in refs.measurements})
    _check_known("model", models, {m.model for m in refs.measurements})
    rows = refs.select(devices, models)
    if args.format == "json":
        emit([{**m.model_dump(mode="json"), "workload_id": m.workload_id} for m in rows], "json")
    elif args.format == "csv":
        emit([_flat(m) for m in rows], "csv")
    else:
        emit([_short(m) for m in rows], args.format, columns=LIST_COLUMNS)
    return 0


def _check_known(what: str, wanted: list[str], have: set[str]) -> None:
    known = {h.lower() for h in have}
    unknown = [w for w in wanted if w.lower() not in known]
    if unknown:
        raise UserError(f"no reference rows for {what} {', '.join(map(repr, unknown))} "
                        f"(the dataset has: {', '.join(sorted(have, key=str.lower))})")


def _short(m) -> dict:
    return {
        "id": m.id, "device": " ".join(p for p in (m.device, m.device_variant) if p),
        "GiB": m.device_memory_gib, "devices": m.devices,
        "instance_type": m.instance_type, "model": m.model, "precision": m.precision,
        "batch": m.batch_per_device, "pipeline": m.data_pipeline, "format": m.memory_format,
        "stack": m.stack, "samples/s": m.samples_per_sec, "per device": m.per_device_sps, "date": m.source_date.isoformat()[:7] if m.source_date else None,
        "source": m.source.label() + (" (derived)" if m.derived else ""),
    }


def _flat(m) -> dict:
    """Every field on one CSV row: the source's fields become source_url, source_repo, ..."""
    d = m.model_dump(mode="json")
    src = d.pop("source")
    d["workload_id"] = m.workload_id
    d.update({f"source_{k}": v for k, v in src.items()})
    return d
