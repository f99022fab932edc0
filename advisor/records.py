"""Output records: one typed dataclass per record a command prints, and what its JSON and CSV are.

A record class is a dataclass whose fields are declared with `fact` (a field of the record, with
its JSON description), `internal` (the row's own, for the text and the plots: not in the record)
or `worded` (in the record, worded by the renderer from the row: the row holds no value). The
differences between the row and its JSON are stated once, on the field: `fact(json=JsonForm(...))`
gives the JSON type and how the value is turned into it. From the class alone come:

- `to_record(row, **worded)`: the JSON/CSV record, in field order (nested records turned too);
- `csv_columns(cls)`: the record's fields that are CSV columns (`fact(csv=False)` leaves one out);
- the JSON Schema model (advisor/schemas/base.py `model_of`), so a new field is one line here.

No pydantic here: the rows are built on every `recommend`, the models only when JSON is printed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

_KEY = "record"  # the dataclass field metadata key this module reads


class JsonForm(NamedTuple):
    """A field whose JSON differs from the row's value: the JSON type, and the value from (value, row)."""

    type: Any
    of: Callable[[Any, Any], Any]


class _Spec(NamedTuple):
    description: str | None
    in_record: bool
    worded: bool
    csv: bool
    json: JsonForm | None


def fact(description: str | None = None, *, default: Any = dataclasses.MISSING,
         default_factory: Any = dataclasses.MISSING, json: JsonForm | None = None, csv: bool = True) -> Any:
    """A field of the record; `description` is its JSON Schema description."""
    return dataclasses.field(default=default, default_factory=default_factory,
                             metadata={_KEY: _Spec(description, True, False, csv, json)})


def internal(*, default: Any = dataclasses.MISSING, default_factory: Any = dataclasses.MISSING) -> Any:
    """A field of the row that the record leaves out (what the text, the notes and the plots read)."""
    return dataclasses.field(default=default, default_factory=default_factory,
                             metadata={_KEY: _Spec(None, False, False, False, None)})


def worded(description: str | None = None, *, csv: bool = True) -> Any:
    """A field of the record that the renderer words from the row (`to_record(row, name=...)`):
    declared here for its place, type and description; the row itself holds no value."""
    return dataclasses.field(init=False, repr=False, compare=False,
                             metadata={_KEY: _Spec(description, True, True, csv, None)})


def finite_or_null(x: float, _row: Any) -> float | None:
    """JSON has no inf or nan: null stands for them (each field says what null means)."""
    return x if math.isfinite(x) else None


def record(json_name: str | None = None, description: str | None = None):
    """Class decorator: the record's name and description in the JSON Schema, where they are not
    the class's (the schema's names are published: a class may be named for Python's readers)."""
    def mark(cls):
        cls.__record__ = (json_name or cls.__name__, description)
        return cls
    return mark


def json_name(cls: type) -> tuple[str, str | None]:
    """(name, description) of the record in the JSON Schema."""
    return vars(cls).get("__record__", (cls.__name__, None))


def spec(f: dataclasses.Field) -> _Spec:
    """A field's record declaration; a plain dataclass field is a fact with no description."""
    return f.metadata.get(_KEY, _Spec(None, True, False, True, None))


def record_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of the record, in order (internal ones left out)."""
    return [f for f in dataclasses.fields(cls) if spec(f).in_record]


def csv_columns(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in record_fields(cls) if spec(f).csv)


def to_record(row: Any, **words: Any) -> dict[str, Any]:
    """The JSON/CSV record of a row: its record fields in order, each in its JSON form; `words`
    give the worded fields (every one, no other)."""
    fs = record_fields(type(row))
    wanted = {f.name for f in fs if spec(f).worded}
    if set(words) != wanted:
        raise TypeError(f"{type(row).__name__}: worded fields {sorted(wanted)}, given {sorted(words)}")
    out = {}
    for f in fs:
        s = spec(f)
        if s.worded:
            out[f.name] = words[f.name]
        elif s.json is not None:
            out[f.name] = s.json.of(getattr(row, f.name), row)
        else:
            out[f.name] = _plain(getattr(row, f.name))
    return out


def _plain(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return to_record(v)
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return dict(v)
    return v
