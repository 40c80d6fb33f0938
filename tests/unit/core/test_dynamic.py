"""Dynamic-table definitions: date patterns, Flink's partition-value rule, the spec and its DAG view."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from airflow_tablemgmt.core.actions import ACTIONS, RefreshSettings
from airflow_tablemgmt.core.dynamic import (
    DateFormatter,
    DynamicState,
    DynamicTableSpec,
    RefreshAction,
    RefreshMode,
    RefreshTrigger,
    check_query,
    find_cycle,
    parse_dynamic_table,
    partition_values,
    referenced_tables,
)
from airflow_tablemgmt.core.errors import InvalidDeclaration
from airflow_tablemgmt.core.tables import TableSpec, parse_declarations, parse_table

# --- DateFormatter -------------------------------------------------------------------------------

T = datetime(2024, 2, 9, 7, 5, 3)


@pytest.mark.parametrize(
    ("pattern", "text"),
    [("yyyy-MM-dd", "2024-02-09"), ("yyyyMMdd", "20240209"), ("HH", "07"), ("H", "7"), ("mm", "05"),
     ("yyyy-MM-dd HH", "2024-02-09 07"), ("yyyy-MM-dd'T'HH:mm:ss", "2024-02-09T07:05:03"), ("yy/M/d", "24/2/9"),
     ("'hour='HH", "hour=07"), ("yyyy''MM", "2024'02"), ("yyyy_MM", "2024_02"), ("y", "2024")],
)  # fmt: skip
def test_date_formatter(pattern: str, text: str) -> None:
    assert DateFormatter(pattern).format(T) == text


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("yyyy-MM-dd hh", "'hh', which is not supported; allowed: Java date-pattern letters y"),
     ("EEE", "'EEE', which is not supported"), ("yyy", "allowed widths for 'y': y, yy, yyyy"),
     ("MMM", "allowed widths for 'M': M, MM"), ("'T", "unterminated quote"), ("", "is not a date pattern"),
     ("'day'", "has no date letters"), ("yyyy\nMM", "not allowed")],
)  # fmt: skip
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


# --- queries ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "kept"),
    [("SELECT 1", "SELECT 1"), ("  select a from t ;  ", "select a from t"),
     ("WITH x AS (SELECT 1) SELECT * FROM x", "WITH x AS (SELECT 1) SELECT * FROM x"),
     ("-- daily\nSELECT ';' AS s FROM t", "-- daily\nSELECT ';' AS s FROM t"),
     ("(SELECT 1) UNION ALL (SELECT 2)", "(SELECT 1) UNION ALL (SELECT 2)"),
     ("SELECT `a;b` FROM t /* ; */", "SELECT `a;b` FROM t /* ; */")],
)  # fmt: skip
def test_one_query(query: str, kept: str) -> None:
    assert check_query(query) == kept


@pytest.mark.parametrize(
    ("query", "why"),
    [("SELECT 1; DROP TABLE t", "more than one statement"), ("SELECT 1;;", "more than one statement"),
     ("INSERT INTO t SELECT 1", "it starts with 'INSERT'"), ("DROP TABLE t", "it starts with 'DROP'"),
     ("", "must be one Spark SQL query"), ("   ", "must be one Spark SQL query"),
     ("SELECT 'x", "unterminated quote"), ("SELECT 1 /* x", "unterminated /\\* comment")],
)  # fmt: skip
def test_not_one_query(query: str, why: str) -> None:
    with pytest.raises(InvalidDeclaration, match=f"query: .*{why}"):
        check_query(query)


def test_referenced_tables() -> None:
    known = {"lake.db.events", "lake.db.daily", "lake.db.Other"}
    q = "SELECT * FROM lake.db.events e JOIN `lake`.`db`.`daily` d ON e.id = d.id WHERE note = 'lake.db.Other'"
    assert referenced_tables(q, known) == {"lake.db.events", "lake.db.daily"}
    assert referenced_tables("SELECT * FROM LAKE.DB.OTHER", known) == {"lake.db.Other"}
    # a prefix or a longer chain is not the table; nor is a 2-part name or a comment
    assert (
        referenced_tables("SELECT lake.db.events_v2.x FROM lake.db.eventsx -- lake.db.daily", known) == set()
    )
    assert referenced_tables("SELECT * FROM db.daily", known) == set()
    assert referenced_tables("SELECT 1", set()) == set()


def test_find_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]
    assert find_cycle({"x": {"y"}, "y": {"z", "w"}, "z": {"y"}, "w": set()}) == ["y", "z", "y"]
    assert find_cycle({}) is None


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
    assert [m.value for m in RefreshMode] == ["full"]
    assert [m.value for m in RefreshTrigger] == ["SCHEDULED", "MANUAL", "CREATION"]
    assert [m.value for m in RefreshAction] == ["FULL", "PARTITION", "NO_DATA"]
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
        ({"refresh-mode": "continuous"},
         "refresh-mode: 'continuous' is not supported: Spark batch refreshes are full; allowed: full"),
        ({"freshness": "7 MINUTE"}, "freshness: '7 MINUTE' cannot be a full-refresh cron.*allowed for MINUTE: 1, 2"),
        ({"freshness": "30 SECOND"}, "freshness: .*no seconds field"),
        ({"query": "SELECT 1; DELETE FROM t"}, "query: holds more than one statement"),
        ({"partition.fields.hour.date-formatter": "HH"},
         "partition-fields.hour: 'hour' has a date formatter but is not in partitioned-by"),
        ({"partitioned-by": ["day"], "partition-fields": {"day": {"date-formatter": "dd"}},
          "partition.fields.day.date-formatter": "yyyy"}, "given twice"),
        ({"partition.fields.day.format": "x"}, "unknown option; allowed: partition.fields.<column>.date-formatter"),
        ({"partitioned-by": ["day"], "partition-fields": {"day": {"date-formatter": "yyyy-MM-dd hh"}}},
         "partition-fields.day.date-formatter: 'yyyy-MM-dd hh' uses 'hh'"),
        ({"partitioned-by": ["day", "DAY"]}, "'DAY' is listed twice"),
        ({"partitioned-by": ["day;"]}, "not a valid identifier"),
        ({"time-zone": "Mars/Base"}, "time-zone: 'Mars/Base' is not an IANA time zone"),
        ({"freshness": "downstream", "partitioned-by": ["day"], "partition.fields.day.date-formatter": "yyyy-MM-dd"},
         "partition-fields: a 'freshness: downstream' table has no schedule time of its own.*\\(day\\); it refreshes in full"),
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
)  # fmt: skip
def test_bad_definitions_name_the_field(over: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidDeclaration, match=message):
        parse_dynamic_table(_spec(**over), "def.json")


def test_missing_fields() -> None:
    with pytest.raises(InvalidDeclaration, match="def.json: freshness: Field required"):
        parse_dynamic_table({"identifier": "a.b.c", "query": "SELECT 1"}, "def.json")
    with pytest.raises(InvalidDeclaration, match="expected a mapping"):
        parse_dynamic_table(["a.b.c"], "def.json")


def test_refresh_mode_is_case_insensitive_and_flink_interval_spelling() -> None:
    spec = parse_dynamic_table(_spec(**{"refresh-mode": "FULL", "freshness": "INTERVAL '5' MINUTE"}))
    assert spec.refresh_mode == RefreshMode.FULL and spec.cron == "*/5 * * * *"


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
    [({}, "interval: a refresh needs the cron of its freshness"),
     ({"trigger": "upstream"}, "needs at least one upstream"),
     ({"trigger": "upstream", "upstream": ["a.b.c"], "interval": "1h"}, "trigger 'upstream' refreshes have no interval"),
     ({"trigger": "event", "interval": "1h"}, "Input should be 'schedule' or 'upstream'"),
     ({"interval": "1h", "on-new-snapshot": True}, "never on new snapshots")],
)  # fmt: skip
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
        parse_declarations({"catalogs": [{"name": "lake", "warehouse": "/w"}], "tables": [body]})
    # other actions of plain tables are unaffected
    assert parse_table({**body, "actions": {"expire-snapshots": {}}}).enabled_actions() == [
        "expire-snapshots"
    ]
