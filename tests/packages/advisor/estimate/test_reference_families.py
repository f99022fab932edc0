"""Reference schema 3 (issue 31): workload families beyond image classification and BERT, each row
with its source and software stack, multi-GPU rows with their strategy, sharded rows kept out of
the fit with their reason, and version-2 files still read."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from advisor.estimate.calibrate import efficiency_from_pairs
from advisor.estimate.points import reference_points
from advisor.estimate.references import REFERENCE_PATH, ReferenceFileError, load_references, loads

# The families schema 3 added, and the least rows each holds (what was read for issue 31).
NEW_FAMILIES = {"decoder-lm": 150, "detection": 30, "seq2seq": 30, "speech": 60, "recommender": 30}


@pytest.fixture(scope="module")
def rows():
    return load_references().measurements


def raw() -> dict:
    return json.loads(REFERENCE_PATH.read_text())


def test_the_new_families_and_their_counts(rows):
    count = Counter(m.family for m in rows)
    assert all(m.family for m in rows), "every shipped row names its family"
    for fam, least in NEW_FAMILIES.items():
        assert count[fam] >= least, (fam, count[fam])
    assert sum(count[f] for f in NEW_FAMILIES) >= 150 + 150  # 150 asked, more read
    assert count["image-classification"] == 340 and count["encoder-transformer"] == 58  # the v2 rows, kept


def test_every_new_row_has_its_source_and_software_stack(rows):
    new = [m for m in rows if m.family in NEW_FAMILIES]
    for m in new:
        s = m.source
        assert s.repo and s.path and s.commit and s.where.strip(), m.id
        assert m.framework.startswith("PyTorch") and m.software and m.stack in ("tuned", "default"), m.id
    # the stack is per source: one source publishes one stack
    by_source = {}
    for m in new:
        by_source.setdefault(s_label(m), set()).add(m.stack)
    assert len(by_source) >= 2 and all(len(v) == 1 for v in by_source.values())


def s_label(m) -> str:
    return m.source.label().split("@")[0]


def test_decoder_language_models_span_sizes_devices_and_strategies(rows):
    lm = [m for m in rows if m.family == "decoder-lm"]
    bf16 = [m for m in lm if m.precision == "bf16-mixed"]
    sizes = {m.parameters for m in bf16}
    assert len(sizes) >= 3
    for dev in ("A100", "H100"):
        assert len({m.parameters for m in bf16 if m.device == dev}) >= 3, dev
    one = [m for m in lm if m.devices == 1]
    assert one and all(m.strategy == "single" for m in one)
    sharded = [m for m in lm if m.sharded]
    assert len(sharded) >= 80 and {m.strategy for m in sharded} == {"fsdp-full-shard", "fsdp-shard-grad-op"}
    assert max(m.nodes for m in sharded) == 64 and min(m.devices for m in sharded) == 8
    for m in sharded:  # what issue 29's scale-out model needs from each row
        assert m.global_batch and m.grad_accumulation and m.batch_per_device and m.tokens_per_sample, m.id
        assert m.tokens_per_sec and m.activation_checkpointing is not None and m.parameters, m.id
        assert m.tokens_per_sec == pytest.approx(m.samples_per_sec * m.tokens_per_sample, rel=0.01)
    # a workload is its sequence length too
    assert any(m.workload_id == "mpt-7b-2048tok" for m in lm)


def test_sharded_rows_are_held_out_of_the_fit_with_their_reason(rows):
    points, skipped = reference_points(rows, None, efficiency_from_pairs(rows))
    fitted = {p.label for p in points}
    why = dict(skipped)
    sharded = [m for m in rows if m.sharded]
    assert sharded and not fitted & {m.id for m in sharded}
    # a one-node FSDP row in bf16-mixed passes every other test: the strategy is what holds it out
    m = next(m for m in sharded if m.nodes == 1 and m.precision == "bf16-mixed")
    assert why[m.id].startswith(f"{m.strategy} run: sharded")


def test_rate_units_say_what_a_figure_counts(rows):
    units = Counter((m.model, m.rate_unit) for m in rows if m.family in NEW_FAMILIES and not m.model.startswith("mpt"))
    assert {u for _, u in units} == {"samples", "tokens", "mel_frames", "audio_samples"}
    assert all(m.tokens_per_sec == m.samples_per_sec for m in rows if m.rate_unit == "tokens")


# -- validation ----------------------------------------------------------------------------------

def _bad(data: dict) -> str:
    with pytest.raises(ReferenceFileError) as e:
        loads(json.dumps(data), where="refs.json")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("refs.json")
    return msg


def _row(prefix: str) -> dict:
    return next(r for r in raw()["measurements"] if r["id"].startswith(prefix))


def _v3(*rows: dict) -> dict:
    return {"schema_version": 3, "about": "t", "measurements": list(rows)}


def test_a_version_2_file_still_reads_and_may_not_use_version_3_fields():
    old = {k: v for k, v in _row("lambda-v1-rn50-").items() if k not in ("family", "batch_policy", "batch_source")}
    assert len(loads(json.dumps({"schema_version": 2, "about": "t", "measurements": [old]})).measurements) == 1
    msg = _bad({"schema_version": 2, "about": "t", "measurements": [{**old, "batch_policy": "per-device"}]})
    assert "batch_policy" in msg and "schema_version 3" in msg
    msg = _bad({"schema_version": 2, "about": "t", "measurements": [{**old, "strategy": "single"}]})
    assert "strategy" in msg and "schema_version 3" in msg
    msg = _bad({"schema_version": 2, "about": "t", "measurements": [{**old, "precision": "bf16-true"}]})
    assert "bf16-true" in msg and "schema_version 3" in msg
    assert "reads 2 and 3" in _bad({"schema_version": 4, "about": "t", "measurements": []})


@pytest.mark.parametrize("change, words", [
    ({"tokens_per_sec": 1.0}, "not the 1 of tokens_per_sec"),
    ({"global_batch": 4000}, "does not fit batch_per_device x grad_accumulation x devices"),
    ({"strategy": "single"}, "strategy 'single' on 8 devices"),
    ({"strategy": "pipelined"}, "strategy"),
    ({"family": "vision"}, "family"),
    ({"rate_unit": "bytes"}, "rate_unit"),
    ({"batch_policy": "largest"}, "batch_policy"),
    ({"batch_source": {"repo": "lambdal/deeplearning-benchmark", "where": "x"}}, "needs a path"),
])
def test_bad_version_3_rows_are_one_line(change, words):
    row = _row("foundry-mpt-7b-h100-80gb-8gpu-")
    assert loads(json.dumps(_v3(row))).measurements[0].strategy == "fsdp-full-shard"
    assert words in _bad(_v3({**row, **change}))


def test_a_tokens_row_repeats_its_figure_and_a_strategy_needs_devices():
    row = _row("lambda-v1-gnmt-")
    assert "repeats it" in _bad(_v3({**row, "tokens_per_sec": row["samples_per_sec"] * 2}))
    assert "needs more than one device" in _bad(_v3({**row, "gpus": 1, "strategy": "ddp"}))
