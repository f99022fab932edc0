"""benchmarks/llm_fit.py's data and memory part: every published row names its source and a
preset the model knows, and the model stays within the benchmark's targets on them."""

from __future__ import annotations

import json
import statistics

from advisor.estimate.memory import Layout, estimate
from benchmarks.llm_fit import FIGURES, MEDIAN_TARGET, training_of
from lightning_module.contract.transformer_shape import PRESETS

DATA = json.loads(FIGURES.read_text())


def test_every_row_has_its_source_its_setup_and_a_known_model():
    assert len([r for r in DATA["rows"] if not r.get("oom")]) >= 15
    for r in DATA["rows"]:
        assert r["source"] in DATA["sources"], r["id"]
        assert r["model"] in PRESETS, r["id"]
        assert (r["peak_gb"] is None) == bool(r.get("oom")), r["id"]
        assert r["method"] in ("full", "lora", "qlora") and r["micro_batch"] >= 1 and r["seq_len"] >= 1


def test_median_error_within_target_and_the_count_is_low_not_high():
    errors = []
    for r in DATA["rows"]:
        if r.get("oom"):
            continue
        e = estimate(PRESETS[r["model"]], training_of(r), Layout(r["strategy"], r["devices"], r["devices"]),
                     r["micro_batch"], r["seq_len"])
        errors.append(e.peak_bytes / 1e9 / r["peak_gb"] - 1)
    assert statistics.median(abs(x) for x in errors) <= MEDIAN_TARGET
    # the fit margin (advisor/data/training_memory.json) covers the under-count of nine rows in ten
    assert sum(x < 0 for x in errors) >= len(errors) * 0.9


def test_no_configuration_its_source_reports_out_of_memory_is_predicted_to_fit():
    for r in DATA["rows"]:
        if r.get("oom"):
            e = estimate(PRESETS[r["model"]], training_of(r), Layout(r["strategy"], r["devices"], r["devices"]),
                         r["micro_batch"], r["seq_len"])
            assert e.device_gib > r["device_gb"], r["id"]


def test_the_shipped_scale_out_constants_are_the_fit_of_the_published_rows():
    from advisor.estimate import sharded
    from benchmarks.llm_scale_out import rows_and_cases

    rows = rows_and_cases()
    cases, ys = [c for _, c, _ in rows], [y for _, _, y in rows]
    f = sharded.fitted()
    assert sharded.fit(cases, ys) == (f["mfu"], f["overlap"], f["memory_bound_bytes"])
    loo = sharded.leave_one_out(cases, ys)
    assert round(statistics.median(abs(e) for e in loo), 3) == f["loo_median_abs_error"]
    low, high = sharded.band(loo)
    assert (round(low, 3), round(high, 3)) == (f["band"]["low"], f["band"]["high"])
    from benchmarks.llm_scale_out import bands_by_reach
    for reach, errors in bands_by_reach(rows, loo).items():
        b = f["bands"][reach]
        assert len(errors) == b["rows"] and round(statistics.median(abs(e) for e in errors), 3) == b["loo_median_abs_error"]
        assert tuple(round(x, 3) for x in sharded.band(errors)) == (b["low"], b["high"])
