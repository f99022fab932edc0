"""Every `--format json` document the CLI prints: one pydantic model per output (the modules of
this package), named and versioned here, its JSON Schema published beside it (json/NAME.schema.json,
written by scripts/generate_schemas.py; tests/packages/advisor/test_schemas.py checks they are
current and that every command's output validates).

Each document is an object whose first keys are `schema` (its NAME) and `schema_version` (bumped
when a field is removed, renamed or changes meaning; new fields keep the version). Keys are
snake_case; numbers are numbers, counts integers, times ISO 8601, unknown values null; a command
to run is an argument list. pydantic is imported only when a document is printed: `import advisor`
and the table path of `advisor recommend` stay without it.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

JSON_DIR = Path(__file__).parent / "json"

# NAME -> (module of this package, model class, what prints it)
SCHEMAS: dict[str, tuple[str, str, str]] = {
    "recommend": ("recommend", "RecommendDocument", "advisor recommend --format json"),
    "recommend-tokens": ("tokens", "RecommendTokensDocument", "advisor recommend --model-shape ... --format json"),
    "result": ("results", "ResultDocument", "advisor results show ID --format json, advisor probe --format json"),
    "results-list": ("results", "ResultsListDocument", "advisor results list --format json"),
    "results-export": ("results", "ResultsExportDocument", "advisor results export --format json"),
    "results-import": ("results", "ResultsImportDocument", "advisor results import FILE... --format json"),
    "results-pull": ("results", "ResultsPullDocument", "advisor results pull S3_URL --format json"),
    "catalog-show": ("catalog", "CatalogShowDocument", "advisor catalog show --format json"),
    "catalog-info": ("catalog", "CatalogInfoDocument", "advisor catalog info --format json"),
    "catalog-refresh": ("catalog", "CatalogRefreshDocument", "advisor catalog refresh --format json"),
    "references-list": ("references", "ReferencesListDocument", "advisor references list --format json"),
    "references-check": ("references", "ReferencesCheckDocument", "advisor references check --format json"),
    "launch-plan": ("launch", "LaunchPlanDocument", "advisor launch ... --dry-run --format json"),
    "launch": ("launch", "LaunchDocument", "advisor launch ... --yes --format json"),
    "launch-status": ("launch", "LaunchStatusDocument", "advisor launch status RUN_ID --format json"),
    "launch-cancel": ("launch", "LaunchCancelDocument", "advisor launch cancel RUN_ID --format json"),
    "schemas": ("base", "SchemasDocument", "advisor schema --format json"),
}


def model(name: str):
    """The pydantic model of document NAME (its module imported on first use)."""
    module, cls, _ = SCHEMAS[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def document(name: str, **fields: Any) -> dict[str, Any]:
    """Document NAME as JSON-ready data: `fields` validated against its model (a value of the
    wrong type fails here, not in a user's script), with its schema name and version first."""
    return model(name).model_validate(fields).model_dump(mode="json", by_alias=True)


def dumps(name: str, **fields: Any) -> str:
    return json.dumps(document(name, **fields), indent=2)


def write(name: str, stream=None, **fields: Any) -> None:
    import sys

    (stream or sys.stdout).write(dumps(name, **fields) + "\n")


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of document NAME, as generated from its model (what json/NAME.schema.json holds)."""
    m = model(name)
    out = {"$schema": "https://json-schema.org/draft/2020-12/schema",
           "$id": f"https://instance-advisor/schemas/{name}.schema.json"}
    out.update(m.model_json_schema(mode="serialization", by_alias=True))
    return out


def published(name: str) -> dict[str, Any]:
    """The JSON Schema file shipped in the package for NAME."""
    return json.loads((JSON_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
