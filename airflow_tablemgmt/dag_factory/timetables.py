"""What every DAG of the factory shares: the start date and an interval's timetable.

Apart from ``build.py`` (the tables' DAGs) so that a task start of a planned or discovery DAG, which builds
one small DAG, does not import what only the tables' DAGs use (their operator, its lifecycle, the failure
callback and what they import): a task start pays for every module the DAG file imports
(``benchmarks/dag_parse.py``, single-DAG parse).
"""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.sdk import CronTriggerTimetable, DeltaTriggerTimetable

from airflow_tablemgmt.core.triggers import Interval

# 2024-01-01 UTC, as a pendulum DateTime: DAG() derives its timezone from the start date through
# pendulum on every construction, which is cheaper when it is one already (≈ 30 µs of ≈ 200 µs per
# DAG(); the serialized DAG is the same).
START_DATE = pendulum.datetime(2024, 1, 1, tz="UTC")


def timetable(interval: Interval) -> Any:
    """``interval``'s timetable: a cron expression's in UTC, else every ``interval.every``."""
    if interval.cron is not None:
        return CronTriggerTimetable(interval.cron, timezone="UTC")
    assert interval.every is not None
    return DeltaTriggerTimetable(interval.every)
