"""What every document and row model shares: strict keys, finite numbers, validators built on first use;
and the models of the record classes (advisor/records.py), derived from their fields."""

from __future__ import annotations

import dataclasses
import functools
import operator
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

from .. import records

# extra="forbid": a key the model does not name is a bug in the command, caught by the tests.
# defer_build: a model's validator is built when a document is first printed, not on import.
ROW = ConfigDict(extra="forbid", allow_inf_nan=False, defer_build=True, populate_by_name=True)
DOC = ConfigDict(extra="forbid", allow_inf_nan=False, defer_build=True, populate_by_name=True)


class Row(BaseModel):
    model_config = ROW


def schema_field(name: str):
    """The `schema` key of a document: its NAME, always that value."""
    return Field(default=name, alias="schema", description="the document's schema name (advisor schema NAME)")


def version_field(version: int):
    return Field(default=version, description="bumped when a field is removed, renamed or changes meaning")


class SchemaRow(Row):
    schema_name: str = Field(alias="schema")
    schema_version: int
    printed_by: str = Field(description="the commands that print it")


class SchemasDocument(BaseModel):
    """`advisor schema --format json`: the documents there are."""

    model_config = DOC
    schema_name: Literal["schemas"] = schema_field("schemas")
    schema_version: Literal[1] = version_field(1)
    schemas: list[SchemaRow]


def model_of(cls: type) -> type[Row]:
    """The JSON Schema model of a record class (advisor/records.py): its record fields in order, each
    with the JSON type (`JsonForm.type` where the JSON differs from the row) and description; every
    key required (a record always has all of them). Records inside records become models too."""
    if cls not in _MODELS:
        name, description = records.json_name(cls)
        hints = get_type_hints(cls)
        fields = {}
        for f in records.record_fields(cls):
            s = records.spec(f)
            fields[f.name] = (_json_type(s.json.type if s.json else hints[f.name]), Field(description=s.description))
        _MODELS[cls] = create_model(name, __base__=Row, __doc__=description, __module__=cls.__module__, **fields)
    return _MODELS[cls]


_MODELS: dict[type, type[Row]] = {}


def _json_type(t: Any) -> Any:
    """A row's type with the record classes in it swapped for their models."""
    if dataclasses.is_dataclass(t) and isinstance(t, type):
        return model_of(t)
    args = get_args(t)
    if not args or get_origin(t) is Literal:
        return t
    swapped = tuple(_json_type(a) for a in args)
    if swapped == args:
        return t
    origin = get_origin(t)
    if origin in (Union, types.UnionType):
        return functools.reduce(operator.or_, swapped)
    return origin[swapped]
