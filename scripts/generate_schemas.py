"""Write advisor/schemas/json/NAME.schema.json from the document models (advisor/schemas/).

Run after changing a document's model: .venv/bin/python scripts/generate_schemas.py
(tests/packages/advisor/test_schemas.py fails while a file is not what this writes).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from advisor import schemas


def text(name: str) -> str:
    return json.dumps(schemas.json_schema(name), indent=2, sort_keys=False) + "\n"


def main() -> int:
    schemas.JSON_DIR.mkdir(exist_ok=True)
    wanted = {f"{name}.schema.json" for name in schemas.SCHEMAS}
    for stale in schemas.JSON_DIR.glob("*.schema.json"):
        if stale.name not in wanted:
            stale.unlink()
    for name in schemas.SCHEMAS:
        (schemas.JSON_DIR / f"{name}.schema.json").write_text(text(name), encoding="utf-8")
    print(f"wrote {len(schemas.SCHEMAS)} schemas to {schemas.JSON_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
