"""The `advisor recommend --format json` document: the ranked (or closest) candidates, the probe
plan and the commands that run it, what was excluded. The candidates, the probes, the probe plan
and the alternatives are records typed where they are built (advisor/recommend/rows.py, planner.py),
each field with its JSON description; their models here are derived from them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from ..recommend import planner, rows
from ..recommend.jobspec import JobSpec
from ..recommend.rows import CandidateRow, ProbeRow
from .base import DOC, Row, model_of, schema_field, version_field

# The records are typed once, where they are built; their models are derived from them (base.model_of).
Candidate = model_of(CandidateRow)
ProbeNext = model_of(ProbeRow)
ProbePlan = model_of(rows.ProbePlan)
Alternative = model_of(planner.Alternative)


class Command(Row):
    """A command to run: its arguments (no shell quoting needed), and what it is for."""

    argv: list[str]
    command: str = Field(description="the same command as one shell line (argv shell-quoted), to paste")
    purpose: str


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
