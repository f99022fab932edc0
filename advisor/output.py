"""Print rows for people (table, markdown) or for pipes (csv; json is a document of its schema:
advisor/schemas/), and every piece of text from outside (S3 keys and logs, result ids, catalog
provenance, file contents in error messages) through safe_text, so nothing printed can move the cursor,
clear the screen or flood the terminal."""

from __future__ import annotations

import csv
import json
import os
import re
import sys
import textwrap
from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import Any

from safeio import strip_controls

FORMATS = ("table", "json", "csv", "markdown")

# Terminal escape sequences (CSI "ESC [ ... final", OSC "ESC ] ... BEL|ESC \\", two-byte ESC x) go
# whole, so no parameters are left behind; then any other control character and the bidi overrides
# (safeio.strip_controls: the one home of which characters text may carry).
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[ -~]?)|\x9b[0-?]*[ -/]*[@-~]?")
CELL_LIMIT = 2000  # characters of one table/csv cell
LINE_LIMIT = 1000  # characters of one warning or error line


def safe_text(value: Any, limit: int = LINE_LIMIT, newlines: bool = False) -> str:
    """`value` as text that is safe on a terminal: escape sequences and control characters removed,
    text that cannot be encoded (lone surrogates from non-UTF-8 arguments) replaced, newlines and
    tabs made spaces unless `newlines`, and at most `limit` characters (a note says how many more)."""
    s = value if isinstance(value, str) else str(value)
    n = len(s)
    s = s[: limit * 4]  # bounded work on a 50 MB string; stripping only shortens what is left
    s = strip_controls(_ESCAPES.sub("", s))
    if not newlines:
        s = s.replace("\n", " ").replace("\t", " ")
    s = s.encode("utf-8", "replace").decode("utf-8")
    if len(s) > limit or n > limit * 4:
        more = n - limit if n > limit * 4 else len(s) - limit
        s = s[:limit] + f"... ({more:,} more characters)"
    return s


def add_format_option(parser, default: str = "table", extra: tuple[str, ...] = (), extra_help: str = "") -> None:
    """--format (FORMATS, and a command's own `extra` formats, said in `extra_help`) and --wide."""
    parser.add_argument("--format", choices=(*FORMATS, *extra), default=default,
                        help="output format" + (f"; {extra_help}" if extra_help else ""))
    parser.add_argument("--wide", action="store_true",
                        help="tables and text at their full width, nothing wrapped (default: fit the terminal, "
                             f"$COLUMNS, or {DEFAULT_WIDTH} columns when printing to a file or pipe)")


# How wide people-facing output may be. json and csv never change with it.
DEFAULT_WIDTH = 100  # a file or pipe with no $COLUMNS: the common terminal
LEAST_WIDTH = 40  # a $COLUMNS or terminal narrower than this is taken as this
NOTES_LEAST = 24  # a notes column narrower than this moves under the table
WORD_LEAST = 16  # when the words do not all fit whole: a column narrowed to its longest word, at most this
WORD_BROKEN = 8  # ... or, when the table cannot fit otherwise, at most this
GAP = "  "  # between table columns
_wide = False


def set_wide(on: bool) -> None:
    """`--wide`: tables and text at their natural width (the CLI sets it from the option)."""
    global _wide
    _wide = bool(on)


def width(stream=None) -> int | None:
    """The columns people-facing output may use on `stream` (default stdout): None with --wide;
    else $COLUMNS when it is set (what the user asked for wins, as in Python's shutil), the
    terminal's width when the stream is a terminal, else DEFAULT_WIDTH."""
    if _wide:
        return None
    stream = stream or sys.stdout
    cols = os.environ.get("COLUMNS", "").strip()
    if cols.isdigit() and int(cols) > 0:
        return max(int(cols), LEAST_WIDTH)
    try:
        if stream.isatty():
            return max(os.get_terminal_size(stream.fileno()).columns, LEAST_WIDTH)
    except (AttributeError, OSError, ValueError):  # a stream with no file behind it
        pass
    return DEFAULT_WIDTH


def say(text: str, stream=None, indent: str = "") -> None:
    """A paragraph of prose, wrapped to width(stream) (whole with --wide); `indent` before every line."""
    stream = stream or sys.stdout
    w = width(stream)
    if w is None:
        print(indent + text, file=stream)
        return
    print(textwrap.fill(text, w, initial_indent=indent, subsequent_indent=indent, break_long_words=False,
                        break_on_hyphens=False), file=stream)


def emit(
    rows: Sequence[dict[str, Any]],
    fmt: str,
    columns: Iterable[str] | None = None,
    stream=None,
    floatfmt: str = "g",
    notes: str | None = None,
    drop: Sequence[str] = (),
) -> None:
    """Write rows for people (table, markdown) or as csv (`--format json` is a document of its own
    schema: advisor/schemas/). `columns` picks and orders the columns. The plain table fits width(stream): the widest
    columns wrap first (a `; `-separated note between its parts, other text between words); the
    column named `notes`, when it would be narrower than NOTES_LEAST, becomes a marker ([1], [2],
    ...) and its text is printed under the table. `drop` names columns a narrow table leaves out,
    in that order, rather than split a value across lines; the table names them under it. json,
    csv and markdown keep every cell whole."""
    stream = stream or sys.stdout
    if fmt == "json":
        raise ValueError("--format json prints a document of its schema (advisor.schemas.write), not rows")
    cols = list(columns) if columns is not None else _all_keys(rows)
    if fmt == "csv":
        header = [safe_text(c) for c in cols]
        w = csv.DictWriter(stream, fieldnames=header, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({h: _csv_cell(r.get(c)) for h, c in zip(header, cols)})
        return
    table = [[_cell(r.get(c)) for c in cols] for r in rows]
    headers = [safe_text(c) for c in cols]
    if fmt == "markdown":
        from tabulate import tabulate  # imported here: only markdown needs it

        stream.write(tabulate(table, headers=headers, tablefmt="github", floatfmt=floatfmt,
                              disable_numparse=True) + "\n")
        return
    stream.write(fit_table(headers, table, width(stream), cols.index(notes) if notes in cols else None,
                           [cols.index(c) for c in drop if c in cols]))


def fit_table(headers: list[str], table: list[list[str]], room: int | None, notes_at: int | None = None,
              drop: Sequence[int] = (), footer: str = "") -> str:
    """A plain table (header, dashes, rows; two spaces between columns) within `room` columns
    (None: every cell on its line). See emit for how it is made to fit."""
    if room is not None and drop:
        # Leave out the `drop` columns, fewest first, until every value fits whole on its line
        for k in range(len(drop) + 1):
            keep = [i for i in range(len(headers)) if i not in drop[:k]]
            if _whole_fits([headers[i] for i in keep], [[row[i] for i in keep] for row in table], room,
                           keep.index(notes_at) if notes_at in keep else None):
                break
        else:
            keep = list(range(len(headers)))  # nothing fits whole: every column, values broken
        if len(keep) < len(headers):
            left_out = ", ".join(headers[i] for i in drop if i not in keep)
            return fit_table([headers[i] for i in keep], [[row[i] for i in keep] for row in table], room,
                             keep.index(notes_at) if notes_at in keep else None,
                             footer=wrap_words(f"Not shown at {room} columns: {left_out} (--wide shows every column).",
                                               room))
    natural = [max(_longest_line(x) for x in [h, *(row[i] for row in table)]) for i, h in enumerate(headers)]
    under: list[str] = []
    widths = natural
    if room is not None and _total(natural) > room:
        given = [row[:] for row in table]  # before the notes become markers: for _records

        def narrowest(cell_cap: int, header_cap: int, longest=_longest_word) -> list[int]:
            # each column at its longest word (`longest`: or part of one) up to the caps, kept whole
            return [min(natural[i], max(min(_header_least(headers[i]), header_cap),
                                        *(min(longest(row[i]), cell_cap) for row in table)))
                    for i in range(len(headers))]

        least = narrowest(WORD_LEAST, room)
        if notes_at is not None:
            # The notes wrap in their column while the others keep their cells' width (their
            # headers may wrap); else they go under the table.
            cells = [max([_header_least(headers[i]), *(_longest_line(row[i]) for row in table)])
                     for i in range(len(headers))]
            others = natural[:notes_at] + [0] + natural[notes_at + 1:]
            if _total(others) + natural[notes_at] > room:
                others = cells[:notes_at] + [0] + cells[notes_at + 1:]
            left = room - _total(others)
            if left >= min(natural[notes_at], max(NOTES_LEAST, len(headers[notes_at]))):
                widths = others[:notes_at] + [min(left, natural[notes_at])] + others[notes_at + 1:]
            else:
                marks = 0
                for row in table:
                    if row[notes_at]:
                        marks += 1
                        under.append(_hanging(f"[{marks}] ", row[notes_at], room))
                        row[notes_at] = f"[{marks}]"
                natural[notes_at] = least[notes_at] = max(len(headers[notes_at]), len(f"[{marks}]"))
        if _total(widths) > room:  # narrowed: only the headers wrapped (after a key's '_'); then every
            # word whole however long (an id stays copyable); then words up to WORD_LEAST whole; then a
            # header's word broken; then names and numbers broken after their punctuation (g5. | 2xlarge,
            # spot+od- | fallback, 8,092, | 303); a word broken inside (refe | rence) only when nothing else fits
            whole = max(natural)
            tiers = [narrowest(whole, room, _longest_line), narrowest(whole, room), least,
                     narrowest(WORD_LEAST, WORD_BROKEN), narrowest(WORD_LEAST, WORD_BROKEN, _longest_chunk),
                     *(narrowest(cap, WORD_BROKEN) for cap in range(WORD_LEAST, WORD_BROKEN - 1, -1))]
            widths = (next((w for w in (_narrowed(natural, t, room) for t in tiers[:4]) if w), None)
                      or _fewest_names_broken(natural, tiers[3], tiers[4], room)
                      or next((w for w in (_narrowed(natural, t, room) for t in tiers[5:]) if w), None))
            if widths is None:  # too many columns for any width: one block of lines per row instead
                return _records(headers, given, room, notes_at)
    lines = _block(headers, widths, wrap_header)
    lines.append(GAP.join("-" * w for w in widths))
    wraps = [wrap_text if i == notes_at else wrap_words for i in range(len(headers))]
    for row in table:
        lines += _block(row, widths, wraps)
    out = "\n".join(line.rstrip() for line in lines) + "\n" + (footer + "\n" if footer else "")
    return out + ("\n" + "\n".join(under) + "\n" if under else "")


def _whole_fits(headers: list[str], table: list[list[str]], room: int, notes_at: int | None) -> bool:
    """Whether every cell but the notes fits on one line within `room` (headers may wrap): the
    notes wrap in their column when NOTES_LEAST is left for them, else go under the table."""
    cells = [max([_header_least(h), *(_longest_line(row[i]) for row in table)]) for i, h in enumerate(headers)]
    if notes_at is None:
        return _total(cells) <= room
    notes = [row[notes_at] for row in table]
    natural = max([len(headers[notes_at]), *(_longest_line(n) for n in notes)])
    marks = max(len(headers[notes_at]), len(f"[{sum(map(bool, notes))}]"))
    others = _total(cells[:notes_at] + cells[notes_at + 1:]) + len(GAP)
    return others + min(natural, max(NOTES_LEAST, len(headers[notes_at]), marks)) <= room or others + marks <= room


def _records(headers: list[str], table: list[list[str]], room: int, notes_at: int | None) -> str:
    """Each row as its own block, a line per column (`header  value`, the value wrapped beside its
    header), blocks apart by a blank line: what a table of more columns than `room` can hold becomes."""
    label = max(map(len, headers))
    room_left = max(room - label - len(GAP), NOTES_LEAST)
    blocks = []
    for row in table:
        lines = []
        for i, (h, cell) in enumerate(zip(headers, row)):
            value = (wrap_text if i == notes_at else wrap_words)(cell, room_left).split("\n") if cell else [""]
            lines += [f"{h if k == 0 else '':<{label}}{GAP}{v}".rstrip() for k, v in enumerate(value)]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def _total(widths: list[int]) -> int:
    return sum(widths) + len(GAP) * (len(widths) - 1)


def _fewest_names_broken(natural: list[int], words: list[int], joints: list[int], room: int) -> list[int] | None:
    """Widths within room that break names (at `joints` widths) in as few columns as can be, the
    rightmost first, the others at their whole-word width (`words`); then the columns that fit
    back at their natural width are (the least cut first), and what room is left goes to the cut
    ones. None when every name broken does not fit either."""
    options = [i for i in range(len(natural)) if joints[i] < words[i]]
    for k in range(len(options) + 1):
        for broken in combinations(reversed(options), k):
            least = [joints[i] if i in broken else words[i] for i in range(len(natural))]
            if _total(least) > room:
                continue
            for i in sorted(range(len(natural)), key=lambda i: natural[i] - least[i]):
                if least[i] < natural[i] and _total(least) + natural[i] - least[i] <= room:
                    least[i] = natural[i]
            return _narrowed(natural, least, room)
    return None


def _narrowed(natural: list[int], least: list[int], room: int) -> list[int] | None:
    """Widths within room: every column wider than one cap is cut to it (never below its least),
    the cap as high as fits; None when the least widths do not fit."""
    if _total(least) > room:
        return None
    lo, hi = 0, max(natural)
    while lo < hi:  # the highest cap that fits
        mid = (lo + hi + 1) // 2
        if _total([max(m, min(n, mid)) for n, m in zip(natural, least)]) <= room:
            lo = mid
        else:
            hi = mid - 1
    widths = [max(m, min(n, lo)) for n, m in zip(natural, least)]
    spare = room - _total(widths)
    for i, n in enumerate(natural):  # what the cap leaves over goes to the cut columns, left first
        if spare and widths[i] < n:
            widths[i] += 1
            spare -= 1
    return widths


def _block(cells: list[str], widths: list[int], wrap) -> list[str]:
    """One row (or the header) as lines: each cell wrapped to its width (`wrap`: one function, or
    one per column) and padded."""
    wraps = wrap if isinstance(wrap, list) else [wrap] * len(cells)
    parts = [f(c, w).split("\n") if len(c) > w or "\n" in c else [c] for c, w, f in zip(cells, widths, wraps)]
    height = max((len(p) for p in parts), default=0)
    return [GAP.join((p[k] if k < len(p) else "").ljust(w) for p, w in zip(parts, widths)) for k in range(height)]


def _hanging(mark: str, text: str, room: int) -> str:
    body = wrap_text(text, max(room - len(mark), NOTES_LEAST)).split("\n")
    return "\n".join([mark + body[0], *(" " * len(mark) + line for line in body[1:])])


def _longest_line(text: str) -> int:
    return max((len(line) for line in text.split("\n")), default=0)


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


# Where a name or a number may break when its column is too narrow: after these characters.
_JOINT = re.compile(r"[^.,+/_-]*[.,+/_-]+|[^.,+/_-]+")


_NUMBER = re.compile(r"[-+±~$]?[\d.,]+[%x]?")


def _chunks(word: str) -> list[str]:
    """A word and the places it may break: after its punctuation, never inside a run of letters,
    and a number (8,092,303) not at all."""
    return [word] if _NUMBER.fullmatch(word) else _JOINT.findall(word) or [""]


def _longest_chunk(text: str) -> int:
    return max((len(c) for w in text.split() for c in _chunks(w)), default=0)


def _header_chunks(word: str) -> list[str]:
    """A header word and the places it may break: after each '_' (instance_ | type)."""
    return re.findall(r"[^_]*_|[^_]+", word) or [""]


def _header_least(text: str) -> int:
    """The narrowest a header goes unbroken: its longest word, or part of a key (usd_per_)."""
    return max((len(c) for w in text.split() for c in _header_chunks(w)), default=0)


def wrap_header(text: str, width: int) -> str:
    """A header within `width`: broken between words, and after a '_' of a key (usd_per_ | hour),
    so the header still reads as the csv column's name."""
    lines = [""]
    for word in text.split():
        for k, chunk in enumerate(_header_chunks(word)):
            sep = "" if k or not lines[-1] else " "
            if lines[-1] and len(lines[-1]) + len(sep) + len(chunk) > width:
                lines.append(chunk)
            else:
                lines[-1] += sep + chunk
    return "\n".join(line[k:k + width] for line in lines for k in range(0, max(len(line), 1), width))


def wrap_words(text: str, width: int) -> str:
    """Lines of at most `width`, broken between words; a word longer than that after its
    punctuation (g5. | 2xlarge), and only a part still longer inside itself."""
    out: list[str] = []
    for line in text.split("\n"):
        lines = [""]
        for word in line.split():
            parts = [word] if len(word) <= width else [
                c[k:k + width] for c in _chunks(word) for k in range(0, len(c), width)]
            for k, part in enumerate(parts):
                sep = " " if lines[-1] and not k else ""
                if len(lines[-1]) + len(sep) + len(part) <= width:
                    lines[-1] += sep + part
                else:
                    lines.append(part)
        out += lines
    return "\n".join(out)


def wrap_text(text: str, width: int, sep: str = "; ") -> str:
    """Lines of at most `width`, broken between `sep`-separated parts where one fits, so each
    part of a note stays whole on its line; a part longer than the width is broken between words.
    A line break already in the text is kept."""
    if "\n" in text:
        return "\n".join(wrap_text(line, width, sep) for line in text.split("\n"))
    if len(text) <= width:
        return text
    parts = text.split(sep)
    lines: list[str] = []
    for k, part in enumerate(parts):
        room = width - (len(sep.rstrip()) if k < len(parts) - 1 else 0)  # a part before a break ends in ';'
        if lines and len(lines[-1]) + len(sep) + len(part) <= room:
            lines[-1] += sep + part
        else:
            if lines:
                lines[-1] += sep.rstrip()
            lines += textwrap.wrap(part, max(room, 1), break_on_hyphens=False) or [""]  # a path stays whole
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
