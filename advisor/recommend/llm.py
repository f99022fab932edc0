"""`advisor recommend --model-shape ...`: a transformer language model counted in tokens. For
every GPU type and instance count up to --max-instances, the least costly strategy that fits
(advisor/estimate/strategy.py), its tokens/s, hours, cost and $ per million tokens; ranked under
the objective; a type on which nothing fits says what would.

Shown by advisor/render/tokens.py (the table, the recommend-tokens document's fields).

Prices: the lowest list price of the type among the chosen regions and markets (spot as listed:
its interruptions are not modelled on this path, and the row says spot).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from catalog.models import Catalog
from lightning_module.contract.transformer_shape import TransformerShape

from ..errors import AdvisorError
from ..estimate.memory import STRATEGIES, Training
from ..estimate.strategy import SEARCH_ORDER, StrategyFit, device_of, plan, what_would_fit
from ..options import DEFAULT_TOP
from .jobspec import catalog_markets


@dataclass(frozen=True)
class LlmJob:
    """A token workload's job; every field given (commands/recommend.llm_job_from_args reads the
    defaults from their homes: JobSpec, Training, estimate.memory)."""

    shape: TransformerShape
    training: Training
    seq_len: int
    tokens: float
    budget_usd: float
    deadline_hours: float
    objective: str
    max_instances: int
    strategy: str | None  # pinned; None: the search order
    regions: tuple[str, ...]
    market: str
    global_batch_tokens: int
    setup_minutes: float

    def strategies(self) -> tuple[str, ...]:
        return (self.strategy,) if self.strategy else SEARCH_ORDER


@dataclass
class LlmRow:
    instance_type: str
    accelerator: str
    count: int
    region: str
    market: str
    usd_per_hour: float
    plan: StrategyFit
    hours: float
    cost_usd: float
    feasible: bool
    reason: str | None
    rank: int | None = None
    # accelerators one instance has, a fraction on a fractional GPU (what SkyPilot's accelerators names)
    accelerators_per_instance: float = 1.0

    @property
    def usd_per_million_tokens(self) -> float:
        return self.usd_per_hour * self.count / (self.plan.tokens_per_sec * 3600) * 1e6

    def as_dict(self) -> dict:
        return {"rank": self.rank, "instance_type": self.instance_type, "accelerator": self.accelerator,
                "count": self.count, "region": self.region, "market": self.market,
                "usd_per_hour": round(self.usd_per_hour, 4), "hours": round(self.hours, 3),
                "cost_usd": round(self.cost_usd, 2), "tokens_per_sec": round(self.plan.tokens_per_sec, 1),
                "tokens_per_sec_per_gpu": round(self.plan.tokens_per_sec / self.plan.devices, 1),
                "usd_per_million_tokens": round(self.usd_per_million_tokens, 4),
                "feasible": self.feasible, "reason": self.reason, "plan": self.plan.as_dict()}


@dataclass
class LlmAdvice:
    job: LlmJob
    rows: list[LlmRow]  # ranked: feasible first under the objective
    excluded: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _cheapest_offer(catalog: Catalog, regions: list[str], markets: set[str]) -> dict[str, tuple[float, str, str]]:
    out: dict[str, tuple[float, str, str]] = {}
    for r in regions:
        ro = catalog.offers.get(r)
        if ro is None:
            continue
        for name, m, p in zip(ro.instance_type, ro.market, ro.usd_per_hour):
            if m in markets and (name not in out or p < out[name][0]):
                out[name] = (p, r, m)
    return out


def advise_llm(catalog: Catalog, job: LlmJob, top: int = DEFAULT_TOP, wanted=None) -> LlmAdvice:
    """`wanted`: the --family/--accelerator/--arch/--min-gpus filter (catalog.filters.TypeFilter), None: all."""
    if job.strategy is not None and job.strategy not in STRATEGIES:
        raise AdvisorError(f"unknown --strategy {job.strategy!r}: one of {', '.join(STRATEGIES)}")
    regions = list(job.regions) or list(catalog.offers)
    markets = catalog_markets(job.market)
    offers = _cheapest_offer(catalog, regions, markets)
    rows: list[LlmRow] = []
    excluded: list[tuple[str, str]] = []
    for name in sorted(offers):
        if wanted is not None and not wanted(catalog.instance_types[name]):
            continue
        dev = device_of(catalog.instance_types[name])
        if dev is None:
            continue
        price, region, market = offers[name]
        fitted = False
        for k in range(1, job.max_instances + 1):
            p = plan(dev, job.shape, job.training, job.seq_len, k, job.strategies(), job.global_batch_tokens)
            if p is None:
                continue
            fitted = True
            hours = job.tokens / p.tokens_per_sec / 3600 + job.setup_minutes / 60
            cost = hours * price * k
            why = []
            if cost > job.budget_usd:
                why.append(f"costs ${cost:,.0f} > budget ${job.budget_usd:,.0f}")
            if hours > job.deadline_hours:
                why.append(f"takes {hours:,.1f} h > deadline {job.deadline_hours:,.1f} h")
            it = catalog.instance_types[name]
            rows.append(LlmRow(name, it.accelerator_model or "", k, region, market, price, p, hours, cost, not why,
                               "; ".join(why) or None,
                               accelerators_per_instance=it.accelerator_count * (it.accelerator_fraction or 1.0)))
        if not fitted:
            excluded.append((name, what_would_fit(dev, job.shape, job.training, job.seq_len, job.max_instances,
                                                  job.strategies())))
    key = (lambda r: (round(r.cost_usd, 2), r.hours)) if job.objective == "cheapest" else (lambda r: (r.hours, r.cost_usd))
    # One row per type and market: its best count under the objective (equal cost: the fewest hours).
    best: dict[tuple[str, str], LlmRow] = {}
    for r in rows:
        k = (r.instance_type, r.market)
        if k not in best or (r.feasible, *[-x for x in key(r)]) > (best[k].feasible, *[-x for x in key(best[k])]):
            best[k] = r
    rows = list(best.values())
    feasible = sorted((r for r in rows if r.feasible), key=key)
    rest = sorted((r for r in rows if not r.feasible),
                  key=lambda r: (max(r.cost_usd / job.budget_usd, r.hours / job.deadline_hours)))
    for i, r in enumerate(feasible):
        r.rank = i + 1
    warnings = []
    if "spot" in markets:
        warnings.append("spot rows are priced at the listed spot price; interruptions are not modelled for token workloads")
    return LlmAdvice(job, feasible[:top] + ([] if feasible else rest[:top]), excluded, warnings)
