"""`advisor schema`: the JSON Schema of each `--format json` document (advisor/schemas/)."""

from __future__ import annotations

import json
import sys

from ..errors import AdvisorError
from ..output import add_format_option, emit


def register(sub) -> None:
    p = sub.add_parser(
        "schema", help="the JSON Schema of every --format json document",
        description="Every '--format json' output is one versioned document: its first keys are 'schema' "
                    "(its NAME) and 'schema_version'. Without NAME, list the documents and the commands "
                    "that print them; with NAME, print its JSON Schema (the file shipped in the package, "
                    "advisor/schemas/json/NAME.schema.json).",
        epilog="Example: advisor schema recommend > /tmp/recommend.schema.json")
    p.add_argument("name", nargs="?", metavar="NAME", help="a document's name (default: list them)")
    add_format_option(p)
    p.set_defaults(func=handle_schema)


def handle_schema(args) -> int:
    from .. import schemas
    from ..schemas import SCHEMAS, published

    if args.name is None:
        rows = [{"schema": name, "schema_version": published(name)["properties"]["schema_version"]["const"],
                 "printed_by": by} for name, (_, _, by) in SCHEMAS.items()]
        if args.format == "json":
            schemas.write("schemas", schemas=rows)
        else:
            emit(rows, args.format, ("schema", "schema_version", "printed_by"), notes="printed_by")
        return 0
    if args.name not in SCHEMAS:
        raise AdvisorError(f"no schema named {args.name!r} (there are: {', '.join(SCHEMAS)}); "
                           "'advisor schema' lists them")
    json.dump(published(args.name), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
