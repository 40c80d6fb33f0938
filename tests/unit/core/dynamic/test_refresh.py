"""The refresh request written down once (core.dynamic.refresh): one schedule-time format and parser,
the parameters <-> DAG-run conf, the action's name from core.actions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_tablemgmt.core.actions import REFRESH as REFRESH_ACTION
from airflow_tablemgmt.core.dynamic.refresh import (
    REFRESH,
    format_schedule_time,
    parse_schedule_time,
    refresh_conf,
    refresh_parameters,
    run_parameters,
    schedule_time_of,
    trigger_of,
)

T = datetime(2026, 2, 3, 4, 5, 6, tzinfo=UTC)


def test_the_action_name_is_core_actions_own() -> None:
    assert REFRESH == REFRESH_ACTION.name == "refresh"


def test_one_format_one_parser_round_trip() -> None:
    text = format_schedule_time(T)
    assert text == "2026-02-03 04:05:06"
    assert parse_schedule_time(text) == T
    assert parse_schedule_time("2026-02-03T05:05:06.5+01:00") == T  # ISO, to UTC, to the second
    assert parse_schedule_time(datetime(2026, 2, 3, 4, 5, 6)) == T  # naive is UTC
    assert parse_schedule_time(None) is None


def test_a_bad_schedule_time_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"scheduleTime: 'noon' is not a time; expected yyyy-MM-dd HH:mm:ss"):
        parse_schedule_time("noon")


def test_parameters_travel_through_the_conf_unchanged() -> None:
    params = refresh_parameters("MANUAL", True, T, {"day": 1}, {"k": "v"})
    conf = refresh_conf(params)
    assert conf == params
    assert run_parameters("ACTIVE", conf, "manual", T + timedelta(hours=1)) == params


def test_what_the_task_reads_back_from_a_process() -> None:
    assert trigger_of({}) == "SCHEDULED" and trigger_of({"trigger": "MANUAL"}) == "MANUAL"
    fallback = datetime(2026, 1, 1, tzinfo=UTC)
    assert schedule_time_of({}, fallback) == fallback
    assert schedule_time_of({"schedule_time": "2026-02-03 04:05:06"}, fallback) == T
