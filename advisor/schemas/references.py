"""The references commands' documents: list (the published rows) and check (the model against them)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, create_model

from ..estimate import evaluate
from ..estimate.references import Measurement
from .base import DOC, Row, model_of, schema_field, version_field

# A reference row as the dataset holds it (advisor/estimate/references.py: Measurement, where each
# field is described), with the probe's workload id beside it.
ReferenceRow = create_model(
    "ReferenceRow", __base__=Row, workload_id=(str, Field(description="the probe's id for this workload")),
    **{name: (f.annotation, f) for name, f in Measurement.model_fields.items()})


class ReferencesListDocument(BaseModel):
    model_config = DOC
    schema_name: Literal["references-list"] = schema_field("references-list")
    # 2: a row's samples_per_sec counts its rate_unit (tokens, mel frames, audio samples where the
    # source publishes those), no longer always samples; the reference dataset's schema 3 fields added.
    schema_version: Literal[2] = version_field(2)
    references: list[ReferenceRow]  # type: ignore[valid-type]


class CpuScaling(Row):
    exponent: float = Field(description="throughput grows as peak^exponent above the CPU anchor's peak")
    anchor_peak_tflops: float | None = Field(description="the measured CPU anchor's peak; null without one")
    channels_exponent: float = Field(
        description="throughput grows as (DDR channels per socket core)^exponent against the anchor's (Article C, derived)")
    anchor_channels_per_core: float | None = Field(
        description="the CPU anchors' DDR channels per socket core; null where a count was not sourced")


class ModelDescription(Row):
    """The fitted cross-device model (advisor/estimate/fit.py, model.py)."""

    form: str
    m_workload: dict[str, float] = Field(
        description="per workload: its memory factor, the reference workload's split intensity over its own")
    theta_m: float
    theta_o: float
    tuned_over_default: float = Field(description="tuned / default stack of the architecture families without a "
                                                  "device published at both stacks")
    tuned_over_default_by_family: dict[str, dict] = Field(
        description="per architecture family with a device at both stacks: its fitted factor and its devices' gaps "
                    "(devices_at_both: the lowest and highest)")
    kappa: dict[str, float] = Field(description="per device kind")
    rows: int = Field(description="reference rows fitted")
    devices: int
    rms_log_residual: float
    cpu_scaling: CpuScaling
    reference: str = Field(description="the reference set: builtin or a file")
    scaling_loss_per_doubling: float
    band_scale: float
    probe_band_scale: float


class CheckSummary(Row):
    """Over the held-out rows; only `rows` (0) when there are none."""

    rows: int
    devices: int | None = None
    median_abs_error: float | None = Field(default=None, description="a ratio (0.25: 25%); devices weighted equally")
    median_abs_error_rows: float | None = None
    coverage: float | None = Field(default=None, description="share of rows inside their band")
    worst_device: str | None = None
    worst_median_abs_error: float | None = None


class DeviceCheck(Row):
    device: str
    rows: int
    median_ratio: float = Field(description="median predicted / published")
    median_abs_error: float
    covered: float = Field(description="share of its rows inside their band")
    extrapolation: str


CheckRow = model_of(evaluate.CheckRow)  # the record, typed where it is built


class NotFitted(Row):
    id: str
    why: str


class ReferencesCheckDocument(BaseModel):
    model_config = DOC
    schema_name: Literal["references-check"] = schema_field("references-check")
    # 2: model.tuned_over_default_by_family (the stack factor per architecture family); m_workload
    # is the split intensity's (advisor/estimate/split.py)
    schema_version: Literal[2] = version_field(2)
    model: ModelDescription
    held_out: Literal["device", "probe"] = Field(
        description="device: leave-one-device-out; probe (--probe): one row of another device re-anchors")
    summary: CheckSummary
    other_summary: CheckSummary = Field(description="the other held-out kind's summary")
    devices: list[DeviceCheck]
    rows: list[CheckRow]
    not_counted: list[CheckRow] = Field(description="held-out devices with no anchor of their kind left")
    not_fitted: list[NotFitted]
