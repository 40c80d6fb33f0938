"""Java/Flink date patterns and Flink's partition-value rule (core.dynamic.date_patterns)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from airflow_tablemgmt.core.dynamic.date_patterns import DateFormatter, partition_values
from airflow_tablemgmt.core.errors import InvalidDeclaration

# --- DateFormatter -------------------------------------------------------------------------------

T = datetime(2024, 2, 9, 7, 5, 3)


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("yyyy-MM-dd", "2024-02-09"),
        ("yyyyMMdd", "20240209"),
        ("HH", "07"),
        ("H", "7"),
        ("mm", "05"),
        ("yyyy-MM-dd HH", "2024-02-09 07"),
        ("yyyy-MM-dd'T'HH:mm:ss", "2024-02-09T07:05:03"),
        ("yy/M/d", "24/2/9"),
        ("'hour='HH", "hour=07"),
        ("yyyy''MM", "2024'02"),
        ("yyyy_MM", "2024_02"),
        ("y", "2024"),
    ],
)
def test_date_formatter(pattern: str, text: str) -> None:
    assert DateFormatter(pattern).format(T) == text


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("yyyy-MM-dd hh", "'hh', which is not supported; allowed: Java date-pattern letters y"),
        ("EEE", "'EEE', which is not supported"),
        ("yyy", "allowed widths for 'y': y, yy, yyyy"),
        ("MMM", "allowed widths for 'M': M, MM"),
        ("'T", "unterminated quote"),
        ("", "is not a date pattern"),
        ("'day'", "has no date letters"),
        ("yyyy\nMM", "not allowed"),
    ],
)
def test_date_formatter_rejects_with_the_allowed_letters(pattern: str, why: str) -> None:
    with pytest.raises(InvalidDeclaration, match=f"date-formatter: .*{why}"):
        DateFormatter(pattern)


# --- partition values: format(scheduleTime - freshness) -------------------------------------------


@pytest.mark.parametrize(
    ("schedule", "freshness", "pattern", "value"),
    [
        # month and year boundaries
        (datetime(2024, 3, 1), "1 DAY", "yyyy-MM-dd", "2024-02-29"),  # leap day
        (datetime(2023, 3, 1), "1 DAY", "yyyy-MM-dd", "2023-02-28"),  # not a leap year
        (datetime(2100, 3, 1), "1 DAY", "yyyy-MM-dd", "2100-02-28"),  # century, not a leap year
        (datetime(2000, 3, 1), "1 DAY", "yyyy-MM-dd", "2000-02-29"),  # 400-year leap year
        (datetime(2024, 1, 1), "1 DAY", "yyyy-MM-dd", "2023-12-31"),  # year
        (datetime(2024, 5, 1), "1 DAY", "yyyyMMdd", "20240430"),  # 30-day month
        (datetime(2024, 1, 1), "1 HOUR", "yyyy-MM-dd HH", "2023-12-31 23"),
        (datetime(2024, 3, 1, 0, 0), "5 MINUTE", "yyyy-MM-dd HH:mm", "2024-02-29 23:55"),
        # hour and minute rollovers
        (datetime(2024, 6, 15, 0, 0), "1 HOUR", "HH", "23"),
        (datetime(2024, 6, 15, 10, 0), "1 HOUR", "HH", "09"),
        (datetime(2024, 6, 15, 10, 0), "6 HOUR", "HH", "04"),
        (datetime(2024, 6, 15, 10, 0), "5 MINUTE", "HH:mm", "09:55"),
        (datetime(2024, 6, 15, 10, 30), "30 MINUTE", "mm", "00"),
        (datetime(2024, 6, 15, 10, 7), "1 MINUTE", "HHmm", "1006"),
        (datetime(2024, 6, 15, 0, 0), "1 MINUTE", "yyyy-MM-dd HH:mm", "2024-06-14 23:59"),
    ],
)
def test_partition_value_is_the_last_complete_period(
    schedule: datetime, freshness: str, pattern: str, value: str
) -> None:
    assert partition_values(schedule, freshness, {"p": pattern}) == {"p": value}
    # An aware UTC schedule time (an Airflow logical date) gives the same in UTC.
    assert partition_values(schedule.replace(tzinfo=UTC), freshness, {"p": pattern}) == {"p": value}


def test_every_formatted_column_gets_its_value() -> None:
    got = partition_values(datetime(2024, 1, 1, tzinfo=UTC), "1 HOUR", {"ds": "yyyy-MM-dd", "hr": "HH"})
    assert got == {"ds": "2023-12-31", "hr": "23"}
    assert partition_values(datetime(2024, 1, 1, tzinfo=UTC), "1 HOUR", {}) == {}


@pytest.mark.parametrize(
    ("schedule", "freshness", "tz", "pattern", "value"),
    [
        # 00:00 UTC is 08:00 in Shanghai: one day back is the previous Shanghai day.
        (datetime(2024, 3, 1, 0, 0, tzinfo=UTC), "1 DAY", "Asia/Shanghai", "yyyy-MM-dd", "2024-02-29"),
        # 16:00 UTC is 00:00 the next day in Shanghai.
        (datetime(2024, 2, 29, 16, 0, tzinfo=UTC), "1 DAY", "Asia/Shanghai", "yyyy-MM-dd", "2024-02-29"),
        (
            datetime(2024, 2, 29, 16, 0, tzinfo=UTC),
            "1 HOUR",
            "Asia/Shanghai",
            "yyyy-MM-dd HH",
            "2024-02-29 23",
        ),
        # 00:00 UTC is the evening before in New York: the last complete NY day is two UTC days back.
        (datetime(2024, 1, 2, 0, 0, tzinfo=UTC), "1 DAY", "America/New_York", "yyyy-MM-dd", "2023-12-31"),
        # India is UTC+05:30: hourly runs at :00 UTC fall at :30 local.
        (
            datetime(2024, 1, 1, 0, 0, tzinfo=UTC),
            "1 HOUR",
            "Asia/Kolkata",
            "yyyy-MM-dd HH:mm",
            "2024-01-01 04:30",
        ),
        # A schedule time given in another zone is the same instant.
        (
            datetime(2024, 3, 1, 9, 0, tzinfo=ZoneInfo("Asia/Tokyo")),
            "1 HOUR",
            "UTC",
            "yyyy-MM-dd HH",
            "2024-02-29 23",
        ),
        # A naive schedule time is wall-clock time in the table's zone (Flink's scheduleTime string).
        (datetime(2024, 3, 1, 0, 0), "1 DAY", "Asia/Shanghai", "yyyy-MM-dd", "2024-02-29"),
    ],
)
def test_partition_values_in_the_tables_time_zone(
    schedule: datetime, freshness: str, tz: str, pattern: str, value: str
) -> None:
    assert partition_values(schedule, freshness, {"p": pattern}, tz) == {"p": value}


def test_daylight_saving_changes() -> None:
    ny = ZoneInfo("America/New_York")
    # Daily at local midnight across spring-forward (a 23-hour day): the previous local day.
    assert partition_values(
        datetime(2024, 3, 11, 0, 0, tzinfo=ny), "1 DAY", {"d": "yyyy-MM-dd"}, "America/New_York"
    ) == {"d": "2024-03-10"}
    # Fall back: 05:00Z and 06:00Z are both 01:00 local; hourly refreshes still get distinct hours.
    hours = [
        partition_values(datetime(2024, 11, 3, h, 0, tzinfo=UTC), "1 HOUR", {"h": "HH"}, "America/New_York")[
            "h"
        ]
        for h in (5, 6, 7)
    ]
    assert hours == ["00", "01", "01"]  # 04:00Z = 00 EDT, 05:00Z = 01 EDT, 06:00Z = 01 EST


def test_partition_values_reject_a_bad_zone_or_pattern() -> None:
    with pytest.raises(InvalidDeclaration, match="time-zone: 'Mars/Base' is not an IANA time zone"):
        partition_values(T, "1 DAY", {"d": "yyyy"}, "Mars/Base")
    with pytest.raises(InvalidDeclaration, match="partition-fields.d.date-formatter: 'qq'"):
        partition_values(T, "1 DAY", {"d": "qq"})
