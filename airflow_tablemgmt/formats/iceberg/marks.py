"""Which process attempt made a snapshot, read back from the table's metadata (recovery,
``lifecycle/table_marks.py``): the snapshot summaries of the current metadata file, local or through pyiceberg."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec

#: How many of the newest snapshots are looked at (a job's marks are among the last ones).
NEWEST = 200


def commits(table: TableSpec, catalog: CatalogSpec) -> Iterator[tuple[dict[str, Any], int, int]]:
    """``(summary, snapshot id, timestamp ms)`` of the table's newest snapshots, newest first: the job's
    mark is in a snapshot's summary (Iceberg's ``EnvironmentContext``, set by ``formats/iceberg/job``)."""
    ident = TableIdentifier(table.catalog, table.namespace, table.name)
    return reversed(_snapshots(catalog, ident)[-NEWEST:])


def _snapshots(catalog: CatalogSpec, table: TableIdentifier) -> list[tuple[dict[str, Any], int, int]]:
    from airflow_tablemgmt.metadata.iceberg import SnapshotReader, local_warehouse_path

    reader = SnapshotReader(catalog)
    pointer = reader.metadata_pointer(table)
    local = local_warehouse_path(pointer)
    if local is not None and not pointer.endswith(".gz"):
        with open(local, "rb") as f:
            doc = json.load(f)
        snaps = doc.get("snapshots") or []
        return [(dict(s.get("summary") or {}), int(s["snapshot-id"]), int(s["timestamp-ms"])) for s in snaps]
    from pyiceberg.table import StaticTable

    meta = StaticTable.from_metadata(pointer, reader._io_properties()).metadata  # noqa: SLF001
    return [(summary_properties(s.summary), s.snapshot_id, s.timestamp_ms) for s in meta.snapshots]


def summary_properties(summary: Any) -> dict[str, Any]:
    """A pyiceberg ``Summary`` as the metadata file's ``summary`` object. Iterating the model itself
    yields pydantic's ``(field, value)`` pairs, not its keys: the properties are ``additional_properties``."""
    if summary is None:
        return {}
    return {"operation": str(summary.operation.value), **summary.additional_properties}
