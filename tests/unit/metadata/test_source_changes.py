"""Issue 41 item 2: a source's change since the snapshot a refresh recorded, read with pyiceberg from real
Iceberg tables (a SQL catalog on SQLite, written by pyiceberg, no JVM): appends give their new data files,
replace snapshots (a compaction) are no change, copy-on-write deletes and overwrites are read from Iceberg's
changelog, merge-on-read ones (delete files) need a FULL refresh and say which snapshot, a recorded snapshot
that left the history needs a FULL one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablemgmt.core.dynamic.source_changes import (
    APPENDS,
    CHANGELOG,
    NEEDS_FULL,
    NO_DATA_CHANGE,
    UNCHANGED,
    SnapshotInfo,
    classify,
)
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.metadata.source_changes import change_since, source_changes

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
T = "lake.db.orders"


@pytest.fixture
def lake(tmp_path: Path) -> tuple[CatalogSpec, Any]:
    from pyiceberg.catalog.sql import SqlCatalog

    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    warehouse = f"file://{tmp_path / 'wh'}"
    cat = SqlCatalog("lake", uri=uri, warehouse=warehouse)
    cat.create_namespace("db")
    cat.create_table("db.orders", schema=SCHEMA)
    return CatalogSpec(name="lake", type="jdbc", warehouse=warehouse, properties={"uri": uri}), cat


def _rows(start: int, n: int) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "v": ["x"] * n}, schema=SCHEMA)


def _append(table: Any, start: int, n: int) -> int:
    table.append(_rows(start, n))
    table.refresh()
    return int(table.current_snapshot().snapshot_id)


def _compact(table: Any) -> None:
    """What a compaction commits: every live data file replaced by one with the same rows, as a ``replace``
    snapshot. pyiceberg writes no ``replace`` itself (its summaries refuse the operation), so the commit is
    its overwrite with the operation Spark's rewrite_data_files records."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files
    from pyiceberg.table.snapshots import Operation, Summary
    from pyiceberg.table.update.snapshot import _OverwriteFiles

    class _Replace(_OverwriteFiles):
        def _summary(self, snapshot_properties: Any = None) -> Summary:
            built = super()._summary(snapshot_properties or {})
            return Summary(Operation.REPLACE, **built.additional_properties)

    rows = table.scan().to_arrow()
    old = [task.file for task in table.scan().plan_files()]
    with table.transaction() as tx:
        producer = _Replace(
            operation=Operation.OVERWRITE, transaction=tx, io=table.io, branch="main", snapshot_properties={}
        )
        for f in old:
            producer.delete_data_file(f)
        for f in _dataframe_to_data_files(table_metadata=tx.table_metadata, df=rows, io=table.io):
            producer.append_data_file(f)
        producer.commit()
    table.refresh()


def _change(table: Any, since: int | None) -> Any:
    return change_since(table.metadata, table.io, T, since)


def test_appends_give_the_data_files_they_added(lake: tuple[CatalogSpec, Any]) -> None:
    _, cat = lake
    table = cat.load_table("db.orders")
    first = _append(table, 0, 10)
    assert _change(table, first).kind == UNCHANGED
    _append(table, 10, 5)
    _append(table, 15, 3)
    change = _change(table, first)
    assert (change.kind, change.incremental, change.added_records) == (APPENDS, True, 8)
    new_files = {task.file.file_path for task in table.scan(row_filter="id >= 10").plan_files()}
    assert set(change.added_files) == new_files and len(change.added_files) == 2
    assert change.reason == f"{T}: 2 append snapshot(s) since {first}: 8 new rows in 2 data file(s)"


def test_replace_snapshots_are_no_change_and_appends_around_them_still_count(
    lake: tuple[CatalogSpec, Any],
) -> None:
    _, cat = lake
    table = cat.load_table("db.orders")
    _append(table, 0, 10)
    second = _append(table, 10, 10)
    _compact(table)
    assert table.current_snapshot().summary.operation.value == "replace"
    change = _change(table, second)
    assert (change.kind, change.incremental, change.added_files) == (NO_DATA_CHANGE, True, ())
    assert "only replace snapshots since" in change.reason
    _append(table, 20, 4)
    _compact(table)
    after = _change(table, second)
    assert (after.kind, after.added_records, len(after.added_files)) == (APPENDS, 4, 1)


@pytest.mark.parametrize(
    ("remove", "operation"),
    [("id >= 0", "delete"), ("id < 5", "overwrite")],  # a whole file dropped; part of one rewritten
)
def test_copy_on_write_deletes_and_overwrites_are_read_from_the_changelog(
    lake: tuple[CatalogSpec, Any], remove: str, operation: str
) -> None:
    _, cat = lake
    table = cat.load_table("db.orders")
    first = _append(table, 0, 10)
    _append(table, 10, 10)
    table.delete(delete_filter=remove)
    table.refresh()
    removing = [s for s in table.snapshots() if s.summary.operation.value == operation]
    assert removing, [s.summary.operation for s in table.snapshots()]
    change = _change(table, first)
    assert (change.kind, change.incremental, change.removes) == (CHANGELOG, True, True)
    assert change.reason.startswith(
        f"{T}: 1 append and 1 {operation} snapshot(s) since {first} (copy-on-write)"
    )
    removed = int(removing[0].summary["deleted-records"])
    assert change.deleted_records == removed > 0
    assert (
        f"read from Iceberg's changelog: {removed} rows of the data files removed or rewritten"
        in change.reason
    )


def test_a_merge_on_read_delete_needs_full_naming_the_snapshot_and_its_delete_files() -> None:
    # A DELETE written merge-on-read (a position delete file), or a copy-on-write one over a table that still
    # has delete files: Iceberg's changelog scan refuses delete files ("not supported in changelog scans").
    newer = [SnapshotInfo(3, "delete", delete_files=1, deleted_records=0), SnapshotInfo(2, "append")]
    change = classify(T, 1, 3, newer, reached_since=True)
    assert (change.kind, change.incremental) == (NEEDS_FULL, False)
    assert change.reason.startswith(
        f"{T}: snapshot 3 is a delete (removed rows) of a table with delete files (1"
    )
    assert "Iceberg's changelog does not read delete files" in change.reason
    cow = classify(
        T, 1, 3, [SnapshotInfo(3, "overwrite", delete_files=0, deleted_records=4)], reached_since=True
    )
    assert (cow.kind, cow.deleted_records) == (CHANGELOG, 4)


def test_a_recorded_snapshot_that_left_the_history_or_none_recorded_needs_full(
    lake: tuple[CatalogSpec, Any],
) -> None:
    _, cat = lake
    table = cat.load_table("db.orders")
    _append(table, 0, 10)
    gone = _change(table, 12345)
    assert (
        gone.kind == NEEDS_FULL and "snapshot 12345, which the last refresh read, is no longer" in gone.reason
    )
    assert _change(table, None).reason == f"{T}: no snapshot recorded by a previous refresh"


def test_source_changes_reads_through_the_registered_catalog(lake: tuple[CatalogSpec, Any]) -> None:
    spec, cat = lake
    table = cat.load_table("db.orders")
    first = _append(table, 0, 10)
    _append(table, 10, 1)
    [(name, change)] = source_changes({"lake": spec}, {T: str(first)}).items()  # ids travel as strings too
    assert (name, change.kind, change.since) == (T, APPENDS, first)
    assert change.to_dict()["added_files"] == list(change.added_files)


def test_an_unknown_operation_is_named() -> None:
    change = classify(T, 1, 3, [SnapshotInfo(3, "append"), SnapshotInfo(2, "rewrite")], reached_since=True)
    assert change.kind == NEEDS_FULL and "snapshot 2 has operation 'rewrite'" in change.reason
