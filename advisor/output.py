"""Print rows for people (table, markdown) or for pipes (json, csv), and every piece of text from
outside (S3 keys and logs, result ids, catalog provenance, file contents in error messages) through
safe_text, so nothing printed can move the cursor, clear the screen or flood the terminal."""

from __future__ import annotations

import csv
import json
import re
import sys
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

FORMATS = ("table", "json", "csv", "markdown")

# Terminal escape sequences (CSI "ESC [ ... final", OSC "ESC ] ... BEL|ESC \\", two-byte ESC x),
# then any other control character (C0 but tab and newline, DEL, C1) and the bidi overrides that
# make text read in another order than it is stored.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[ -~]?)|\x9b[0-?]*[ -/]*[@-~]?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
CELL_LIMIT = 2000  # characters of one table/csv cell
LINE_LIMIT = 1000  # characters of one warning or error line


def safe_text(value: Any, limit: int = LINE_LIMIT, newlines: bool = False) -> str:
    """`value` as text that is safe on a terminal: escape sequences and control characters removed,
    text that cannot be encoded (lone surrogates from non-UTF-8 arguments) replaced, newlines and
    tabs made spaces unless `newlines`, and at most `limit` characters (a note says how many more)."""
    s = value if isinstance(value, str) else str(value)
    n = len(s)
    s = s[: limit * 4]  # bounded work on a 50 MB string; stripping only shortens what is left
    s = _CONTROLS.sub("", _ESCAPES.sub("", s))
    if not newlines:
        s = s.replace("\n", " ").replace("\t", " ")
    s = s.encode("utf-8", "replace").decode("utf-8")
    if len(s) > limit or n > limit * 4:
        more = n - limit if n > limit * 4 else len(s) - limit
        s = s[:limit] + f"... ({more:,} more characters)"
    return s


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
        header = [safe_text(c) for c in cols]
        w = csv.DictWriter(stream, fieldnames=header, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({h: _csv_cell(r.get(c)) for h, c in zip(header, cols)})
        return
    from tabulate import tabulate  # imported here: only people-facing formats need it

    table = [[_cell(r.get(c)) for c in cols] for r in rows]
    widths = None
    if fmt == "table" and wrap:
        widths = [wrap.get(c) for c in cols]
        table = [[wrap_text(v, w) if w else v for v, w in zip(row, widths)] for row in table]
    tablefmt = "github" if fmt == "markdown" else "simple"
    stream.write(tabulate(table, headers=[safe_text(c) for c in cols], tablefmt=tablefmt, floatfmt=floatfmt, disable_numparse=True,
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
        v = ", ".join(str(x) for x in v)
    return safe_text(v, CELL_LIMIT, newlines=True)


def _csv_cell(v: Any) -> Any:
    if isinstance(v, (list, tuple, dict)):
        v = json.dumps(v, default=str)
    return safe_text(v, CELL_LIMIT, newlines=True) if isinstance(v, str) else v


def warn(msg: str) -> None:
    print(f"advisor: warning: {safe_text(msg)}", file=sys.stderr)


def error(msg: str) -> None:
    """The one way an error line is printed (the CLI's handler, and per-item errors of a command
    that goes on with the other items)."""
    print(f"advisor: error: {safe_text(msg)}", file=sys.stderr)
