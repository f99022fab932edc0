"""The `advisor recommend --format json` document: the ranked (or closest) candidates, the probe
plan and the commands that run it, what was excluded. Each candidate field is defined where the
row is built (advisor/recommend/rows.py: CandidateRow); the descriptions here are for readers of
the JSON Schema."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..recommend.jobspec import JobSpec
from .base import DOC, Row, schema_field, version_field

Market = Literal["on-demand", "spot", "spot+od-fallback"]
Source = Literal["measured", "reference", "estimated"]


class SameCost(Row):
    count: int
    hours: float


class GpuAndCpuVariant(Row):
    gain: float = Field(description="expected: together / the GPUs alone - 1")
    low: float
    high: float
    source: Literal["measured", "estimated"]
    basis: dict[str, Any] = Field(description="how the gain was worked out (advisor/estimate/gpu_and_cpu.py)")


class Candidate(Row):
    rank: int | None = Field(description="order under the objective; null for the closest candidates")
    instance_type: str
    variant: Literal["gpu_and_cpu"] | None = Field(
        description="null: the GPUs alone; gpu_and_cpu: the host's CPU training beside them (one instance; "
                    "its throughput, time and cost are the pair's)")
    count: int = Field(description="instances running data-parallel")
    region: str
    also_regions: list[str] = Field(description="the same offer at the same price in these regions too")
    also_counts: list[SameCost] = Field(description="cheapest: more instances at the same cost, and their time")
    market: Market
    samples_per_sec: float = Field(description="all `count` instances together")
    throughput_source: Source
    throughput_low: float
    throughput_high: float
    hours: float = Field(description="expected; interruption losses and --setup-minutes included")
    hours_pessimistic: float
    cost_usd: float
    hours_at_confidence: float = Field(description="what the deadline is checked against (job.confidence)")
    cost_usd_at_confidence: float = Field(description="what the budget is checked against")
    samples_per_dollar: float | None = Field(description="null for a run that costs nothing")
    tokens_per_sec: float | None = Field(description="all `count` instances together, for a workload whose probe "
                                                     "counted tokens (job.tokens_per_sample); null otherwise")
    usd_per_million_tokens: float | None = Field(description="cost_usd over the job's tokens, per million; null: "
                                                             "the workload's probe counted no tokens")
    mfu: float | None = Field(description="model FLOPs utilisation, derived: samples/s x the probe's training FLOPs "
                                          "per sample over the instances' GPU peak at the precision; null where "
                                          "either is unknown or the workload counted no tokens")
    feasible: bool
    reason: str | None = Field(description="why it is not feasible; null when it is")
    budget_needed_usd: float | None = Field(description="the budget that makes it feasible; null: within")
    deadline_needed_hours: float | None = Field(description="the deadline that makes it feasible; null: within")
    usd_per_hour: float = Field(description="per instance")
    precision: str
    scale_out_efficiency: float
    expected_interruptions: float
    interruption_bucket: str | None = Field(description="spot: the bucket's label; null on demand")
    obtainable: Literal["yes", "no", "unknown"] | None = Field(description="--check-account; null: not checked")
    obtainable_reason: str | None
    gpu_and_cpu: GpuAndCpuVariant | None = Field(
        description="the host's CPU training beside the GPUs: offered only when its gain's band is above zero "
                    "(on the variant's row and its GPUs-alone row)")
    notes: list[str] = Field(description="the table's note column, part by part")
    basis: dict[str, Any] = Field(description="what the throughput rests on (docs/recommend.md#json-output)")


class ProbeNext(Row):
    instance_type: str
    throughput_source: Source
    samples_per_sec: float
    throughput_low: float
    throughput_high: float
    region: str
    market: Literal["on-demand", "spot"]
    usd_per_hour: float
    probe_hours: float
    probe_cost_usd: float
    gain_usd: float = Field(description="expected drop of the pick's true cost (after the probes above it)")
    p_change: float = Field(description="chance it changes the pick")
    saving_if_changed_usd: float
    covers: list[str] = Field(description="sizes of the same device whose estimates it re-anchors")
    reason: str
    cpu_too: bool = Field(description="probe it with --cpu-too: the host's CPU beside the GPU might add, "
                                      "or its GPU + CPU variant rests on an estimate")
    probe_hours_basis: str = Field(description="what probe_hours rests on: the store's past probes of the workload "
                                               "on its device class, or the ladder's bound where there are none")


class Outlook(Row):
    p_within: float | None = Field(description="null: nothing fits in any outcome")
    p90_regret: float | None = Field(description="null: unbounded (the pick misses in more than 10% of outcomes)")
    p_miss: float | None = Field(description="over the outcomes where something fits; null: there are none")
    p_any: float = Field(description="something fits, over all outcomes")
    p_fit: float = Field(description="the pick fits, over all outcomes")


class ProbePlan(Row):
    has_pick: bool
    usd: float = Field(description="the plan's probes together")
    hours: float = Field(description="wall time: the probes run in parallel")
    now: Outlook | None
    after: Outlook | None
    within: float = Field(description="the share 'within' means")
    why_empty: str | None
    not_affordable: list[str] = Field(description="worth probing, but past --probe-budget")
    probe_budget_usd: float | None


class Command(Row):
    """A command to run: its arguments (no shell quoting needed), and what it is for."""

    argv: list[str]
    command: str = Field(description="the same command as one shell line (argv shell-quoted), to paste")
    purpose: str


class Alternative(Row):
    option: str = Field(description="the option, as typed (--market any)")
    instance_type: str
    variant: Literal["gpu_and_cpu"] | None = Field(description="as a recommend row's")
    count: int
    region: str
    market: Market
    hours: float
    cost_usd: float
    confidence: float


class Excluded(Row):
    instance_type: str
    reason: str


class CatalogUsed(Row):
    source: str = Field(description="where the specs and list prices come from: snapshot, cache, a file")
    fetched_at: datetime = Field(description="when the catalog was fetched (UTC)")
    provenance: str


class RecommendJob(JobSpec):
    """The job as planned: its work always in whole samples (--tokens converted by the probe's tokens per sample)."""

    samples: int = Field(gt=0, description="whole samples: as given, or --tokens over tokens_per_sample, rounded up")


class RecommendDocument(BaseModel):
    model_config = DOC
    schema_name: Literal["recommend"] = schema_field("recommend")
    # 2: candidates gain tokens_per_sec, usd_per_million_tokens and mfu; the job gains tokens and
    # tokens_per_sample, and its samples are derived from --tokens for a token-counting workload.
    schema_version: Literal[2] = version_field(2)
    workload_id: str
    job: RecommendJob
    feasible: bool = Field(description="something meets the budget and the deadline")
    candidates_evaluated: int
    prices: str | None = Field(description="the --prices file that applied; null for list prices")
    catalog: CatalogUsed = Field(description="the catalog the candidates were priced from")
    recommendations: list[Candidate]
    closest: list[Candidate] = Field(description="when nothing is feasible: the closest, each with what it needs")
    probe_next: list[ProbeNext]
    probe_plan: ProbePlan
    probe_commands: list[Command] = Field(description="what measures probe_next: launch, then pull")
    would_fit_with: list[Alternative]
    excluded: list[Excluded]
    warnings: list[str]
