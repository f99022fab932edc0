"""The declared Python API (advisor/__init__.py): only its public names are used here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import advisor
from advisor.cli import main


def test_every_public_name_resolves():
    assert set(advisor.__all__) == set(advisor._LAZY) | {"run_probe", "__version__"}
    for name in advisor.__all__:
        assert getattr(advisor, name) is not None, name
    assert set(advisor.__all__) <= set(dir(advisor))


def test_importing_advisor_is_light_and_torch_comes_only_with_a_probe():
    code = ("import sys, advisor; advisor.JobSpec; advisor.ProbeOptions; advisor.ProbeResult; advisor.run_probe; "
            "print(sorted(m for m in ('torch', 'lightning', 'torchvision', 'numpy', 'boto3', 'matplotlib') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    bare = subprocess.run([sys.executable, "-c", "import sys, advisor; print('pydantic' in sys.modules)"],
                          capture_output=True, text=True, check=True).stdout
    assert bare.strip() == "False"


def test_a_notebook_gets_the_rows_the_cli_prints_as_json(capsys):
    job = advisor.JobSpec(samples=1e8, budget_usd=500, deadline_hours=48, market="any", max_instances=2)
    advice = advisor.advise(job, catalog=advisor.load_catalog(), program="advisor")
    assert advice.recommendations and not advice.closest
    assert advice.recommendations[0].rank == 1
    assert main(["recommend", "--budget", "500", "--deadline", "48h", "--samples", "1e8", "--market", "any",
                 "--max-instances", "2", "--format", "json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    mine = advice.to_dict()
    assert mine == cli  # the command lines too: under pytest the CLI calls itself plain 'advisor'


def test_nothing_fits_gives_the_closest_candidates():
    advice = advisor.advise(advisor.JobSpec(samples=1e8, budget_usd=1, deadline_hours=1))
    assert advice.recommendations == [] and advice.closest
    assert all(r.budget_needed_usd or r.deadline_needed_hours for r in advice.closest)


def test_advise_reads_the_jobs_workload_once(monkeypatch):
    """advise picks the measurements by the workload's spec and hands that spec to build_plan."""
    from advisor import advice as facade
    from advisor.recommend import planner

    calls, real = [], planner.workload_spec

    def counted(job):
        calls.append(job.workload)
        return real(job)

    monkeypatch.setattr(facade, "workload_spec", counted)
    monkeypatch.setattr(planner, "workload_spec", counted)
    advisor.advise(advisor.JobSpec(samples=1e8, budget_usd=500, deadline_hours=48), catalog=advisor.load_catalog())
    assert calls == ["resnet50"]


def test_library_errors_are_the_librarys_own_types():
    with pytest.raises(advisor.AdvisorError, match="unknown workload"):
        advisor.advise(advisor.JobSpec(samples=1e8, budget_usd=500, deadline_hours=48, workload="nope"))
    with pytest.raises(advisor.AdvisorError):
        advisor.parse_deadline("yesterday")


def test_a_store_path_is_read_and_its_measurement_used(tmp_path):
    from factories import probe_result

    path = tmp_path / "results.sqlite"
    with advisor.ResultStore(path) as store:
        store.add(probe_result("g5.xlarge", 1000.0, accelerator="gpu"))
    job = advisor.JobSpec(samples=1e8, budget_usd=500, deadline_hours=48, families=["g5"])
    advice = advisor.advise(job, store=path)
    measured = [r for r in advice.recommendations if r.instance_type == "g5.xlarge" and r.count == 1]
    assert measured and measured[0].throughput_source == "measured"
    assert measured[0].samples_per_sec == 1000.0
    assert advisor.advise(job).recommendations[0].throughput_source != "measured"
