"""The one reader of the structured documents a user writes: configs (`--config`), price files
(`--prices`), constructor arguments (`--init-args`), as YAML or JSON.

Limits, each a one-line error of the caller's type rather than a hang, a RecursionError or a
MemoryError: the size (the caller's bound, read by read_bytes), the nesting (MAX_DEPTH levels,
checked while the document is composed, so a 100,000-deep `[[[...` stops at level MAX_DEPTH + 1
without building the rest), and YAML aliases, which are refused outright: `*name` repeats a
subtree, so nine levels of nine aliases stand for 9**9 nodes in a file of a few hundred bytes
(the "billion laughs"); none of our documents needs one, and a value written out twice is clearer.

Strict types are the models' (pydantic's strict fields: a boolean, or YAML's `yes`/`on`, is not a
number); `mapping` is the check for a section that must be a mapping with text keys."""

from __future__ import annotations

from pathlib import Path

from .errors import FileError
from .files import read_bytes
from .text import JSON_MAX_DEPTH, decode_text, parse_json

# The same bound as every JSON file's: a config nests a handful of levels (model.init_args.x.y).
MAX_DEPTH = JSON_MAX_DEPTH
FORMATS = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}


class _Refused(Exception):
    """Raised inside the YAML composer: carries the one line out past PyYAML's own handlers."""


def _too_deep(where: str) -> str:
    return f"{where}: nested more than {MAX_DEPTH} levels deep: not a document the advisor reads"


def _yaml_loader(yaml, where: str):
    class Loader(yaml.SafeLoader):  # the pure-Python composer: the one whose compose_node can be bounded
        depth = 0

        def fetch_flow_collection_start(self, token_class):
            # The scanner keeps every open `[`/`{` as a possible key until it closes: refused at the
            # limit here, before 100,000 of them are scanned, rather than in the composer after.
            if self.flow_level >= MAX_DEPTH:
                raise _Refused(_too_deep(where))
            super().fetch_flow_collection_start(token_class)

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                ev = self.peek_event()
                raise _Refused(f"{where}: YAML alias *{ev.anchor} at line {ev.start_mark.line + 1}: aliases (and "
                               "<< merges) are not read, since a few can stand for billions of values; write the value out")
            if self.check_event(yaml.ScalarEvent):  # a leaf: depth counts collections, as JSON's does
                return super().compose_node(parent, index)
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise _Refused(_too_deep(where))
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return Loader


def _yaml(text: str, where: str, error: type[Exception]):
    try:
        import yaml
    except ImportError:
        raise error(f"{where}: reading YAML needs PyYAML (pip install pyyaml), or write the file as JSON") from None
    loader = _yaml_loader(yaml, where)(text)
    try:
        return loader.get_single_data()
    except _Refused as e:
        raise error(str(e)) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise error(f"{where}: not valid YAML ({getattr(e, 'problem', None) or 'syntax error'}{at})") from None
    except ValueError:  # int() past Python's 4,300 digits: no count or price is that long
        raise error(f"{where}: not a usable YAML document (a number too long to be a count or a price)") from None
    except (TypeError, RecursionError) as e:
        raise error(f"{where}: not a usable YAML document ({' '.join(str(e).split())[:200]})") from None
    finally:
        loader.dispose()


def read_document(data: str | bytes, where: str, fmt: str, error: type[Exception] = FileError):
    """YAML or JSON text (`fmt` "yaml" or "json") -> Python objects, within the limits above."""
    text = decode_text(data, where, error)  # the one text rule: UTF-8, a BOM allowed
    if fmt == "json":
        return parse_json(text, where, error)
    return _yaml(text, where, error)


def read_document_file(path: str | Path, what: str, limit: int, error: type[Exception] = FileError,
                       default: str | None = None):
    """A .json, .yaml or .yml file of at most `limit` bytes; another suffix is read as `default`
    (None: refused, naming the suffixes read)."""
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower(), default)
    if fmt is None:
        raise error(f"{what} {path}: give a .yaml, .yml or .json file")
    return read_document(read_bytes(path, what, limit, error), f"{what} {path}", fmt, error)


def mapping(value, where: str, error: type[Exception] = FileError, what: str = "a mapping") -> dict:
    """`value` when it is a mapping with text keys, else `error` naming where and what was given."""
    if not isinstance(value, dict):
        given = "nothing" if value is None else f"a {type(value).__name__.replace('str', 'string')}"
        raise error(f"{where}: expected {what}, got {given}")
    bad = next((k for k in value if not isinstance(k, str)), None)
    if bad is not None:
        raise error(f"{where}: key {bad!r} is not text")
    return value
