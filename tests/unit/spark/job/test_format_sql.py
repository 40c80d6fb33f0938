"""The SQL the Delta maintainers send: identifiers quoted, values as literals, retention in whole hours
rounded up; a table location with a quote never reaches Spark."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.formats.delta.actions import OptimizeSettings, VacuumSettings
from airflow_tablemgmt.formats.delta.job.optimize import optimize_sql
from airflow_tablemgmt.formats.delta.job.vacuum import vacuum_sql
from airflow_tablemgmt.spark.errors import InvalidJobSpec
from airflow_tablemgmt.spark.job.maintainers.paths import take_location


def test_optimize_sql() -> None:
    assert optimize_sql("/w/t", OptimizeSettings()) == "OPTIMIZE delta.`/w/t`"
    s = OptimizeSettings.model_validate(
        {"zorder-by": ["a", "b"], "partition-filter": {"day": "2026-11-25", "h": 3}}
    )
    assert (
        optimize_sql("/w/t", s)
        == "OPTIMIZE delta.`/w/t` WHERE `day` = '2026-11-25' AND `h` = 3 ZORDER BY (`a`, `b`)"
    )
    with pytest.raises(ValueError, match="column"):
        OptimizeSettings.model_validate({"partition-filter": {"a; DROP": 1}})


def test_vacuum_sql_retains_whole_hours_rounded_up() -> None:
    assert vacuum_sql("/w/t", VacuumSettings(), dry_run=True) == "VACUUM delta.`/w/t` DRY RUN"
    s = VacuumSettings.model_validate({"retain": "30m", "allow-below-floor": True})
    assert vacuum_sql("/w/t", s, dry_run=False) == "VACUUM delta.`/w/t` RETAIN 1 HOURS"
    assert vacuum_sql("/w/t", VacuumSettings.model_validate({"retain": "7d"}), dry_run=False).endswith(
        "RETAIN 168 HOURS"
    )
    with pytest.raises(ValueError, match="retain: 2h is below the 24-hour floor"):
        VacuumSettings.model_validate({"retain": "2h"})


@pytest.mark.parametrize("location", ["/w/t`; DROP", "/w/it's", "", None])
def test_a_location_that_could_leave_its_quotes_is_refused(location: object) -> None:
    with pytest.raises(InvalidJobSpec, match="table-location"):
        take_location({"table-location": location}, "vacuum")
