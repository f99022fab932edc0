"""Which strategy a transformer fine-tune or pre-training runs on k instances of a type: the least
costly in throughput among those whose memory fits (advisor/estimate/memory.py), its micro-batch
and what it costs; and for a type on which nothing fits, what would.

Throughput of one device, tokens/s = peak bf16 FLOP/s x MFU / training FLOPs per token:
- FLOPs per token: 6N + 12 L d_q s (Chowdhery et al. 2022, PaLM, arXiv:2204.02311, appendix B);
  LoRA/QLoRA compute no weight gradient of the frozen base: 4N (forward 2N, input gradients 2N);
  activation checkpointing runs each block's forward again: + 2N (Korthikanti et al. 2022, section 5).
- MFU: what torchtitan publishes for Llama 3/3.1 8B under FSDP2 in bf16 (advisor/data/llm_throughput.json).
- QLoRA's dequantization: the slowdown litgpt's resource tables measured against LoRA (same file).
- Communication: the data-parallel model of advisor/estimate/scaling.py (ring all-reduce, overlapped
  with backward): DDP/ZeRO-1/ZeRO-2 move a gradient all-reduce's bytes once per optimizer step
  (ZeRO-1/2 add nothing over DDP; Rajbhandari et al. 2020, arXiv:1910.02054, section 7); FSDP full
  shard gathers the weights forward and backward and reduce-scatters the gradients every
  micro-batch: 1.5 times DDP's bytes when every weight trains (section 7.2.2), the whole frozen
  base gathered under LoRA; hybrid shard does FSDP inside an instance and all-reduces its shard across them.
  The bytes come from advisor/estimate/sharded.py; the share of compute they hide behind is the
  overlap fitted there on published sharded runs (advisor/data/sharded_fit.json).
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
from .scaling import allreduce_seconds, overlap_efficiency
from .sharded import FULL_SHARD, GRAD_SHARD, comm_bytes, fitted, training_flops_per_token

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
                  sustained_network_gbps(it)[0])


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


def per_device_tokens_per_sec(dev: Device, shape: TransformerShape, training: Training,
                              seq_len: int) -> tuple[float, float, float]:
    c = throughput_constants()
    mfu = c["mfu"]
    f = flops_per_token(shape, training, seq_len)
    slow = c["qlora_slowdown"]["value"] if training.method == QLORA else 1.0
    rate = dev.peak_tflops * 1e12 / f * slow
    return rate * mfu["value"], rate * mfu["low"], rate * mfu["high"]


def _efficiency(dev: Device, strategy: str, instances: int, micro_batch: int, seq_len: int, global_tokens: int,
                per_dev_rate: float, grad_bytes: float, weight_bytes: float, no_sync: bool = False) -> float:
    """Communication efficiency. An all-gather or a reduce-scatter of X bytes moves half an
    all-reduce's: FSDP gathers every weight, frozen ones included, forward and backward
    (allreduce_seconds(n, W)) and reduce-scatters the trained gradients (allreduce_seconds(n, G) / 2),
    every micro-batch, or once a step where the run accumulates under no_sync."""
    n = dev.per_instance * instances
    if n == 1:
        return 1.0
    intra = (dev.interconnect_gbs or 0) * 1e9
    inter = (dev.network_gbps or 0) * 1e9 / 8 / dev.per_instance  # the instance's network, shared by its devices
    link = intra if instances == 1 else min(x for x in (intra or inter, inter) if x)
    if not link:
        return 0.0
    micro_tokens = micro_batch * seq_len
    micro_s = micro_tokens / per_dev_rate
    accum = max(1, round(global_tokens / (micro_tokens * n)))
    if strategy in (DDP, ZERO1, ZERO2):
        comm = float(allreduce_seconds(n, comm_bytes(GRAD_SHARD, grad_bytes, weight_bytes), link)) / accum  # once per step
    elif strategy == FSDP:
        comm = float(allreduce_seconds(n, _fsdp_bytes(grad_bytes, weight_bytes, accum if no_sync else 1), link))
    else:  # hybrid: FSDP inside the instance, the shard all-reduced across instances once per step
        m = dev.per_instance
        comm = float(allreduce_seconds(m, _fsdp_bytes(grad_bytes, weight_bytes, accum if no_sync else 1), intra or inter))
        if instances > 1:
            comm += float(allreduce_seconds(instances, grad_bytes / dev.per_instance, inter)) / accum
    # The overlap share fitted on published sharded runs (advisor/data/sharded_fit.json).
    return float(overlap_efficiency(micro_s, comm, fitted()["overlap"]))


def _fsdp_bytes(grad_bytes: float, weight_bytes: float, rounds: int) -> float:
    """FSDP's all-reduce-equivalent bytes a micro-batch: the weights gathered every micro-batch, the
    gradients' reduce-scatter spread over the `rounds` micro-batches it waits for (1: every one)."""
    return comm_bytes(FULL_SHARD, grad_bytes / rounds, weight_bytes)


def scale_out_band(devices: int, low: float, high: float) -> tuple[float, float]:
    """The (low, high) multipliers on a plan's tokens/s: the MFU band of one device, widened on more
    than one to the scale-out model's leave-one-out band (advisor/data/sharded_fit.json: the central
    80% of its errors on published sharded runs), whichever is wider on each side. The envelope,
    not the product: the scale-out residuals already hold those runs' compute error."""
    if devices <= 1:
        return low, high
    b = fitted()["band"]
    return min(low, b["low"]), max(high, b["high"])


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
            mid, low, high = per_device_tokens_per_sec(dev, shape, t, seq_len)
            grads = (shape.params() if t.method == FULL else shape.lora_params(t.lora_rank, t.lora_targets)) * 2.0
            eff = _efficiency(dev, strategy, instances, mb, seq_len, global_tokens, mid, grads, shape.params() * 2.0,
                              t.no_sync_accumulation)
            if eff <= 0:
                continue
            lo_f, hi_f = scale_out_band(n, low / mid, high / mid)
            p = StrategyFit(strategy, ckpt, instances, n, mb, mid * n * eff, mid * lo_f * n * eff, mid * hi_f * n * eff, eff,
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
