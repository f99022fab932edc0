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
            + (f" r={t.lora_rank}" if t.method != FULL_FINETUNE else "") + f", {t.precision}, {t.optimizer}"
            + (", FSDP accumulating under no_sync" if t.no_sync_accumulation else "") + "; "
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


def render_skypilot(advice: LlmAdvice, context) -> None:
    """`--format skypilot` for a token workload: the top plan's task (advisor/render/skypilot.py, the
    one home of the task's shape)."""
    from .skypilot import tokens_task_yaml

    print(tokens_task_yaml(advice, job_words(advice.job), THROUGHPUT_SOURCE), end="", file=context.out)

THROUGHPUT_SOURCE = ("tokens/s: the sharded step-time model calibrated on published FSDP runs (training FLOPs per token at the "
                     "fitted share of peak bf16, memory-bound bytes at the GPU's bandwidth, exposed communication), one "
                     "GPU or many, and its leave-one-out band for runs inside one instance or across several "
                     "(advisor/data/sharded_fit.json); "
                     "memory: advisor/estimate/memory.py (docs/llm-memory.md)")
FOOTNOTE = "count: instances; GPUs: all of them; AC: activation checkpointing; mb: micro-batch per GPU. " + THROUGHPUT_SOURCE


def page(advice: LlmAdvice, *, command_line: str, now, version: str) -> str:
    """`--format html FILE`'s page for a token workload: the job, the ranked rows (sortable, every
    figure with its JSON field as data-key), the band, what was excluded and why, and the
    recommend-tokens document it was made from; the samples page's style, script and policy
    (advisor/render/page.py): it fetches nothing."""
    from html import escape

    from .. import schemas
    from .page import CSP, CSS, _td, excluded_section, made_by

    fields = document_fields(advice)
    data = schemas.dumps("recommend-tokens", **fields)
    for ch, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e")):  # cannot end the script element
        data = data.replace(ch, esc)
    job = advice.job
    title = f"instance-advisor: {job.shape.name} in tokens"
    heads = ["rank", "instance", "count", "GPUs", "region", "market", "strategy", "mb", "GiB/GPU",
             "tokens/s (band)", "tokens/s/GPU", "hours", "cost", "$/M tokens", "notes"]
    rows = []
    for i, r in enumerate(advice.rows):
        d, p = r.as_dict(), r.plan
        band = f'<div class="band">{p.low:,.0f}-{p.high:,.0f}</div>'
        cells = [_td("rank", d["rank"], "-" if d["rank"] is None else str(d["rank"]), num=True),
                 _td("instance_type", d["instance_type"]), _td("count", d["count"], num=True),
                 _td("devices", p.devices, f"{p.devices} {r.accelerator}", num=True),
                 _td("region", d["region"]), _td("market", d["market"]),
                 _td("strategy", p.strategy, p.words), _td("micro_batch", p.micro_batch, num=True),
                 _td("device_gib", round(p.memory.device_gib, 3), f"{p.memory.device_gib:.1f}", num=True),
                 _td("tokens_per_sec", d["tokens_per_sec"], f"{d['tokens_per_sec']:,.0f}", num=True, inner=band),
                 _td("tokens_per_sec_per_gpu", d["tokens_per_sec_per_gpu"], f"{d['tokens_per_sec_per_gpu']:,.0f}", num=True),
                 _td("hours", d["hours"], f"{d['hours']:,.1f}", num=True),
                 _td("cost_usd", d["cost_usd"], f"${d['cost_usd']:,.0f}", num=True),
                 _td("usd_per_million_tokens", d["usd_per_million_tokens"], f"${d['usd_per_million_tokens']:.3f}", num=True),
                 f'<td class="notes">{escape(r.reason or "")}</td>']
        rows.append(f'<tr data-i="{i}">' + "".join(cells) + "</tr>")
    feasible = any(r.feasible for r in advice.rows)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP)}">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{escape(title)}</title><style>{CSS}</style></head><body>", f"<h1>{escape(title)}</h1>",
             f'<p class="summary" id="summary">{escape(job_words(job))}</p>',
             f"<p>budget ${job.budget_usd:,.0f}, deadline {job.deadline_hours:,.1f} h, objective {escape(job.objective)}"
             + (f", strategy pinned to {escape(job.strategy)}" if job.strategy else "") + "</p>",
             *(f'<p class="warn">{escape(w)}</p>' for w in advice.warnings),
             f"<h2>{'Ranked candidates' if feasible else 'Closest candidates' if advice.rows else 'Candidates'}</h2>"]
    if advice.rows:
        parts += ["<p>Click a column's header to sort by it (again to reverse).</p>",
                  '<table class="sortable" id="candidates"><thead><tr>' + "".join(f"<th>{escape(h)}</th>" for h in heads)
                  + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>", f"<p>{escape(FOOTNOTE)}</p>"]
    else:
        parts.append("<p>Nothing fits on any priced GPU type within --max-instances.</p>")
    if advice.excluded:
        parts.append(excluded_section("instance types on which nothing fits, and what would", list(advice.excluded)))
    parts += made_by(command_line, version, now, data)
    return "\n".join(parts)


def render_html(advice: LlmAdvice, context) -> None:
    """`--format html FILE` for a token workload: the page written to the context's target (render.check
    has checked it), and where it went said on its stream."""
    from datetime import datetime, timezone

    from .page import write_page

    write_page(str(context.target), page(advice, command_line=context.command_line,
                                         now=context.now or datetime.now(timezone.utc), version=context.version))
    print(f"page written to {context.target} (open it in a browser; it fetches nothing)", file=context.out)


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
    say(FOOTNOTE, stream)
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
                     "lora_targets": list(t.lora_targets), "no_sync_accumulation": t.no_sync_accumulation},
        "tokens": job.tokens, "seq_len": job.seq_len, "budget_usd": job.budget_usd, "deadline_hours": job.deadline_hours,
        "objective": job.objective, "max_instances": job.max_instances, "strategy": job.strategy,
        "global_batch_tokens": job.global_batch_tokens,
        "feasible": any(r.feasible for r in advice.rows),
        "recommendations": [r.as_dict() for r in advice.rows],
        "excluded": [{"instance_type": n, "reason": w} for n, w in advice.excluded],
        "warnings": list(advice.warnings),
    }
