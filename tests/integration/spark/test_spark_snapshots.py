"""expire-snapshots: retain-last is honoured and files only expired snapshots held are deleted."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.spark.maintainers.snapshots import expire_snapshots
from tests.integration.spark.spark_tables import TableFactory, Tables

pytestmark = pytest.mark.integration


def test_expire_keeps_retain_last_and_deletes_unreferenced_files(
    make_table: TableFactory, tables: Tables
) -> None:
    spark = tables.spark
    table = make_table("id bigint, v string")
    for i in range(4):  # snapshots 1-4: appends
        spark.sql(f"INSERT INTO {table.quoted} VALUES ({i}, 'old')")
    spark.sql(f"INSERT OVERWRITE {table.quoted} SELECT 100, 'new'")  # 5: replaces those four files
    spark.sql(f"INSERT INTO {table.quoted} VALUES (101, 'new')")  # 6
    before = tables.content(table)

    # older-than 0s puts the cutoff at "now": every snapshot is old enough, retain-last decides.
    summary = expire_snapshots(spark, table, {"older-than": "0s", "retain-last": 2})

    assert summary["before"]["snapshots"] == 6
    assert summary["after"]["snapshots"] == 2
    assert summary["expired_snapshots"] == 4
    assert summary["retain_last"] == 2
    assert summary["deleted_files"]["data"] == 4
    assert summary["deleted_files"]["manifest_lists"] == 4
    assert summary["after"]["current_snapshot_id"] == summary["before"]["current_snapshot_id"]
    assert tables.content(table) == before


def test_nothing_expires_before_the_cutoff(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    table = make_table("id bigint")
    for i in range(3):
        spark.sql(f"INSERT INTO {table.quoted} VALUES ({i})")

    summary = expire_snapshots(spark, table, {"older-than": "5d", "retain-last": 1})

    assert summary["expired_snapshots"] == 0
    assert summary["after"]["snapshots"] == 3
    assert sum(summary["deleted_files"].values()) == 0
