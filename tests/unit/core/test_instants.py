"""core.instants: the run-now instant rule (issue 22): tz-aware ISO 8601 within [the DAG's start,
now + 5 minutes]; numbers, naive times and instants outside the window are refused naming the field,
the value and the window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from airflow_tablemgmt.core.instants import DAG_START_DATE, RUN_SKEW, InvalidInstant, check_run_instant

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def test_the_window_starts_at_the_generated_dags_start_date() -> None:
    from airflow_tablemgmt.dag_factory import START_DATE

    assert START_DATE == DAG_START_DATE


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-02-01T06:00:00+00:00", datetime(2026, 2, 1, 6, tzinfo=UTC)),
        ("2026-02-01T06:00:00Z", datetime(2026, 2, 1, 6, tzinfo=UTC)),
        ("2026-02-01T08:00:00.750+02:00", datetime(2026, 2, 1, 6, tzinfo=UTC)),
        (datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=-1))), datetime(2024, 1, 1, 1, tzinfo=UTC)),
        ((NOW + RUN_SKEW).isoformat(), NOW + RUN_SKEW),
    ],
)
def test_accepts_tz_aware_instants_in_the_window(value: object, expected: datetime) -> None:
    assert check_run_instant(value, now=NOW) == expected


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (-1615, "-1615 is a number, not a time"),
        (1767225600, "1767225600 is a number, not a time"),
        (1.5, "1.5 is a number"),
        (True, "True is bool, not a time"),
        ("2026-02-01T06:00:00", "'2026-02-01T06:00:00' has no time zone"),
        ("2026-02-01", "'2026-02-01' has no time zone"),
        (datetime(2026, 2, 1), "has no time zone"),
        ("9999-12-31T00:00:00+00:00", "'9999-12-31T00:00:00+00:00' is in the future"),
        ((NOW + RUN_SKEW + timedelta(seconds=1)).isoformat(), "is in the future"),
        ("1999-01-01T00:00:00+00:00", "'1999-01-01T00:00:00+00:00' is before the DAG's start date"),
        ("tomorrow", "'tomorrow' is not an ISO 8601 time"),
    ],
)
def test_refusals_name_the_field_the_value_and_the_window(value: object, words: str) -> None:
    with pytest.raises(InvalidInstant) as e:
        check_run_instant(value, "instant", now=NOW)
    message = str(e.value)
    assert message.startswith("instant: ") and words in message, message
    assert "allowed: an ISO 8601 time with a time zone between 2024-01-01T00:00:00+00:00" in message
    assert "2026-11-25T12:05:00+00:00 (now + 5 minutes)" in message
