"""Check a command's `--format json` output against the schema it names (advisor/schemas/json/)."""

from __future__ import annotations

import json


def checked(out: str, name: str) -> dict:
    """The document printed, after checking it is schema NAME and valid against the published file."""
    import jsonschema

    from advisor import schemas

    doc = json.loads(out)
    assert isinstance(doc, dict) and doc.get("schema") == name, f"not a {name} document: {out[:200]}"
    assert doc["schema_version"] == schemas.published(name)["properties"]["schema_version"]["const"]
    jsonschema.validate(doc, schemas.published(name), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return doc
