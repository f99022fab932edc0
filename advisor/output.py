"""Print rows for people (table, markdown) or for pipes (json, csv)."""

from __future__ import annotations

import csv
import json
import sys
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

FORMATS = ("table", "json", "csv", "markdown")


def add_format_option(parser, default: str = "table") -> None:
    parser.add_argument("--format", choices=FORMATS, default=default, help="output format")


def emit(
    rows: Sequence[dict[str, Any]],
    fmt: str,
    columns: Iterable[str] | None = None,
    stream=None,
    floatfmt: str = "g",
    wrap: dict[str, int] | None = None,
) -> None:
    """Write rows in the chosen format. `columns` picks and orders the table/csv columns;
    json always carries every key of every row. `wrap` gives columns a width in the plain table
    (their text is whole in json, csv and markdown, whose cells cannot hold line breaks)."""
    stream = stream or sys.stdout
    if fmt == "json":
        json.dump(list(rows), stream, indent=2, default=str)
        stream.write("\n")
        return
    cols = list(columns) if columns is not None else _all_keys(rows)
    if fmt == "csv":
        w = csv.DictWriter(stream, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({c: _csv_cell(r.get(c)) for c in cols})
        return
    from tabulate import tabulate  # imported here: only people-facing formats need it

    table = [[_cell(r.get(c)) for c in cols] for r in rows]
    widths = None
    if fmt == "table" and wrap:
        widths = [wrap.get(c) for c in cols]
        table = [[wrap_text(v, w) if w else v for v, w in zip(row, widths)] for row in table]
    tablefmt = "github" if fmt == "markdown" else "simple"
    stream.write(tabulate(table, headers=cols, tablefmt=tablefmt, floatfmt=floatfmt, disable_numparse=True,
                          maxcolwidths=widths) + "\n")


def wrap_text(text: str, width: int, sep: str = "; ") -> str:
    """Lines of at most `width`, broken between `sep`-separated parts where one fits, so each
    part of a note stays whole on its line; a part longer than the width is broken between words."""
    room = width - len(sep.rstrip())  # a line broken after a part ends in the separator
    lines: list[str] = []
    for part in text.split(sep):
        if lines and len(lines[-1]) + len(sep) + len(part) <= room:
            lines[-1] += sep + part
        else:
            if lines:
                lines[-1] += sep.rstrip()
            lines += textwrap.wrap(part, room, break_on_hyphens=False) or [""]
    return "\n".join(lines)


def _all_keys(rows: Sequence[dict[str, Any]]) -> list[str]:
    keys: dict[str, None] = {}
    for r in rows:
        keys.update(dict.fromkeys(r))
    return list(keys)


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v)
    return str(v)


def _csv_cell(v: Any) -> Any:
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(v, default=str)
    return v


def warn(msg: str) -> None:
    print(f"advisor: warning: {msg}", file=sys.stderr)
