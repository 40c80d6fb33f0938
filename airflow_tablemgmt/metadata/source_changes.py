"""Read what changed in a dynamic table's sources since the snapshots its last refresh read, with pyiceberg
(no JVM). The classification is ``core.dynamic.source_changes.classify``; this module walks each source's
snapshot ancestry back from its current snapshot to the recorded one and, when every snapshot between is an
``append`` or a ``replace``, lists the data files the appends added (their manifests: only the manifests
an append wrote are read, and only when the change can be read from them).

An appended file a later compaction rewrote is still listed (its rows are still new to the table): it stays
readable as long as the append's snapshot is kept, so snapshot expiry must not pass a source's last refreshed
snapshot before an incremental refresh has read it — else the walk does not meet the recorded snapshot and the
change is ``NEEDS_FULL``.

Not on the refresh path: the refresh job classifies each source's change itself, with the same
``classify``, at the snapshot it pins and reads (``spark/job/incremental_state.source_change``): a commit
between a decision made here, before the JVM, and the job's read would otherwise go unseen, and the job reads
the appended rows with Iceberg's incremental scan, not this file list. What stays JVM-free before the job is
the NO_DATA decision (``metadata/dynamic.check_sources``: ``replace``-only snapshots are no change).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from airflow_tablemgmt.core.dynamic.source_changes import (
    APPEND,
    APPENDS,
    SnapshotInfo,
    SourceChange,
    classify,
)
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from airflow_tablemgmt.metadata.iceberg import SnapshotReader

# How far back the walk goes before it calls the recorded snapshot lost (a refresh records its sources'
# snapshots every time, so the walk covers the commits between two refreshes).
MAX_SNAPSHOTS = 10_000


def _operation(snapshot: Any) -> str:
    summary = snapshot.summary
    if summary is None:
        return "unknown"
    op = summary.operation
    return str(getattr(op, "value", op))


def _count(snapshot: Any, key: str) -> int | None:
    summary = snapshot.summary
    value = summary.get(key) if summary is not None else None
    return int(value) if value is not None else None


def _info(snapshot: Any) -> SnapshotInfo:
    """A snapshot as ``classify`` reads it: its operation and what its summary says it added and removed,
    and the delete files the table held after it (a merge-on-read write: no changelog)."""
    delete_files = _count(snapshot, "total-delete-files")
    return SnapshotInfo(
        snapshot.snapshot_id,
        _operation(snapshot),
        None,
        _count(snapshot, "added-records"),
        deleted_records=_count(snapshot, "deleted-records"),
        delete_files=delete_files if delete_files is not None else _count(snapshot, "added-delete-files"),
    )


def _added_data_files(snapshot: Any, io: Any) -> tuple[str, ...]:
    """The data files ``snapshot`` added: the ADDED entries of the manifests it wrote."""
    from pyiceberg.manifest import DataFileContent, ManifestEntryStatus

    files: list[str] = []
    for manifest in snapshot.manifests(io):
        if manifest.added_snapshot_id != snapshot.snapshot_id:
            continue  # a manifest an earlier snapshot wrote: nothing of it is new here
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
            if (
                entry.status == ManifestEntryStatus.ADDED
                and entry.snapshot_id == snapshot.snapshot_id
                and entry.data_file.content == DataFileContent.DATA
            ):
                files.append(str(entry.data_file.file_path))
    return tuple(files)


def change_since(metadata: Any, io: Any, table: str, since: int | None) -> SourceChange:
    """How ``table`` (its pyiceberg ``TableMetadata`` and ``FileIO``) changed since snapshot ``since``."""
    current = metadata.current_snapshot()
    current_id = current.snapshot_id if current is not None else None
    newer: list[Any] = []
    snapshot = current
    reached = False
    while snapshot is not None and len(newer) < MAX_SNAPSHOTS:
        if since is not None and snapshot.snapshot_id == since:
            reached = True
            break
        newer.append(snapshot)
        parent = snapshot.parent_snapshot_id
        snapshot = metadata.snapshot_by_id(parent) if parent is not None else None
    infos = [_info(s) for s in newer]
    change = classify(table, since, current_id, infos, reached_since=reached)
    if change.kind != APPENDS:
        return change
    listed = [
        replace(i, added_files=_added_data_files(s, io) if i.operation == APPEND else ())
        for i, s in zip(infos, newer, strict=True)
    ]
    return classify(table, since, current_id, listed, reached_since=reached)


def _load(reader: SnapshotReader, table: TableIdentifier) -> tuple[Any, Any]:
    """The table's current metadata and FileIO, the way ``metadata/files.py`` loads them."""
    if reader.catalog.type == CatalogType.HADOOP:
        from pyiceberg.table import StaticTable

        static = StaticTable.from_metadata(reader.metadata_pointer(table), reader._io_properties())  # noqa: SLF001
        return static.metadata, static.io
    loaded = reader._catalog_table(table)  # noqa: SLF001
    return loaded.metadata, loaded.io


def source_changes(
    catalogs: Mapping[str, CatalogSpec], recorded: Mapping[str, object]
) -> dict[str, SourceChange]:
    """Each source named in ``recorded`` (the last refresh's ``source_snapshots``) with its change since.

    Raises as ``metadata.dynamic.current_states`` does for an unknown catalog or a missing table."""
    from airflow_tablemgmt.metadata.dynamic import reader_for

    out: dict[str, SourceChange] = {}
    for table_id, since in recorded.items():
        ident = TableIdentifier.parse(table_id)
        catalog = catalogs.get(ident.catalog)
        if catalog is None:
            from airflow_tablemgmt.core.errors import CatalogNotFound

            raise CatalogNotFound(
                f"source table {table_id}: catalog {ident.catalog!r} is not registered; "
                f"registered: {', '.join(sorted(catalogs)) or 'none'}"
            )
        metadata, io = _load(reader_for(catalog), ident)
        out[table_id] = change_since(metadata, io, table_id, None if since is None else int(str(since)))
    return out
