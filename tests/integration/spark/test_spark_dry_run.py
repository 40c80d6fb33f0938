"""expire-data ``dry-run``: reports the rows, files, bytes and partitions it would delete; deletes nothing.

And the first-run policy end to end: the iceberg factory turns the first run into a dry run, the
next run (same column and retention) deletes what the dry run reported.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_tablemgmt.core.factory import TriggerContext
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.formats.iceberg.factory import IcebergProcessFactory
from airflow_tablemgmt.formats.iceberg.job.ttl import expire_data
from airflow_tablemgmt.spark.job import literals
from tests.integration.spark.spark_tables import TableFactory, Tables

pytestmark = pytest.mark.integration

NOW = datetime(2026, 3, 10, 0, 30, tzinfo=UTC)
OLD = literals.timestamp(NOW - timedelta(days=10))
NEW = literals.timestamp(NOW - timedelta(hours=1))


def _append(tables: Tables, table: TableIdentifier, sql: str) -> None:
    """One commit of one data file holding the rows of ``sql``."""
    tables.spark.sql(sql).coalesce(1).writeTo(str(table)).append()


def _files(tables: Tables, table: TableIdentifier) -> dict[str, int]:
    rows = tables.spark.sql(
        f"SELECT file_path, file_size_in_bytes FROM {table.quoted}.`data_files`"
    ).collect()
    return {r["file_path"]: int(r["file_size_in_bytes"]) for r in rows}


def _snapshot(tables: Tables, table: TableIdentifier) -> int:
    return int(
        tables.spark.sql(f"SELECT snapshot_id FROM {table.quoted}.`refs` WHERE name = 'main'").collect()[0][0]
    )


def test_dry_run_reports_rows_and_files_and_deletes_nothing(make_table: TableFactory, tables: Tables) -> None:
    table = make_table("id bigint, ts timestamp")
    _append(tables, table, f"SELECT id, {OLD} AS ts FROM range(0, 10)")  # wholly expired: dropped
    old_file = set(_files(tables, table))
    _append(tables, table, f"SELECT id, IF(id < 15, {OLD}, {NEW}) AS ts FROM range(10, 20)")  # rewritten
    mixed_file = set(_files(tables, table)) - old_file
    _append(tables, table, f"SELECT id, {NEW} AS ts FROM range(20, 30)")  # kept
    sizes = _files(tables, table)
    snapshot, content = _snapshot(tables, table), tables.content(table)

    summary = expire_data(tables.spark, table, {"column": "ts", "retention": "5d", "dry-run": True}, now=NOW)

    assert summary["dry_run"] is True
    assert summary["dry_run_reason"] == "dry-run: true is set"
    assert summary["would_delete_rows"] == 15
    assert summary["would_drop_data_files"] == 1
    assert summary["would_drop_bytes"] == sum(sizes[f] for f in old_file)
    assert summary["would_rewrite_data_files"] == 1
    assert summary["would_rewrite_bytes"] == sum(sizes[f] for f in mixed_file)
    assert summary["would_touch_partitions"] == 1  # unpartitioned: the one partition
    assert summary["cutoff"] == (NOW - timedelta(days=5)).isoformat()
    assert "deleted_rows" not in summary and summary["snapshot_id"] is None
    # Nothing changed: same snapshot, same rows.
    assert _snapshot(tables, table) == snapshot
    assert tables.content(table) == content
    assert summary["before"] == summary["after"]

    real = expire_data(tables.spark, table, {"column": "ts", "retention": "5d"}, now=NOW)
    assert real["dry_run"] is False
    assert real["deleted_rows"] == summary["would_delete_rows"]
    assert (
        real["deleted_data_files"] == summary["would_drop_data_files"] + summary["would_rewrite_data_files"]
    )


def test_dry_run_counts_partitions(make_table: TableFactory, tables: Tables) -> None:
    table = make_table("id bigint, ts timestamp", partitioned_by="days(ts)")
    for age in (12, 11, 10, 0):
        ts = literals.timestamp(NOW - timedelta(days=age, minutes=1))
        _append(tables, table, f"SELECT id, {ts} AS ts FROM range({age * 100}, {age * 100 + 5})")

    summary = expire_data(tables.spark, table, {"column": "ts", "retention": "5d", "dry-run": True}, now=NOW)

    assert summary["would_delete_rows"] == 15
    assert summary["would_drop_data_files"] == 3
    assert summary["would_rewrite_data_files"] == 0
    assert summary["would_touch_partitions"] == 3
    assert tables.content(table)[0] == 20


def _succeeded(table_id: str, options: dict[str, Any], summary: dict[str, Any]) -> Process:
    return Process(
        id=1,
        table_id=table_id,
        action="expire-data",
        instant=NOW,
        status=ProcessStatus.SUCCESS,
        parameters={"options": options},
        summary=summary,
    )


def test_first_run_is_a_dry_run_and_the_next_run_deletes(
    make_table: TableFactory, tables: Tables, catalog: CatalogSpec
) -> None:
    table = make_table("id bigint, ts timestamp", partitioned_by="days(ts)")
    _append(tables, table, f"SELECT id, IF(id < 6, {OLD}, {NEW}) AS ts FROM range(10)")
    spec = TableSpec.model_validate(
        {
            "catalog": table.catalog,
            "namespace": table.namespace,
            "name": table.name,
            "actions": {"expire-data": {"column": "ts", "retention": "5d"}},
        }
    )
    factory = IcebergProcessFactory()
    snapshot = _snapshot(tables, table)

    first = factory.trigger(spec, "expire-data", TriggerContext(instant=NOW, catalog=catalog))
    assert first is not None
    summary = expire_data(tables.spark, table, dict(first.options), now=NOW)
    assert summary["dry_run"] is True
    assert "first run of expire-data" in summary["dry_run_reason"]
    assert summary["would_delete_rows"] == 6
    assert _snapshot(tables, table) == snapshot and tables.content(table)[0] == 10

    last = _succeeded(str(table), dict(first.options), summary)
    second = factory.trigger(
        spec, "expire-data", TriggerContext(instant=NOW, catalog=catalog, last_success=last)
    )
    assert second is not None
    summary = expire_data(tables.spark, table, dict(second.options), now=NOW)
    assert summary["dry_run"] is False
    assert summary["deleted_rows"] == 6
    assert tables.content(table)[0] == 4
