"""The one text rule and the one safe JSON reader every JSON file the advisor reads goes through
(catalog, probe results, S3 objects, run manifests, the spot advisor, the reference dataset)."""

from __future__ import annotations

import json

from .errors import FileError

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
