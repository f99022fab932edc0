"""A token workload's answer (advisor/recommend/llm.py: LlmAdvice) as text and as the
`recommend-tokens` document's fields: reads the advice, computes nothing."""

from __future__ import annotations

from ..recommend.llm import LlmAdvice, LlmJob

FULL_FINETUNE = "full"


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
