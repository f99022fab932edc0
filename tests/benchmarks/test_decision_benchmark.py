"""The decision benchmark's scenario generator: seeded, reproducible, and honest about truth."""

from __future__ import annotations

import sys
from dataclasses import asdict

import pytest
from checkout import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import decision_quality as dq


@pytest.fixture(scope="module")
def world():
    return dq.World(seed=0)


def test_scenarios_are_seeded_and_reproducible(world):
    a = [asdict(s) for s in world.scenarios(4)]
    b = [asdict(s) for s in dq.World(seed=0).scenarios(4)]
    assert a == b
    c = [asdict(s) for s in dq.World(seed=1).scenarios(4)]
    assert a != c


def test_truth_is_a_published_row_of_the_types_own_device_and_count(world):
    by_id = {m.id: m for m in world.refs}
    for s in world.scenarios(4):
        assert len(s.types) >= 2 and set(s.truth) == set(s.types)
        for name in s.types:
            row = by_id[s.truth_row[name]]
            assert row.samples_per_sec == s.truth[name]
            it = world.catalog.instance_types[name]
            assert dq.rows_match(row, it) and row.model == dq.WORKLOAD and row.tuned
            if it.accelerator_kind != "none":
                assert row.gpus == it.accelerator_count


def test_the_advisor_never_sees_a_hidden_devices_rows(world):
    for s in world.scenarios(4):
        seen = world.visible(s.hidden_devices).measurements
        assert seen and not {m.device for m in seen} & set(s.hidden_devices)
        assert {m.device for m in world.refs} - {m.device for m in seen} == set(s.hidden_devices)


def test_every_scenario_has_a_true_optimum_inside_its_limits(world):
    for s in world.scenarios(4):
        assert s.optimum in s.types and s.optimum_cost <= s.budget_usd
        assert 0 < s.probe_budget_usd == pytest.approx(dq.PROBE_BUDGET_SHARE * s.budget_usd)


@pytest.mark.parametrize("confidence", [0.0, 0.9])
def test_one_scenario_runs_every_strategy(world, confidence):
    s = world.scenarios(1)[0]
    for strategy in dq.STRATEGIES:
        out = dq.run(world, s, strategy, confidence)
        assert len(out.probes) <= dq.MAX_PROBES and out.probe_usd <= s.probe_budget_usd + 1e-9
        if strategy == "none":
            assert out.probes == []
