"""Every number in a catalog file is validated for what it means (positive, finite, in a plausible
unit), and datetimes are UTC-aware: a bad catalog is refused in one line, a good one never yields
a negative or non-finite throughput, price, time or cost."""

from __future__ import annotations

import copy
import json
import math
import tempfile
import uuid
import warnings
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_paths import leaves
from recommend_catalogs import make_catalog

from catalog.io import CatalogError, loads

BASE = json.loads(make_catalog().model_dump_json())
_DIR = Path(tempfile.mkdtemp(prefix="catalog-validation-"))
JOB = ["--budget", "5000", "--deadline", "30d", "--samples", "1e8", "--max-age", "100000", "--format", "json",
       "--market", "any"]


def write(doc: dict) -> str:
    f = _DIR / f"{uuid.uuid4().hex}.json"
    f.write_text(json.dumps(doc))
    return str(f)


def with_type(field: str, value) -> dict:
    doc = copy.deepcopy(BASE)
    doc["instance_types"]["c7i.2xlarge"][field] = value
    return doc


def with_offer(field: str, value, i: int = 1) -> dict:
    doc = copy.deepcopy(BASE)
    doc["offers"]["us-east-1"][field][i] = value  # offer 1: c7i.2xlarge spot
    return doc


@pytest.mark.parametrize("field, value", [
    ("cpu_clock_ghz", -3.2), ("cpu_clock_ghz", 0.0), ("cpu_clock_ghz", 3200.0), ("cpu_clock_ghz", math.inf),
    ("vcpus", 0), ("vcpus", -8), ("physical_cores", 0), ("physical_cores", 64),  # more cores than vCPUs
    ("memory_gib", -16.0), ("memory_gib", math.nan), ("memory_gib", 1e300),
    ("network_gbps", -12.5), ("network_gbps", 1e9), ("network_baseline_gbps", 0.0), ("generation", 0),
    ("cpu_model", "Xeon\x1b[2J"), ("cpu_model", "x" * 10_000), ("name", "../etc"), ("family", ""),
])
def test_instance_type_numbers_and_names_are_checked(cli, field, value):
    doc = with_type(field, value)
    with pytest.raises(CatalogError) as e:
        loads(json.dumps(doc), "c.json")
    assert "\n" not in str(e.value) and (field in str(e.value) or "c7i.2xlarge" in str(e.value))
    code, _out, err = cli("recommend", *JOB, "--catalog", write(doc))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("field, value", [
    ("accelerator_memory_gib", 24576.0), ("accelerator_memory_gib", -24.0), ("accelerator_count", -1),
    ("accelerator_count", 100_000),
])
def test_accelerator_numbers_are_checked(field, value):
    doc = copy.deepcopy(BASE)
    doc["instance_types"]["g5.2xlarge"][field] = value
    with pytest.raises(CatalogError, match=field):
        loads(json.dumps(doc), "c.json")


@pytest.mark.parametrize("field, value", [
    ("usd_per_hour", -0.36), ("usd_per_hour", 0.0), ("usd_per_hour", 1e6), ("usd_per_hour", math.nan),
    ("spot_min_usd", -1.0), ("az_count", 0), ("az_count", -3), ("savings_pct", 250.0), ("savings_pct", -500.0),
    ("interruption_bucket", 7), ("price_at", "9999-12-31T23:59:59-23:59"), ("price_at", "0001-01-01T00:00:00+14:00"),
    ("instance_type", "\x1b[2J"),
])
def test_offer_numbers_are_checked(field, value):
    with pytest.raises(CatalogError) as e:
        loads(json.dumps(with_offer(field, value)), "c.json")
    assert field in str(e.value) and "\n" not in str(e.value)


def test_the_issues_negative_clock_is_refused_not_ranked_first(cli):
    code, out, err = cli("recommend", *JOB, "--catalog", write(with_type("cpu_clock_ghz", -1.0)))
    assert code == 2 and out == "" and "cpu_clock_ghz" in err


@pytest.mark.parametrize("stamp, expected", [
    ("2026-11-01T00:00:00", datetime(2026, 11, 1, tzinfo=timezone.utc)),
    ("2026-11-01T05:30:00+05:30", datetime(2026, 11, 1, tzinfo=timezone.utc)),
])
def test_datetimes_are_utc_aware_and_every_command_works(cli, stamp, expected):
    doc = copy.deepcopy(BASE)
    doc["fetched_at"] = stamp
    doc["offers"]["us-east-1"]["price_at"][0] = stamp
    cat = loads(json.dumps(doc))
    assert cat.fetched_at == expected and cat.fetched_at.utcoffset().total_seconds() == 0
    price_at = cat.offers["us-east-1"].price_at[0]
    assert price_at == expected and price_at.utcoffset() is not None  # aware: the same instant, comparable
    f = write(doc)
    for argv in (["catalog", "info", "--catalog", f], ["catalog", "show", "--catalog", f],
                 ["recommend", *JOB, "--catalog", f]):
        code, _, err = cli(*argv)
        assert code == 0 and "Traceback" not in err, (argv, err)


def test_a_catalog_from_the_future_is_refused(cli):
    doc = copy.deepcopy(BASE)
    doc["fetched_at"] = "2999-01-01T00:00:00Z"  # would never warn about its age
    code, _, err = cli("catalog", "info", "--catalog", write(doc))
    assert code == 2 and "in the future" in err


# --- any number anywhere: refused, or answered with nothing negative or non-finite -------------

NUMERIC_TYPE_FIELDS = ["vcpus", "physical_cores", "memory_gib", "cpu_clock_ghz", "accelerator_count",
                       "accelerator_memory_gib", "network_gbps", "network_baseline_gbps", "generation"]
NUMERIC_OFFER_FIELDS = ["usd_per_hour", "spot_min_usd", "az_count", "interruption_bucket", "savings_pct"]
_number = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**12), 10**12),
                    st.sampled_from([0, -0.0, 1e-300, 5e-324, 1e308, -1, 3500, 24576, 1e-6, 1e4, 0.01, 0.1, 4096,
                                     100_000, 16384, 1024, 0.1, 10]))


def _all_finite_non_negative(node) -> bool:
    if isinstance(node, bool):
        return True
    if isinstance(node, (int, float)):
        return math.isfinite(node) and node >= 0
    if isinstance(node, dict):
        return all(_all_finite_non_negative(v) for k, v in node.items() if k not in ("savings_pct",))
    if isinstance(node, list):
        return all(_all_finite_non_negative(v) for v in node)
    return True


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(["type", "offer"]), data=st.data(), value=_number)
def test_any_number_is_refused_in_one_line_or_ranked_sanely(cli, target, data, value):
    if target == "type":
        name = data.draw(st.sampled_from(sorted(BASE["instance_types"])))
        doc = copy.deepcopy(BASE)
        doc["instance_types"][name][data.draw(st.sampled_from(NUMERIC_TYPE_FIELDS))] = value
    else:
        field = data.draw(st.sampled_from(NUMERIC_OFFER_FIELDS))
        doc = with_offer(field, value, data.draw(st.integers(0, len(BASE["offers"]["us-east-1"]["market"]) - 1)))
    with warnings.catch_warnings():  # numpy overflow on a valid catalog would be a wrong answer
        warnings.simplefilter("error", RuntimeWarning)
        code, out, err = cli("recommend", *JOB, "--catalog", write(doc))
    assert "Traceback" not in err
    if code == 2:
        assert err.strip().count("\n") == 0 and err.startswith("advisor: error:"), err
        return
    assert code == 0, err
    report = json.loads(out)
    rows = report["recommendations"] + report.get("closest", [])
    for r in rows:
        for k in ("samples_per_sec", "hours", "cost_usd", "samples_per_dollar", "throughput_low", "throughput_high"):
            v = r.get(k)
            assert v is None or (math.isfinite(v) and v > 0), (k, r)
    assert "NaN" not in out and "Infinity" not in out


# --- any structural change: refused in one line, or answered (never exit 70) --------------------


LEAVES = list(leaves(BASE))
_anything = st.one_of(st.none(), st.booleans(), _number, st.text(max_size=12),
                      st.sampled_from(["", "spot", "on-demand", "gpu", "none", "us-east-1", "c7i.2xlarge",
                                       "2026-01-01", "\x1b[2J", [], {}, [1], {"a": 1}]))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.sampled_from(LEAVES), _anything, st.booleans()), min_size=1, max_size=3))
def test_any_edit_of_a_catalog_is_refused_in_one_line_or_answered(cli, edits):
    doc = copy.deepcopy(BASE)
    for path, value, delete in edits:
        try:
            node = doc
            for k in path[:-1]:
                node = node[k]
            if delete and isinstance(node, dict):
                del node[path[-1]]
            else:
                node[path[-1]] = value
        except (KeyError, IndexError, TypeError):  # an earlier edit replaced a parent
            pass
    f = write(doc)
    for argv in (["catalog", "show", "--catalog", f, "--format", "csv"], ["recommend", *JOB, "--catalog", f]):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            code, _out, err = cli(*argv)
        assert code in (0, 2) and "Traceback" not in err, (argv, code, err)
        if code == 2:
            assert len([line for line in err.splitlines() if "error" in line]) == 1, err
