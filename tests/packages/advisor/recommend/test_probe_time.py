"""The probe plan's probe time: read from the store's past probes of the workload on the device
class (advisor/recommend/probeplan/probetime.py), the ladder's bound only where there are none."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from factories import probe_result

from advisor.paths import load_catalog
from advisor.recommend.probeplan import inputs as pi
from advisor.recommend.probeplan.probetime import PastProbes
from advisor.store import ResultStore
from lightning_module.contract import ladder
from lightning_module.contract.result import RungResult


@pytest.fixture(scope="module")
def types():
    return load_catalog().instance_types


def took(instance_type, seconds, *, skipped=0, **kw):
    """A past probe whose own run took `seconds`: its two timed rungs, and `skipped` rungs that never trained."""
    r = probe_result(instance_type, **kw)
    extra = [RungResult(rung=f"x{i}", config=r.config, status="skipped", error="--skip") for i in range(skipped)]
    return r.model_copy(update={"started_at": r.finished_at - timedelta(seconds=seconds), "ladder": r.ladder + extra})


def test_without_past_probes_the_plan_says_it_prices_the_ladders_bound(types):
    t = pi.probe_time(types["c7i.4xlarge"], 50.0, PastProbes([], types))
    assert t.seconds == pi.probe_seconds(50.0, 16, True)
    assert "no past probe" in t.basis and "bound" in t.basis


def test_the_probe_time_is_the_median_past_probe_of_the_device_per_rung_and_the_types_own_rungs(types):
    # Two probes on c7i.2xlarge: 600 s and 1,000 s over their 2 trained rungs (a skipped rung costs nothing).
    past = PastProbes([took("c7i.2xlarge", 600, skipped=3), took("c7i.2xlarge", 1000, n=1)], types)
    t = pi.probe_time(types["c7i.4xlarge"], 50.0, past)
    # Median 400 s a rung, times the rungs a 16-vCPU ladder measures, plus start-up.
    assert t.seconds == pytest.approx(pi.STARTUP_SECONDS + ladder.measured_rungs(16, True) * 400)
    assert "2 past probes" in t.basis and "8488C" in t.basis and "derived" in t.basis
    # The same processor in another family is the same device class.
    assert pi.probe_time(types["m7i.2xlarge"], 50.0, past).seconds == pytest.approx(
        pi.STARTUP_SECONDS + ladder.measured_rungs(8, True) * 400)
    # Another CPU: the next-nearest class, any CPU, said so; a GPU: the bound.
    other = pi.probe_time(types["c6i.2xlarge"], 50.0, past)
    assert other.seconds == pytest.approx(pi.STARTUP_SECONDS + ladder.measured_rungs(8, True) * 400)
    assert "any CPU" in other.basis
    gpu = pi.probe_time(types["g5.xlarge"], 500.0, past)
    assert gpu.seconds == pi.probe_seconds(500.0, 4) and "no past probe" in gpu.basis


def test_a_slow_device_is_never_priced_under_the_steps_a_rung_must_time(types):
    past = PastProbes([took("c7i.2xlarge", 20)], types)  # 10 s a rung on a fast one
    slow = 0.5  # samples/s: one step of the start batch takes 64 s
    t = pi.probe_time(types["c7i.4xlarge"], slow, past)
    step = pi.START_BATCH / slow
    assert t.seconds == pytest.approx(pi.STARTUP_SECONDS + ladder.measured_rungs(16, True) * (pi.WARMUP_STEPS + 2) * step)


def test_a_training_runs_record_is_no_probes_time(types):
    run = took("c7i.2xlarge", 5000).model_copy(update={"source": "training run"})
    t = pi.probe_time(types["c7i.4xlarge"], 50.0, PastProbes([run], types))
    assert "no past probe" in t.basis


JOB = ("--budget", "500", "--deadline", "2d", "--samples", "1.5e8")


def test_the_plans_probe_time_is_read_from_the_store(cli, tmp_path):
    code, out, err = cli("recommend", *JOB, "--format", "json")
    assert code == 0, err
    before = {p["instance_type"]: p for p in json.loads(out)["probe_next"]}
    assert before and all("no past probe" in p["probe_hours_basis"] for p in before.values())
    # A past probe of the workload on an A10 took 300 s over its 2 rungs: a probe of g5.2xlarge (the
    # same A10) is priced at 150 s a rung, far under the bound's 60 s a rung plus compilation's 300 s.
    db = tmp_path / "r.db"
    with ResultStore(db) as s:
        s.add(took("g5.xlarge", 300, accelerator="gpu", samples_per_sec=400.0))
    code, out, err = cli("recommend", *JOB, "--store", str(db), "--format", "json")
    assert code == 0, err
    after = {p["instance_type"]: p for p in json.loads(out)["probe_next"]}
    a10 = [p for n, p in after.items() if n.startswith("g5.")]
    assert a10, after.keys()
    for p in a10:
        assert "1 past probe" in p["probe_hours_basis"] and "A10 GPUs" in p["probe_hours_basis"]
        vcpus = load_catalog().instance_types[p["instance_type"]].vcpus
        assert p["probe_hours"] * 3600 == pytest.approx(pi.STARTUP_SECONDS + ladder.measured_rungs(vcpus) * 150)
    code, out, _ = cli("recommend", *JOB, "--store", str(db))
    assert code == 0 and "Probe time of" in out and "1 past probe of this workload on A10 GPUs" in out
