"""A cron is validated at declaration by the rules that build the schedule (issue 23, item 8): what
Airflow's cron timetable refuses, or what never fires, is refused when the table is declared."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.core.triggers import Interval

BAD = ["99 99 * * *", "* * * * 8", "60 * * * *", "0 24 * * *", "0 0 0 * *", "0 0 * 13 *", "0 0 31 2 *"]
GOOD = ["0 3 * * *", "*/15 * * * *", "@daily", "@hourly", "0 0 1-7 * MON", "0 0 * * 7", "0 0 L * *"]


@pytest.mark.parametrize("cron", BAD)
def test_a_bad_cron_is_rejected_at_declaration_naming_it(cron: str) -> None:
    with pytest.raises(InvalidDeclaration) as e:
        Interval.parse(cron)
    assert repr(cron) in str(e.value) and "minute 0-59" in str(e.value), str(e.value)
    with pytest.raises(ValueError, match="not a valid schedule"):
        TableSpec.model_validate(
            {
                "catalog": "lake",
                "namespace": "db",
                "name": "t",
                "actions": {"rewrite-files": {"interval": cron}},
            }
        )


@pytest.mark.parametrize("cron", GOOD + BAD)
def test_declaration_and_airflows_timetable_agree(cron: str) -> None:
    """Accepted at declaration exactly when Airflow's CronTriggerTimetable validates it and finds a
    next run."""
    from datetime import UTC, datetime

    from airflow.timetables.trigger import CronTriggerTimetable  # the scheduler's own

    try:
        Interval.parse(cron)
        declared = True
    except InvalidDeclaration:
        declared = False
    try:
        timetable = CronTriggerTimetable(cron, timezone="UTC")
        timetable.validate()
        from croniter import croniter

        croniter(timetable._expression, datetime(2025, 1, 1, tzinfo=UTC)).get_next(datetime)
        airflow_ok = True
    except Exception:  # noqa: BLE001 - whatever Airflow raises, it refuses the schedule
        airflow_ok = False
    assert declared == airflow_ok, (cron, declared, airflow_ok)
