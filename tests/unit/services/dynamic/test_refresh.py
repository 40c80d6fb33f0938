"""services.dynamic and the factory's run parameters without a database or Spark: schedule-time parsing,
the refresh-history row, what a refresh task makes of its DAG run."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_tablemgmt.core.dynamic.refresh import run_parameters
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.factories.dynamic import DynamicTableProcessFactory
from airflow_tablemgmt.services import dynamic
from airflow_tablemgmt.services.errors import InvalidInput

T = datetime(2026, 2, 3, tzinfo=UTC)


def test_schedule_time_flink_format_and_iso() -> None:
    assert dynamic.parse_schedule_time("2026-02-03 00:00:00") == T
    assert dynamic.parse_schedule_time("2026-02-03T01:00:00+01:00") == T
    assert dynamic.parse_schedule_time(None) is None
    with pytest.raises(
        InvalidInput, match="scheduleTime: 'yesterday' is not a time; expected yyyy-MM-dd HH:mm:ss"
    ):
        dynamic.parse_schedule_time("yesterday")


@pytest.mark.parametrize(
    ("state", "conf", "run_type", "expected"),
    [
        ("ACTIVE", None, "scheduled", ("SCHEDULED", True)),
        ("ACTIVE", None, "asset_triggered", ("SCHEDULED", True)),  # downstream: after its upstream
        ("ACTIVE", None, "manual", ("MANUAL", False)),
        (
            "ACTIVE",
            {"trigger": "MANUAL", "is_periodic": True, "schedule_time": "2026-02-01 00:00:00"},
            "manual",
            ("MANUAL", True),
        ),
        ("CREATING", None, "scheduled", ("CREATION", False)),  # a YAML table is created by its first run
    ],
)
def test_run_parameters_from_the_dag_run(
    state: str, conf: dict[str, object] | None, run_type: str, expected: tuple[str, bool]
) -> None:
    params = run_parameters(state, conf, run_type, T)
    assert (params["trigger"], params["is_periodic"]) == expected
    assert params["schedule_time"] == (conf or {}).get("schedule_time", "2026-02-03 00:00:00")


def test_history_row_has_snowflakes_columns_before_and_after_the_run() -> None:
    pending = Process(
        1,
        "l.d.t",
        "refresh",
        T,
        ProcessStatus.PENDING,
        parameters={"trigger": "MANUAL", "schedule_time": "2026-02-03 00:00:00"},
    )
    row = dynamic.history_row(pending)
    assert (row["trigger"], row["state"], row["refresh_action"], row["schedule_time"]) == (
        "MANUAL",
        "PENDING",
        None,
        "2026-02-03 00:00:00",
    )
    done = Process(
        2,
        "l.d.t",
        "refresh",
        T,
        ProcessStatus.SUCCESS,
        external_id="app-1",
        parameters={"trigger": "SCHEDULED"},
        summary={
            "refresh_action": "PARTITION",
            "rows_written": 5,
            "duration_seconds": 1.5,
            "partitions_written": [{"day": "2026-02-02"}],
            "source_snapshots": {"l.d.s": 7},
        },
    )
    row = dynamic.history_row(done)
    assert row["application_id"] == "app-1" and row["rows_written"] == 5
    assert set(row) >= {
        "process_id",
        "state",
        "reason",
        "trigger",
        "refresh_action",
        "schedule_time",
        "source_snapshots",
        "partitions_written",
        "rows_written",
        "duration_seconds",
        "application_id",
    }


def test_summary_completion_keeps_what_the_job_said() -> None:
    p = Process(3, "l.d.t", "refresh", T, ProcessStatus.RUNNING, parameters={"trigger": "SCHEDULED"})
    out = DynamicTableProcessFactory().complete_summary(
        p, {"refresh_action": "NO_DATA", "application_id": None}, application_id=None, duration_seconds=0.0
    )
    assert out["refresh_action"] == "NO_DATA" and out["schedule_time"] == "2026-02-03 00:00:00"
    assert out["trigger"] == "SCHEDULED" and out["rows_written"] == 0 and out["partitions_written"] == []
