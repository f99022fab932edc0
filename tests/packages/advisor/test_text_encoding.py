"""Issue 21: one text rule. Every file the advisor reads is UTF-8 (a BOM allowed), decoded by one
reader (safeio.decode_text) before it is parsed; UTF-16, UTF-32 and invalid UTF-8 are "not
UTF-8 text", one line and exit 2, whichever reader meets them (json.loads alone used to detect and
read UTF-16/32, so results import read what the catalog loader refused)."""

from __future__ import annotations

import json

import pytest
from checkout import ROOT
from factories import probe_result
from schema_check import checked

from advisor.estimate.references import REFERENCE_PATH
from catalog.io import CatalogError
from safeio import FileError, decode_text, parse_json, read_json_file, read_text

RESULT = probe_result(n=0).model_dump_json()
SNAPSHOT = (ROOT / "catalog" / "data" / "snapshot.json").read_text()
REFERENCES = REFERENCE_PATH.read_text()


def _invalid_utf8(text: str) -> bytes:
    return text.encode().replace(b'"', b'"\xff', 1)  # a lone 0xff: never in UTF-8


BAD = {
    "UTF-16 with BOM": lambda t: t.encode("utf-16"),
    "UTF-16-LE, no BOM": lambda t: t.encode("utf-16-le"),
    "UTF-16-BE, no BOM": lambda t: t.encode("utf-16-be"),
    "UTF-32 with BOM": lambda t: t.encode("utf-32"),
    "UTF-32-BE, no BOM": lambda t: t.encode("utf-32-be"),
    "invalid UTF-8": _invalid_utf8,
    "Latin-1": lambda t: t.replace("{", '{"x": "caf\u00e9", ', 1).encode("latin-1", errors="replace"),
}


def _not_utf8(code: int, err: str) -> None:
    errors = [ln for ln in err.strip().splitlines() if ln.startswith("advisor: error: ")]
    assert code == 2 and len(errors) == 1 and "not UTF-8 text" in errors[0], err
    assert "Traceback" not in err


# --- the reader itself ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(BAD))
def test_decode_text_refuses_everything_but_utf8(kind):
    for error in (FileError, CatalogError):
        with pytest.raises(error, match="f.json: not UTF-8 text"):
            parse_json(BAD[kind]('{"a": 1}'), "f.json", error)


def test_a_utf8_bom_is_allowed_and_removed(tmp_path):
    assert parse_json('{"a": "é"}'.encode("utf-8-sig"), "f.json") == {"a": "é"}
    assert decode_text("\ufeff{}", "f.json") == "{}"
    f = tmp_path / "f.json"
    f.write_bytes('{"a": 1}'.encode("utf-8-sig"))
    assert read_json_file(f, "file", 100) == {"a": 1} and read_text(f, "file", 100) == '{"a": 1}'


# --- each reader, from the CLI ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(BAD))
def test_results_import(cli, tmp_path, kind):
    f = tmp_path / "r.json"
    f.write_bytes(BAD[kind](RESULT))
    code, _, err = cli("results", "import", str(f), "--store", str(tmp_path / "s.db"))
    _not_utf8(code, err)
    f.write_bytes(RESULT.encode("utf-8-sig"))
    code, _, err = cli("results", "import", str(f), "--store", str(tmp_path / "s.db"))
    assert code == 0 and "imported 1 new" in err, err


@pytest.mark.parametrize("kind", list(BAD))
def test_references_file(cli, tmp_path, kind):
    f = tmp_path / "refs.json"
    f.write_bytes(BAD[kind](REFERENCES))
    _not_utf8(*cli("references", "list", "--references", str(f))[::2])
    f.write_bytes(REFERENCES.encode("utf-8-sig"))
    code, _, err = cli("references", "list", "--references", str(f), "--format", "json")
    assert code == 0, err


@pytest.mark.parametrize("kind", list(BAD))
def test_catalog_file(cli, tmp_path, kind):
    f = tmp_path / "cat.json"
    f.write_bytes(BAD[kind](SNAPSHOT))
    _not_utf8(*cli("catalog", "info", "--catalog", str(f))[::2])
    f.write_bytes(SNAPSHOT.encode("utf-8-sig"))
    code, _, err = cli("catalog", "info", "--catalog", str(f), "--max-age", "100000")
    assert code == 0, err


@pytest.mark.parametrize("kind", list(BAD))
def test_spot_advisor_file(cli, tmp_path, kind):
    f = tmp_path / "adv.json"
    f.write_bytes(BAD[kind](json.dumps({"spot_advisor": {"us-east-1": {"Linux": {"c7i.large": {"r": 1, "s": 60}}}}})))
    _not_utf8(*cli("catalog", "refresh", "--spot-advisor", str(f), "--regions", "us-east-1")[::2])


@pytest.mark.parametrize("kind", list(BAD))
def test_run_manifest(cli, isolated_dirs, kind):
    runs = isolated_dirs / "data" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    run_id = "20261121-070000-abcdef"
    (runs / f"{run_id}.json").write_bytes(BAD[kind](json.dumps({"manifest_version": 1, "run_id": run_id})))
    _not_utf8(*cli("launch", "status", run_id)[::2])


@pytest.mark.parametrize("kind", list(BAD))
def test_catalog_cache(cli, kind):
    from advisor.paths import catalog_cache_path

    catalog_cache_path().parent.mkdir(parents=True, exist_ok=True)
    catalog_cache_path().write_bytes(BAD[kind](SNAPSHOT))
    _not_utf8(*cli("catalog", "info")[::2])


@pytest.mark.parametrize("kind", list(BAD))
def test_pulled_result_object(cli, tmp_path, kind):
    pytest.importorskip("moto")
    import boto3
    from moto import mock_aws

    bucket, run = "text-bucket", "20261121-070000-abcdef"
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket=bucket, Key=f"probes/{run}/c7i.2xlarge/result.json", Body=BAD[kind](RESULT))
        code, out, err = cli("results", "pull", f"s3://{bucket}/probes", "--store", str(tmp_path / "s.db"),
                             "--format", "json")
    assert code == 1 and "Traceback" not in err, err
    (row,) = checked(out, "results-pull")["runs"]
    assert row["status"] == "corrupt" and "not UTF-8 text" in row["detail"]
