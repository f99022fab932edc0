"""Tokens as the unit of work: counted from a [batch, sequence] batch of ids or by the user's
tokens_in_batch() hook, recorded per sample, and tokens/s agreeing with samples/s; results of
schemas 1-5 (no tokens) still read."""

from __future__ import annotations

import json

import pytest
import torch
from factories import probe_result

from lightning_module.contract.result import (
    READABLE_SCHEMA_VERSIONS,
    RESULT_SCHEMA_VERSION,
    ResultError,
    WorkloadShape,
    WorkloadSpec,
    parse_result,
)
from lightning_module.run.batches import sequence_tokens, tokens_counter, tokens_per_sample
from lightning_module.run.preview import preview

TINY_LM = {"d_model": 16, "heads": 2, "layers": 1, "seq_len": 8, "vocab_size": 50, "batch_size": 4}


def test_a_batch_of_ids_counts_batch_times_sequence_and_nothing_else_counts():
    ids = torch.zeros(4, 8, dtype=torch.long)
    assert sequence_tokens((ids, ids)) == 32
    assert sequence_tokens({"input_ids": ids.int()}) == 32
    assert sequence_tokens(torch.zeros(4, 8)) is None  # features, not ids
    assert sequence_tokens(torch.zeros(4, 3, 8, 8, dtype=torch.uint8)) is None  # images
    assert sequence_tokens(torch.zeros(4, 8, dtype=torch.bool)) is None  # a mask
    assert tokens_per_sample((ids, ids), 4, object()) == (8.0, "batch")
    assert tokens_per_sample(torch.zeros(4, 8), 4, object()) == (None, None)


class _Packed:
    """A module whose batch is one packed row with a mask: its hook counts the mask's ones."""

    def tokens_in_batch(self, batch):
        return int(batch["mask"].sum())


def test_the_hook_counts_and_wins_over_the_shape():
    batch = {"input_ids": torch.zeros(2, 8, dtype=torch.long),
             "mask": torch.tensor([[1] * 8, [1] * 3 + [0] * 5], dtype=torch.long)}
    count, by = tokens_counter(_Packed())
    assert by == "hook" and count(batch) == 11
    assert tokens_per_sample(batch, 2, _Packed()) == (5.5, "hook")


@pytest.mark.parametrize("bad", [0, -3, 2.5, "12", None])
def test_a_hook_that_returns_no_count_is_one_line(bad):
    class M:
        def tokens_in_batch(self, batch):
            return bad

    with pytest.raises(ValueError, match="tokens_in_batch\\(\\) returned"):
        tokens_per_sample(torch.zeros(2, 4, dtype=torch.long), 2, M())


def test_the_preview_of_a_language_model_counts_its_sequence(user_module):
    pv = preview(WorkloadSpec(model="examples.tinylm:TinyLM", init_args=TINY_LM), own_batch=True)
    assert (pv.tokens_per_sample, pv.tokens_counted_by) == (8.0, "batch")
    user_module("packedlm", """
        from examples.tinylm import TinyLM

        class Packed(TinyLM):
            def tokens_in_batch(self, batch):
                return int(batch[0].numel() // 2)  # say half the positions are padding
    """)
    pv = preview(WorkloadSpec(model="packedlm:Packed", init_args=TINY_LM), own_batch=True)
    assert (pv.tokens_per_sample, pv.tokens_counted_by) == (4.0, "hook")


def test_an_image_workload_has_no_tokens():
    pv = preview(WorkloadSpec(model="mlp", image_size=8, num_classes=3, batch_size=4))
    assert pv.tokens_per_sample is None and pv.tokens_counted_by is None


def _with_tokens(per_sample: float, tokens_per_sec: float | None) -> dict:
    r = probe_result()
    d = json.loads(r.model_dump_json())
    d["shape"] = WorkloadShape(data_source="module", tokens_per_sample=per_sample, tokens_counted_by="batch").model_dump()
    d["tokens_per_sec"] = tokens_per_sec
    return d


def test_tokens_per_sec_is_samples_per_sec_times_tokens_per_sample():
    sps = probe_result().samples_per_sec
    r = parse_result(json.dumps(_with_tokens(512.0, sps * 512)))
    assert r.tokens_per_sec == pytest.approx(40 * 512) and r.schema_version == RESULT_SCHEMA_VERSION >= 8
    with pytest.raises(ResultError, match="tokens_per_sec .* is not samples_per_sec x shape.tokens_per_sample"):
        parse_result(json.dumps(_with_tokens(512.0, sps * 256)))
    d = _with_tokens(512.0, None)
    d["shape"]["tokens_counted_by"] = None
    with pytest.raises(ResultError, match="come together"):
        parse_result(json.dumps(d))


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6, 7])
def test_older_results_still_read(version):
    assert version in READABLE_SCHEMA_VERSIONS
    d = json.loads(probe_result().model_dump_json(exclude_defaults=True))
    for k in ("tokens_per_sec", "runtime_overhead", "extrapolation", "rank_peak_memory_gib"):
        d.pop(k, None)
    d["schema_version"] = version
    r = parse_result(json.dumps(d))
    assert r.schema_version == version and r.tokens_per_sec is None and r.extrapolation is None
