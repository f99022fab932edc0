"""Text from outside is shown safely: S3 log tails, result ids, key names, catalog provenance and
file contents quoted in errors reach the terminal without escape sequences or control characters,
and bounded in length (output.safe_text, applied by emit, warn and error)."""

from __future__ import annotations

import io
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.output import CELL_LIMIT, emit, safe_text

UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
HOSTILE = ["\x1b[2J\x1b[H", "\x1b]0;pwned\x07", "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\", "\x9b31m", "\r\b\x07",
           "\u202eevil", "\x00nul", "\udcff", "\x1bc"]


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x206F), max_size=400)
       | st.sampled_from(HOSTILE).map(lambda h: "ok " + h * 3 + " end"),
       limit=st.integers(1, 300))
def test_safe_text_has_no_control_characters_and_is_bounded(text, limit):
    out = safe_text(text, limit)
    assert not UNSAFE.search(out) and "\n" not in out
    out.encode("utf-8")  # printable: no lone surrogates
    assert len(out) <= limit + len("... (999,999 more characters)")


def test_safe_text_keeps_ordinary_text():
    assert safe_text("g5.xlarge: 926 samples/s, ±2.5% — ok") == "g5.xlarge: 926 samples/s, ±2.5% — ok"
    assert safe_text("a\nb", newlines=True) == "a\nb" and safe_text("a\nb") == "a b"


def test_a_huge_string_costs_bounded_work():
    out = safe_text("x" * 50_000_000, 100)
    assert out.startswith("x" * 100) and "49,999,900 more characters" in out


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_emit_strips_hostile_cells_for_people_and_pipes(fmt):
    buf = io.StringIO()
    emit([{"id": h, "detail": h * 2000} for h in HOSTILE], fmt, ["id", "detail"], stream=buf)
    out = buf.getvalue()
    assert not UNSAFE.search(out.replace("\n", ""))
    assert max(len(line) for line in out.splitlines()) < 2 * CELL_LIMIT + 200


def test_json_escapes_rather_than_strips():
    from advisor import schemas

    text = schemas.dumps("launch-cancel", run_id="\x1b[2J\x9b", instances=[])
    assert "\x1b" not in text and json.loads(text)["run_id"] == "\x1b[2J\x9b"


# --- through the commands ----------------------------------------------------------------------


def test_pull_shows_a_hostile_and_huge_log_safely(cli, tmp_path):
    pytest.importorskip("moto")
    import boto3
    from moto import mock_aws

    bucket, run = "log-bucket", "20261121-070000-abcdef"
    log = ("\x1b]0;owned\x07\x1b[2J" + "A" * 3_000_000 + "\n" + "step 1\n" * 40
           + "\x1b[31mRuntimeError: boom\x1b[0m" + "\x9b2J" + "Z" * 100_000 + "\n")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket=bucket, Key=f"p/{run}/g5.xlarge/probe.log", Body=log.encode())
        s3.put_object(Bucket=bucket, Key=f"p/{run}/g5\x1b[2J.xlarge/probe.log", Body=b"x\n")
        for fmt in ("table", "json", "csv", "markdown"):
            code, out, err = cli("results", "pull", f"s3://{bucket}/p", "--store", str(tmp_path / "r.db"), "--format", fmt)
            assert code == 1 and "Traceback" not in err, err
            assert "\x1b" not in out + err and "\x9b" not in out + err and "\x07" not in out + err
            assert len(out) < 60_000, len(out)  # the 3 MB line is neither downloaded whole nor printed


def test_catalog_provenance_is_bounded_and_stripped(cli, tmp_path):
    from catalog.io import SNAPSHOT_PATH
    from catalog.models import PROVENANCE_MAX_CHARS

    doc = json.loads(SNAPSHOT_PATH.read_text())
    doc["provenance"] = ("\x1b[2J\x1b]0;t\x07" + "word " * (PROVENANCE_MAX_CHARS // 5))[:PROVENANCE_MAX_CHARS]
    f = tmp_path / "c.json"
    f.write_text(json.dumps(doc))
    for fmt in ("table", "markdown", "csv"):
        code, out, err = cli("catalog", "info", "--catalog", str(f), "--format", fmt, "--max-age", "100000")
        assert code == 0, err
        assert "\x1b" not in out and "\x07" not in out
        assert len(out) < 30_000  # 12 rows padded to the bounded provenance cell (markdown), from 1 MiB
    code, out, _ = cli("catalog", "info", "--catalog", str(f), "--format", "json", "--max-age", "100000")
    assert json.loads(out)["provenance"] == doc["provenance"]  # json: the whole text, escaped
    doc["provenance"] += "x"  # past the bound: not a catalog this advisor wrote
    f.write_text(json.dumps(doc))
    code, _, err = cli("catalog", "info", "--catalog", str(f))
    assert code == 2 and "provenance" in err and err.count("\n") == 1


def test_file_contents_quoted_in_errors_are_stripped(cli, tmp_path):
    from catalog.io import SNAPSHOT_PATH

    doc = json.loads(SNAPSHOT_PATH.read_text())
    region = doc["regions"][0]
    doc["offers"][region]["instance_type"][0] = "\x1b[2Jevil"
    doc["schema_version"] = 1
    f = tmp_path / "c.json"
    f.write_text(json.dumps(doc))
    code, _, err = cli("catalog", "info", "--catalog", str(f))
    assert code == 2 and "\x1b" not in err and err.count("\n") == 1
    doc["schema_version"] = "\x1b]0;pwned\x07" * 1000
    f.write_text(json.dumps(doc))
    code, _, err = cli("catalog", "info", "--catalog", str(f))
    assert code == 2 and "\x1b" not in err and "\x07" not in err and len(err) < 1200
