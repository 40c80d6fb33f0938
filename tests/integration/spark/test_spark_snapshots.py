"""expire-snapshots: retain-last is honoured and files only expired snapshots held are deleted."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from airflow_tablemgmt.formats.iceberg.job.snapshots import expire_snapshots
from airflow_tablemgmt.spark.errors import InvalidJobSpec
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

    # The cutoff at the last commit: every snapshot is old enough, retain-last decides.
    ms = spark.sql(f"SELECT unix_millis(max(committed_at)) AS t FROM {table.quoted}.`snapshots`").collect()[0]
    now = datetime.fromtimestamp(ms["t"] / 1000, UTC) + timedelta(hours=1)
    options = {"older-than": "1h", "retain-last": 2}
    summary = expire_snapshots(spark, table, options, now=now)

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


def test_below_the_floor_needs_the_override_and_is_logged(
    make_table: TableFactory, tables: Tables, caplog: pytest.LogCaptureFixture
) -> None:
    table = make_table("id bigint")
    tables.spark.sql(f"INSERT INTO {table.quoted} VALUES (1)")
    with pytest.raises(InvalidJobSpec, match=r"expire-snapshots: older-than: 30m is below the 1-hour floor"):
        expire_snapshots(tables.spark, table, {"older-than": "30m"})

    with caplog.at_level(logging.WARNING, logger="airflow_tablemgmt.formats.iceberg.job.snapshots"):
        summary = expire_snapshots(
            tables.spark, table, {"older-than": "30m", "allow-below-floor": True}, now=datetime.now(UTC)
        )
    assert summary["below_floor"] is True
    assert any(
        "older-than 30m is below the 1-hour floor" in r.getMessage() and str(table) in r.getMessage()
        for r in caplog.records
    )


def test_the_snapshot_a_dynamic_table_reads_its_next_change_from_is_kept(
    make_table: TableFactory, tables: Tables
) -> None:
    """Told which snapshot an incremental refresh reads from (``lifecycle/retention.py``), the expiry keeps it
    and every later one, whatever older-than and retain-last say; an id the table no longer has keeps nothing."""
    spark = tables.spark
    table = make_table("id bigint, v string")
    for i in range(5):
        spark.sql(f"INSERT INTO {table.quoted} VALUES ({i}, 'v')")
    rows = spark.sql(
        f"SELECT snapshot_id, unix_millis(committed_at) AS t FROM {table.quoted}.`snapshots` ORDER BY t"
    ).collect()
    ids = [r["snapshot_id"] for r in rows]
    now = datetime.fromtimestamp(rows[-1]["t"] / 1000, UTC) + timedelta(hours=1)
    options = {"older-than": "1h", "retain-last": 1, "keep-snapshots-for": {"lake.db.daily": ids[2], "x": 1}}

    summary = expire_snapshots(spark, table, options, now=now)

    assert summary["kept_for_dynamic_tables"] == {"lake.db.daily": ids[2]}
    left = [
        r["snapshot_id"] for r in spark.sql(f"SELECT snapshot_id FROM {table.quoted}.`snapshots`").collect()
    ]
    assert sorted(left) == sorted(ids[2:]), (ids, left)
    assert summary["expired_snapshots"] == 2
    assert summary["older_than"] == datetime.fromtimestamp(rows[2]["t"] / 1000, UTC).isoformat()
