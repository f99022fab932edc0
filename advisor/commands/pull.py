"""`advisor results pull`: import the results of launched probe runs from S3."""

from __future__ import annotations

import sys
from dataclasses import asdict

from .. import options as opt
from ..output import add_format_option, emit
from .common import add_store_option, one_region, open_store


def register(results_sub) -> None:
    p = results_sub.add_parser(
        "pull",
        help="import probe results of 'advisor launch' runs from S3",
        description=(
            "List the runs under an S3 prefix (or one run), download each instance's result, "
            "validate it and import it into the results store; report the ones that are missing, "
            "failed (with the tail of their log) or corrupt. Pulling twice imports nothing new."
        ),
        epilog="Example: advisor results pull s3://my-bucket/probes --run 20261124-141000-123456",
    )
    p.add_argument("s3", metavar="S3_URL", help="the s3://bucket/prefix given to 'advisor launch --s3'")
    p.add_argument("--run", type=opt.text, metavar="RUN_ID", help="only this run (default: every run under the prefix)")
    p.add_argument("--region", type=one_region, help="region of the bucket (default: found from the bucket)")
    add_store_option(p)
    add_format_option(p)
    p.set_defaults(func=handle_pull)


def handle_pull(args) -> int:
    from ..ec2.aws import parse_s3_url
    from ..ec2.pull import PullRow, pull, summary
    from ..records import csv_columns, to_record

    loc = parse_s3_url(args.s3)
    with open_store(args) as store:
        rows = pull(loc, store, run_id=args.run, region=args.region)
    if args.format == "json":  # with log_tail, which the table leaves out
        from .. import schemas

        schemas.write("results-pull", runs=[to_record(r) for r in rows])
    else:  # the table reads the row's own values ("" for no instance type); log_tail is no column
        emit([asdict(r) for r in rows], args.format, csv_columns(PullRow), notes="detail")
    print(f"advisor: {summary(rows)}", file=sys.stderr)
    return 1 if any(r.status in ("failed", "corrupt") for r in rows) else 0
