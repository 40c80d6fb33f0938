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
from airflow_tablemgmt.formats.iceberg.job import MAINTAINERS
from airflow_tablemgmt.formats.iceberg.job.compaction import rewrite_deletes, rewrite_files
from airflow_tablemgmt.spark.job.metrics import METRIC_KEYS, _metrics_from_metadata_tables, table_metrics
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
        if getattr(maintainer, "may_create_table", False):
            continue  # a dynamic table's refresh writes its own table from a query, not this one
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


# -- metrics from metadata (pyiceberg) equal Spark's metadata tables ------------------------------
def _reference(tables: Tables, table: TableIdentifier) -> dict[str, object]:
    """The figures as Spark's metadata tables and a full count give them (the former implementation)."""
    return _metrics_from_metadata_tables(tables.spark, table)


def test_metrics_from_metadata_equal_the_metadata_tables_in_every_state(
    make_table: TableFactory, tables: Tables
) -> None:
    table = make_table("id bigint, p string, v string", partitioned_by="p", props=MOR)
    states = {"empty": table_metrics(tables.spark, table)}
    assert states["empty"] == _reference(tables, table)
    assert states["empty"]["current_snapshot_id"] is None and states["empty"]["data_files"] == 0

    tables.small_files(table, files=6, commits=2)  # 12 files in each of 2 partitions
    tables.spark.sql(f"ALTER TABLE {table.quoted} ADD PARTITION FIELD bucket(2, id)")  # a second spec
    tables.small_files(table, files=3)
    states["two specs"] = table_metrics(tables.spark, table)
    for victim in (1, 2, 30, 61):
        tables.spark.sql(f"DELETE FROM {table.quoted} WHERE id = {victim}")
    states["position deletes"] = table_metrics(tables.spark, table)
    assert states["position deletes"] == _reference(tables, table)
    assert states["position deletes"]["position_delete_files"] > 0
    # ids 0-59 were written twice: 3 of the victims had two rows each
    assert states["position deletes"]["live_records"] == states["position deletes"]["physical_rows"] - 7
    assert states["position deletes"]["live_records"] == tables.content(table)[0]

    rewrite_files(tables.spark, table, {"rewrite-all": True})
    states["compacted"] = table_metrics(tables.spark, table)
    assert states["compacted"] == _reference(tables, table)
    assert states["compacted"]["data_files"] < states["two specs"]["data_files"]
    assert states["compacted"]["snapshots"] == states["position deletes"]["snapshots"] + 1


def test_live_records_reused_only_at_the_same_snapshot(make_table: TableFactory, tables: Tables) -> None:
    table = _with_position_deletes(make_table, tables)
    before = table_metrics(tables.spark, table)
    assert before["live_records"] == 196
    # A previous figure at this snapshot is taken as is (nothing was committed since) ...
    same = table_metrics(tables.spark, table, previous={**before, "live_records": 7})
    assert same["live_records"] == 7
    # ... but not after a commit: the count is taken again at the new snapshot.
    tables.spark.sql(f"DELETE FROM {table.quoted} WHERE id = 0")
    moved = table_metrics(tables.spark, table, previous={**before, "live_records": 7})
    assert moved["live_records"] == 195 and moved == _reference(tables, table)


def test_metrics_fall_back_to_the_metadata_tables_when_pyiceberg_cannot_read(
    make_table: TableFactory, tables: Tables, caplog: pytest.LogCaptureFixture
) -> None:
    table = make_table("id bigint, p string, v string")
    tables.small_files(table, files=3)  # unpartitioned: one file per write task
    # A FileIO that does not exist: pyiceberg fails to load, the metadata tables still answer.
    conf_key = f"spark.sql.catalog.{table.catalog}.py-io-impl"
    tables.spark.sparkContext._conf.set(conf_key, "no.such.FileIO")  # noqa: SLF001
    try:
        with caplog.at_level("INFO", logger="airflow_tablemgmt.spark.job.metrics"):
            figures = table_metrics(tables.spark, table)
    finally:
        tables.spark.sparkContext._jsc.sc().conf().remove(conf_key)  # noqa: SLF001
    assert figures == _reference(tables, table)
    assert figures["data_files"] == 3
    assert "from Spark's metadata tables" in caplog.text
