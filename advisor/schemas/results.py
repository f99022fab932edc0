"""The results commands' documents: list, show (and probe), export, pull."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from lightning_module.contract.result import ProbeResult, ResultSource

from ..ec2 import pull
from .base import DOC, Row, model_of, schema_field, version_field


class ResultRow(Row):
    """One stored result, summarised (`results list`)."""

    result_id: str
    workload_id: str
    workload: str = Field(description="the model: a builtin name or the user's 'package.module:Class'")
    init_args: dict = Field(description="the LightningModule's constructor arguments as built (its recorded "
                                        "defaults filled in; results of schema 5 and before: those given)")
    data_init_args: dict = Field(description="the DataModule's, likewise")
    instance_type: str | None = Field(description="null when the probe ran off EC2 and none was given")
    accelerator: str = Field(description="cpu, gpu, ... as the probe ran it")
    devices: int
    precision: str
    batch_size: int
    samples_per_sec: float = Field(description="the stored (confirmed) figure")
    ci_low: float = Field(description="95% confidence interval of samples_per_sec")
    ci_high: float
    speedup_over_baseline: float | None = Field(
        description="samples_per_sec / the ladder's baseline rung (null: no ladder, or a baseline "
                    "that moved between the ladder and the confirmation)")
    source: ResultSource = Field(
        description="what measured it: advisor probe, or ThroughputCallback in a training run")
    finished_at: datetime


class ResultsListDocument(BaseModel):
    model_config = DOC
    schema_name: Literal["results-list"] = schema_field("results-list")
    schema_version: Literal[1] = version_field(1)
    results: list[ResultRow] = Field(description="newest first")


class ResultDocument(BaseModel):
    """One whole probe result (`results show`, `probe`): 'results import' reads it back."""

    model_config = DOC
    schema_name: Literal["result"] = schema_field("result")
    schema_version: Literal[1] = version_field(1)
    result: ProbeResult


class ResultsExportDocument(BaseModel):
    """Every stored result the filters keep, whole: 'results import' reads it back."""

    model_config = DOC
    schema_name: Literal["results-export"] = schema_field("results-export")
    schema_version: Literal[1] = version_field(1)
    results: list[ProbeResult] = Field(description="newest first")


class ResultsImportDocument(BaseModel):
    model_config = DOC
    schema_name: Literal["results-import"] = schema_field("results-import")
    schema_version: Literal[1] = version_field(1)
    store: str = Field(description="the results store imported into")
    imported: list[str] = Field(description="result ids added")
    already_stored: list[str] = Field(description="result ids the store had (skipped)")
    invalid: list[str] = Field(description="one line per bad file or entry, naming it (the exit status is then 2)")


PullRow = model_of(pull.PullRow)  # the record, typed where it is built (advisor/ec2/pull.py)


class ResultsPullDocument(BaseModel):
    model_config = DOC
    schema_name: Literal["results-pull"] = schema_field("results-pull")
    schema_version: Literal[1] = version_field(1)
    runs: list[PullRow] = Field(description="one row per launched instance")
