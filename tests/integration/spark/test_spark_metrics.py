"""Every action's before/after metrics report ``live_records`` (what a query returns) and
``physical_rows`` (rows stored in data files, deleted ones included) separately."""

from __future__ import annotations

import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.process import Process, ProcessStatus
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


def _demo_table_module():  # type: ignore[no-untyped-def]
    scripts = str(Path(__file__).resolve().parents[3] / "scripts")
    if scripts not in sys.path:
        sys.path.insert(0, scripts)
    import demo_table

    return demo_table


def test_demo_table_gives_rewrite_deletes_work_and_compaction_keeps_live_records(tables: Tables) -> None:
    """The demo's table, at a small size, with the demo's options (tables.demo.yaml) in its order."""
    demo_table = _demo_table_module()
    table = TableIdentifier("lake", "db", f"demo_{uuid.uuid4().hex[:8]}")
    demo_table.create_table(tables.spark, str(table), files=24, rows=2_400)
    demo_table.add_position_deletes(tables.spark, str(table), every=50, commits=demo_table.DELETE_COMMITS)
    live = tables.content(table)

    per_partition = tables.spark.sql(
        f"SELECT position_delete_file_count AS n FROM {table.quoted}.`partitions`"
    ).collect()
    assert len(per_partition) == 4 and all(r["n"] >= 2 for r in per_partition)  # work in every partition

    deletes = rewrite_deletes(tables.spark, table, {"min-input-files": 2})
    assert deletes["rewritten_delete_files_count"] == deletes["before"]["position_delete_files"]
    assert deletes["after"]["position_delete_files"] < deletes["before"]["position_delete_files"]
    files = rewrite_files(tables.spark, table, {"min-input-files": 2, "target-file-size-bytes": 134217728})
    assert files["after"]["physical_rows"] < files["before"]["physical_rows"]

    for summary in (deletes, files):
        assert summary["before"]["live_records"] == summary["after"]["live_records"] == live[0]
    assert tables.content(table) == live


def _process(pid: int, action: str, before: int, after: int, **summary: object) -> Process:
    return Process(
        id=pid,
        table_id="demo.db.events",
        action=action,
        instant=datetime(2026, 3, 10, tzinfo=UTC),
        status=ProcessStatus.SUCCESS,
        summary={"before": {"live_records": before}, "after": {"live_records": after}, **summary},
    )


def test_demo_report_flags_a_non_ttl_action_that_changed_live_records() -> None:
    _demo_table_module()  # puts scripts/ on sys.path
    import demo_report

    fine = [
        _process(1, "rewrite-files", 100, 100),
        _process(2, "expire-data", 100, 100, dry_run=True),
        _process(3, "expire-data", 100, 60, dry_run=False),  # the one action allowed to delete rows
    ]
    assert demo_report.live_records_changes(fine) == (2, [])

    checked, bad = demo_report.live_records_changes(
        [*fine, _process(4, "rewrite-deletes", 100, 99), _process(5, "expire-data", 60, 50, dry_run=True)]
    )
    assert checked == 4
    assert bad == [
        "rewrite-deletes (process 4) changed live records: 100 -> 99",
        "expire-data (process 5) changed live records: 60 -> 50",
    ]
