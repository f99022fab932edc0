"""The factory's results are what a probe writes: they round-trip, and times read as UTC."""

from __future__ import annotations

from datetime import timedelta

from factories import T0, probe_result


def test_factory_result_round_trips():
    from lightning_module.contract.result import parse_result

    r = probe_result(n=3)
    assert parse_result(r.model_dump_json()) == r


def test_a_time_without_an_offset_is_read_as_utc():
    import json

    from lightning_module.contract.result import parse_result

    data = json.loads(probe_result(n=1).model_dump_json())
    data["finished_at"] = f"{T0:%Y-%m-%d}T10:00:00"
    data["started_at"] = f"{T0:%Y-%m-%d}T09:59:00"
    r = parse_result(json.dumps(data))
    assert r.finished_at == T0.replace(hour=10)
    assert r.finished_at - T0 == timedelta(hours=10)  # comparable with the probe's own aware times
