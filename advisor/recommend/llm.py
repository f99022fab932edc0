"""`advisor recommend --model-shape ...`: a transformer language model counted in tokens. For
every GPU type and instance count up to --max-instances, the least costly strategy that fits
(advisor/estimate/strategy.py), its tokens/s, hours, cost and $ per million tokens; ranked under
the objective; a type on which nothing fits says what would.

Prices: the lowest list price of the type among the chosen regions and markets (spot as listed:
its interruptions are not modelled on this path, and the row says spot).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from catalog.models import Catalog
from lightning_module.contract.transformer_shape import TransformerShape

from ..errors import AdvisorError
from ..estimate.memory import STRATEGIES, Training
from ..estimate.strategy import SEARCH_ORDER, Plan, device_of, plan, what_would_fit

FULL_FINETUNE = "full"


@dataclass(frozen=True)
class LlmJob:
    shape: TransformerShape
    training: Training
    seq_len: int
    tokens: float
    budget_usd: float
    deadline_hours: float
    objective: str = "cheapest"
    max_instances: int = 4
    strategy: str | None = None  # pinned
    regions: tuple[str, ...] = ()
    market: str = "on-demand"
    global_batch_tokens: int = 2**20
    setup_minutes: float = 0.0

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
    plan: Plan
    hours: float
    cost_usd: float
    feasible: bool
    reason: str | None
    rank: int | None = None

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


def advise_llm(catalog: Catalog, job: LlmJob, top: int = 10, wanted=None) -> LlmAdvice:
    """`wanted`: the --family/--accelerator/--arch/--min-gpus filter (catalog.filters.TypeFilter), None: all."""
    if job.strategy is not None and job.strategy not in STRATEGIES:
        raise AdvisorError(f"unknown --strategy {job.strategy!r}: one of {', '.join(STRATEGIES)}")
    regions = list(job.regions) or list(catalog.offers)
    markets = {"on-demand"} if job.market == "on-demand" else {"spot"} if job.market == "spot" else {"on-demand", "spot"}
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
            rows.append(LlmRow(name, catalog.instance_types[name].accelerator_model or "", k, region, market, price, p,
                               hours, cost, not why, "; ".join(why) or None))
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
    rest = sorted((r for r in rows if not r.feasible), key=lambda r: (max(r.cost_usd / job.budget_usd, r.hours / job.deadline_hours)))
    for i, r in enumerate(feasible):
        r.rank = i + 1
    warnings = []
    if "spot" in markets:
        warnings.append("spot rows are priced at the listed spot price; interruptions are not modelled for token workloads")
    return LlmAdvice(job, feasible[:top] + ([] if feasible else rest[:top]), excluded, warnings)


def job_words(job: LlmJob) -> str:
    t = job.training
    return (f"{job.shape.name} ({job.shape.params() / 1e9:.2f}B parameters), {t.method} fine-tune"
            + (f" r={t.lora_rank}" if t.method != FULL_FINETUNE else "") + f", {t.precision}, {t.optimizer}; "
            f"{job.tokens:,.3g} tokens at {job.seq_len} per sequence")


def table(advice: LlmAdvice, show_excluded: bool = False) -> str:
    job = advice.job
    lines = [job_words(job), f"budget ${job.budget_usd:,.0f}, deadline {job.deadline_hours:,.1f} h, objective {job.objective}"
             + (f", strategy pinned to {job.strategy}" if job.strategy else ""), ""]
    head = f"{'#':>3} {'instance type':<16} {'n':>2} {'GPU':<6} {'strategy':<40} {'mb':>3} {'GiB/GPU':>7} {'tok/s/GPU':>9} {'hours':>8} {'cost $':>10} {'$/M tok':>8}"
    lines.append(head)
    for r in advice.rows:
        p = r.plan
        lines.append(f"{r.rank if r.rank else '-':>3} {r.instance_type:<16} {r.count:>2} {r.accelerator[:6]:<6} {p.words:<40} "
                     f"{p.micro_batch:>3} {p.memory.device_gib:>7.1f} {p.tokens_per_sec / p.devices:>9,.0f} {r.hours:>8,.1f} "
                     f"{r.cost_usd:>10,.0f} {r.usd_per_million_tokens:>8.3f}" + ("" if r.feasible else f"  ({r.reason})"))
    if not advice.rows:
        lines.append("  nothing fits on any priced GPU type within --max-instances (see --show-excluded)")
    elif not any(r.feasible for r in advice.rows):
        lines.insert(3, "nothing meets both the budget and the deadline; the closest:")
    lines += ["", "tokens/s: peak bf16 x MFU (torchtitan's published band) / training FLOPs per token; memory: "
              "advisor/estimate/memory.py (docs/llm-memory.md)"]
    if show_excluded and advice.excluded:
        lines += ["", "excluded:"] + [f"  {n}: {why}" for n, why in advice.excluded]
    lines += [f"warning: {w}" for w in advice.warnings]
    return "\n".join(lines) + "\n"


def document_fields(advice: LlmAdvice) -> dict:
    job = advice.job
    t = job.training
    return {
        "model_shape": {"name": job.shape.name, "parameters": job.shape.params(), "source": job.shape.source,
                        "d_model": job.shape.d_model, "n_layers": job.shape.n_layers, "n_heads": job.shape.n_heads,
                        "n_kv_heads": job.shape.n_kv_heads, "d_ff": job.shape.d_ff, "vocab": job.shape.vocab},
        "training": {"method": t.method, "precision": t.precision, "optimizer": t.optimizer, "lora_rank": t.lora_rank,
                     "lora_targets": list(t.lora_targets)},
        "tokens": job.tokens, "seq_len": job.seq_len, "budget_usd": job.budget_usd, "deadline_hours": job.deadline_hours,
        "objective": job.objective, "max_instances": job.max_instances, "strategy": job.strategy,
        "global_batch_tokens": job.global_batch_tokens,
        "feasible": any(r.feasible for r in advice.rows),
        "recommendations": [r.as_dict() for r in advice.rows],
        "excluded": [{"instance_type": n, "reason": w} for n, w in advice.excluded],
        "warnings": list(advice.warnings),
    }


def check_seq(seq_len: int, shape: TransformerShape) -> None:
    if seq_len < 1 or not math.isfinite(seq_len):
        raise AdvisorError(f"--seq-len must be a positive whole number, got {seq_len}")


def with_method(training: Training, method: str) -> Training:
    return replace(training, method=method)
