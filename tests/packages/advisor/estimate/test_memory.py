"""The training-memory model's terms against figures worked by hand, strategy by strategy.

The shape is small enough to count on paper: d_model 64, 2 layers, 4 heads (head_dim 16, all
heads their own k/v), SwiGLU d_ff 128, vocab 100, RMSNorm, untied head.
  block: q, k, v, o 4 x 64 x 64 = 16,384; gate, up, down 3 x 64 x 128 = 24,576; 2 norms 128
         -> 41,088
  embedding + head 2 x 100 x 64 = 12,800; final norm 64 -> 12,864
  total 2 x 41,088 + 12,864 = 95,040 parameters
"""

from __future__ import annotations

import pytest

from advisor.estimate.memory import (
    GiB,
    Layout,
    MemoryModelError,
    Training,
    activation_bytes_per_token_per_layer,
    estimate,
    largest_micro_batch,
)
from lightning_module.contract.transformer_shape import ShapeError, TransformerShape, parse_shape

TINY = TransformerShape("tiny", d_model=64, n_layers=2, n_heads=4, n_kv_heads=4, d_ff=128, vocab=100)
N, BLOCK, ROOT = 95_040, 41_088, 12_864


def terms(e) -> dict[str, float]:
    return {t.name: t.bytes for t in e.terms}


def test_the_hand_counted_parameters():
    assert TINY.block_params() == BLOCK
    assert TINY.embedding_params() == ROOT
    assert TINY.params() == N


def test_presets_count_their_published_sizes():
    # Llama 2 7B: 6,738,415,616 parameters (the figure Meta's and Hugging Face's model cards round to 7B)
    assert parse_shape("llama-2-7b").params() == 6_738_415_616
    assert round(parse_shape("llama-3-8b").params() / 1e9, 2) == 8.03
    assert parse_shape("llama-3-8b,n_layers=16").n_layers == 16


@pytest.mark.parametrize("text", ["llama-9", "d_model=64", "llama-3-8b,n_layers=x", "llama-3-8b,wings=2",
                                  "d_model=64,n_layers=2,n_heads=3,d_ff=8,vocab=9,n_kv_heads=2"])
def test_bad_shapes_are_refused(text):
    with pytest.raises(ShapeError):
        parse_shape(text)


def test_ddp_on_one_device_bf16_true_adamw_is_8_bytes_a_parameter():
    t = terms(estimate(TINY, Training(), Layout("ddp", 1, 1), 1, 16))
    assert t["state: trained weights"] == N * 2
    assert t["state: gradients"] == N * 2
    assert t["state: optimizer"] == N * 2 * 2  # exp_avg, exp_avg_sq in the parameter's dtype
    assert "state: DDP gradient buckets" not in t


def test_ddp_on_two_devices_adds_the_bucket_copy_of_the_gradients():
    t = terms(estimate(TINY, Training(), Layout("ddp", 2, 2), 1, 16))
    assert t["state: DDP gradient buckets"] == N * 2
    assert t["state: optimizer"] == N * 4  # nothing sharded


def test_bf16_mixed_keeps_fp32_master_weights_and_a_16_bit_copy():
    t = terms(estimate(TINY, Training(precision="bf16-mixed"), Layout("ddp", 1, 1), 1, 16))
    assert (t["state: trained weights"], t["state: 16-bit weight copies"], t["state: gradients"],
            t["state: optimizer"]) == (N * 4, N * 2, N * 4, N * 8)


@pytest.mark.parametrize("optimizer, per_param", [("sgd", 2), ("adamw8bit", 2), ("adamw", 4)])
def test_optimizer_state_per_parameter(optimizer, per_param):
    t = terms(estimate(TINY, Training(optimizer=optimizer), Layout("ddp", 1, 1), 1, 16))
    assert t["state: optimizer"] == N * per_param


def test_zero1_shards_the_optimizer_only():
    t = terms(estimate(TINY, Training(), Layout("zero1", 4, 4), 1, 16))
    assert (t["state: trained weights"], t["state: gradients"], t["state: optimizer"]) == (N * 2, N * 2, N * 4 / 4)


def test_zero2_shards_optimizer_and_gradients():
    t = terms(estimate(TINY, Training(), Layout("zero2", 4, 4), 1, 16))
    assert (t["state: trained weights"], t["state: gradients"], t["state: optimizer"]) == (N * 2, N * 2 / 4, N * 4 / 4)


def test_fsdp_shards_everything_and_holds_two_blocks_and_the_root_whole():
    t = terms(estimate(TINY, Training(), Layout("fsdp", 4, 4), 1, 16))
    assert (t["state: trained weights"], t["state: gradients"], t["state: optimizer"]) == (N * 2 / 4, N * 2 / 4, N * 4 / 4)
    # beyond its own quarter, a device holds 3/4 of each gathered unit, in bf16
    assert t["state: gathered blocks"] == pytest.approx(2 * BLOCK * 0.75 * 2)
    assert t["state: gathered root unit"] == pytest.approx(ROOT * 0.75 * 2)
    assert t["state: unsharded gradients (a block, the root)"] == pytest.approx((BLOCK + ROOT) * 0.75 * 2)


def test_fsdp_no_sync_accumulation_holds_the_whole_unsharded_gradient():
    plain = estimate(TINY, Training(), Layout("fsdp", 4, 4), 1, 16)
    held = estimate(TINY, Training(no_sync_accumulation=True), Layout("fsdp", 4, 4), 1, 16)
    t = terms(held)
    # the shard (state) plus the other 3/4: every device holds the whole model's bf16 gradients
    assert t["state: gradients"] + t["gradients: unsharded, held across the accumulation (no_sync)"] == N * 2
    assert t["transient: the root unit's new gradient before it is accumulated"] == ROOT * 2
    assert "state: unsharded gradients (a block, the root)" not in t
    # the held gradients are not state: the optimizer step sees the shard only
    assert held.state_bytes == plain.state_bytes - (BLOCK + ROOT) * 0.75 * 2
    assert held.peak_bytes > plain.peak_bytes
    # DDP keeps whole gradients anyway: the flag changes nothing there
    assert terms(estimate(TINY, Training(no_sync_accumulation=True), Layout("ddp", 2, 2), 1, 16)) == \
        terms(estimate(TINY, Training(), Layout("ddp", 2, 2), 1, 16))


def test_hybrid_shards_within_the_instance_only():
    t = terms(estimate(TINY, Training(), Layout("hybrid", 8, 4), 1, 16))  # 2 instances of 4
    assert (t["state: trained weights"], t["state: gradients"], t["state: optimizer"]) == (N * 2 / 4, N * 2 / 4, N * 4 / 4)


def test_lora_freezes_the_base_in_16_bits_and_trains_the_adapters_in_full():
    tr = Training(method="lora", lora_rank=4, lora_targets=("q", "v"))
    adapters = 2 * 2 * 4 * (64 + 64)  # layers x targets x r x (in + out)
    t = terms(estimate(TINY, tr, Layout("ddp", 1, 1), 1, 16))
    assert t["state: frozen base weights"] == N * 2
    assert (t["state: trained weights"], t["state: gradients"], t["state: optimizer"]) == (
        adapters * 2, adapters * 2, adapters * 4)


def test_qlora_stores_the_block_matrices_in_nf4():
    linear = 2 * (16_384 + 24_576)
    t = terms(estimate(TINY, Training(method="qlora"), Layout("ddp", 1, 1), 1, 16))
    assert t["state: frozen base weights"] == pytest.approx(linear * 4.127 / 8 + (N - linear) * 2)
    t = terms(estimate(TINY, Training(method="qlora", double_quant=False), Layout("ddp", 1, 1), 1, 16))
    assert t["state: frozen base weights"] == pytest.approx(linear * 4.5 / 8 + (N - linear) * 2)


def test_activations_per_token_per_layer_by_hand():
    # full fine-tune: 2 norms x (4h fp32 input + 4h fp32 normalised) = 1,024
    # attention: q/k/v input 2h 128 + q 128 + k, v 4 x 64 = 256 + output 128 + logsumexp 16 + out-proj input 128 = 784
    # MLP: gate/up input 128 + gate out 2f 256 + the product's factors 4f 512 + down input 2f 256 = 1,152
    per, _ = activation_bytes_per_token_per_layer(TINY, Training(), 16)
    assert per == 1024 + 784 + 1152
    # LoRA on q, v with dropout: norms 2 x 4h; q/k/v kept by the adapters (dropped copy + mask, 3h each);
    # no frozen linear keeps its input: 512 + (2 x 192 + 128 + 256 + 128 + 16) + (256 + 512)
    lora, _ = activation_bytes_per_token_per_layer(TINY, Training(method="lora"), 16)
    assert lora == 512 + 912 + 768


def test_checkpointing_keeps_block_inputs_and_one_block():
    plain = terms(estimate(TINY, Training(), Layout("ddp", 1, 1), 2, 16))
    ckpt = terms(estimate(TINY, Training(checkpointing=True), Layout("ddp", 1, 1), 2, 16))
    assert ckpt["activations: block inputs (checkpointed)"] == 2 * 32 * 2 * 64  # layers x tokens x 2h
    assert ckpt["activations: one block recomputed"] == plain["activations: blocks"] / 2


def test_the_peak_is_the_larger_of_backward_and_the_optimizer_step():
    e = estimate(TINY, Training(), Layout("ddp", 1, 1), 1, 1)
    assert e.step_terms[0].bytes == N * 2  # the foreach step's one state-sized temporary
    assert e.peak_bytes == max(sum(t.bytes for t in e.terms), e.state_bytes + N * 2)
    assert e.device_gib == pytest.approx((e.peak_bytes * (1 + e.margin.bytes) + e.runtime.bytes) / GiB)


def test_largest_micro_batch_is_the_last_that_fits():
    shape, tr, lay = parse_shape("llama-2-7b"), Training(method="lora"), Layout("ddp", 1, 1)
    mb = largest_micro_batch(shape, tr, lay, 1024, 40.0)
    assert mb >= 1
    assert estimate(shape, tr, lay, mb, 1024).device_gib <= 40.0 < estimate(shape, tr, lay, mb + 1, 1024).device_gib
    assert largest_micro_batch(shape, Training(), lay, 1024, 24.0) == 0  # 7B full fine-tune on one 24 GiB GPU


def test_unknown_setups_are_refused():
    with pytest.raises(MemoryModelError):
        Training(optimizer="adafactor")
    with pytest.raises(MemoryModelError):
        Layout("zero4", 2, 2)
