"""Every action's before/after metrics report ``live_records`` (what a query returns) and
``physical_rows`` (rows stored in data files, deleted ones included) separately."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.spark.maintainers import MAINTAINERS
from airflow_tablemgmt.spark.maintainers.compaction import rewrite_deletes, rewrite_files
from airflow_tablemgmt.spark.metrics import METRIC_KEYS
from tests.integration.spark.spark_tables import TableFactory, Tables

pytestmark = pytest.mark.integration

MOR = {"format-version": "2", "write.delete.mode": "merge-on-read", "write.delete.granularity": "partition"}


def _with_position_deletes(make_table: TableFactory, tables: Tables) -> TableIdentifier:
    """200 rows in 4 small files of one partition, then 4 DELETE commits: 4 position delete files."""
    table = make_table("id bigint, v string", props=MOR)
    tables.spark.range(200).selectExpr("id", "cast(id AS string) AS v").repartition(4).writeTo(
        str(table)
    ).append()
    for victim in (3, 50, 120, 199):
        tables.spark.sql(f"DELETE FROM {table.quoted} WHERE id = {victim}")
    return table


def test_rewrite_deletes_keeps_live_records(make_table: TableFactory, tables: Tables) -> None:
    table = _with_position_deletes(make_table, tables)

    summary = rewrite_deletes(tables.spark, table, {"rewrite-all": True})

    before, after = summary["before"], summary["after"]
    assert before["live_records"] == after["live_records"] == tables.content(table)[0] == 196
    assert before["physical_rows"] == 200
    assert after["physical_rows"] <= before["physical_rows"]
    assert summary["rewritten_delete_files_count"] == 4
    assert "records" not in before and "records" not in after


def test_rewrite_files_keeps_live_records_and_drops_deleted_rows(
    make_table: TableFactory, tables: Tables
) -> None:
    table = _with_position_deletes(make_table, tables)

    summary = rewrite_files(tables.spark, table, {"rewrite-all": True})

    before, after = summary["before"], summary["after"]
    assert before["live_records"] == after["live_records"] == 196
    # The rewrite applied the deletes: the deleted rows are no longer stored.
    assert (before["physical_rows"], after["physical_rows"]) == (200, 196)
    assert after["delete_files"] <= before["delete_files"]


def test_every_action_reports_both_counts(make_table: TableFactory, tables: Tables) -> None:
    table = make_table("id bigint, ts timestamp", props=MOR)
    tables.spark.sql(f"INSERT INTO {table.quoted} SELECT id, current_timestamp() FROM range(5)")
    options = {
        "expire-data": {"column": "ts", "retention": "400d"},
        "delete-orphans": {"dry-run": True},
    }
    for action, maintainer in MAINTAINERS.items():
        summary = maintainer(tables.spark, table, options.get(action, {}))
        for side in ("before", "after"):
            assert set(METRIC_KEYS) <= set(summary[side]), (action, side)
            assert summary[side]["live_records"] == 5, (action, side)
            assert summary[side]["physical_rows"] == 5, (action, side)
