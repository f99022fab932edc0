"""Issue 21: nothing invalid gets in. Every numeric and text field of every incoming record (a probe
result by `results import` and `results pull`, a team's reference file) is given hostile values:
each is refused with exit 2 and one line, or stored and then usable by `results list/show/export`
and `recommend` without an exit 70. Strictly typed (no JSON true as 1.0, no "40" as 40), finite,
within the physical bounds result.py states, a CI holding its estimate, utilisation at most 100%."""

from __future__ import annotations

import json
import tempfile
import uuid
from pathlib import Path

import pytest
from checkout import ROOT
from factories import probe_result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_paths import get_path, leaves, numeric_paths, set_path
from recommend_catalogs import write_catalog

from advisor.estimate.references import REFERENCE_PATH
from lightning_module.contract.result import (
    MAX_DEVICE_TFLOPS,
    MAX_STEP_SECONDS,
    MIN_SAMPLES_PER_SEC,
    ProbeResult,
    ResultError,
    parse_result,
)

# A probe with FLOPs and a measured peak, so those fields (and their checks) are there to mutate.
BASE = json.loads(probe_result(n=0, flops_per_sample=8.2e9).model_dump_json())
BASE.update(achieved_tflops=40.0 * 8.2e9 / 1e12, peak_tflops_matmul=2.0, utilisation_matmul=40.0 * 8.2e9 / 1e12 / 2.0,
            pipeline_samples_per_sec_per_worker=900.0)
_DIR = Path(tempfile.mkdtemp(prefix="hostile-records-"))
CATALOG = write_catalog(_DIR / "cat.json")  # has c7i.2xlarge: the probe re-anchors the estimates


def _numeric(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# Every number of a result, and of the optional fields the factory leaves empty (null).
NUMERIC = numeric_paths(BASE, ProbeResult)
TEXT = [p for p in leaves(BASE) if isinstance(get_path(BASE, p), str)]

HOSTILE_NUMBERS = st.one_of(
    st.sampled_from([5e-324, 2.2e-308, 1e-300, MIN_SAMPLES_PER_SEC / 2, 1e-7, 0.0, -0.0, -1.0, -5e-324, 1.0, 1e12,
                     1e15, 1e300, 1.7976931348623157e308, True, False, "40", "1e3", "NaN", "", None, [], {},
                     [True, True], 10**30, -(10**30), 2**63, 1.5, 3]),
    st.floats(allow_nan=False, allow_infinity=False), st.integers(-(10**20), 10**20),
)
HOSTILE_TEXT = st.one_of(
    st.sampled_from(["", " ", "\x00", "\x1b[2J", "a\nb", "\u202e", "\ud800", "x" * 5000, "x" * 100_000, "é" * 10,
                     "resnet50", "mlp", "../../etc", "2999-01-01T00:00:00Z", "1e308", "true", 5, None, True, 1e308]),
    st.text(max_size=30),
)


def _all_read_commands_work(cli, store: str) -> None:
    code, out, err = cli("results", "list", "--store", store, "--format", "json")
    assert code == 0 and "Traceback" not in err, err
    code, out, err = cli("results", "export", "--store", store)
    assert code == 0 and "Traceback" not in err, err
    for r in json.loads(out)["results"]:
        for fmt in ("table", "json", "csv"):
            code, out2, err = cli("results", "show", r["result_id"], "--store", store, "--format", fmt)
            assert code == 0 and "inf%" not in out2 and "nan" not in out2.lower().replace("nanos", ""), err
    for workload in ("resnet50", BASE["workload_id"]):
        code, _, err = cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--catalog",
                           CATALOG, "--store", store, "--workload", workload, "--format", "json", "--max-age", "100000")
        assert code in (0, 2) and "Traceback" not in err, err


def _import_then_read(cli, doc) -> int:
    f = _DIR / f"{uuid.uuid4().hex}.json"
    f.write_text(json.dumps(doc))
    store = str(_DIR / f"{uuid.uuid4().hex}.db")
    code, _, err = cli("results", "import", str(f), "--store", store)
    assert "Traceback" not in err, err
    if code == 2:
        # one line says which field (then import's count of what it stored)
        assert [ln.startswith("advisor: error: ") for ln in err.strip().splitlines()] == [True, False], err
    else:
        assert code == 0, err
        _all_read_commands_work(cli, store)
    return code


_settings = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_settings
@given(path=st.sampled_from(NUMERIC), value=HOSTILE_NUMBERS)
def test_a_hostile_number_in_any_field_is_refused_or_usable(cli, path, value):
    _import_then_read(cli, set_path(BASE, path, value))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(TEXT), value=HOSTILE_TEXT)
def test_hostile_text_in_any_field_is_refused_or_usable(cli, path, value):
    _import_then_read(cli, set_path(BASE, path, value))


# --- the examples of the issue, and the rules they break ----------------------------------------


@pytest.mark.parametrize("path, value", [
    (("samples_per_sec",), 5e-324), (("samples_per_sec",), True), (("samples_per_sec",), "40"),
    (("samples_per_sec_ci",), [True, True]), (("step_time", "n_steps"), True), (("step_time", "n_steps"), 20.0),
    (("config", "compile"), 1), (("config", "compile"), "false"), (("reliable",), "no"),
    (("samples_per_sec_ci",), [41.0, 50.0]),  # a CI that does not hold its estimate
    (("ladder", 1, "ci_low"), 45.0),  # nor a rung's
    (("flops_per_sample",), 5e-324), (("flops_per_sample",), 1e300),  # 1e300 x 40 samples/s: past any device
    (("achieved_tflops",), MAX_DEVICE_TFLOPS * 2), (("peak_tflops_matmul",), 1e308),
    (("pipeline_samples_per_sec_per_worker",), 5e-324), (("finished_at",), 1.8e9), (("started_at",), True),
])
def test_refused_in_one_line(cli, path, value):
    with pytest.raises(ResultError) as e:
        parse_result(json.dumps(set_path(BASE, path, value)), where="r.json")
    assert "\n" not in str(e.value) and "r.json" in str(e.value)
    assert _import_then_read(cli, set_path(BASE, path, value)) == 2


def test_a_denormal_rate_no_longer_breaks_recommend(cli):
    # The first example: stored with exit 0, then every recommend of the workload exit 70.
    doc = set_path(set_path(BASE, ("samples_per_sec",), 5e-324), ("samples_per_sec_ci",), [0.0, 1.0])
    assert _import_then_read(cli, doc) == 2
    # The slowest rate a record can hold: one sample per step of a day (the longest step timed);
    # the floor below it is the bound for a rate alone.
    slowest = 1 / MAX_STEP_SECONDS
    assert slowest >= MIN_SAMPLES_PER_SEC
    ok = set_path(set_path(BASE, ("samples_per_sec",), slowest), ("samples_per_sec_ci",), [0.0, 1.0])
    ok["step_time"] = {**ok["step_time"], "mean_s": MAX_STEP_SECONDS, "median_s": MAX_STEP_SECONDS,
                       "p10_s": MAX_STEP_SECONDS, "p90_s": MAX_STEP_SECONDS}
    ok.update(ladder=[], achieved_tflops=None, utilisation_matmul=None)  # derived from the old rate
    assert _import_then_read(cli, ok) == 0  # stored and usable


@pytest.mark.parametrize("what", ["matmul", "datasheet"])
def test_utilisation_above_100_percent_is_emptied_and_said(cli, what):
    doc = {**BASE, f"peak_tflops_{what}": 2.0, f"utilisation_{what}": 1e308}
    r = parse_result(json.dumps(doc))
    assert getattr(r, f"utilisation_{what}") is None and not r.reliable
    assert any("above 100%" in why for why in r.unreliable_reasons)
    # achieved above the peak, whatever utilisation says, is the same measurement error
    r = parse_result(json.dumps({**doc, f"utilisation_{what}": 0.5, f"peak_tflops_{what}": 0.1}))
    assert getattr(r, f"utilisation_{what}") is None
    assert _import_then_read(cli, doc) == 0


def test_max_device_tflops_is_above_every_device_in_the_table():
    table = json.loads((ROOT / "catalog" / "data" / "accelerators.json").read_text())
    peaks = [v for a in table["accelerators"] for k, v in a.items() if k.endswith("_tflops") and v]
    assert max(peaks) * 4 <= MAX_DEVICE_TFLOPS


# --- a team's reference file --------------------------------------------------------------------

REF = json.loads(REFERENCE_PATH.read_text())
ROW = REF["measurements"][0]
REF_NUMERIC = [(k,) for k, v in ROW.items() if _numeric(v) or v is None]


def _reference_file(row: dict) -> str:
    f = _DIR / f"{uuid.uuid4().hex}.json"
    f.write_text(json.dumps({**REF, "measurements": [row]}))
    return str(f)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(REF_NUMERIC), value=HOSTILE_NUMBERS)
def test_a_hostile_number_in_a_reference_file_is_refused_or_usable(cli, path, value):
    ref = _reference_file(set_path(ROW, path, value))
    code, _, err = cli("references", "list", "--references", ref, "--format", "json")
    assert code in (0, 2) and "Traceback" not in err, err
    if code == 2:
        assert len(err.strip().splitlines()) == 1, err
        return
    code, _, err = cli("recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8", "--catalog", CATALOG,
                       "--references", ref, "--workload", str(ROW.get("model", "resnet50")), "--format", "json")
    assert code in (0, 2) and "Traceback" not in err, err


@pytest.mark.parametrize("field, value", [("samples_per_sec", True), ("samples_per_sec", "40"),
                                          ("samples_per_sec", 5e-324), ("gpus", True), ("gpus", 1.0),
                                          ("tuned", 1), ("image_size", 10**9)])
def test_a_reference_row_is_typed_strictly(cli, field, value):
    code, _, err = cli("references", "list", "--references", _reference_file({**ROW, field: value}))
    assert code == 2 and len(err.strip().splitlines()) == 1 and field in err, err


@pytest.mark.parametrize("change, says", [
    ({"achieved_tflops": 3.28}, "achieved_tflops 3.28 is not samples_per_sec x flops_per_sample"),
    ({"utilisation_matmul": 0.5}, "utilisation_matmul 0.5 is not achieved_tflops / peak_tflops_matmul"),
])
def test_derived_figures_agree_with_their_parts(change, says):
    with pytest.raises(ResultError, match=says):
        parse_result(json.dumps({**BASE, **change}))
    parse_result(json.dumps({**BASE, "achieved_tflops": BASE["achieved_tflops"] * 1.005}))  # a hand's rounding
