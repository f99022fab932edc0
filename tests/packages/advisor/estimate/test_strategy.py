"""The strategy search: the least costly strategy that fits, its throughput arithmetic, and what
an excluded type is told would make it fit."""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.estimate import sharded
from advisor.estimate.memory import Training
from advisor.estimate.strategy import Device, case_of, flops_per_token, per_device, plan, what_would_fit
from lightning_module.contract.transformer_shape import parse_shape

LLAMA3 = parse_shape("llama-3-8b")
A10G_1 = Device("g5.xlarge", 24, 1, 125.0, None, 10.0)
A10G_8 = Device("g5.48xlarge", 24, 8, 125.0, 32.0, 100.0)
H100_8 = Device("p5.48xlarge", 80, 8, 989.0, 450.0, 3200.0, 3350.0)


def test_flops_per_token_is_palms_count():
    s = 4096
    n = LLAMA3.params()
    attn = 12 * 32 * 4096 * s
    assert flops_per_token(LLAMA3, Training(), s) == 6 * n + attn
    assert flops_per_token(LLAMA3, Training(method="lora"), s) == 4 * n + attn  # no weight gradients
    assert flops_per_token(LLAMA3, Training(checkpointing=True), s) == pytest.approx(8 * n + attn * 4 / 3)


def test_one_gpus_rate_is_the_calibrated_compute_model():
    """One device, nothing to communicate: tokens/s = 1 / (FLOPs / (peak x fitted matmul efficiency)
    + fitted memory-bound bytes x n_layers x d_model / HBM bandwidth), the fitted constants of
    advisor/data/sharded_fit.json, not a separate MFU."""
    f = sharded.fitted()
    h100 = Device("p5.4xlarge", 80, 1, 989.0, None, 100.0, 3350.0)
    shape = parse_shape("llama-3.2-1b")
    r = per_device(h100, shape, Training(), 2048, "ddp", 1, 4)
    per_token = (flops_per_token(shape, Training(), 2048) / (989e12 * f["mfu"])
                 + f["memory_bound_bytes"] * shape.n_layers * shape.d_model / 3350e9)
    assert r.tokens_per_sec == pytest.approx(1 / per_token)
    assert r.efficiency == 1.0
    # the model's band for runs inside one instance (one GPU included)
    b = f["bands"]["one_instance"]
    assert (r.low / r.tokens_per_sec, r.high / r.tokens_per_sec) == pytest.approx((b["low"], b["high"]))
    # a device with half the memory bandwidth is slower, by the memory-bound term only
    slow = per_device(Device("x", 80, 1, 989.0, None, 100.0, 1675.0), shape, Training(), 2048, "ddp", 1, 4)
    assert 1 / slow.tokens_per_sec - 1 / r.tokens_per_sec == pytest.approx(
        f["memory_bound_bytes"] * shape.n_layers * shape.d_model / 3350e9)


def test_qlora_keeps_litgpts_share_of_loras_rate():
    lora = per_device(H100_8, LLAMA3, Training(method="lora"), 4096, "ddp", 1, 1)
    q = per_device(H100_8, LLAMA3, Training(method="qlora"), 4096, "ddp", 1, 1)
    # both communicate only the adapters' gradients, hidden behind compute: the ratio is the compute's
    assert lora.efficiency == q.efficiency == 1.0
    assert q.tokens_per_sec == pytest.approx(lora.tokens_per_sec * 0.62)


def test_every_strategy_is_the_scale_out_model_and_its_band():
    """The ranking's tokens/s for every strategy is sharded.predict on the run's Case: the plan's
    rate, band and efficiency are the model's, times the devices."""
    bands = sharded.fitted()["bands"]
    for strategy, k in (("zero1", 1), ("fsdp", 1), ("fsdp", 2), ("hybrid", 2)):
        b = bands["one_instance" if k == 1 else "several_instances"]
        p = plan(H100_8, LLAMA3, Training(), 4096, k, strategies=(strategy,))
        case = case_of(H100_8, LLAMA3, replace(Training(), checkpointing=p.checkpointing), 4096, strategy, k, p.micro_batch)
        r = sharded.predict(case)
        assert p.tokens_per_sec == pytest.approx(r.tokens_per_sec * p.devices)
        assert p.efficiency == pytest.approx(r.efficiency)
        assert (p.low / p.tokens_per_sec, p.high / p.tokens_per_sec) == pytest.approx((b["low"], b["high"]))
    # the kinds: ZeRO-1 all-reduces once a step, FSDP gathers and reduce-scatters every micro-batch,
    # hybrid shard's cross-instance all-reduce rides the network
    assert case_of(H100_8, LLAMA3, Training(), 4096, "zero1", 1, 1).kind == sharded.GRAD_SHARD
    assert case_of(H100_8, LLAMA3, Training(), 4096, "fsdp", 2, 1).kind == sharded.FULL_SHARD
    hyb = case_of(H100_8, LLAMA3, Training(), 4096, "hybrid", 2, 1)
    assert hyb.kind == sharded.HYBRID_SHARD and hyb.link == 450e9 and hyb.inter_link == 3200e9 / 8 / 8


def test_an_8b_full_fine_tune_does_not_fit_one_24_gib_gpu_but_a_sharded_instance_of_eight():
    assert plan(A10G_1, LLAMA3, Training(), 4096, 1) is None
    p = plan(A10G_8, LLAMA3, Training(), 4096, 1)
    assert p is not None and p.strategy in ("zero2", "fsdp") and p.devices == 8
    assert p.memory.device_gib <= 24


def test_the_cheapest_strategy_in_communication_wins_where_several_fit():
    p = plan(H100_8, LLAMA3, Training(), 4096, 1)
    assert p.strategy == "zero1" and not p.checkpointing  # DDP does not fit 80 GiB; ZeRO-1 moves no more bytes than DDP


def test_checkpointing_only_where_nothing_fits_without_it():
    p = plan(A10G_8, LLAMA3, Training(), 4096, 1)
    without = plan(A10G_8, LLAMA3, Training(), 4096, 1, strategies=(p.strategy,))
    assert without.checkpointing == p.checkpointing
    assert p.checkpointing  # 24 GiB cannot hold 4,096 tokens of 8B activations beside the state


def test_a_pinned_strategy_is_the_only_one_tried():
    p = plan(H100_8, LLAMA3, Training(), 4096, 1, strategies=("fsdp",))
    assert p.strategy == "fsdp"
    assert plan(A10G_8, LLAMA3, Training(), 4096, 1, strategies=("ddp",)) is None


def test_hybrid_needs_several_instances_of_several_devices():
    assert plan(H100_8, LLAMA3, Training(), 4096, 1, strategies=("hybrid",)) is None
    assert plan(H100_8, LLAMA3, Training(), 4096, 2, strategies=("hybrid",)).strategy == "hybrid"


def test_what_would_make_it_fit_names_instances_strategy_and_lora():
    words = what_would_fit(A10G_1, LLAMA3, Training(), 4096, 4)
    assert words.startswith("24 GiB per device; one sequence of 4096 tokens needs ")
    assert "GiB on its one device with activation checkpointing" in words
    # the fewest instances that hold it, and the lighter method: the 16 GB frozen base and 4,096 tokens fit 24 GiB
    assert "needs 6 instances with FSDP full shard + activation checkpointing (--max-instances 6)" in words
    assert words.endswith(", or LoRA fits on one (--finetune lora)")
    lora = what_would_fit(A10G_1, LLAMA3, Training(method="qlora"), 65_536, 1, limit=2)
    assert "nothing fits within 2 instances" in lora and "--finetune" not in lora


def test_the_throughput_model_fits_a_transformer_by_strategy_not_by_a_wall(snapshot):

    from recommend_catalogs import NOW

    from advisor.estimate.throughput import Exclusion, ThroughputModel
    from lightning_module.contract.workload_facts import facts_for

    facts = replace(facts_for("resnet50"), transformer=LLAMA3, seq_len=4096)
    m = ThroughputModel(snapshot, facts, "resnet50-224px-1000c", now=NOW)
    small = m.evaluate(snapshot.instance_types["g5.xlarge"])
    assert isinstance(small, Exclusion)
    # the snapshot's A10G: 22.35 GiB usable
    assert small.reason.startswith("22.35 GiB per device; one sequence of 4096 tokens needs ")
    assert "needs 7 instances with FSDP full shard + activation checkpointing (--max-instances 7)" in small.reason
    big = m.evaluate(snapshot.instance_types["p5.48xlarge"])
    assert not isinstance(big, Exclusion)
    assert any(n.startswith("fits with ZeRO-1, micro-batch 1 x 4096 tokens") for n in big.notes)


def _measured(per_token: float, per_position: float = 0.0):
    """The probe's Activations record (result schema 8): two counted points and the fitted terms."""
    from lightning_module.contract.result import ActivationPoint, Activations

    pts = [ActivationPoint(batch_size=b, sequence_length=s, saved_bytes_per_layer=per_token * b * s,
                           input_bytes_per_layer=2.0 * 4096 * b * s, saved_bytes_outside_layers=0.0)
           for b, s in ((1, 128), (2, 256))]
    return Activations(layer_class="Block", layers=2, precision="bf16-mixed", points=pts,
                       bytes_per_token_per_layer=per_token, bytes_per_token_per_position_per_layer=per_position,
                       checkpointed_bytes_per_token_per_layer=2.0 * 4096)


def test_measured_activations_replace_the_count_in_the_fit(snapshot):
    """A probe's measured bytes per token per layer: the memory model takes them over its count from
    the shape, and the note says so; a smaller measured figure fits a larger micro-batch."""
    from recommend_catalogs import NOW

    from advisor.estimate.memory import Layout, activation_bytes_per_token_per_layer, estimate
    from advisor.estimate.throughput import ThroughputModel
    from lightning_module.contract.workload_facts import facts_for

    counted, _ = activation_bytes_per_token_per_layer(LLAMA3, Training(), 4096)
    e = estimate(LLAMA3, Training(), Layout("ddp", 1, 1), 1, 4096, measured_act_per_token_layer=2 * counted)
    blocks = next(t for t in e.terms if t.name == "activations: blocks")
    assert blocks.bytes == LLAMA3.n_layers * 4096 * 2 * counted and "measured by the probe" in blocks.source
    base = replace(facts_for("resnet50"), transformer=LLAMA3, seq_len=4096)
    # measured at a quarter of the count, with a term that grows with the length: another quarter at 4096
    measured = replace(base, activations=_measured(0.25 * counted, 0.25 * counted / 4096))
    assert measured.measured_act_per_token_layer(4096) == pytest.approx(0.5 * counted)
    notes = {}
    for name, facts in (("counted", base), ("measured", measured)):
        th = ThroughputModel(snapshot, facts, "resnet50-224px-1000c", now=NOW).evaluate(snapshot.instance_types["p5.48xlarge"])
        notes[name] = next(n for n in th.notes if n.startswith("fits with"))
    assert "as your probe measured them" in notes["measured"] and "probe measured" not in notes["counted"]
    mb = {k: int(v.split("micro-batch ")[1].split(" x")[0]) for k, v in notes.items()}
    assert mb["measured"] > mb["counted"] == 1, notes
    assert all("checkpointing" not in n for n in notes.values())  # the same strategy, more sequences


def test_a_probe_results_activations_reach_the_workload_facts():
    from factories import probe_result

    from lightning_module.contract.result import WorkloadShape
    from lightning_module.contract.workload_facts import facts_from_probes

    plain = probe_result("g5.2xlarge", 40.0, accelerator="gpu", model="m:LM")
    shape = WorkloadShape(data_source="module", tokens_per_sample=512.0, tokens_counted_by="batch",
                          activations=_measured(30_000.0, 2.0))
    counted = plain.model_copy(update={"shape": shape, "tokens_per_sec": 40.0 * 512})
    assert facts_from_probes("m:LM", 224, [plain]).measured_act_per_token_layer(1024) is None
    assert facts_from_probes("m:LM", 224, [plain, counted]).measured_act_per_token_layer(1024) == 30_000.0 + 2.0 * 1024


def test_fsdp_no_sync_holds_the_gradient_and_reduce_scatters_once_a_step():
    # litgpt's Llama 2 7B full fine-tune on 4 x A10G (micro-batch 4 x 512) runs out of memory: a run
    # that accumulates under no_sync does not fit there; one that reduce-scatters every micro-batch does
    a10g_4 = Device("g5.12xlarge", 24, 4, 125.0, 32.0, 40.0)
    llama2 = parse_shape("llama-2-7b")
    assert plan(a10g_4, llama2, Training(), 512, 1, strategies=("fsdp",)) is not None
    assert plan(a10g_4, llama2, Training(no_sync_accumulation=True), 512, 1, strategies=("fsdp",)) is None
    from advisor.estimate.scaling import allreduce_seconds
    g = w = 2.0 * 8e9
    every = sharded.Case(sharded.FULL_SHARD, 8, 8, 4096, 8, 1.0, 1.0, w, g, 100e9)
    once = replace(every, no_sync=True)
    # gathers twice (each half an all-reduce) + the reduce-scatter, every micro-batch
    assert sharded.comm_seconds(every) == pytest.approx(float(allreduce_seconds(8, w + g / 2, 100e9)))
    # the reduce-scatter once in 8 micro-batches
    assert sharded.comm_seconds(once) == pytest.approx(float(allreduce_seconds(8, w + g / 16, 100e9)))
