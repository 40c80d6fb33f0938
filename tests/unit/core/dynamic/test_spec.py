"""Dynamic-table definitions: the states, the spec and its DAG view (core.dynamic.spec)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from airflow_tablemgmt.core.actions import ACTIONS, RefreshSettings
from airflow_tablemgmt.core.dynamic import (
    DynamicState,
    DynamicTableSpec,
    RefreshAction,
    RefreshMode,
    RefreshTrigger,
    parse_dynamic_table,
)
from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.tables import TableSpec, parse_table
from airflow_tablemgmt.declarations.parse import parse_declarations_text

# --- the definition ------------------------------------------------------------------------------


def _spec(**over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "identifier": "lake.db.daily",
        "query": "SELECT day, count(*) AS n FROM lake.db.events GROUP BY day",
        "freshness": "1 DAY",
    }
    base.update(over)
    return base


def test_the_enums() -> None:
    assert [m.value for m in RefreshMode] == ["AUTO", "FULL", "INCREMENTAL"]
    assert [m.value for m in RefreshTrigger] == ["SCHEDULED", "MANUAL", "CREATION"]
    assert [m.value for m in RefreshAction] == ["FULL", "PARTITION", "NO_DATA", "INCREMENTAL"]
    assert [m.value for m in DynamicState] == ["CREATING", "ACTIVE", "SUSPENDED"]


def test_spec_round_trips_by_alias() -> None:
    spec = DynamicTableSpec.model_validate(
        _spec(
            **{
                "partitioned-by": ["day"],
                "partition.fields.day.date-formatter": "yyyy-MM-dd",
                "time-zone": "Europe/Berlin",
                "retry-delay": "10m",
                "schema": [{"name": "day", "type": "date", "nullable": True}],
                "source-tables": ["lake.db.events"],
            }
        )
    )
    assert spec.id == "lake.db.daily" and str(spec.identifier) == "lake.db.daily"
    assert spec.formatters == {"day": "yyyy-MM-dd"} and spec.cron == "0 0 * * *"
    assert spec.retry_delay == timedelta(minutes=10) and spec.suspend_after_failures == 5
    doc = spec.model_dump(mode="json", by_alias=True)
    assert doc["freshness"] == "1 DAY" and doc["partition-fields"] == {
        "day": {"date-formatter": "yyyy-MM-dd"}
    }
    assert doc["schema"][0]["name"] == "day" and doc["source-tables"] == ["lake.db.events"]
    assert DynamicTableSpec.model_validate(doc) == spec
    assert DynamicTableSpec.model_validate_json(spec.model_dump_json(by_alias=True)) == spec
    assert spec.partition_values(datetime(2024, 3, 1, 1, tzinfo=UTC)) == {"day": "2024-02-29"}


@pytest.mark.parametrize(
    ("over", "message"),
    [
        (
            {"refresh-mode": "continuous"},
            r"refresh-mode: 'continuous' is not a refresh mode; allowed: AUTO \(the default: incremental where "
            r"the query allows it, else full, recording why\), FULL or INCREMENTAL",
        ),
        (
            {"freshness": "7 MINUTE"},
            "freshness: '7 MINUTE' cannot be a full-refresh cron.*allowed for MINUTE: 1, 2",
        ),
        ({"freshness": "30 SECOND"}, "freshness: .*no seconds field"),
        ({"query": "SELECT 1; DELETE FROM t"}, "query: holds more than one statement"),
        (
            {"partition.fields.hour.date-formatter": "HH"},
            "partition-fields.hour: 'hour' has a date formatter but is not in partitioned-by",
        ),
        (
            {
                "partitioned-by": ["day"],
                "partition-fields": {"day": {"date-formatter": "dd"}},
                "partition.fields.day.date-formatter": "yyyy",
            },
            "given twice",
        ),
        (
            {"partition.fields.day.format": "x"},
            "unknown option; allowed: partition.fields.<column>.date-formatter",
        ),
        (
            {"partitioned-by": ["day"], "partition-fields": {"day": {"date-formatter": "yyyy-MM-dd hh"}}},
            "partition-fields.day.date-formatter: 'yyyy-MM-dd hh' uses 'hh'",
        ),
        ({"partitioned-by": ["day", "DAY"]}, "'DAY' is listed twice"),
        ({"partitioned-by": ["day;"]}, "not a valid identifier"),
        ({"time-zone": "Mars/Base"}, "time-zone: 'Mars/Base' is not an IANA time zone"),
        (
            {
                "freshness": "downstream",
                "partitioned-by": ["day"],
                "partition.fields.day.date-formatter": "yyyy-MM-dd",
            },
            "partition-fields: a 'freshness: downstream' table has no schedule time of its own.*\\(day\\); it refreshes in full",
        ),
        ({"suspend-after-failures": 0}, "suspend-after-failures: Input should be greater than or equal to 1"),
        ({"retries": 21}, "retries: Input should be less than or equal to 20"),
        ({"retry-delay": 30}, "retry-delay: 30 has no unit"),
        ({"identifier": "lake.daily"}, "identifier: 'lake.daily' must be written catalog.namespace.name"),
        ({"catalog": "lake"}, "give either identifier or catalog"),
        ({"identifier": "lake.db.x y"}, "name: 'x y' is not a valid identifier"),
        ({"source-tables": ["events"]}, "must be written catalog.namespace.table"),
        ({"interval": "1h"}, "interval: Extra inputs are not permitted"),
        ({"identifier": "lake.db." + "x" * 120}, "shorten the catalog, namespace or table name"),
    ],
)
def test_bad_definitions_name_the_field(over: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidDeclaration, match=message):
        parse_dynamic_table(_spec(**over), "def.json")


def test_missing_fields() -> None:
    with pytest.raises(InvalidDeclaration, match="def.json: freshness: Field required"):
        parse_dynamic_table({"identifier": "a.b.c", "query": "SELECT 1"}, "def.json")
    with pytest.raises(InvalidDeclaration, match="expected a mapping"):
        parse_dynamic_table(["a.b.c"], "def.json")


def test_refresh_mode_is_case_insensitive_and_flink_interval_spelling() -> None:
    spec = parse_dynamic_table(_spec(**{"refresh-mode": "full", "freshness": "INTERVAL '5' MINUTE"}))
    assert spec.refresh_mode == RefreshMode.FULL and spec.cron == "*/5 * * * *"
    assert parse_dynamic_table(_spec(**{"refresh-mode": " Incremental "})).refresh_mode == "INCREMENTAL"
    assert parse_dynamic_table(_spec()).refresh_mode == RefreshMode.AUTO  # the default
    assert parse_dynamic_table(_spec()).model_dump(by_alias=True, mode="json")["refresh-mode"] == "AUTO"


# --- the maintenance view ----------------------------------------------------------------------


def test_table_spec_carries_the_cron_and_the_task_settings() -> None:
    spec = parse_dynamic_table(
        _spec(owner="bi", queue="spark", priority=7, retries=3, **{"retry-delay": "2m"})
    )
    view = spec.table_spec()
    assert isinstance(view, TableSpec) and view.id == spec.id
    assert (view.owner, view.queue, view.priority) == ("bi", "spark", 7)
    settings = view.action_settings("refresh")
    assert isinstance(settings, RefreshSettings)
    assert (settings.interval, settings.trigger, settings.freshness) == ("0 0 * * *", "schedule", "1 DAY")
    assert (settings.retries, settings.retry_delay) == (3, timedelta(minutes=2))
    assert view.enabled_actions() == ["refresh"]
    # what the store writes reads back
    assert TableSpec.model_validate(view.model_dump(mode="json", by_alias=True)) == view


def test_downstream_table_spec_names_its_upstreams() -> None:
    spec = parse_dynamic_table(
        _spec(
            identifier="lake.db.weekly",
            query="SELECT * FROM lake.db.daily JOIN lake.db.events",
            freshness="downstream",
        )
    )
    assert spec.upstream_candidates({"lake.db.daily", "lake.db.weekly"}) == {"lake.db.daily"}
    settings = spec.table_spec({"lake.db.daily", "lake.db.weekly"}).action_settings("refresh")
    assert isinstance(settings, RefreshSettings)
    assert (settings.trigger, settings.upstream, settings.interval) == ("upstream", ["lake.db.daily"], None)
    # Without the known dynamic tables: its recorded source tables.
    recorded = spec.model_copy(update={"source_tables": ["lake.db.daily", "lake.db.events"]})
    assert recorded.table_spec().action_settings("refresh").upstream == ["lake.db.daily", "lake.db.events"]  # type: ignore[attr-defined]
    # No upstream at all: the view cannot be built.
    with pytest.raises(
        InvalidDeclaration, match="lake.db.weekly: freshness: downstream needs an upstream dynamic"
    ):
        spec.table_spec(set())


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({}, "interval: a refresh needs the cron of its freshness"),
        ({"trigger": "upstream"}, "needs at least one upstream"),
        (
            {"trigger": "upstream", "upstream": ["a.b.c"], "interval": "1h"},
            "trigger 'upstream' refreshes have no interval",
        ),
        ({"trigger": "event", "interval": "1h"}, "Input should be 'schedule' or 'upstream'"),
        ({"interval": "1h", "on-new-snapshot": True}, "never on new snapshots"),
    ],
)
def test_refresh_settings(raw: dict[str, object], message: str) -> None:
    with pytest.raises(Exception, match=message):
        ACTIONS.get("refresh").settings(raw)


def test_a_plain_table_cannot_declare_refresh() -> None:
    body = {
        "catalog": "lake",
        "namespace": "db",
        "name": "t",
        "actions": {"refresh": {"interval": "0 * * * *"}},
    }
    with pytest.raises(
        InvalidDeclaration, match="refresh: only dynamic tables refresh; declare it under dynamic-tables:"
    ):
        parse_table(body)
    with pytest.raises(InvalidDeclaration, match="only dynamic tables refresh"):
        parse_declarations_text(  # the real parse of a declarations file
            json.dumps({"catalogs": [{"name": "lake", "warehouse": "/w"}], "tables": [body]}), "tables.yaml"
        ).raise_for_errors()
    # other actions of plain tables are unaffected
    assert parse_table({**body, "actions": {"expire-snapshots": {}}}).enabled_actions() == [
        "expire-snapshots"
    ]
