"""Durations: a unit is required, zero/negative/overflow are field errors, floors need an override."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from airflow_tablemgmt.core.durations import Duration
from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.tables import parse_table
from airflow_tablemgmt.core.triggers import Interval


def table(actions: dict) -> dict:
    return {"catalog": "lake", "namespace": "db", "name": "t", "actions": actions}


def ttl(retention: object, **extra: object) -> dict:
    return table({"expire-data": {"column": "ts", "retention": retention, **extra}})


@pytest.mark.parametrize("bare", [30, 30.0, "30", " 30 ", "1.5", -1, 0])
def test_bare_number_is_an_error_naming_the_field_and_an_example(bare: object) -> None:
    # `tablemgmt register --set expire-data.retention=30` reaches the model as int 30 (yaml.safe_load)
    with pytest.raises(InvalidDeclaration) as e:
        parse_table(ttl(bare))
    msg = str(e.value)
    assert "actions.expire-data.retention" in msg
    assert "'30d'" in msg and "unit" in msg


@pytest.mark.parametrize("field", ["retry-delay", "lease-wait", "poll-interval"])
def test_every_duration_option_needs_a_unit(field: str) -> None:
    with pytest.raises(InvalidDeclaration, match=rf"rewrite-files\.{field}.*no unit.*'30d'"):
        parse_table(table({"rewrite-files": {field: 30}}))


@pytest.mark.parametrize("value", ["0d", "0s", "-1d", "- 5h", "0 hours"])
def test_zero_and_negative_durations_rejected(value: str) -> None:
    with pytest.raises(InvalidDeclaration, match=r"expire-snapshots\.older-than"):
        parse_table(table({"expire-snapshots": {"older-than": value, "allow-below-floor": True}}))


@pytest.mark.parametrize("value", [timedelta(0), timedelta(seconds=-1), timedelta(milliseconds=1500)])
def test_timedelta_values_follow_the_same_rules(value: timedelta) -> None:
    class M(BaseModel):
        d: Duration

    with pytest.raises(ValidationError, match="d"):
        M(d=value)


def test_overflow_is_a_field_error_not_an_overflow_error() -> None:
    with pytest.raises(InvalidDeclaration, match=r"retention.*too large"):
        parse_table(ttl("99999999999d"))


def test_expire_data_retention_floor_one_day_with_logged_override(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(
        InvalidDeclaration, match=r"retention.*below the 1-day floor.*allow-below-floor: true"
    ):
        parse_table(ttl("23h"))
    with caplog.at_level(logging.WARNING, logger="airflow_tablemgmt"):
        spec = parse_table(ttl("2h", **{"allow-below-floor": True}))
    assert spec.action_settings("expire-data").options()["retention"] == "2h"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("lake.db.t" in m and "expire-data" in m and "allow-below-floor" in m for m in warned), warned
    assert parse_table(ttl("1d")).action_settings("expire-data").options()["retention"] == "1d"


def test_expire_snapshots_older_than_floor_one_hour_with_override() -> None:
    with pytest.raises(InvalidDeclaration, match=r"older-than.*below the 1-hour floor"):
        parse_table(table({"expire-snapshots": {"older-than": "59m"}}))
    spec = parse_table(table({"expire-snapshots": {"older-than": "10m", "allow-below-floor": True}}))
    assert spec.action_settings("expire-snapshots").options()["older-than"] == "10m"
    parse_table(table({"expire-snapshots": {"older-than": "1h"}}))


def test_override_never_allows_a_cutoff_in_the_future() -> None:
    for action, field, extra in (
        ("expire-data", "retention", {"column": "ts"}),
        ("expire-snapshots", "older-than", {}),
        ("delete-orphans", "older-than", {}),
    ):
        with pytest.raises(InvalidDeclaration, match=field):
            parse_table(table({action: {field: "-1h", "allow-below-floor": True, **extra}}))
        with pytest.raises(InvalidDeclaration, match=field):
            parse_table(table({action: {field: "0s", "allow-below-floor": True, **extra}}))


@pytest.mark.parametrize("value", [30, "30", "0m", "0 3", "-5m", "99999999999d", 0])
def test_intervals_reject_bare_numbers_zero_negative_overflow(value: object) -> None:
    with pytest.raises(InvalidDeclaration, match=r"rewrite-files\.interval.*allowed"):
        parse_table(table({"rewrite-files": {"interval": value}}))
    with pytest.raises(InvalidDeclaration, match="interval"):
        Interval.parse(value)  # type: ignore[arg-type]


def test_interval_keeps_cron_and_duration_syntax() -> None:
    spec = parse_table(table({"rewrite-files": {"interval": "0 3 * * *", "fallback-interval": "6h"}}))
    assert spec.action_settings("rewrite-files").interval == "0 3 * * *"


@settings(max_examples=200, deadline=None, database=None)
@given(st.integers(min_value=1, max_value=36500 * 86400))
def test_duration_round_trips_with_a_unit(seconds: int) -> None:
    class M(BaseModel):
        d: Duration

    dumped = M(d=timedelta(seconds=seconds)).model_dump(mode="json")["d"]
    assert dumped[-1] in "smhd" and not dumped.strip().lstrip("-").isdigit()
    assert M.model_validate({"d": dumped}).d == timedelta(seconds=seconds)


def test_a_dumped_spec_validates_back_to_itself() -> None:
    spec = parse_table(
        table(
            {
                "expire-snapshots": {"older-than": "36h", "retry-delay": "45s", "lease-wait": "90m"},
                "expire-data": {"column": "c", "retention": "400d"},
            }
        )
    )
    dumped = spec.model_dump(mode="json", by_alias=True)
    assert dumped["actions"]["expire-snapshots"]["older-than"] == "36h"
    assert parse_table(dumped) == spec
