"""expire-data: rows older than the retention go, newer rows stay; column checks name the column.

Every test passes the job a fixed ``now`` and writes rows relative to it, so the outcome does not
depend on the wall clock (the old tests, built on ``current_date()``, broke across midnight UTC).
``NOW`` is 30 minutes after midnight on purpose: a cutoff computed from another clock or another
day boundary than the job's would show here.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from airflow_tablemgmt.formats.iceberg.job.ttl import expire_data
from airflow_tablemgmt.spark.errors import ColumnNotFound, InvalidJobSpec, UnsupportedColumnType
from airflow_tablemgmt.spark.job import literals
from tests.integration.spark.spark_tables import TableFactory, Tables

pytestmark = pytest.mark.integration

NOW = datetime(2026, 3, 10, 0, 30, tzinfo=UTC)


def rows_at(*ages: tuple[int, timedelta]) -> str:
    """``SELECT id, ts`` with ``count`` rows at ``NOW - age`` for each ``(count, age)``, ids ascending."""
    parts, start = [], 0
    for count, age in ages:
        ts = literals.timestamp(NOW - age)
        parts.append(f"SELECT id, {ts} AS ts FROM range({start}, {start + count})")
        start += count
    return " UNION ALL ".join(parts)


# 10 rows 10 days old, 10 rows 9 days old, 10 rows 1 hour old (before midnight: yesterday's partition).
ROWS = rows_at((10, timedelta(days=10)), (10, timedelta(days=9)), (10, timedelta(hours=1)))


def test_partition_aligned_delete_drops_whole_files(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    table = make_table("id bigint, ts timestamp", partitioned_by="days(ts)")
    spark.sql(f"INSERT INTO {table.quoted} {ROWS}")
    files_before = spark.sql(f"SELECT count(*) AS n FROM {table.quoted}.`data_files`").collect()[0]["n"]

    summary = expire_data(spark, table, {"column": "ts", "retention": "5d"}, now=NOW)

    assert summary["cutoff"] == (NOW - timedelta(days=5)).isoformat()
    assert summary["before"]["live_records"] == 30
    assert summary["after"]["live_records"] == 10
    assert summary["deleted_rows"] == 20
    assert summary["partition_aligned"] is True
    assert summary["deleted_data_files"] == files_before - 1 >= 2
    assert summary["added_data_files"] == summary["added_delete_files"] == 0
    left = spark.sql(f"SELECT min(id) AS lo, max(id) AS hi FROM {table.quoted}").collect()[0]
    assert (left["lo"], left["hi"]) == (20, 29)


def test_unaligned_delete_rewrites_files(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    table = make_table("id bigint, ts timestamp")
    spark.sql(ROWS).coalesce(1).writeTo(str(table)).append()  # old and new rows in one file

    summary = expire_data(spark, table, {"column": "ts", "retention": "5d"}, now=NOW)

    assert summary["deleted_rows"] == 20
    assert summary["partition_aligned"] is False
    assert summary["deleted_data_files"] == 1
    assert summary["added_data_files"] == 1
    assert summary["operation"] == "overwrite"


def test_date_column(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    table = make_table("id bigint, d date")
    today = NOW.date()
    spark.sql(
        f"INSERT INTO {table.quoted} SELECT id, date_sub({literals.date_literal(today)}, cast(id AS int)) "
        "FROM range(10)"
    )

    summary = expire_data(spark, table, {"column": "d", "retention": "5d"}, now=NOW)

    # d = today - id; cutoff date = today - 5 (the UTC date of now - 5d): ids 6..9 are strictly older.
    assert summary["cutoff"] == (NOW - timedelta(days=5)).isoformat()
    assert summary["deleted_rows"] == 4
    assert summary["after"]["live_records"] == 6
    left = spark.sql(f"SELECT max(id) AS hi FROM {table.quoted}").collect()[0]
    assert left["hi"] == 5


def test_nothing_to_delete_commits_nothing(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    table = make_table("id bigint, ts timestamp_ntz")
    spark.sql(
        f"INSERT INTO {table.quoted} SELECT id, {literals.timestamp_ntz(NOW - timedelta(days=29))} "
        "FROM range(3)"
    )

    summary = expire_data(spark, table, {"column": "ts", "retention": "30d"}, now=NOW)

    assert summary["deleted_rows"] == 0
    assert summary["after"]["live_records"] == 3


def test_column_must_be_a_time_column(make_table: TableFactory, tables: Tables) -> None:
    table = make_table("id bigint, ts timestamp")
    with pytest.raises(UnsupportedColumnType) as err:
        expire_data(tables.spark, table, {"column": "id", "retention": "5d"}, now=NOW)
    assert "'id'" in str(err.value) and "bigint" in str(err.value) and "timestamp" in str(err.value)
    with pytest.raises(ColumnNotFound, match=r"'created'.*its columns: id, ts"):
        expire_data(tables.spark, table, {"column": "created", "retention": "5d"}, now=NOW)


def test_retention_below_the_floor_needs_the_override_and_is_logged(
    make_table: TableFactory, tables: Tables, caplog: pytest.LogCaptureFixture
) -> None:
    spark = tables.spark
    table = make_table("id bigint, ts timestamp")
    spark.sql(f"INSERT INTO {table.quoted} {rows_at((3, timedelta(hours=13)), (2, timedelta(hours=1)))}")
    with pytest.raises(InvalidJobSpec, match=r"expire-data: retention: 12h is below the 1-day floor"):
        expire_data(spark, table, {"column": "ts", "retention": "12h"}, now=NOW)

    options = {"column": "ts", "retention": "12h", "allow-below-floor": True}
    with caplog.at_level(logging.WARNING, logger="airflow_tablemgmt.formats.iceberg.job.ttl"):
        summary = expire_data(spark, table, options, now=NOW)
    assert summary["below_floor"] is True and summary["deleted_rows"] == 3
    assert any("retention 12h is below the 1-day floor" in r.getMessage() for r in caplog.records)
