"""What the table page's Details, Files and Snapshots tabs show of an Iceberg table (Iceberg's views, declared
in ``factories/iceberg.py``; the shared shape is ``metadata/format_views.py``'s), read from Iceberg metadata with
pyiceberg (no JVM): the schema, partition spec, sort order and properties; the live files per
partition against the target file size, with v2 position and equality delete files and v3 deletion vectors
apart (``metadata/deletes.py``); the snapshot timeline with each snapshot's added and removed
files and records (from its summary).

``catalog`` has its secret references resolved already (``services/tables.py`` does that).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType, TableSpec
from airflow_tablemgmt.metadata.deletes import DeleteCounts
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.files import _DATA, _targets, live_data_files, quiet_pyiceberg
from airflow_tablemgmt.metadata.format_views import MAX_PARTITIONS, SIZE_BUCKETS, _bucket

if TYPE_CHECKING:
    from airflow_tablemgmt.metadata.iceberg import SnapshotReader

__all__ = ["MAX_PARTITIONS", "SIZE_BUCKETS", "read_details", "read_files", "read_snapshots"]


def _read(catalog: CatalogSpec, table: TableSpec) -> tuple[Any, Any]:
    from airflow_tablemgmt.metadata.iceberg import SnapshotReader

    try:
        with quiet_pyiceberg():
            return _load_metadata(SnapshotReader(catalog), table)
    except TableMgmtError:
        raise
    except Exception as e:  # pyiceberg/pyarrow/IO errors: say which table and why
        raise HealthUnavailable(f"table {table.id}: cannot read its Iceberg metadata: {e}") from None


def _load_metadata(reader: SnapshotReader, table: TableSpec) -> tuple[Any, Any]:
    """The table's current metadata and FileIO, read afresh (the views read files the health walk does not keep)."""
    if reader.catalog.type == CatalogType.HADOOP:
        from pyiceberg.table import StaticTable

        static = StaticTable.from_metadata(reader.metadata_pointer(table.identifier), reader._io_properties())
        return static.metadata, static.io
    loaded = reader._catalog_table(table.identifier)
    return loaded.metadata, loaded.io


def _ms(ts: int | None) -> str | None:
    return datetime.fromtimestamp(ts / 1000, UTC).isoformat() if ts is not None else None


def read_details(catalog: CatalogSpec, table: TableSpec) -> dict[str, Any]:
    """Schema (every column, nested ones dotted), partition spec, sort order and properties."""
    metadata, _ = _read(catalog, table)
    schema = metadata.schema()
    from pyiceberg.schema import index_by_id

    columns = []
    for field_id, field in sorted(index_by_id(schema).items()):
        columns.append(
            {
                "id": field_id,
                "name": schema.find_column_name(field_id),
                "type": str(field.field_type),
                "required": bool(field.required),
                "doc": field.doc,
            }
        )
    spec = metadata.spec()
    sort = metadata.sort_order_by_id(metadata.default_sort_order_id)
    snap = metadata.current_snapshot()
    return {
        "location": metadata.location,
        "format_version": int(metadata.format_version),
        "table_uuid": str(metadata.table_uuid),
        "last_updated": _ms(metadata.last_updated_ms),
        "current_snapshot_id": str(snap.snapshot_id) if snap is not None else None,
        "schema_id": schema.schema_id,
        "columns": columns,
        "partition_spec": {
            "spec_id": spec.spec_id,
            "fields": [
                {
                    "name": f.name,
                    "source": schema.find_column_name(f.source_id),
                    "transform": str(f.transform),
                }
                for f in spec.fields
            ],
        },
        "sort_order": {
            "order_id": sort.order_id if sort is not None else 0,
            "fields": [
                {
                    "source": schema.find_column_name(f.source_id),
                    "transform": str(f.transform),
                    "direction": str(f.direction.value),
                    "null_order": str(f.null_order.value),
                }
                for f in (sort.fields if sort is not None else [])
            ],
        },
        "properties": dict(sorted(metadata.properties.items())),
    }


def read_files(catalog: CatalogSpec, table: TableSpec) -> dict[str, Any]:
    """The current snapshot's live files per partition: data and delete files, bytes, records and a
    histogram of data file sizes in :data:`SIZE_BUCKETS` of the target file size (the table's own:
    rewrite-files' ``target-file-size-bytes``, else ``write.target-file-size-bytes``).

    ``delete_files`` counts every delete entry, as Iceberg's ``total-delete-files`` does; of them
    ``position_delete_files`` and ``equality_delete_files`` are v2 files and ``deletion_vectors`` v3 vectors,
    and ``deleted_rows`` / ``dv_deleted_rows`` the rows all of them / the vectors mark deleted. A Puffin
    file's bytes count once in the totals' ``delete_bytes`` (it may hold vectors of several partitions)."""
    metadata, io = _read(catalog, table)
    target = _targets(metadata, table)[0]
    schema = metadata.schema()
    specs = metadata.specs()
    snap = metadata.current_snapshot()
    parts: dict[tuple[int, str], dict[str, Any]] = {}
    deletes: dict[tuple[int, str], DeleteCounts] = {}
    every = DeleteCounts()
    if snap is not None:
        for f in live_data_files(io, snap.manifests(io)):
            spec = specs.get(f.spec_id)
            path = spec.partition_to_path(f.partition, schema) if spec is not None and spec.fields else ""
            p = parts.setdefault(
                (f.spec_id, path),
                {
                    "partition": path,
                    "spec_id": f.spec_id,
                    "data_files": 0,
                    "data_bytes": 0,
                    "records": 0,
                    **_delete_figures(DeleteCounts()),
                    "small_files": 0,
                    "histogram": [0] * (len(SIZE_BUCKETS) + 1),
                },
            )
            size = int(f.file_size_in_bytes)
            if int(f.content) == _DATA:
                p["data_files"] += 1
                p["data_bytes"] += size
                p["records"] += int(f.record_count)
                b = _bucket(size, target)
                p["histogram"][b] += 1
                p["small_files"] += b < SIZE_BUCKETS.index(0.75) + 1
            else:
                deletes.setdefault((f.spec_id, path), DeleteCounts()).add(f)
                every.add(f)
    for key, counts in deletes.items():
        parts[key].update(_delete_figures(counts))
    rows = sorted(parts.values(), key=lambda p: (-p["data_files"], p["partition"]))
    totals = {k: sum(p[k] for p in rows) for k in ("data_files", "data_bytes", "records", "small_files")}
    totals.update(_delete_figures(every))
    totals["histogram"] = [sum(p["histogram"][i] for p in rows) for i in range(len(SIZE_BUCKETS) + 1)]
    return {
        "snapshot_id": str(snap.snapshot_id) if snap is not None else None,
        "target_file_size_bytes": target,
        "buckets": [round(b * target) for b in SIZE_BUCKETS],
        "bucket_fractions": list(SIZE_BUCKETS),
        "partitions_total": len(rows),
        "totals": totals,
        "partitions": rows[:MAX_PARTITIONS],
    }


def _delete_figures(counts: DeleteCounts) -> dict[str, int]:
    return {
        "delete_files": counts.delete_files,
        "delete_bytes": counts.delete_bytes,
        "position_delete_files": counts.position_delete_files,
        "equality_delete_files": counts.equality_delete_files,
        "deletion_vectors": counts.deletion_vectors,
        "deleted_rows": counts.deleted_rows,
        "dv_deleted_rows": counts.dv_deleted_rows,
    }


def _int(summary: dict[str, str], key: str) -> int:
    try:
        return int(summary.get(key, 0))
    except ValueError:
        return 0


def read_snapshots(catalog: CatalogSpec, table: TableSpec) -> dict[str, Any]:
    """Every snapshot, oldest first: operation, added and removed data/delete files (deletion vectors
    included, and apart: ``added_dvs`` / ``removed_dvs``), records and bytes (the snapshot's summary, which
    Iceberg writes with each commit)."""
    metadata, _ = _read(catalog, table)
    snap = metadata.current_snapshot()
    current = snap.snapshot_id if snap is not None else None
    out = []
    for s in sorted(metadata.snapshots, key=lambda s: (s.timestamp_ms, s.snapshot_id)):
        summary = {k: str(v) for k, v in (s.summary.additional_properties if s.summary else {}).items()}
        out.append(
            {
                "snapshot_id": str(s.snapshot_id),
                "parent_id": str(s.parent_snapshot_id) if s.parent_snapshot_id is not None else None,
                "committed_at": _ms(s.timestamp_ms),
                "operation": str(s.summary.operation.value) if s.summary else None,
                "current": s.snapshot_id == current,
                "added_data_files": _int(summary, "added-data-files"),
                "removed_data_files": _int(summary, "deleted-data-files"),
                "added_delete_files": _int(summary, "added-delete-files"),
                "removed_delete_files": _int(summary, "removed-delete-files"),
                "added_dvs": _int(summary, "added-dvs"),
                "removed_dvs": _int(summary, "removed-dvs"),
                "added_records": _int(summary, "added-records"),
                "removed_records": _int(summary, "deleted-records"),
                "added_bytes": _int(summary, "added-files-size"),
                "removed_bytes": _int(summary, "removed-files-size"),
                "total_records": _int(summary, "total-records"),
                "total_data_files": _int(summary, "total-data-files"),
            }
        )
    return {"current_snapshot_id": str(current) if current is not None else None, "snapshots": out}
