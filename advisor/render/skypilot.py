"""`advisor recommend --format skypilot`: the ranked list as a SkyPilot task, for the real training run.

SkyPilot (https://docs.skypilot.co/en/latest/reference/yaml-spec.html) tries `resources.ordered` in
order until one launches, recovers managed spot jobs (`sky jobs launch`) and starts `num_nodes`
nodes. This writes the task for the rows recommend ranked: those with the first row's count (one
task has one `num_nodes`), not known to be unobtainable (--check-account), in rank order; a spot row
with on-demand fallback becomes its spot entry then its on-demand one. A "GPU + CPU" variant row is
left out, with the reason in a comment: the task cannot make your script train on the CPU too. The YAML is written by hand
(JSON strings are YAML scalars): SkyPilot is never a dependency, and the core install has no YAML
library. The advisor's figures and where they come from go in a comment block on top.
"""

from __future__ import annotations

import json
import math

from ..recommend.planner import Plan
from ..recommend.rows import CandidateRow, Rows
from .report import duration, instance_label, money, summary_line

MAX_ENTRIES = 8  # resources.ordered entries: past a handful SkyPilot's failover is slow to reach them
MASTER_PORT = 29500  # torchrun's default rendezvous port
TRAIN_SCRIPT = "train.py"  # the default of the task's TRAIN_SCRIPT env (sky launch --env TRAIN_SCRIPT=...)
# A GPU + CPU row needs the heterogeneous strategy inside the training script; the task only starts it.
VARIANT_LEFT_OUT = ("a GPU + CPU variant: the task runs your script with torchrun, one process per GPU; training on "
                    "the CPU beside them needs the HeteroDDP strategy (lightning_module/run/hetero.py) inside your script, which "
                    "the task cannot set up")


def _q(s: str) -> str:
    return json.dumps(s)


def entries(rows: list[CandidateRow], budget_usd: float, own_prices: bool) -> tuple[list[dict], list[CandidateRow]]:
    """(resources.ordered, the rows it holds) from the rows in rank order, at most MAX_ENTRIES entries."""
    out: list[dict] = []
    used: list[CandidateRow] = []
    seen = set()
    for r in rows:
        new = [s for s in {"on-demand": [False], "spot": [True], "spot+od-fallback": [True, False]}[r.market]
               if (r.instance_type, r.region, s) not in seen]
        if len(out) + len(new) > MAX_ENTRIES:
            break
        used.append(r)
        for use_spot in new:
            seen.add((r.instance_type, r.region, use_spot))
            e = {"infra": f"aws/{r.region}", "instance_type": r.instance_type, "use_spot": use_spot}
            # The cost ceiling (derived): the $/h per instance at which `count` instances for the time at
            # the confidence spend the whole budget. SkyPilot compares it with its own list prices, so it
            # is left out with --prices.
            ceiling = None if own_prices else cost_ceiling(budget_usd, r.count, r.hours_at_confidence)
            if ceiling is not None:
                e["max_hourly_cost"] = ceiling
            out.append(e)
    return out, used


def strategy_of(row) -> str:
    """The strategy the task launches: the row's (the strategy search's pick, where rows carry one;
    fsdp, zero3, ...), else "ddp", what torchrun with one process per GPU runs under Lightning."""
    return getattr(row, "strategy", None) or "ddp"


def run_lines(num_nodes: int) -> list[str]:
    """torchrun on every node (its node count and rank from SkyPilot's environment variables); the
    script reads the strategy from $STRATEGY (task_yaml's envs)."""
    nproc = "$(( ${SKYPILOT_NUM_GPUS_PER_NODE:-0} > 0 ? SKYPILOT_NUM_GPUS_PER_NODE : 1 ))"
    if num_nodes == 1:
        return [f"torchrun --nproc_per_node={nproc} $TRAIN_SCRIPT"]
    return ['MASTER_ADDR=$(echo "$SKYPILOT_NODE_IPS" | head -n1)',
            f"torchrun --nnodes=$SKYPILOT_NUM_NODES --node_rank=$SKYPILOT_NODE_RANK --nproc_per_node={nproc} \\",
            f"  --master_addr=$MASTER_ADDR --master_port={MASTER_PORT} $TRAIN_SCRIPT"]


def task_yaml(plan: Plan, rows: Rows) -> str:
    """The task file; AdvisorError-free: with nothing to run it says so in a comment and has no resources."""
    job = plan.job
    ranked = [r for r in rows.candidates if rows.feasible and r.obtainable != "no"]
    chosen = [r for r in ranked if r.variant is None]
    head = ["# SkyPilot task written by instance-advisor (advisor recommend --format skypilot).",
            f"# {summary_line(plan)}"]
    if len(chosen) < len(ranked):
        head.append("# Left out: " + ", ".join(f"{r.rank}. {instance_label(r.instance_type, r.variant)} x{r.count}"
                                               for r in ranked if r.variant is not None) + f" ({VARIANT_LEFT_OUT}).")
    if not chosen:
        why = ("nothing meets the budget and the deadline" if not rows.feasible
               else "only GPU + CPU variants are ranked" if ranked
               else "no ranked candidate is obtainable (--check-account)")
        head.append(f"# No task: {why}; run recommend without --format skypilot for the closest candidates "
                    "and what they need.")
        return "\n".join(head) + "\n"
    k = chosen[0].count
    ordered, same = entries([r for r in chosen if r.count == k], job.budget_usd, bool(plan.prices))
    at = f"{job.confidence:.0%}" if job.confidence else None
    head.append(f"# resources.ordered: the ranked candidates with {k} instance{'s' if k > 1 else ''}, in rank order "
                "(SkyPilot tries the next when one cannot launch):")
    for r in same:
        figs = f"{duration(r.hours)}, ${money(r.cost_usd)} expected"
        if at:
            figs += f"; {duration(r.hours_at_confidence)}, ${money(r.cost_usd_at_confidence)} at {at} confidence"
        src = r.throughput_source + (f" {r.throughput_low:,.0f}-{r.throughput_high:,.0f}/s"
                                     if r.throughput_source != "measured" else "")
        rid = r.basis.get("id") or r.basis.get("result_id")
        head.append(f"#   {r.rank}. {r.instance_type} x{r.count} {r.region} {r.market} at ${r.usd_per_hour:.4g}/h: {figs}; "
                    f"{r.samples_per_sec:,.0f} samples/s ({src}{', ' + str(rid) if rid else ''})"
                    + ("; usually needs a Capacity Block or reservation" if r.sold_by_reservation else "")
                    + (f"; obtainable {r.obtainable}" if r.obtainable else ""))
    others = [r for r in chosen if r.count != k]  # and those past MAX_ENTRIES are left out
    if others:
        head.append("# Ranked but with another count (one task has one num_nodes): "
                    + ", ".join(f"{r.rank}. {r.instance_type} x{r.count}" for r in others[:5]))
    head.append(f"# Prices: {plan.prices or 'list prices (the catalog)'}.")
    if plan.prices:
        head.append("# max_hourly_cost is left out: SkyPilot compares it with list prices, not yours.")
    else:
        head.append("# max_hourly_cost (derived): the $/h per instance at which the run spends the whole budget in "
                    + (f"its time at {at} confidence" if at else "its pessimistic time") + "; SkyPilot skips dearer offers.")
    spot = any(r.market != "on-demand" for r in same)
    if spot:
        head.append("# Spot: launch as a managed job (sky jobs launch) so job_recovery restarts it after a "
                    f"preemption; checkpoint every {job.checkpoint_minutes:g} min, as the advisor assumed.")
    return "\n".join(head + task_lines(plan.workload_id, k, strategy_of(same[0]), ordered, spot)) + "\n"


TRAINER_NOTE = ("the pick's strategy, for your script: "
                "Trainer(strategy=os.environ['STRATEGY'], num_nodes=int(os.environ['SKYPILOT_NUM_NODES']))")


def task_lines(name: str, num_nodes: int, strategy: str, ordered: list[dict], spot: bool,
               envs: tuple[tuple[str, str, str], ...] = (), strategy_note: str = TRAINER_NOTE) -> list[str]:
    """The task itself, below its comments: the one shape of a SkyPilot task this writes, for the
    samples path and the token path alike. `ordered`: resources.ordered's entries (infra,
    instance_type, accelerators where known, use_spot, max_hourly_cost where given); `envs`: more
    (name, value, comment) for the script."""
    lines = [f"name: {_q(name)}", f"num_nodes: {num_nodes}", "envs:",
             f"  TRAIN_SCRIPT: {_q(TRAIN_SCRIPT)}  # your training script (sky launch --env TRAIN_SCRIPT=...)",
             f"  STRATEGY: {_q(strategy)}  # {strategy_note}",
             *(f"  {k}: {_q(v)}  # {why}" for k, v, why in envs),
             "resources:", "  ordered:"]
    for e in ordered:
        lines.append(f"    - infra: {_q(e['infra'])}")
        lines.append(f"      instance_type: {_q(e['instance_type'])}")
        if "accelerators" in e:
            lines.append(f"      accelerators: {_q(e['accelerators'])}")
        lines.append(f"      use_spot: {'true' if e['use_spot'] else 'false'}")
        if "max_hourly_cost" in e:
            lines.append(f"      max_hourly_cost: {e['max_hourly_cost']}")
    if spot:
        lines += ["  job_recovery:", "    strategy: FAILOVER", "    max_restarts_on_errors: 0"]
    return lines + ["run: |"] + [f"  {ln}" for ln in run_lines(num_nodes)]


def cost_ceiling(budget_usd: float, count: int, hours: float) -> float | None:
    """max_hourly_cost (derived): the $/h per instance at which `count` instances for `hours` spend
    the whole budget; None where the time is not finite."""
    if not 0 < hours < math.inf:
        return None
    return math.floor(budget_usd / (count * hours) * 1e4) / 1e4


def tokens_task_yaml(advice, job_line: str, source: str) -> str:
    """A token workload's task (recommend --model-shape, advisor/recommend/llm.py LlmAdvice): its top
    plan, the first ranked row, as one entry: the instance type, its accelerators, num_nodes the
    instance count, use_spot as the row's market, and the plan's strategy, micro-batch and
    activation checkpointing for the script. With no ranked row it says why in a comment and holds
    no task, as the samples path does. `job_line`, `source`: the job in words and where the tokens/s
    comes from (advisor/render/tokens.py says both, for the table too)."""
    job = advice.job
    head = ["# SkyPilot task written by instance-advisor (advisor recommend --model-shape ... --format skypilot).",
            (f"# {job_line}; budget ${money(job.budget_usd)}, deadline {duration(job.deadline_hours)}, "
             f"objective {job.objective}")]
    ranked = [r for r in advice.rows if r.feasible]
    if not ranked:
        why = ("nothing meets the budget and the deadline" if advice.rows
               else "nothing fits on any priced GPU type within --max-instances")
        head.append(f"# No task: {why}; run recommend without --format skypilot for the closest candidates "
                    "and what they need.")
        return "\n".join(head) + "\n"
    r = ranked[0]
    p = r.plan
    per = r.accelerators_per_instance
    spot = r.market == "spot"
    head.append(f"# The top plan: {r.rank}. {r.instance_type} x{r.count} {r.region} {r.market} at ${r.usd_per_hour:.4g}/h: "
                f"{p.devices} {r.accelerator}, {p.words}, micro-batch {p.micro_batch} x {job.seq_len} tokens, "
                f"{p.memory.device_gib:.1f} GiB a GPU; {p.tokens_per_sec:,.0f} tokens/s ({p.low:,.0f}-{p.high:,.0f}), "
                f"{duration(r.hours)}, ${money(r.cost_usd)}")
    others = ranked[1:6]
    if others:
        head.append("# Ranked next (another task each: their strategy or count differs): "
                    + ", ".join(f"{o.rank}. {o.instance_type} x{o.count} {o.plan.words}" for o in others))
    head.append("# " + source)
    pessimistic = job.tokens / p.low / 3600 + job.setup_minutes / 60 if p.low > 0 else math.inf
    ceiling = cost_ceiling(job.budget_usd, r.count, pessimistic)
    if ceiling is not None:
        head.append("# max_hourly_cost (derived): the $/h per instance at which the run spends the whole budget in "
                    "its time at the band's low tokens/s; SkyPilot skips dearer offers.")
    if spot:
        head.append("# Spot: launch as a managed job (sky jobs launch) so job_recovery restarts it after a "
                    "preemption; interruptions are not modelled for token workloads, so checkpoint often.")
    entry = {"infra": f"aws/{r.region}", "instance_type": r.instance_type, "use_spot": spot}
    if r.accelerator:
        entry["accelerators"] = f"{r.accelerator}:{per:g}"
    if ceiling is not None:
        entry["max_hourly_cost"] = ceiling
    envs = (("MICRO_BATCH", str(p.micro_batch), "sequences per GPU per forward"),
            ("SEQ_LEN", str(job.seq_len), "tokens per sequence"),
            ("ACTIVATION_CHECKPOINTING", "true" if p.checkpointing else "false", "what the memory fit assumed"))
    name = f"{job.shape.name}-{job.training.method}"
    note = f"the plan's strategy ({p.words.split(' + ')[0]}), for your script to set up"
    return "\n".join(head + task_lines(name, r.count, p.strategy, [entry], spot, envs, note)) + "\n"


def render(result, context) -> None:
    """`--format skypilot` (advisor/render/__init__.py FORMATS): the task on the context's stream."""
    print(task_yaml(result.plan, result.rows), end="", file=context.out)
