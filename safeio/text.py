"""The one text rule and the one safe JSON reader every JSON file the advisor reads goes through
(catalog, probe results, S3 objects, run manifests, the spot advisor, the reference dataset), and
the one rule for the characters a name, a label or a line from a user or a file may carry."""

from __future__ import annotations

import json
import re

from .errors import FileError

# --- Control characters: the one home of the rule --------------------------------------------------
# C0 (U+0000-U+001F), DEL and C1 (U+007F-U+009F): ESC and C1's CSI (U+009B) start terminal escape
# sequences, CR and BS overwrite what was printed, LF ends a line where a cell or a log line expects
# none. Text that is stored or looked up refuses them (has_controls, one_line: one message,
# CONTROLS_REFUSED); text that is shown has them removed (strip_controls). A tab is the one
# exception, and only in prose from a file (a model name, an error line): a name typed on the
# command line is looked up and stored as typed, so a tab there is refused too. The bidi overrides
# and isolates (U+202A-U+202E, U+2066-U+2069) make shown text read in another order than it is
# stored: they are removed from what is shown (a name that holds one is still stored as given).
CONTROLS_REFUSED = "contains control characters"
_CONTROL_CODES = (*range(0x20), *range(0x7F, 0xA0))
_BIDI_CODES = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))


def _class(codes, keep: str = "") -> re.Pattern[str]:
    escaped = (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in codes if chr(c) not in keep)
    return re.compile("[" + "".join(escaped) + "]")


_IN_A_NAME = _class(_CONTROL_CODES)  # text typed to be looked up and stored
_IN_A_LINE = _class(_CONTROL_CODES, keep="\t")  # one line of prose from a file
_SHOWN = _class((*_CONTROL_CODES, *_BIDI_CODES), keep="\t\n")  # the caller says what tabs and newlines become


def has_controls(text: str, tab: bool = False) -> bool:
    """Whether `text` holds a control character (C0, DEL, C1); a tab is one unless `tab` (prose)."""
    return (_IN_A_LINE if tab else _IN_A_NAME).search(text) is not None


def one_line(text: str) -> str:
    """pydantic's AfterValidator for one line of text from a file (a name, a version, a path, an S3
    key, an error line): no control character but a tab, so no escape sequence reaches a terminal."""
    if has_controls(text, tab=True):
        raise ValueError(CONTROLS_REFUSED)
    return text


def strip_controls(text: str) -> str:
    """`text` with its control characters and bidi overrides removed, tabs and newlines kept."""
    return _SHOWN.sub("", text)


# Our files hold small integers: 100 digits is past any count or price, and far below the 4,300
# digits at which Python's int() raises ValueError (and which take quadratic time to convert).
JSON_MAX_INT_DIGITS = 100


# Our files nest a handful of levels (a catalog's offers: 4). Python's own limit (a RecursionError
# somewhere near 1,000 levels, depending on the version and the stack) is no contract.
JSON_MAX_DEPTH = 64


def _too_deep(where: str) -> str:
    return f"{where}: JSON nested more than {JSON_MAX_DEPTH} levels deep: not one of the advisor's files"


def _check_depth(doc, where: str, error: type[Exception]) -> None:
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, (dict, list)):
                if depth >= JSON_MAX_DEPTH:
                    raise error(_too_deep(where))
                stack.append((child, depth + 1))


def _json_int(s: str) -> int:
    if len(s.lstrip("-")) > JSON_MAX_INT_DIGITS:
        raise ValueError(f"an integer with {len(s.lstrip('-')):,} digits")
    return int(s)


def decode_text(data: str | bytes, where: str, error: type[Exception] = FileError) -> str:
    """The one text rule: every file the advisor reads is UTF-8 (a BOM allowed), decoded here before
    it is parsed; anything else is `error` "not UTF-8 text". json.loads alone would detect and read
    UTF-16 and UTF-32 too, which pydantic's parser (the catalog's) refuses: the readers disagreed.
    A NUL is never in our text (JSON forbids it unescaped): UTF-16/32 of ASCII decodes to NULs."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise error(f"{where}: not UTF-8 text (byte {e.start}: {e.reason}); save it as UTF-8") from None
    else:
        text = data
    if "\x00" in text:
        raise error(f"{where}: not UTF-8 text (NUL characters: UTF-16 or UTF-32?); save it as UTF-8") from None
    return text.removeprefix("\ufeff")


def parse_json(text: str | bytes, where: str, error: type[Exception] = FileError):
    """JSON text -> Python objects, or `error` with one line saying why: not UTF-8 (decode_text),
    invalid JSON, nested more than JSON_MAX_DEPTH levels (or deep enough for a RecursionError),
    integers too long. NaN, Infinity and 1e400 (inf) are read: the models refuse non-finite numbers
    field by field, which names the field."""
    text = decode_text(text, where, error)
    try:
        doc = json.loads(text, parse_int=_json_int)
    except RecursionError:
        raise error(_too_deep(where)) from None
    except json.JSONDecodeError as e:
        raise error(f"{where}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except ValueError as e:  # from _json_int
        raise error(f"{where}: not valid JSON ({e})") from None
    if isinstance(doc, (dict, list)):
        _check_depth(doc, where, error)
    return doc
