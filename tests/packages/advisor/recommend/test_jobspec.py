"""Deadline, amount and work parsing: every accepted spelling, and one-line errors for the rest."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from advisor.errors import AdvisorError
from advisor.recommend.jobspec import parse_amount, parse_deadline, work_samples

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("text,hours", [
    ("90m", 1.5), ("36h", 36), ("2d", 48), ("1d12h", 36), ("1.5h", 1.5), ("1w", 168), ("90s", 90 / 3600),
    ("2D", 48), ("1d 12h", 36),
    ("P2DT3H", 51), ("PT90M", 1.5), ("P1W", 168), ("PT1H30M", 1.5), ("P1DT0.5H", 24.5), ("pt36h", 36),
])
def test_durations(text, hours):
    assert parse_deadline(text, NOW) == timedelta(hours=hours)


def test_absolute_datetime_with_zone():
    assert parse_deadline("2026-11-23T12:00:00+00:00", NOW) == timedelta(days=2)
    assert parse_deadline("2026-11-23T14:00+02:00", NOW) == timedelta(days=2)
    assert parse_deadline("2026-11-23T12:00Z", NOW) == timedelta(days=2)


def test_naive_datetime_is_utc():
    assert parse_deadline("2026-11-22T12:00", NOW) == timedelta(days=1)
    assert parse_deadline("2026-11-22 18:00", NOW) == timedelta(hours=30)
    assert parse_deadline("2026-11-23", NOW) == timedelta(hours=36)


@pytest.mark.parametrize("text", ["2026-11-20T12:00", "2020-01-01", "2026-11-21T12:00Z"])
def test_past_deadline(text):
    with pytest.raises(AdvisorError, match="in the past"):
        parse_deadline(text, NOW)


@pytest.mark.parametrize("text", ["", "  ", "soon", "2", "36", "h", "d2", "2x", "P", "PT", "P2DT", "1d12", "-2d",
                                  "0h", "0d0h", "P0D", "2026-13-01", "P1Y", "nan", "inf", "1e400d"])
def test_bad_deadlines(text):
    with pytest.raises(AdvisorError) as e:
        parse_deadline(text, NOW)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("text,value", [("1.2e8", 1.2e8), ("120M", 1.2e8), ("120_000_000", 1.2e8),
                                        ("1,000", 1000), ("500", 500), ("2.5k", 2500), ("1G", 1e9), ("0.01", 0.01)])
def test_amounts(text, value):
    assert parse_amount(text, "--samples") == pytest.approx(value)


@pytest.mark.parametrize("text", ["0", "-1", "nan", "NaN", "inf", "-inf", "1e999", "abc", "", "M", "1e", "--5"])
def test_bad_amounts(text):
    with pytest.raises(AdvisorError) as e:
        parse_amount(text, "--budget")
    assert "--budget" in str(e.value) and "\n" not in str(e.value)


def test_work_from_epochs():
    assert work_samples(None, "90", "1.28M") == pytest.approx(90 * 1.28e6)
    assert work_samples("1e8", None, None) == 1e8


@pytest.mark.parametrize("args", [(None, None, None), (None, "3", None), (None, None, "1000"), ("1e8", "3", "1000"),
                                  (None, "0", "1000"), ("0", None, None)])
def test_bad_work(args):
    with pytest.raises(AdvisorError):
        work_samples(*args)


def test_each_market_choice_draws_on_the_catalogs_markets():
    """One rule (jobspec.catalog_markets) for the image and the token rankings."""
    from typing import get_args

    from advisor.recommend.jobspec import MarketChoice, catalog_markets
    from catalog.models import Market

    drawn = {choice: catalog_markets(choice) for choice in get_args(MarketChoice)}
    assert drawn == {"on-demand": {"on-demand"}, "spot": {"spot"}, "any": {"on-demand", "spot"}}
    assert set().union(*drawn.values()) == set(get_args(Market))
