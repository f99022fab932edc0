"""A token workload's answer (advisor/recommend/llm.py: LlmAdvice) as text and as the
`recommend-tokens` document's fields: reads the advice, computes nothing."""

from __future__ import annotations

import sys

from ..estimate.strategy import STRATEGY_WORDS
from ..output import emit, say
from ..recommend.llm import LlmAdvice, LlmJob
from ..schemas.tokens import ModelShape

FULL_FINETUNE = "full"


def job_words(job: LlmJob) -> str:
    t = job.training
    return (f"{job.shape.name} ({job.shape.params() / 1e9:.2f}B parameters), {t.method} fine-tune"
            + (f" r={t.lora_rank}" if t.method != FULL_FINETUNE else "") + f", {t.precision}, {t.optimizer}; "
            f"{job.tokens:,.3g} tokens at {job.seq_len} per sequence")


# The columns a narrow terminal leaves out, first to last (named under the table; --wide shows all)
DROP_ORDER = ("region", "GiB/GPU", "tok/s/GPU", "mb")


# --format csv's columns, one row per recommendation: numbers as numbers, for a pipe
CSV_COLUMNS = ("rank", "instance_type", "count", "gpus", "accelerator", "region", "market", "strategy",
               "activation_checkpointing", "micro_batch", "gib_per_gpu", "tokens_per_sec", "tokens_per_sec_low",
               "tokens_per_sec_high", "tokens_per_sec_per_gpu", "hours", "cost_usd", "usd_per_million_tokens",
               "usd_per_hour", "feasible", "reason")


def csv_rows(advice: LlmAdvice) -> list[dict]:
    return [{**{k: v for k, v in r.as_dict().items() if k in CSV_COLUMNS}, "gpus": r.plan.devices,
             "strategy": r.plan.strategy, "activation_checkpointing": r.plan.checkpointing,
             "micro_batch": r.plan.micro_batch, "gib_per_gpu": round(r.plan.memory.device_gib, 3),
             "tokens_per_sec_low": round(r.plan.low, 1), "tokens_per_sec_high": round(r.plan.high, 1)}
            for r in advice.rows]


def write(advice: LlmAdvice, fmt: str, show_excluded: bool = False, stream=None) -> None:
    """`fmt`: table, markdown (the same rows and words, as a GitHub table) or csv (CSV_COLUMNS only)."""
    stream = stream or sys.stdout
    if fmt == "csv":
        emit(csv_rows(advice), "csv", CSV_COLUMNS, stream=stream)
        return
    table(advice, show_excluded, stream, fmt)


def render(fmt: str):
    """The registry's function(result, context) for a token workload's answer in `fmt`."""
    def show(advice: LlmAdvice, context) -> None:
        write(advice, fmt, context.show_excluded, context.out)
    return show


render_table, render_markdown, render_csv = render("table"), render("markdown"), render("csv")


def table(advice: LlmAdvice, show_excluded: bool = False, stream=None, fmt: str = "table") -> None:
    """The ranked (type, count, strategy) rows for people, through the shared table fitter: no value
    is split across lines; a narrow terminal drops DROP_ORDER's columns instead. `fmt` markdown: the
    same rows as a GitHub table (every column kept)."""
    stream = stream or sys.stdout
    job = advice.job
    say(job_words(job), stream)
    say(f"budget ${job.budget_usd:,.0f}, deadline {job.deadline_hours:,.1f} h, objective {job.objective}"
        + (f", strategy pinned to {job.strategy}" if job.strategy else ""), stream)
    print(file=stream)
    if not advice.rows:
        say("Nothing fits on any priced GPU type within --max-instances (see --show-excluded).", stream)
    else:
        if not any(r.feasible for r in advice.rows):
            say("Nothing meets both the budget and the deadline; the closest:", stream)
        rows = [{"rank": r.rank or "-", "instance": r.instance_type, "count": r.count,
                 "GPUs": f"{r.plan.devices} {r.accelerator}", "region": r.region,
                 "strategy": STRATEGY_WORDS[r.plan.strategy] + (" + AC" if r.plan.checkpointing else ""),
                 "mb": r.plan.micro_batch, "GiB/GPU": f"{r.plan.memory.device_gib:.1f}",
                 "tok/s/GPU": f"{r.plan.tokens_per_sec / r.plan.devices:,.0f}", "hours": f"{r.hours:,.1f}",
                 "USD": f"{r.cost_usd:,.0f}", "$/M tok": f"{r.usd_per_million_tokens:.3f}", "note": r.reason or ""}
                for r in advice.rows]
        cols = [c for c in rows[0] if c != "note" or any(r["note"] for r in rows)]
        emit(rows, fmt, cols, stream=stream, notes="note", drop=DROP_ORDER)
    print(file=stream)
    say("count: instances; GPUs: all of them; AC: activation checkpointing; mb: micro-batch per GPU. "
        "tokens/s: peak bf16 x MFU (torchtitan's "
        "published band) / training FLOPs per token, its band widened on more than one GPU to the sharded scale-out "
        "model's leave-one-out band (advisor/data/sharded_fit.json); memory: advisor/estimate/memory.py (docs/llm-memory.md)",
        stream)
    if show_excluded and advice.excluded:
        print(f"\nExcluded ({len(advice.excluded)}):", file=stream)
        emit([{"instance_type": n, "reason": w} for n, w in advice.excluded], fmt, stream=stream, notes="reason")
    for w in advice.warnings:
        say(f"warning: {w}", stream)


def document_fields(advice: LlmAdvice) -> dict:
    job = advice.job
    t = job.training
    return {
        # the document's fields are the shape's own (schemas/tokens.ModelShape names them), parameters counted
        "model_shape": {k: job.shape.params() if k == "parameters" else getattr(job.shape, k)
                        for k in ModelShape.model_fields},
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
