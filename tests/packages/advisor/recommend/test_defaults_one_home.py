"""recommend's defaults live on JobSpec and Training (one home): a command line that sets none of
them plans the job JobSpec plans when it is given only the work, the budget and the deadline."""

from __future__ import annotations

from advisor.cli import build_parser
from advisor.commands.recommend import job_from_args
from advisor.estimate.memory import Training
from advisor.recommend.jobspec import JobSpec

JOB = ["recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8"]


def test_a_command_line_with_no_options_plans_jobspecs_own_job():
    args = build_parser().parse_args(JOB)
    assert job_from_args(args) == JobSpec(samples=10**8, budget_usd=500, deadline_hours=48)


def test_token_options_default_to_trainings_own():
    args = build_parser().parse_args([*JOB, "--model-shape", "llama-3-8b"])
    training = Training(method=args.finetune, precision=args.precision, optimizer=args.optimizer_kind,
                        lora_rank=args.lora_rank)
    assert training == Training()


def test_the_choices_are_jobspecs_values():
    """An objective, market or dtype the CLI offers is one JobSpec takes, and the other way round."""
    parser = build_parser()
    recommend = parser._subparsers._group_actions[0].choices["recommend"]
    offered = {a.dest: tuple(a.choices) for a in recommend._actions if a.choices}
    for dest in ("objective", "market", "require_dtype"):
        for value in offered[dest]:
            JobSpec(samples=1, budget_usd=1, deadline_hours=1, **{dest: value})
        assert set(offered[dest]) == set(enum(dest))


def enum(field: str) -> list[str]:
    """The values JobSpec's JSON schema allows a Literal field (an optional one is anyOf it and null)."""
    prop = JobSpec.model_json_schema()["properties"][field]
    return prop.get("enum") or next(x["enum"] for x in prop["anyOf"] if "enum" in x)
