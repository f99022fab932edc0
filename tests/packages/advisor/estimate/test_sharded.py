"""The sharded step-time model: its byte terms, the overlap bounds, and the LOO calibration."""

from __future__ import annotations

import pytest

from advisor.estimate import sharded
from advisor.estimate.scaling import allreduce_seconds


def test_fsdp_moves_one_and_a_half_times_ddps_bytes():
    g = w = 2.0 * 7e9  # bf16 weights and gradients, every weight trained
    assert sharded.comm_bytes(sharded.FULL_SHARD, g, w) == pytest.approx(1.5 * sharded.comm_bytes(sharded.GRAD_SHARD, g, w))
    assert sharded.comm_bytes(sharded.GRAD_SHARD, g, w) == g  # ZeRO-1/2: DDP's all-reduce


def test_overlap_bounds():
    assert sharded.exposed_efficiency(1.0, 0.5, 1.0) == 1.0  # all hidden
    assert sharded.exposed_efficiency(1.0, 0.5, 0.0) == pytest.approx(1 / 1.5)  # none hidden
    assert sharded.exposed_efficiency(1.0, 3.0, 5.0) == pytest.approx(1 / 3.0)  # overlap clipped to 1
    assert sharded.exposed_efficiency(1.0, 0.5, -1.0) == pytest.approx(1 / 1.5)  # and to 0


def test_link_within_and_across_instances():
    assert sharded.link_bytes_per_s(8, 1, 450.0, 3200.0) == 450e9
    assert sharded.link_bytes_per_s(8, 2, 450.0, 3200.0) == pytest.approx(3200e9 / 8 / 8)


def _case(devices, params, network_gbps=400.0, kind=sharded.FULL_SHARD):
    return sharded.Case(kind, devices, 8, 8 * 2048, 1, 6.0 * params, 989e12, 2.0 * params, 2.0 * params,
                        sharded.link_bytes_per_s(8, max(devices // 8, 1), 450.0, network_gbps))


def test_leave_one_out_recovers_a_known_overlap():
    # Where communication is all exposed, time = comm + (1 - overlap) x compute: MFU and overlap
    # trade off, so the set mixes hidden, partly hidden and exposed rows (fast and slow networks).
    cases = [_case(d, p, net) for d in (8, 16, 64, 256) for p in (1e9, 7e9, 30e9) for net in (400.0, 3200.0, 12800.0)]
    truth = [sharded.per_device_tokens_per_sec(c, 0.40, 0.6) for c in cases]
    assert sharded.fit(cases, truth) == (0.40, 0.6, 0.0)  # no bandwidth given: the memory-bound term is 0
    errors = sharded.leave_one_out(cases, truth)
    assert max(abs(e) for e in errors) < 1e-9
    low, high = sharded.band(errors)
    assert low == pytest.approx(1.0) and high == pytest.approx(1.0)


def test_the_fit_separates_matmul_efficiency_from_memory_bound_bytes():
    # Narrow and wide models on two devices whose FLOP/s-to-bandwidth ratios differ: the memory-bound
    # share falls as d_model grows, so MFU and the bytes per n_layers x d_model are both identifiable.
    cases = []
    for layers, d in ((12, 768), (24, 2048), (80, 8192)):
        params = 12 * layers * d * d
        for peak, hbm in ((989e12, 3.35e12), (312e12, 2.0e12)):
            cases.append(sharded.Case(sharded.FULL_SHARD, 8, 8, 8 * 2048, 1, 6.0 * params, peak, 2.0 * params,
                                      2.0 * params, 450e9, layers * d, hbm))
    truth = [sharded.per_device_tokens_per_sec(c, 0.70, 1.0, 300.0) for c in cases]
    m, _, w = sharded.fit(cases, truth)
    assert (m, w) == (0.70, 300.0)
    narrow, wide = (sharded.per_device_tokens_per_sec(c, 0.7, 1.0, 300.0) / sharded.per_device_tokens_per_sec(c, 0.7, 1.0)
                    for c in (cases[0], cases[4]))
    assert narrow < wide < 1.0  # the narrow model loses more to its memory-bound kernels


def test_training_flops_count_the_attention():
    # PaLM appendix B: 6N + 12 L d s; checkpointing adds a third of each
    assert sharded.training_flops_per_token(1e9, 24, 2048, 2048) == 6e9 + 12 * 24 * 2048 * 2048
    assert sharded.training_flops_per_token(1e9, 24, 2048, 2048, checkpointing=True) == pytest.approx(
        8e9 + 16 * 24 * 2048 * 2048)
    assert sharded.training_flops_per_token(1e9, 1, 1, 1, weights_train=False) == 4e9 + 12


def test_more_exposed_communication_is_slower():
    one = sharded.per_device_tokens_per_sec(_case(8, 30e9), 0.4, 0.0)
    many = sharded.per_device_tokens_per_sec(_case(256, 30e9), 0.4, 0.0)
    assert many < one
    # the all-reduce model's ring factor carries through
    assert allreduce_seconds(256, 1.0, 1.0) > allreduce_seconds(8, 1.0, 1.0)


def test_fitted_constants_carry_their_derivation():
    f = sharded.fitted()
    assert "fitted on rows" in f["derived"] and "benchmarks/llm_fit.py" in f["derived"]
    assert 0.0 <= f["overlap"] <= 1.0 and 0.0 < f["mfu"] < 1.0


def test_hybrid_shard_gathers_inside_the_instance_and_all_reduces_its_shard_across():
    g = w = 2.0 * 8e9
    c = sharded.Case(sharded.HYBRID_SHARD, 16, 8, 4096, 4, 1.0, 1.0, w, g, 450e9, inter_link=50e9)
    inside = float(allreduce_seconds(8, w + g / 2, 450e9))  # FSDP's bytes over the instance's own link
    across = float(allreduce_seconds(2, g / 8, 50e9)) / 4  # the 1/8 shard, once a step of 4 micro-batches
    assert sharded.comm_seconds(c) == pytest.approx(inside + across)
    from dataclasses import replace
    assert sharded.comm_seconds(replace(c, devices=8)) == pytest.approx(inside)  # one instance: nothing across
    assert sharded.comm_seconds(replace(c, inter_link=0.0)) == float("inf")  # a network it needs, unknown
    assert sharded.comm_seconds(replace(c, devices=1)) == 0.0


def test_predict_is_the_fitted_constants_and_their_band():
    from dataclasses import replace

    f = sharded.fitted()
    c = sharded.Case(sharded.FULL_SHARD, 16, 8, 8 * 2048, 1, 6.0 * 7e9, 989e12, 2.0 * 7e9, 2.0 * 7e9,
                     sharded.link_bytes_per_s(8, 2, 450.0, 3200.0), 32 * 4096, 3.35e12)
    p = sharded.predict(c)
    want = sharded.per_device_tokens_per_sec(c, f["mfu"], f["overlap"], f["memory_bound_bytes"])
    assert p.tokens_per_sec == pytest.approx(want)
    b = f["bands"]["several_instances"]  # 16 GPUs, 8 an instance: across the network
    assert (p.low, p.high) == pytest.approx((p.tokens_per_sec * b["low"], p.tokens_per_sec * b["high"]))
    one = sharded.predict(replace(c, devices=8))
    assert one.high / one.tokens_per_sec == pytest.approx(f["bands"]["one_instance"]["high"])
    assert f["bands"]["one_instance"]["high"] < b["high"]  # inside an instance the published runs were closer
    compute = sharded.compute_seconds(c, f["mfu"], f["memory_bound_bytes"])
    assert p.efficiency == pytest.approx(sharded.exposed_efficiency(compute, sharded.comm_seconds(c), f["overlap"]))
    # work the FLOP count misses (QLoRA's dequantization) slows the compute, not the communication
    slow = replace(c, compute_share=0.5)
    assert sharded.compute_seconds(slow, f["mfu"], f["memory_bound_bytes"]) == pytest.approx(2 * compute)
    assert sharded.comm_seconds(slow) == sharded.comm_seconds(c)
