"""The job to plan for: how much work, the budget, the deadline and the filters.

Parsing lives here so every entry point (CLI, tests, notebooks) reads `2d`, `P2DT3H` or
`2026-12-01T09:00` the same way. Every parse error is a AdvisorError with a one-line message.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from catalog.filters import TypeFilter
from catalog.models import Arch

from ..errors import AdvisorError
from ..options import MAX_BUDGET_USD, MAX_EPOCHS, MAX_SAMPLES, MIN_BUDGET_USD, parse_amount

Objective = Literal["cheapest", "fastest", "pareto"]
MarketChoice = Literal["on-demand", "spot", "any"]
RequiredDtype = Literal["bf16", "fp16"]  # --require-dtype: a device without native support is excluded

_UNIT_SECONDS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}
_COMPACT = re.compile(r"(\d+(?:\.\d+)?)\s*([wdhms])", re.IGNORECASE)
_ISO_DURATION = re.compile(
    r"P(?:(?P<w>\d+(?:[.,]\d+)?)W)?(?:(?P<d>\d+(?:[.,]\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:[.,]\d+)?)H)?(?:(?P<m>\d+(?:[.,]\d+)?)M)?(?:(?P<s>\d+(?:[.,]\d+)?)S)?)?",
    re.IGNORECASE,
)
# --confidence: the chance a pick must have of meeting the deadline and the budget (advisor.recommend.rank);
# 0 ranks on the point estimate. Below a half the quantile is faster than the figure itself; above
# MAX_CONFIDENCE the band's far tail (not calibrated that far) would decide.
DEFAULT_CONFIDENCE = 0.9
MIN_CONFIDENCE, MAX_CONFIDENCE = 0.5, 0.99
MIN_DEADLINE_S = 60  # nothing boots, let alone trains, in less
MAX_DEADLINE_S = 100 * 365 * 86400


def parse_deadline(text: str, now: datetime | None = None) -> timedelta:
    """A duration (`90m`, `36h`, `2d`, `1d12h`, ISO 8601 `P2DT3H`) or a future absolute time
    (ISO 8601; a time without a zone is taken as UTC, so the answer does not depend on the
    machine's locale). Returns the time available from now."""
    now = now or datetime.now(timezone.utc)
    s = text.strip()
    if not s:
        raise AdvisorError("deadline is empty: give e.g. 36h, 2d, 1d12h, P2DT3H or 2026-12-01T09:00")
    seconds = _duration_seconds(s)
    if seconds is None:
        at = _absolute(s)
        if at is None:
            raise AdvisorError(
                f"cannot read deadline {text!r}: give e.g. 90m, 36h, 2d, 1d12h, P2DT3H or "
                "an ISO date-time such as 2026-12-01T09:00 (UTC unless a zone is given)"
            )
        seconds = (at - now).total_seconds()
        if seconds <= 0:
            raise AdvisorError(f"deadline {text!r} is in the past ({at:%Y-%m-%d %H:%M} UTC)")
    if not math.isfinite(seconds) or seconds <= 0:
        raise AdvisorError(f"deadline {text!r} must be a positive duration")
    if seconds < MIN_DEADLINE_S:
        raise AdvisorError(f"deadline {text!r} is less than a minute away: no training job fits in it")
    if seconds > MAX_DEADLINE_S:
        raise AdvisorError(f"deadline {text!r} is more than 100 years away")
    return timedelta(seconds=seconds)


def _duration_seconds(s: str) -> float | None:
    if s[:1] in "Pp":
        m = _ISO_DURATION.fullmatch(s)
        if not m or not any(m.groupdict().values()) or s.upper().endswith("T"):
            return None
        return sum(float(v.replace(",", ".")) * _UNIT_SECONDS[k] for k, v in m.groupdict().items() if v)
    pos, total = 0, 0.0
    compact = s.replace(" ", "")
    for m in _COMPACT.finditer(compact):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2).lower()]
        pos = m.end()
    if pos != len(compact) or pos == 0:
        return None
    return total


def _absolute(s: str) -> datetime | None:
    t = s[:-1] + "+00:00" if s[-1:] in "Zz" else s
    try:
        at = datetime.fromisoformat(t)
    except ValueError:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    return at


def catalog_markets(choice: MarketChoice) -> set[str]:
    """The catalog's markets a --market choice draws offers from: any is both."""
    return {"on-demand", "spot"} if choice == "any" else {choice}


def parse_budget(text: str) -> float:
    return parse_amount(text, "--budget", MIN_BUDGET_USD, MAX_BUDGET_USD)


class JobSpec(BaseModel):
    """What `advisor recommend` plans for. Hours and dollars are floats on purpose: the
    ranker does vectorised arithmetic on them."""

    model_config = ConfigDict(extra="forbid")

    # Whole samples (a float with no fraction, as 1e8, is taken). None: the work is given in tokens,
    # and the planner converts them with the probed workload's tokens per sample (planner.resolve_work).
    samples: int | None = Field(default=None, gt=0)
    tokens: int | None = Field(default=None, gt=0)  # --tokens: the work as asked, for a token-counting workload
    tokens_per_sample: float | None = Field(default=None, gt=0)  # what the probe counted; None: no tokens
    budget_usd: float = Field(gt=0)
    deadline_hours: float = Field(gt=0)
    workload: str = "resnet50"
    datamodule: str | None = None  # a user's LightningDataModule, part of a custom workload's id
    init_args: dict = {}  # the user's LightningModule's constructor arguments: part of the id too
    data_init_args: dict = {}  # ... and its DataModule's
    optimizer: dict | None = None  # a LightningCLI optimizer: {class_path, init_args}; part of the id
    lr_scheduler: dict | None = None  # ... and its lr_scheduler:
    image_size: int = 224
    num_classes: int = 1000
    objective: Objective = "cheapest"
    regions: list[str] = []
    # Instance-type filters, matched by catalog/filters.py (the rule `catalog show` uses too).
    families: list[str] = []
    accelerators: list[str] = []  # device names or kinds; any of them
    arch: Arch | None = None
    min_gpus: int = Field(default=0, ge=0)  # accelerator devices per instance
    market: MarketChoice = "on-demand"
    max_instances: int = Field(default=4, ge=1)
    min_accelerator_memory_gib: float | None = None
    require_dtype: RequiredDtype | None = None
    checkpoint_minutes: float = Field(default=30.0, gt=0)
    restart_minutes: float = Field(default=5.0, ge=0)
    setup_minutes: float = Field(default=0.0, ge=0)
    include_cpu: bool = True
    probe_budget_usd: float | None = Field(default=None, ge=0)  # the most the probe plan may cost
    confidence: float = DEFAULT_CONFIDENCE  # 0, or MIN_CONFIDENCE..MAX_CONFIDENCE (check_confidence)

    @model_validator(mode="after")
    def _work(self) -> JobSpec:
        if self.samples is None and self.tokens is None:
            raise ValueError("say how much work: samples or tokens")
        return self

    @field_validator("confidence")
    @classmethod
    def _confidence(cls, v: float) -> float:
        return check_confidence(v)

    def type_filter(self) -> TypeFilter:
        return TypeFilter(families=tuple(self.families), accelerators=tuple(self.accelerators), arch=self.arch,
                          min_gpus=self.min_gpus)


def check_confidence(v: float) -> float:
    if v != 0 and not MIN_CONFIDENCE <= v <= MAX_CONFIDENCE:  # NaN fails too
        raise AdvisorError(f"--confidence must be 0 (rank on the point estimate) or between {MIN_CONFIDENCE:g} and "
                           f"{MAX_CONFIDENCE:g}, got {v:g}")
    return float(v)


def work_samples(samples: str | None, epochs: str | None, dataset_size: str | None) -> float:
    """--samples N, or --epochs E --dataset-size N (samples = E x N, rounded up to whole samples:
    a fraction of an epoch is fine)."""
    if samples is not None:
        if epochs is not None or dataset_size is not None:
            raise AdvisorError("give either --samples or --epochs with --dataset-size, not both")
        return parse_amount(samples, "--samples", 1, MAX_SAMPLES, whole=True)
    if epochs is None or dataset_size is None:
        raise AdvisorError("say how much work: --samples N, or --epochs E with --dataset-size N")
    total = math.ceil(parse_amount(epochs, "--epochs", 0, MAX_EPOCHS)
                      * parse_amount(dataset_size, "--dataset-size", 1, MAX_SAMPLES, whole=True))
    if total > MAX_SAMPLES:
        raise AdvisorError(f"--epochs x --dataset-size is {total:.3g} samples; at most {MAX_SAMPLES:.0e} can be planned")
    return float(total)


MAX_TOKENS = 1e15  # a thousand trillion: past any training run


def parse_tokens(text: str) -> float:
    """--tokens: whole tokens, 1 to MAX_TOKENS (for a --model-shape job and a probed token workload alike)."""
    return parse_amount(text, "--tokens", 1, MAX_TOKENS, whole=True)


def work_tokens(tokens: str | None, samples: str | None, seq_len: int | None, epochs: str | None = None,
                dataset_size: str | None = None) -> float:
    """Tokens to train on, for a token workload: --tokens N, or --samples N (or --epochs with
    --dataset-size) with --seq-len: a sample of a packed sequence is seq_len tokens."""
    if tokens is not None:
        if samples is not None or epochs is not None or dataset_size is not None:
            raise AdvisorError("give either --tokens or --samples (--epochs with --dataset-size) with --seq-len, not both")
        return parse_tokens(tokens)
    if seq_len is None:
        raise AdvisorError("say how much work in tokens: --tokens N, or --samples N with --seq-len L")
    n = work_samples(samples, epochs, dataset_size)
    if n * seq_len > MAX_TOKENS:
        raise AdvisorError(f"--samples x --seq-len is {n * seq_len:.3g} tokens; at most {MAX_TOKENS:.0e} can be planned")
    return n * seq_len
