"""What every document and row model shares: strict keys, finite numbers, validators built on first use."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

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
