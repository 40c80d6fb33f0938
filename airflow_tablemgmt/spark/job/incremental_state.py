"""Snapshot histories and the state table of an incremental refresh (driver side).

**Histories.** What changed in a source, in the dynamic table and in its state table since the snapshots the
last refresh recorded is read here through Iceberg's table API in the driver (each snapshot's parent and
operation; no Spark job, where a metadata-table query cost ≈ 0.25 s each), at the moment the job reads
its sources' snapshots — not from the decision the factory made before the job started (a source may have
been written in between): :func:`source_change` classifies with ``core.dynamic.source_changes.classify``.

**The state table.** A query with ``avg`` keeps, per group, the sum and count behind each average in a
table of its own, ``<name>__tms_state`` in the dynamic table's namespace (table property
``tablemgmt.state-of`` names the dynamic table); the dynamic table's schema stays exactly the query's
columns. Iceberg commits one table at a time, so the two tables commit one after the other and the process
records both snapshot ids:

* an incremental refresh commits the state first, then the table; stopped in between, the state is ahead
  of the recorded snapshot while the table is not, and the next refresh rolls the state back
  (:func:`rollback`, Iceberg's ``rollback_to_snapshot``) and reads the same change again. A state that is
  not partitioned is a log (``incremental_merge``): the change's partials are appended to it beside the
  table's write (``incremental_write.side_by_side``), so the two commits land in either order; the state
  ahead is rolled back as above (the append undone), the table ahead makes the next refresh FULL (below);
* a FULL refresh commits the table first, then rebuilds the state (:func:`replace_state`); stopped in
  between, the table is ahead of its recorded snapshot, so the next refresh is FULL again.

``drop --purge`` drops the state table with the dynamic table.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.dynamic.source_changes import UNCHANGED, SnapshotInfo, SourceChange, classify
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.spark.job.metrics import _iceberg_table  # noqa: PLC2701 - the one loader
from airflow_tablemgmt.spark.job.procedures import procedure_sql

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

STATE_SUFFIX = "__tms_state"
STATE_OF = "tablemgmt.state-of"
# What the state table's rows mean (``incremental_merge.layout``): another value is rebuilt by a FULL refresh.
STATE_LAYOUT = "tablemgmt.state-layout"


def state_table(table: TableIdentifier) -> TableIdentifier:
    return TableIdentifier(table.catalog, table.namespace, f"{table.name}{STATE_SUFFIX}")


def _table(spark: SparkSession, table: TableIdentifier) -> Any:
    """Iceberg's ``Table`` for ``table``, refreshed: its snapshots are read in the driver, no Spark job."""
    loaded = _iceberg_table(spark, table)
    loaded.refresh()
    return loaded


def current(spark: SparkSession, table: TableIdentifier) -> int | None:
    snapshot = _table(spark, table).currentSnapshot()
    return None if snapshot is None else int(snapshot.snapshotId())


def records(spark: SparkSession, table: TableIdentifier) -> int | None:
    """The rows ``table`` holds, from its current snapshot's summary (``total-records``; no Spark job); None
    without a snapshot or the figure."""
    snapshot = _table(spark, table).currentSnapshot()
    value = None if snapshot is None else snapshot.summary().get("total-records")
    return None if value is None else int(value)


def history(
    spark: SparkSession, table: TableIdentifier, since: int | None
) -> tuple[int | None, list[tuple[int, str]], bool]:
    """``(current, [(snapshot id, operation)] after ``since`` newest first, whether ``since`` was met)``:
    the current snapshot's ancestry walked back to ``since``."""
    loaded = _table(spark, table)
    snapshot = loaded.currentSnapshot()
    now = None if snapshot is None else int(snapshot.snapshotId())
    newer: list[tuple[int, str]] = []
    while snapshot is not None:
        snapshot_id = int(snapshot.snapshotId())
        if snapshot_id == since:
            return now, newer, True
        newer.append((snapshot_id, str(snapshot.operation())))
        parent = snapshot.parentId()
        snapshot = None if parent is None else loaded.snapshot(parent)
    return now, newer, False


def source_change(spark: SparkSession, table_id: str, since: int | None, now: int | None) -> SourceChange:
    """How source ``table_id`` changed from ``since`` (recorded by the last refresh) to ``now`` (the
    snapshot this refresh recorded and reads)."""
    if since is None and now is None:  # empty then, empty now
        return SourceChange(table_id, UNCHANGED, None, None, f"{table_id}: no snapshot yet")
    table = TableIdentifier.parse(table_id)
    _, newer, reached = history(spark, table, since)
    # The walk starts at the table's current snapshot: keep only what this refresh reads (up to ``now``).
    ids = [s for s, _ in newer]
    if now in ids:
        newer = newer[ids.index(now) :]
    elif now == since:
        newer = []
    loaded = _table(spark, table) if newer else None
    infos = [_info(loaded, s, op) for s, op in newer]
    return classify(table_id, since, now, infos, reached_since=reached or now == since)


def _info(loaded: Any, snapshot_id: int, operation: str) -> SnapshotInfo:
    """What a snapshot's own summary says: the rows it added and removed, for the refresh's stated reason,
    and the delete files the table held after it (a merge-on-read write: no changelog)."""
    if operation == "replace":
        return SnapshotInfo(snapshot_id, operation)
    summary = loaded.snapshot(snapshot_id).summary()
    return SnapshotInfo(
        snapshot_id,
        operation,
        added_records=_count(summary, "added-records"),
        deleted_records=_count(summary, "deleted-records"),
        delete_files=_delete_files(summary),
    )


def _count(summary: Any, key: str) -> int | None:
    value = summary.get(key)
    return None if value is None else int(value)


def _delete_files(summary: Any) -> int | None:
    """The delete files the table held after the snapshot (or, when the summary lacks the total, those it
    added)."""
    total = _count(summary, "total-delete-files")
    return total if total is not None else _count(summary, "added-delete-files")


def added_records(spark: SparkSession, table: TableIdentifier, before: int | None) -> int:
    """The rows the commits since snapshot ``before`` appended (each append's own ``added-records``)."""
    _, newer, _ = history(spark, table, before)
    loaded = _table(spark, table) if newer else None
    return sum(_info(loaded, s, op).added_records or 0 for s, op in newer if op == "append")


def exists(spark: SparkSession, table: TableIdentifier) -> bool:
    return bool(spark.catalog.tableExists(str(table)))


def rollback(spark: SparkSession, table: TableIdentifier, snapshot_id: int) -> None:
    """Roll ``table`` back to ``snapshot_id`` (an ancestor of its current snapshot), one commit."""
    log.warning("rolling %s back to snapshot %s", table, snapshot_id)
    spark.sql(procedure_sql(table, "rollback_to_snapshot", {"snapshot_id": str(int(snapshot_id))}))


def identity_partitions(spark: SparkSession, table: TableIdentifier) -> list[str] | None:
    """The columns ``table`` is partitioned by (``[]``: not partitioned); None when a field is not an
    identity partition (a transform): then no partition holds whole groups."""
    loaded = _table(spark, table)
    spec, schema = loaded.spec(), loaded.schema()
    out: list[str] = []
    for field in spec.fields():
        if not bool(field.transform().isIdentity()):
            return None
        out.append(str(schema.findColumnName(field.sourceId())))
    return out


def layout_of(spark: SparkSession, table: TableIdentifier) -> str | None:
    """The state table's ``tablemgmt.state-layout`` property (None: none, a state from before layouts)."""
    value = _table(spark, table).properties().get(STATE_LAYOUT)
    return None if value is None else str(value)


def replace_state(
    spark: SparkSession,
    table: TableIdentifier,
    rows: DataFrame,
    owner: TableIdentifier,
    *,
    layout: str,
    partitioned_by: list[str],
) -> int:
    """Write ``rows`` as the whole state table (created or replaced in one commit); its new snapshot id.
    The table is partitioned by ``partitioned_by`` (the keys the dynamic table is partitioned by, so that a
    change rewrites the same partitions of both) and says its ``layout``."""
    from pyspark.sql import functions as F

    same = (
        exists(spark, table)
        and _columns(spark.table(table.quoted)) == _columns(rows)
        and layout_of(spark, table) == layout
    )
    if same:
        rows.writeTo(str(table)).overwrite(_true())
    else:  # new, or the query's aggregates or partitions changed: replaced in one commit
        writer = rows.writeTo(str(table)).using("iceberg").tableProperty(STATE_OF, str(owner))
        writer = writer.tableProperty(STATE_LAYOUT, layout)
        if partitioned_by:
            writer = writer.partitionedBy(*(F.col(c) for c in partitioned_by))
        writer.createOrReplace()
    snapshot = current(spark, table)
    assert snapshot is not None  # a write commits a snapshot
    return snapshot


def drop(spark: SparkSession, table: TableIdentifier) -> None:
    spark.sql(f"DROP TABLE IF EXISTS {state_table(table).quoted} PURGE")


def _columns(df: DataFrame) -> list[tuple[str, str]]:
    return [(f.name.lower(), f.dataType.simpleString()) for f in df.schema.fields]


def _true() -> Column:
    from pyspark.sql import functions as F

    return F.lit(True)
