"""Which strategy a transformer fine-tune or pre-training runs on k instances of a type: the least
costly in throughput among those whose memory fits (advisor/estimate/memory.py), its micro-batch
and what it costs; and for a type on which nothing fits, what would.

Throughput: the calibrated sharded step-time model of advisor/estimate/sharded.py, the one model of
a sharded step's time, on one GPU and many, for every strategy: compute = tokens x (training FLOPs
per token / (peak bf16 x the fitted matmul efficiency) + the fitted memory-bound bytes per n_layers
x d_model / HBM bandwidth), communication exposed past the fitted overlap, and the leave-one-out
band of that fit (advisor/data/sharded_fit.json, fitted on published FSDP runs by
benchmarks/llm_scale_out.py). This module only says what the run is, as a sharded.Case:
- FLOPs per token: 6N + 12 L d_q s (Chowdhery et al. 2022, PaLM, arXiv:2204.02311, appendix B);
  LoRA/QLoRA compute no weight gradient of the frozen base: 4N (forward 2N, input gradients 2N);
  activation checkpointing runs each block's forward again: + 2N (Korthikanti et al. 2022, section 5).
- QLoRA's dequantization: the slowdown litgpt's resource tables measured against LoRA
  (advisor/data/llm_throughput.json), as the compute rate's share left.
- Communication, by strategy: DDP/ZeRO-1/ZeRO-2 move a gradient all-reduce's bytes once per
  optimizer step (ZeRO-1/2 add nothing over DDP; Rajbhandari et al. 2020, arXiv:1910.02054,
  section 7); FSDP full shard gathers the weights forward and backward and reduce-scatters the
  gradients every micro-batch: 1.5 times DDP's bytes when every weight trains (section 7.2.2), the
  whole frozen base gathered under LoRA; hybrid shard does FSDP inside an instance and all-reduces
  its shard across them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from catalog import accelerators as acc
from catalog.hardware import best_dtype, device_count, device_share, gpu_spec, sustained_network_gbps
from catalog.models import InstanceType
from lightning_module.contract.transformer_shape import TransformerShape

from .memory import (
    DDP,
    DEFAULT_GLOBAL_BATCH_TOKENS,
    FSDP,
    FULL,
    HYBRID,
    LORA,
    QLORA,
    STRATEGY_WORDS,
    ZERO1,
    ZERO2,
    Layout,
    MemoryEstimate,
    Training,
    estimate,
    largest_micro_batch,
)
from .sharded import FULL_SHARD, GRAD_SHARD, HYBRID_SHARD, Case, Prediction, link_bytes_per_s, predict, training_flops_per_token

DATA = Path(__file__).resolve().parents[1] / "data" / "llm_throughput.json"
# Cheapest in communication first: the order a tie in throughput is broken in.
SEARCH_ORDER = (DDP, ZERO1, ZERO2, HYBRID, FSDP)


@lru_cache(maxsize=1)
def throughput_constants() -> dict:
    return json.loads(DATA.read_text())


def flops_per_token(shape: TransformerShape, training: Training, seq_len: int) -> float:
    return training_flops_per_token(shape.params(), shape.n_layers, shape.q_dim, seq_len,
                                    weights_train=training.method == FULL, checkpointing=training.checkpointing)


@dataclass(frozen=True)
class Device:
    """One instance type as the search needs it."""

    name: str
    memory_gib: float
    per_instance: int  # devices
    peak_tflops: float  # dense bf16 (or fp16) of one device
    interconnect_gbs: float | None  # between its devices, GB/s per direction
    network_gbps: float | None  # between instances
    hbm_gbs: float | None = None  # one device's memory bandwidth (its share of it on a fractional GPU), GB/s


def device_of(it: InstanceType, memory_gib: float | None = None) -> Device | None:
    """A GPU instance type as the search sees it; None where it has no 16-bit peak the catalog knows
    (the throughput arithmetic needs one) or no memory figure."""
    spec = gpu_spec(it)
    memory = memory_gib if memory_gib is not None else it.accelerator_memory_gib
    dtype = best_dtype(it)
    if it.accelerator_kind != "gpu" or spec is None or not memory or dtype not in ("bf16", "fp16"):
        return None
    peak = acc.peak_tflops(spec, dtype)
    if not peak:
        return None
    return Device(it.name, memory, device_count(it), peak * device_share(it), it.interconnect_gbs,
                  sustained_network_gbps(it)[0], spec.bandwidth_gbs * device_share(it))


@dataclass(frozen=True)
class StrategyFit:
    strategy: str
    checkpointing: bool
    instances: int
    devices: int
    micro_batch: int
    tokens_per_sec: float  # all devices of all instances
    low: float
    high: float
    efficiency: float  # communication efficiency, 1 = none exposed
    memory: MemoryEstimate

    @property
    def words(self) -> str:
        return STRATEGY_WORDS[self.strategy] + (" + activation checkpointing" if self.checkpointing else "")

    def as_dict(self) -> dict:
        return {"strategy": self.strategy, "strategy_words": self.words, "activation_checkpointing": self.checkpointing,
                "instances": self.instances, "devices": self.devices, "micro_batch": self.micro_batch,
                "tokens_per_sec": round(self.tokens_per_sec, 1), "tokens_per_sec_low": round(self.low, 1),
                "tokens_per_sec_high": round(self.high, 1), "communication_efficiency": round(self.efficiency, 4),
                "memory": self.memory.as_dict()}


KIND_OF = {DDP: GRAD_SHARD, ZERO1: GRAD_SHARD, ZERO2: GRAD_SHARD, FSDP: FULL_SHARD, HYBRID: HYBRID_SHARD}


def case_of(dev: Device, shape: TransformerShape, training: Training, seq_len: int, strategy: str, instances: int,
            micro_batch: int, global_tokens: int = DEFAULT_GLOBAL_BATCH_TOKENS) -> Case:
    """The run as the sharded step-time model sees it. Gradients: the trained weights' (the adapters
    under LoRA) in bf16; gathers: every weight, the frozen base's too."""
    n = dev.per_instance * instances
    micro_tokens = micro_batch * seq_len
    kind = KIND_OF[strategy]
    trained = shape.params() if training.method == FULL else shape.lora_params(training.lora_rank, training.lora_targets)
    if kind == HYBRID_SHARD:  # FSDP over the instance's own link, the shard's all-reduce over its network
        link = link_bytes_per_s(dev.per_instance, 1, dev.interconnect_gbs, dev.network_gbps)
    else:
        link = link_bytes_per_s(dev.per_instance, instances, dev.interconnect_gbs, dev.network_gbps)
    inter = (dev.network_gbps or 0.0) * 1e9 / 8.0 / dev.per_instance
    share = throughput_constants()["qlora_slowdown"]["value"] if training.method == QLORA else 1.0
    return Case(kind, n, dev.per_instance, micro_tokens, max(1, round(global_tokens / (micro_tokens * n))),
                flops_per_token(shape, training, seq_len), dev.peak_tflops * 1e12, shape.params() * 2.0, trained * 2.0,
                link, shape.n_layers * shape.d_model * (4.0 / 3.0 if training.checkpointing else 1.0),
                (dev.hbm_gbs or 0.0) * 1e9, no_sync=training.no_sync_accumulation, inter_link=inter,
                compute_share=share)


def per_device(dev: Device, shape: TransformerShape, training: Training, seq_len: int, strategy: str, instances: int,
               micro_batch: int, global_tokens: int = DEFAULT_GLOBAL_BATCH_TOKENS) -> Prediction:
    """One device's tokens/s, its band and its communication efficiency (sharded.predict)."""
    return predict(case_of(dev, shape, training, seq_len, strategy, instances, micro_batch, global_tokens))


def plan(dev: Device, shape: TransformerShape, training: Training, seq_len: int, instances: int,
         strategies: tuple[str, ...] = SEARCH_ORDER, global_tokens: int = DEFAULT_GLOBAL_BATCH_TOKENS,
         measured_act: float | None = None) -> StrategyFit | None:
    """The fastest (strategy, checkpointing) whose memory fits on `instances` of the type, or None.
    `measured_act`: the probe's bytes per token per layer, in place of the count from the shape."""
    best: StrategyFit | None = None
    n = dev.per_instance * instances
    for strategy in strategies:
        if n == 1 and strategy != DDP:
            continue  # one device: nothing to shard, every strategy is the plain one
        if strategy == HYBRID and (instances == 1 or dev.per_instance == 1):
            continue  # hybrid is FSDP inside instances, replicated across them: needs both
        layout = Layout(strategy, n, dev.per_instance)
        for ckpt in (False, True):
            t = replace(training, checkpointing=ckpt)
            mb = largest_micro_batch(shape, t, layout, seq_len, dev.memory_gib, cap=max(1, global_tokens // seq_len),
                                     measured_act_per_token_layer=measured_act)
            if mb == 0:
                continue
            r = per_device(dev, shape, t, seq_len, strategy, instances, mb, global_tokens)
            if r.efficiency <= 0:
                continue
            p = StrategyFit(strategy, ckpt, instances, n, mb, r.tokens_per_sec * n, r.low * n, r.high * n, r.efficiency,
                            estimate(shape, t, layout, mb, seq_len, measured_act))
            if best is None or p.tokens_per_sec > best.tokens_per_sec * 1.0001:
                best = p
            break  # checkpointing only where nothing fits without it
    return best


def what_would_fit(dev: Device, shape: TransformerShape, training: Training, seq_len: int, max_instances: int,
                   strategies: tuple[str, ...] = SEARCH_ORDER, limit: int = 64, tried: int | None = None,
                   measured_act: float | None = None) -> str:
    """An excluded type's "what would make it fit": the fewest instances that would, with their
    strategy, and the lighter fine-tuning methods that would fit on one. `tried`: the counts
    already found too few (default: all up to max_instances)."""
    options = []
    for k in range((max_instances if tried is None else tried) + 1, limit + 1):
        p = plan(dev, shape, training, seq_len, k, strategies, measured_act=measured_act)
        if p is not None:
            options.append(f"needs {k} instances with {p.words}" + (f" (--max-instances {k})" if k > max_instances else ""))
            break
    for method, flag in ((LORA, "lora"), (QLORA, "qlora")):
        if training.method in (method, QLORA):
            continue
        # the probe measured full training's activations: a LoRA run's differ, so the count from the shape
        if plan(dev, shape, replace(training, method=method), seq_len, 1, strategies) is not None:
            options.append(f"LoRA{'' if method == LORA else ' in 4 bits (QLoRA)'} fits on one (--finetune {flag})")
            break
    need = estimate(shape, replace(training, checkpointing=True), Layout(FSDP if dev.per_instance > 1 else DDP,
                    dev.per_instance, dev.per_instance), 1, seq_len, measured_act).device_gib
    where = ("on its one device with activation checkpointing" if dev.per_instance == 1 else
             f"per device sharded over its {dev.per_instance} devices with activation checkpointing")
    head = f"{dev.memory_gib:g} GiB per device; one sequence of {seq_len} tokens needs {need:.1f} GiB {where}"
    return head + (": " + ", or ".join(options) if options else f"; nothing fits within {limit} instances")
