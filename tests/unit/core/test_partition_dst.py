"""``partition_values`` with a naive schedule time in a zone with DST behaves as its docstring says
(issue 23, item 9): sub-day periods on the absolute time line, so the hour a spring-forward skips is
never produced and the hour a fall-back repeats is, just as for an aware schedule time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from airflow_tablemgmt.core.dynamic import partition_values

NY = "America/New_York"


def test_spring_forward_never_produces_the_skipped_hour() -> None:
    # 2024-03-10: 02:00 EST jumps to 03:00 EDT. The run at 03:00 local covers 01:00-02:00 EST.
    assert partition_values(datetime(2024, 3, 10, 3, 0), "1 HOUR", {"h": "HH"}, NY) == {"h": "01"}
    hours = [partition_values(datetime(2024, 3, 10, h, 0), "1 HOUR", {"h": "HH"}, NY)["h"] for h in (1, 3, 4)]
    assert "02" not in hours and hours == ["00", "01", "03"]


def test_naive_and_aware_agree_across_both_changes() -> None:
    ny = ZoneInfo(NY)
    for day, hours in ((datetime(2024, 3, 10), range(0, 6)), (datetime(2024, 11, 3), range(0, 6))):
        for h in hours:
            naive = day + timedelta(hours=h)
            if naive.replace(tzinfo=ny).astimezone(UTC).astimezone(ny).replace(tzinfo=None) != naive:
                continue  # a wall-clock time that does not exist has no aware twin
            for freshness in ("1 HOUR", "30 MINUTE", "1 DAY"):
                aware = naive.replace(tzinfo=ny)
                fmt = {"p": "yyyy-MM-dd HH:mm"}
                assert partition_values(naive, freshness, fmt, NY) == partition_values(
                    aware, freshness, fmt, NY
                ), (
                    naive,
                    freshness,
                )


def test_daily_runs_keep_the_wall_clock_day() -> None:
    assert partition_values(datetime(2024, 3, 11, 0, 0), "1 DAY", {"d": "yyyy-MM-dd"}, NY) == {
        "d": "2024-03-10"
    }
    assert partition_values(datetime(2024, 11, 4, 0, 0), "1 DAY", {"d": "yyyy-MM-dd"}, NY) == {
        "d": "2024-11-03"
    }
