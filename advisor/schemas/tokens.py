"""The `advisor recommend --model-shape ... --format json` document: a token workload's ranked
(instance type, count, strategy) rows, each with its memory ledger (advisor/estimate/memory.py),
tokens/s and $ per million tokens (advisor/recommend/llm.py builds the fields)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from catalog.models import Market

from ..estimate.memory import METHODS, STRATEGIES
from .base import DOC, Row, schema_field, version_field


class MemoryTerm(Row):
    name: str
    gib: float
    source: str = Field(description="where the bytes come from")


class Margin(Row):
    name: str
    share: float = Field(description="of the peak, added before comparing with the device's memory")
    source: str


class Memory(Row):
    peak_gib: float = Field(description="one device's peak, as torch.cuda.max_memory_allocated would count it")
    device_gib: float = Field(description="what the device must have: the peak, the margin and the CUDA context")
    terms: list[MemoryTerm]
    optimizer_step: list[MemoryTerm] = Field(description="added to the state at the optimizer step, instead of the activations")
    runtime: MemoryTerm
    margin: Margin
    notes: list[str]


class TokenPlan(Row):
    strategy: Literal[STRATEGIES]
    strategy_words: str
    activation_checkpointing: bool
    instances: int
    devices: int = Field(description="all GPUs of all instances")
    micro_batch: int = Field(description="sequences per GPU per forward")
    tokens_per_sec: float = Field(description="all devices together")
    tokens_per_sec_low: float
    tokens_per_sec_high: float
    communication_efficiency: float
    memory: Memory


class TokenRow(Row):
    rank: int | None = Field(description="order under the objective; null for the closest rows when nothing is feasible")
    instance_type: str
    accelerator: str
    count: int
    region: str
    market: Market
    usd_per_hour: float = Field(description="per instance")
    hours: float
    cost_usd: float
    tokens_per_sec: float
    tokens_per_sec_per_gpu: float
    usd_per_million_tokens: float
    feasible: bool
    reason: str | None
    plan: TokenPlan


class ModelShape(Row):
    name: str
    parameters: int
    source: str
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    vocab: int


class TrainingSetup(Row):
    method: Literal[METHODS]
    precision: str
    optimizer: str
    lora_rank: int
    lora_targets: list[str]
    no_sync_accumulation: bool = Field(description="--fsdp-no-sync: the script accumulates gradients under FSDP's "
                                       "no_sync(), so every GPU holds the unsharded gradient between optimizer steps "
                                       "and reduce-scatters it once a step")


class Excluded(Row):
    instance_type: str
    reason: str = Field(description="what would make it fit")


class RecommendTokensDocument(BaseModel):
    model_config = DOC
    schema_name: Literal["recommend-tokens"] = schema_field("recommend-tokens")
    # 2: training gains no_sync_accumulation (--fsdp-no-sync); tokens_per_sec and its low/high change
    # meaning: the calibrated sharded step-time model, on one GPU and many, and its leave-one-out band
    # for runs of the plan's reach, one instance or several (1: peak x torchtitan's MFU band, widened
    # to the model's band on more than one GPU). Nothing reads
    # these documents back; a version-1 document differs only in lacking no_sync_accumulation.
    schema_version: Literal[2] = version_field(2)
    model_shape: ModelShape
    training: TrainingSetup
    tokens: float
    seq_len: int
    budget_usd: float
    deadline_hours: float
    objective: Literal["cheapest", "fastest"]
    max_instances: int
    strategy: str | None = Field(description="the pinned strategy; null: searched")
    global_batch_tokens: int
    feasible: bool
    recommendations: list[TokenRow]
    excluded: list[Excluded]
    warnings: list[str]
