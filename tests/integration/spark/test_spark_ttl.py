"""expire-data: rows older than the retention go, newer rows stay; column checks name the column."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.spark.errors import ColumnNotFound, UnsupportedColumnType
from airflow_tablemgmt.spark.maintainers.ttl import expire_data
from tests.integration.spark.spark_tables import TableFactory, Tables

pytestmark = pytest.mark.integration

# 10 rows 10 days old, 10 rows 9 days old, 10 rows 1 hour old.
ROWS = (
    "SELECT id, current_timestamp() - make_interval(0, 0, 0, CASE WHEN id < 10 THEN 10 WHEN id < 20 "
    "THEN 9 ELSE 0 END, CASE WHEN id < 20 THEN 0 ELSE 1 END) AS ts FROM range(30)"
)


def test_partition_aligned_delete_drops_whole_files(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    table = make_table("id bigint, ts timestamp", partitioned_by="days(ts)")
    spark.sql(f"INSERT INTO {table.quoted} {ROWS}")
    files_before = spark.sql(f"SELECT count(*) AS n FROM {table.quoted}.`data_files`").collect()[0]["n"]

    summary = expire_data(spark, table, {"column": "ts", "retention": "5d"})

    assert summary["records_before"] == 30
    assert summary["records_after"] == 10
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

    summary = expire_data(spark, table, {"column": "ts", "retention": "5d"})

    assert summary["deleted_rows"] == 20
    assert summary["partition_aligned"] is False
    assert summary["deleted_data_files"] == 1
    assert summary["added_data_files"] == 1
    assert summary["operation"] == "overwrite"


def test_date_column(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    table = make_table("id bigint, d date")
    spark.sql(
        f"INSERT INTO {table.quoted} SELECT id, date_sub(current_date(), cast(id AS int)) FROM range(10)"
    )

    summary = expire_data(spark, table, {"column": "d", "retention": "5d"})

    # d = today - id; cutoff date = today - 5: rows with id > 5 are strictly older.
    assert summary["deleted_rows"] == 4
    assert summary["records_after"] == 6


def test_nothing_to_delete_commits_nothing(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    table = make_table("id bigint, ts timestamp_ntz")
    spark.sql(f"INSERT INTO {table.quoted} SELECT id, localtimestamp() FROM range(3)")

    summary = expire_data(spark, table, {"column": "ts", "retention": "30d"})

    assert summary["deleted_rows"] == 0
    assert summary["records_after"] == 3


def test_column_must_be_a_time_column(make_table: TableFactory, tables: Tables) -> None:
    table = make_table("id bigint, ts timestamp")
    with pytest.raises(UnsupportedColumnType) as err:
        expire_data(tables.spark, table, {"column": "id", "retention": "5d"})
    assert "'id'" in str(err.value) and "bigint" in str(err.value) and "timestamp" in str(err.value)
    with pytest.raises(ColumnNotFound, match=r"'created'.*its columns: id, ts"):
        expire_data(tables.spark, table, {"column": "created", "retention": "5d"})
