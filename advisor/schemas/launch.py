"""The launch commands' documents: the plan (a dry run), what was launched, status, cancel."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from catalog.models import Market

from ..ec2.manifest import LaunchState
from .base import DOC, Row, schema_field, version_field


class PlannedRow(Row):
    instance_type: str
    arch: str
    ami: str
    market: Market
    usd_per_hour: float | None = Field(description="null: the catalog has no price for it")
    max_cost_usd: float | None = Field(description="if it runs its full --max-minutes; null: price unknown")
    check_error: str | None = Field(description="why it would be skipped (quota, AMI, EC2 DryRun); null: ok")


class LaunchPlanDocument(BaseModel):
    model_config = DOC
    schema_name: Literal["launch-plan"] = schema_field("launch-plan")
    schema_version: Literal[1] = version_field(1)
    region: str
    max_minutes: int
    planned: list[PlannedRow]


class LaunchedRow(Row):
    instance_type: str
    state: LaunchState
    instance_id: str | None
    error: str | None


class LaunchDocument(BaseModel):
    model_config = DOC
    schema_name: Literal["launch"] = schema_field("launch")
    schema_version: Literal[1] = version_field(1)
    run_id: str
    region: str
    instances: list[LaunchedRow]


class StatusRow(Row):
    instance_type: str
    instance_id: str | None
    market: str | None
    state: str = Field(description="EC2's state, or 'launch failed' / 'not found'")
    launched_at: datetime | None
    result: Literal["uploaded", "failed (log only)", "none", "not yet", "unknown"]
    error: str | None


class LaunchStatusDocument(BaseModel):
    model_config = DOC
    schema_name: Literal["launch-status"] = schema_field("launch-status")
    schema_version: Literal[1] = version_field(1)
    run_id: str
    instances: list[StatusRow]


class CancelRow(Row):
    instance_type: str | None
    instance_id: str
    previous_state: str
    state: str


class LaunchCancelDocument(BaseModel):
    model_config = DOC
    schema_name: Literal["launch-cancel"] = schema_field("launch-cancel")
    schema_version: Literal[1] = version_field(1)
    run_id: str
    instances: list[CancelRow] = Field(description="empty: nothing was running")
