"""`advisor results`: the probe results store (list, show, import, export; pull comes from launch)."""

from __future__ import annotations

import sys

from lightning_module.contract.reliability import speedup_over_baseline
from lightning_module.contract.result import (
    BUILTIN_MODELS,
    ResultError,
    canonical_json,
    parse_results,
)
from safeio import FileError, read_bytes

from .. import options as opt
from ..errors import AdvisorError
from ..output import add_format_option, emit, error, warn
from ..render.probe import ci_text, write_result
from .common import add_list_option, add_store_option, open_store, read_store, store_path

IMPORT_MAX_BYTES = 256 * 2**20  # an export of ~50,000 results; a probe result is a few KiB
LIST_COLUMNS = ("result_id", "workload_id", "workload", "init_args", "data_init_args", "instance_type", "accelerator", "devices",
                "precision", "batch_size",
                "samples_per_sec", "ci_low", "ci_high", "speedup_over_baseline", "source", "finished_at")
# The people's table: accelerator, precision and batch in one column that wraps, so it fits 100 columns.
TABLE_COLUMNS = ("id", "workload", "instance_type", "config", "samples/s", "ci", "x baseline", "finished")
EXPORT_COLUMNS = (
    "result_id", "workload_id", "instance_type", "instance_type_source", "accelerator", "devices",
    "precision", "channels_last", "compile", "batch_size", "num_workers", "samples_per_sec", "ci_low",
    "ci_high", "flops_per_sample", "achieved_tflops", "utilisation_matmul", "utilisation_datasheet",
    "peak_memory_gib", "cpu_model", "gpu", "gpu_count", "torch", "source", "finished_at",
)


def register(sub) -> None:
    p = sub.add_parser("results", help="list, show, import and export probe results")
    rsub = p.add_subparsers(dest="results_command", required=True, metavar="ACTION")

    lp = rsub.add_parser(
        "list", help="the stored results, newest first",
        description="One row per stored probe result: its id, workload, instance type, configuration, "
                    "samples/s with its confidence interval, the speed-up over the baseline and when it finished.",
        epilog="Example: advisor results list --workload resnet50-224px-1000c --instance-type g5.xlarge")
    _add_filters(lp)
    add_store_option(lp)
    add_format_option(lp)
    lp.set_defaults(func=handle_list)

    sp = rsub.add_parser(
        "show", help="one result in full, with its optimisation ladder",
        description="Every field of one result (configuration, step times, FLOP/s and utilisation, memory, "
                    "reliability, hardware, software) and each rung of its ladder with its figure or failure.",
        epilog="Example: advisor results show f50d5e93")
    sp.add_argument("result_id", type=opt.text, metavar="ID", help="a result id or a unique prefix of one")
    add_store_option(sp)
    add_format_option(sp)
    sp.set_defaults(func=handle_show)

    ip = rsub.add_parser(
        "import", help="add ProbeResult JSON files (one result, or a list as export writes) to the store; "
        "already stored ones are skipped",
        description="Validate each file and store the good ones; a bad file is reported on one line "
        "and makes the exit status 2, but does not stop the others from being imported.",
        epilog="Example: advisor results import docs/examples/mlp-cpu.json",
    )
    ip.add_argument("files", type=opt.path, nargs="+", metavar="FILE")
    ip.add_argument("--format", choices=("table", "json"), default="table",
                    help="json: what was imported as a results-import document on stdout (the summary line "
                         "stays on stderr either way)")
    add_store_option(ip)
    ip.set_defaults(func=handle_import)

    ep = rsub.add_parser(
        "export", help="every stored result (json: full records; csv and others: one row each)",
        description="The stored results the filters keep, newest first: json is the full ProbeResult records "
                    "(what 'results import' reads back), csv and the tables one row each.",
        epilog="Example: advisor results export --format csv > /tmp/results.csv")
    _add_filters(ep)
    add_format_option(ep, default="json")
    add_store_option(ep)
    ep.set_defaults(func=handle_export)

    dp = rsub.add_parser(
        "delete", help="remove results from the store (e.g. a row that no longer validates)",
        description="Remove the results with these ids (or unique prefixes of them). All or none: "
        "an unknown or ambiguous id removes nothing.",
        epilog="Example: advisor results delete f50d5e93",
    )
    dp.add_argument("result_ids", type=opt.text, nargs="+", metavar="ID")
    add_store_option(dp)
    dp.set_defaults(func=handle_delete)

    from . import pull

    pull.register(rsub)


def _add_filters(parser) -> None:
    add_list_option(parser, "--workload", metavar="ID", normalise=str.strip,
                    help="only these workloads: a workload id (e.g. resnet50-224px-1000c), or a model "
                         "(resnet50, package.module:Class) for every result of it, whatever its arguments")
    add_list_option(parser, "--instance-type", metavar="TYPE", help="only these instance types")


def _selected(store, args) -> list:
    """The stored results the --workload / --instance-type filters keep, newest first."""
    one = lambda xs: xs[0] if len(xs) == 1 else None  # a single value filters in SQL
    ids = [w for w in args.workload or () if ":" not in w and w not in BUILTIN_MODELS]
    return [r for r in store.results(one(ids) if ids == args.workload else None, one(args.instance_type))
            if (not args.workload or r.workload_id in args.workload or r.workload.model in args.workload)
            and (not args.instance_type or r.instance_type in args.instance_type)]


def list_row(r) -> dict:
    """A result's `results list` record (schema results-list: advisor/schemas/results.py)."""
    return {
        "result_id": r.result_id,
        "workload_id": r.workload_id,
        "workload": r.workload.model,
        "init_args": r.workload.resolved_args()[0],
        "data_init_args": r.workload.resolved_args()[1],
        "instance_type": r.instance_type,
        "accelerator": r.config.accelerator,
        "devices": r.config.devices,
        "precision": r.config.precision,
        "batch_size": r.config.batch_size,
        "samples_per_sec": r.samples_per_sec,
        "ci_low": r.samples_per_sec_ci[0],
        "ci_high": r.samples_per_sec_ci[1],
        "speedup_over_baseline": speedup_over_baseline(r),
        "source": r.source,
        "finished_at": r.finished_at,
    }


def table_row(row: dict) -> dict:
    """A list record for people: short id, one config cell, the CI as a share, minutes."""
    x = row["speedup_over_baseline"]
    acc = row["accelerator"] + (f" x{row['devices']}" if row["devices"] > 1 else "")
    return {
        "id": row["result_id"][:12], "workload": _workload_cell(row), "instance_type": row["instance_type"] or "",
        # A training run's source in its config cell: the table keeps to 100 columns.
        "config": f"{acc}, {row['precision']}, batch {row['batch_size']}"
                  + (f" ({row['source']})" if row["source"] != "probe" else ""),
        "samples/s": round(row["samples_per_sec"], 2),
        "ci": ci_text(row["samples_per_sec"], row["ci_low"], row["ci_high"]),
        "x baseline": round(x, 2) if x is not None else None,
        "finished": row["finished_at"].strftime("%Y-%m-%d %H:%M"),
    }


def _workload_cell(row: dict) -> str:
    """The id, and for a user's own module its class and the arguments it was built with."""
    if row["workload_id"].startswith(row["workload"]):  # a builtin: the id says it all
        return row["workload_id"]
    args = ", ".join(f"{k}={canonical_json(v)}" for k, v in sorted(row["init_args"].items()))
    data = ", ".join(f"{k}={canonical_json(v)}" for k, v in sorted(row["data_init_args"].items()))
    return f"{row['workload_id']} {row['workload']}({args})" + (f" data({data})" if data else "")


def _stored(args) -> tuple[list, int]:
    """The valid results the filters keep, newest first (the store opened read-only), and how many
    invalid rows were skipped (and named)."""
    store = read_store(args)
    if store is None:  # nothing ever stored in the default place
        return [], 0
    with store:
        results = _selected(store, args)
        for w in store.invalid_warnings():
            warn(w)
        return results, len(store.invalid)


def handle_list(args) -> int:
    results, invalid = _stored(args)
    rows = [list_row(r) for r in results]
    if args.format == "json":
        from .. import schemas

        schemas.write("results-list", results=rows)
        return 0
    if not rows and args.format in ("table", "markdown"):
        filters = [f"{name} {', '.join(v)}" for name, v in (("--workload", args.workload),
                                                            ("--instance-type", args.instance_type)) if v]
        print(f"no valid results ({invalid} invalid skipped)" if invalid else
              f"no stored result matches {' and '.join(filters)} (a workload is an id or a model, e.g. "
              "resnet50 or package.module:Class)" if filters else
              "no results stored yet: run 'advisor probe' or 'advisor results import FILE'", file=sys.stderr)
        return 0
    if args.format == "csv":
        emit([r | {"finished_at": r["finished_at"].isoformat()} for r in rows], "csv", LIST_COLUMNS)
    else:
        emit([table_row(r) for r in rows], args.format, TABLE_COLUMNS)
    return 0


def handle_show(args) -> int:
    store = read_store(args)
    if store is None:
        raise AdvisorError(f"no result with id {args.result_id!r}: nothing is stored yet")
    with store:
        r = store.get(args.result_id)
    write_result(r, args.format)
    return 0


def handle_import(args) -> int:
    results, bad, invalid = [], 0, []
    for name in args.files:
        errors: list[ResultError] = []
        try:
            results.extend(parse_results(read_bytes(name, "probe result file", IMPORT_MAX_BYTES), where=name, errors=errors))
        except (FileError, ResultError) as e:
            errors.append(e)
        for e in errors:
            error(str(e))
        bad += len(errors)
        invalid += [str(e) for e in errors]
    path, imported, already = store_path(args), [], []
    if results:  # nothing valid: no store is created for it
        with open_store(args) as store:
            for r in results:
                (imported if store.add(r) else already).append(r.result_id)
    added = len(imported)
    if args.format == "json":
        from .. import schemas

        schemas.write("results-import", store=str(path), imported=imported, already_stored=already, invalid=invalid)
    print(f"imported {added} new result(s), {len(results) - added} already stored, {bad} invalid; store {path}",
          file=sys.stderr)
    return 2 if bad else 0


def export_row(r) -> dict:
    c = r.config
    return {
        "result_id": r.result_id, "workload_id": r.workload_id, "instance_type": r.instance_type,
        "instance_type_source": r.instance_type_source, "accelerator": c.accelerator, "devices": c.devices,
        "precision": c.precision, "channels_last": c.channels_last, "compile": c.compile,
        "batch_size": c.batch_size, "num_workers": c.num_workers, "samples_per_sec": r.samples_per_sec,
        "ci_low": r.samples_per_sec_ci[0], "ci_high": r.samples_per_sec_ci[1],
        "flops_per_sample": r.flops_per_sample, "achieved_tflops": r.achieved_tflops,
        "utilisation_matmul": r.utilisation_matmul, "utilisation_datasheet": r.utilisation_datasheet,
        "peak_memory_gib": r.peak_memory_gib, "cpu_model": r.hardware.cpu_model,
        "gpu": r.hardware.gpus[0].name if r.hardware.gpus else None, "gpu_count": len(r.hardware.gpus),
        "torch": r.software.torch, "source": r.source, "finished_at": r.finished_at.isoformat(),
    }


def handle_export(args) -> int:
    results, _ = _stored(args)
    if args.format == "json":
        from .. import schemas

        schemas.write("results-export", results=results)
    else:
        emit([export_row(r) for r in results], args.format, EXPORT_COLUMNS)
    return 0


def handle_delete(args) -> int:
    with open_store(args, create=False) as store:
        removed = store.delete(args.result_ids)
        path = store.path
    print(f"deleted {len(removed)} result(s) from {path}: {', '.join(removed)}", file=sys.stderr)
    return 0
