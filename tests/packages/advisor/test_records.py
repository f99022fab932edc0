"""advisor/records.py: a record class is the one place a field of an output record is declared.
Adding a field to a row adds it to the JSON document, the CSV header and the JSON Schema with no
other edit (the reason the JSON, the CSV and the schema's models were once three lists to keep
in step: issue 30 step 1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from advisor.records import JsonForm, csv_columns, fact, finite_or_null, internal, record, to_record, worded

ROOT = Path(__file__).resolve().parents[3]

# Run in a fresh interpreter: CandidateRow gains a field before anything reads it, as an edit of
# advisor/recommend/rows.py would; then a plan is built and printed as JSON and CSV, and the
# recommend schema generated. Prints the three as one JSON line.
EXTENDED = """
import dataclasses, io, json, sys
from advisor import records
from advisor.recommend import rows

@records.record("Candidate")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Extended(rows.CandidateRow):
    tested_fact: float = records.fact("a fact added to the row in the test", default=0.5)

rows.CandidateRow = Extended
from recommend_catalogs import make_catalog
from advisor import schemas
from advisor.recommend.jobspec import JobSpec
from advisor.recommend.planner import build_plan
from advisor.render import report

plan = build_plan(make_catalog(), JobSpec(samples=1e8, budget_usd=500.0, deadline_hours=48.0), top=2)
built = rows.build(plan)
out = {}
for fmt in ("json", "csv"):
    s = io.StringIO()
    report.write(plan, built, fmt, probe_commands=[], stream=s)
    out[fmt] = s.getvalue()
out["schema"] = schemas.json_schema("recommend")
print(json.dumps(out))
"""


def test_a_field_added_to_the_row_reaches_json_csv_and_the_schema():
    env = os.environ | {"PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"}  # the test's own cache/data dirs
    p = subprocess.run([sys.executable, "-c", EXTENDED], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    recs = json.loads(out["json"])["recommendations"]
    assert recs and all(r["tested_fact"] == 0.5 for r in recs)
    assert list(recs[0])[-1] == "tested_fact"  # after the row's own fields, as declared
    header = out["csv"].splitlines()[0].split(",")
    assert header[-1] == "tested_fact" and len(out["csv"].splitlines()) == len(recs) + 1
    field = out["schema"]["$defs"]["Candidate"]["properties"]["tested_fact"]
    assert field == {"description": "a fact added to the row in the test", "title": "Tested Fact", "type": "number"}
    assert "tested_fact" in out["schema"]["$defs"]["Candidate"]["required"]


@record("Thing", "A record of the test.")
@dataclass(frozen=True, kw_only=True)
class Thing:
    name: str = fact("what it is called")
    ratio: float = fact("null: unbounded", json=JsonForm(float | None, finite_or_null))
    said: str = worded("worded by its renderer", csv=False)
    kept: int = internal(default=0)
    parts: list[str] = fact(default_factory=list, csv=False)


def test_a_record_in_json_and_csv():
    t = Thing(name="a", ratio=float("inf"), parts=["x"])
    assert to_record(t, said="hello") == {"name": "a", "ratio": None, "said": "hello", "parts": ["x"]}
    assert csv_columns(Thing) == ("name", "ratio")
    with pytest.raises(TypeError, match="said"):  # a worded field left out is a bug, caught
        to_record(t)
    with pytest.raises(AttributeError):  # the row holds no value of a worded field
        _ = t.said


def test_a_records_schema_model():
    from advisor.schemas.base import model_of

    schema = model_of(Thing).model_json_schema(mode="serialization")
    assert schema["title"] == "Thing" and schema["description"] == "A record of the test."
    assert list(schema["properties"]) == ["name", "ratio", "said", "parts"] == schema["required"]
    assert schema["properties"]["ratio"]["anyOf"] == [{"type": "number"}, {"type": "null"}]
    assert schema["additionalProperties"] is False
    assert model_of(Thing) is model_of(Thing)  # built once
