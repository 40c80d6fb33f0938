import re
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
    [
        ("5 MINUTE", "*/5 * * * *"),
        ("1 MINUTE", "* * * * *"),
        ("30 minute", "*/30 * * * *"),
        ("1 HOUR", "0 * * * *"),
        ("6 HOUR", "0 */6 * * *"),
        ("1 DAY", "0 0 * * *"),
        ("5 MINUTES", "*/5 * * * *"),
        ("12 hours", "0 */12 * * *"),
        ("INTERVAL '5' MINUTE", "*/5 * * * *"),
        ("interval '2' HOURS", "0 */2 * * *"),
        ("INTERVAL 1 DAY", "0 0 * * *"),
        ("60 MINUTE", "0 * * * *"),
        ("24 HOUR", "0 0 * * *"),
    ],
)
def test_freshness_to_cron(text: str, cron: str) -> None:
    assert Freshness.parse(text).to_cron() == cron


@pytest.mark.parametrize(
    ("text", "delta"),
    [
        ("5 MINUTE", timedelta(minutes=5)),
        ("2 HOURS", timedelta(hours=2)),
        ("1 DAY", timedelta(days=1)),
        ("downstream", timedelta(0)),
    ],
)
def test_freshness_delta(text: str, delta: timedelta) -> None:
    assert Freshness.parse(text).delta == delta


@pytest.mark.parametrize("text", ["downstream", "DOWNSTREAM", " Downstream "])
def test_downstream_has_no_cron(text: str) -> None:
    f = Freshness.parse(text)
    assert f.is_downstream and f.to_cron() is None and str(f) == "DOWNSTREAM"
    assert Freshness.parse(str(f)) == f


def test_freshness_round_trips_through_its_text() -> None:
    for text in ("5 MINUTE", "INTERVAL '3' HOUR", "1 day"):
        f = Freshness.parse(text)
        assert Freshness.parse(str(f)) == f and not f.is_downstream


@pytest.mark.parametrize(
    ("text", "allowed"),
    [
        ("7 MINUTE", "allowed for MINUTE: 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60"),
        ("45 MINUTES", "allowed for MINUTE: 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60"),
        ("5 HOUR", "allowed for HOUR: 1, 2, 3, 4, 6, 8, 12, 24"),
        ("48 HOUR", "allowed for HOUR: 1, 2, 3, 4, 6, 8, 12, 24"),
        ("2 DAY", "allowed for DAY: 1"),
        ("0 MINUTE", "allowed for MINUTE: 1,"),
        ("0 DAY", "allowed for DAY: 1"),
        ("99999999999999999999 MINUTE", "allowed for MINUTE: 1,"),
    ],
)
def test_freshness_rejected_with_the_allowed_values_of_its_unit(text: str, allowed: str) -> None:
    with pytest.raises(InvalidFreshness, match=re.escape(allowed)):
        Freshness.parse(text)


@pytest.mark.parametrize(
    "text",
    [
        "fast",
        "",
        "5",
        "-5 MINUTE",
        "1.5 HOUR",
        "5 WEEK",
        "INTERVAL '5 MINUTE",
        "5 MINUTE 1 HOUR",
        "downstreams",
    ],
)
def test_not_a_freshness_lists_every_form(text: str) -> None:
    with pytest.raises(InvalidFreshness, match="is not a freshness; allowed: 'N MINUTE'.*'downstream'"):
        Freshness.parse(text)


def test_seconds_message_says_why() -> None:
    with pytest.raises(InvalidFreshness, match="no seconds field; use MINUTE"):
        Freshness.parse("10 SECOND")
    with pytest.raises(InvalidFreshness, match="no seconds field"):
        Freshness.parse("INTERVAL '30' SECONDS")


def test_freshness_is_not_a_string() -> None:
    with pytest.raises(InvalidFreshness, match="freshness: 5 is not a freshness"):
        Freshness.parse(5)  # type: ignore[arg-type]


def test_strategy_parallelism() -> None:
    with pytest.raises(InvalidDeclaration, match="parallelism"):
        TriggerStrategy(Interval.parse("1h"), parallelism=0)
