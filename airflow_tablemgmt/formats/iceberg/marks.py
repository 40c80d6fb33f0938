"""Which process attempt made a snapshot, read back from the table's metadata (recovery,
``lifecycle/table_marks.py``): the snapshot summaries of the current metadata file, local or through pyiceberg.

A spark-submit job marks its snapshots (Iceberg's ``EnvironmentContext``, ``formats/iceberg/job``): :func:`commits`.
A job on a shared Spark Connect server cannot: the context is global to the server's JVM, and Iceberg 1.10's
procedures take no snapshot properties (``rewrite_data_files``' commit carries only its action's
``snapshotProperty`` entries, which the procedure never sets; ``CommitMetadata``'s thread-local properties are
read by DataFrame writes only). Its commit is credited by the table's lineage instead
(:func:`connect_commit`, the rule in ``lifecycle/table_marks.py``): the attempt records the snapshot it starts
from (:func:`newest_commit`, while it holds the table's lease, before its first operation), and its commit is
the first snapshot after that one that is not an append, when it is the action's operation and unmarked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec

#: How many of the newest snapshots are looked at (a job's marks are among the last ones).
NEWEST = 200
#: The snapshot operation of each action whose Connect commit can be credited by lineage.
CONNECT_OPERATIONS = {
    "rewrite-files": "replace",
    "rewrite-deletes": "replace",
    "rewrite-manifests": "replace",
}
#: A mark's key (``spark/job/commit_mark.py``'s ``PROCESS``; a snapshot that has it is a marked one).
_MARK_KEY = "tablemgmt.process-id"


@dataclass(frozen=True)
class Snap:
    summary: dict[str, Any]
    snapshot_id: int
    timestamp_ms: int
    parent_id: int | None


def commits(table: TableSpec, catalog: CatalogSpec) -> Iterator[tuple[dict[str, Any], int, int]]:
    """``(summary, snapshot id, timestamp ms)`` of the table's newest snapshots, newest first: the job's
    mark is in a snapshot's summary (Iceberg's ``EnvironmentContext``, set by ``formats/iceberg/job``)."""
    ident = TableIdentifier(table.catalog, table.namespace, table.name)
    snaps, _ = _snapshots(catalog, ident)
    return ((s.summary, s.snapshot_id, s.timestamp_ms) for s in reversed(snaps[-NEWEST:]))


def newest_commit(table: TableSpec, catalog: CatalogSpec) -> int | None:
    """The table's current snapshot id (None: no snapshot yet): what a Connect attempt records as the
    snapshot it starts from."""
    from airflow_tablemgmt.metadata.iceberg import SnapshotReader

    return SnapshotReader(catalog).current_snapshot_id(
        TableIdentifier(table.catalog, table.namespace, table.name)
    )


def connect_commit(
    table: TableSpec, catalog: CatalogSpec, base: int | None, action: str
) -> tuple[dict[str, Any], int, int, list[int]] | None:
    """The commit a Connect attempt of ``action`` that started from snapshot ``base`` (None: an empty
    table) made, if the lineage says it made one: the first snapshot after ``base`` in the current
    lineage that is not an ``append`` (other writers append; a maintenance commit is not one), when its
    operation is the action's (:data:`CONNECT_OPERATIONS`) and it carries no mark. Returns ``(summary,
    snapshot id, timestamp ms, the snapshot ids from base up to it, base first)`` -- the caller checks that no
    other job started from one of those -- or None (``base`` not in the lineage: rolled back, expired)."""
    operation = CONNECT_OPERATIONS.get(action)
    if operation is None:
        return None
    ident = TableIdentifier(table.catalog, table.namespace, table.name)
    snaps, current = _snapshots(catalog, ident)
    by_id = {s.snapshot_id: s for s in snaps}
    chain: list[Snap] = []  # current back to (not including) base
    at = by_id.get(current) if current is not None else None
    while at is not None and at.snapshot_id != base:
        chain.append(at)
        at = by_id.get(at.parent_id) if at.parent_id is not None else None
    if base is not None and at is None:
        return None  # base is not an ancestor of the current snapshot
    seen: list[int] = [] if base is None else [base]
    for snap in reversed(chain):  # oldest first
        op = str(snap.summary.get("operation", ""))
        if op == "append":
            seen.append(snap.snapshot_id)
            continue
        if op != operation or _MARK_KEY in snap.summary:
            return None
        return snap.summary, snap.snapshot_id, snap.timestamp_ms, seen
    return None


def _snapshots(catalog: CatalogSpec, table: TableIdentifier) -> tuple[list[Snap], int | None]:
    """Every snapshot of the table's current metadata, in its order, and the current snapshot id."""
    from airflow_tablemgmt.metadata.iceberg import SnapshotReader, local_warehouse_path

    reader = SnapshotReader(catalog)
    pointer = reader.metadata_pointer(table)
    local = local_warehouse_path(pointer)
    if local is not None and not pointer.endswith(".gz"):
        with open(local, "rb") as f:
            doc = json.load(f)
        snaps = [
            Snap(dict(s.get("summary") or {}), int(s["snapshot-id"]), int(s["timestamp-ms"]),
                 None if s.get("parent-snapshot-id") is None else int(s["parent-snapshot-id"]))
            for s in doc.get("snapshots") or []
        ]  # fmt: skip
        current = doc.get("current-snapshot-id")
        return snaps, None if current in (None, -1) else int(current)
    from pyiceberg.table import StaticTable

    meta = StaticTable.from_metadata(pointer, reader._io_properties()).metadata  # noqa: SLF001
    out = [
        Snap(summary_properties(s.summary), s.snapshot_id, s.timestamp_ms, s.parent_snapshot_id)
        for s in meta.snapshots
    ]
    return out, meta.current_snapshot_id


def summary_properties(summary: Any) -> dict[str, Any]:
    """A pyiceberg ``Summary`` as the metadata file's ``summary`` object. Iterating the model itself
    yields pydantic's ``(field, value)`` pairs, not its keys: the properties are ``additional_properties``."""
    if summary is None:
        return {}
    return {"operation": str(summary.operation.value), **summary.additional_properties}
