from datetime import timedelta

import pytest

from airflow_tablemgmt.core.errors import InvalidDeclaration, InvalidFreshness
from airflow_tablemgmt.core.triggers import Freshness, Interval, TriggerStrategy


@pytest.mark.parametrize(
    ("text", "every"),
    [
        ("6h", timedelta(hours=6)),
        ("30 minutes", timedelta(minutes=30)),
        ("1 DAY", timedelta(days=1)),
        ("90m", timedelta(minutes=90)),
    ],
)
def test_durations(text: str, every: timedelta) -> None:
    assert Interval.parse(text) == Interval(every=every)


@pytest.mark.parametrize("text", ["0 3 * * *", "*/15 * * * *", "@daily", "0 0 1-7 * MON"])
def test_crons(text: str) -> None:
    assert Interval.parse(text).cron == text


@pytest.mark.parametrize("text", ["soon", "5 fortnights", "30s", "* * *"])
def test_bad_intervals_name_the_rule(text: str) -> None:
    with pytest.raises(InvalidDeclaration, match="allowed"):
        Interval.parse(text)


@pytest.mark.parametrize(
    ("text", "cron"),
    [("5 MINUTE", "*/5 * * * *"), ("1 MINUTE", "* * * * *"), ("30 minute", "*/30 * * * *"), ("1 HOUR", "0 * * * *"),
     ("6 HOUR", "0 */6 * * *"), ("1 DAY", "0 0 * * *")],
)  # fmt: skip
def test_freshness_to_cron(text: str, cron: str) -> None:
    assert Freshness.parse(text).to_cron() == cron


@pytest.mark.parametrize("text", ["7 MINUTE", "5 HOUR", "2 DAY", "30 SECOND", "0 MINUTE", "fast"])
def test_freshness_rejected_with_allowed_values(text: str) -> None:
    with pytest.raises(InvalidFreshness, match="allowed: 'N MINUTE'"):
        Freshness.parse(text)


def test_seconds_message_says_why() -> None:
    with pytest.raises(InvalidFreshness, match="no seconds field"):
        Freshness.parse("10 SECOND")


def test_strategy_parallelism() -> None:
    with pytest.raises(InvalidDeclaration, match="parallelism"):
        TriggerStrategy(Interval.parse("1h"), parallelism=0)
