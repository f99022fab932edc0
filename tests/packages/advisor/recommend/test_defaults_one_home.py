"""recommend's defaults live on JobSpec, Training and estimate.memory (one home each): a command line
that sets none of them plans the job those homes describe when given only the work, the budget and
the deadline."""

from __future__ import annotations

from advisor.cli import build_parser
from advisor.commands.recommend import job_from_args, llm_job_from_args
from advisor.estimate.memory import DEFAULT_GLOBAL_BATCH_TOKENS, DEFAULT_SEQ_LEN, Training
from advisor.recommend.jobspec import JobSpec

JOB = ["recommend", "--budget", "500", "--deadline", "2d", "--samples", "1e8"]


def test_a_command_line_with_no_options_plans_jobspecs_own_job():
    args = build_parser().parse_args(JOB)
    assert job_from_args(args) == JobSpec(samples=10**8, budget_usd=500, deadline_hours=48)


def test_a_token_job_with_no_options_takes_the_defaults_from_their_homes():
    job = llm_job_from_args(build_parser().parse_args([*JOB, "--model-shape", "llama-3-8b"]))
    assert job.training == Training()
    assert (job.seq_len, job.global_batch_tokens) == (DEFAULT_SEQ_LEN, DEFAULT_GLOBAL_BATCH_TOKENS)
    shared = ("objective", "max_instances", "market", "setup_minutes")
    assert [getattr(job, f) for f in shared] == [JobSpec.model_fields[f].default for f in shared]


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


def test_the_cli_and_the_api_show_as_many_rows_and_launch_probes_the_probes_default():
    import inspect

    from advisor.advice import advise
    from lightning_module.contract.result import WorkloadSpec

    parser = build_parser()
    assert parser.parse_args(JOB).top == inspect.signature(advise).parameters["top"].default
    launch = parser.parse_args(["launch", "--instance-type", "g5.xlarge"])
    assert launch.workload == WorkloadSpec().model
