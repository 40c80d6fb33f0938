"""What a table's current snapshot holds, from its manifests: one walk, two readings of it.

* :class:`FileStats` (:func:`read_file_stats`): the health figures, measured against the table's own
  targets (the rewrite-files action's target file size, the expire-snapshots action's age and count):
  data and delete files (v2 position and equality delete files and v3 deletion vectors apart:
  ``metadata/deletes.py``), deleted rows, small files and how many of them a compaction would remove,
  manifests, snapshots and how many an expiry would drop. ``metadata/health.py`` scores them.
* :class:`TableShape` (:func:`read_shape`): the before/after figures of a maintenance job, everything
  but the live record count, per coerced partition.

Both read the live entries of the snapshot's manifests with pyiceberg (:func:`live_data_files`, with the
v3 fields: ``metadata/deletes.py``).
Like the rest of ``metadata/`` this imports neither Airflow nor pyspark, and pyiceberg only inside the
functions that read; the catalog it is handed has its secret references already resolved.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType, TableSpec
from airflow_tablemgmt.metadata.deletes import (
    DATA,
    EQUALITY_DELETES,
    POSITION_DELETES,
    DeleteCounts,
    in_words,
    is_deletion_vector,
    live_entries,
)
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.recent import Walk, walk_at

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile, ManifestFile

    from airflow_tablemgmt.metadata.iceberg import SnapshotReader

DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024
SMALL_FILE_FRACTION = 0.75

# DataFileContent values of the Iceberg spec (pyiceberg.manifest.DataFileContent).
_DATA, _POSITION_DELETES, _EQUALITY_DELETES = DATA, POSITION_DELETES, EQUALITY_DELETES


def live_data_files(io: FileIO, manifests: Iterable[ManifestFile]) -> Iterator[DataFile]:
    """The live (not deleted) files the ``manifests`` list: data and delete files alike, with their v3
    fields (a deletion vector's referenced data file and blob offset and size)."""
    return live_entries(io, manifests)


# ---- health: FileStats -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FileStats:
    """What the table's current snapshot holds, and the targets it was measured against.

    The fields after ``records`` have defaults so a reader built before them (a test's fake) still works.
    """

    snapshot_id: int | None
    snapshots: int
    data_files: int
    small_data_files: int
    small_file_threshold_bytes: int
    delete_files: int
    data_bytes: int
    delete_bytes: int
    records: int
    #: the rewrite-files action's ``target-file-size-bytes`` (the table's own when the action is absent)
    target_file_size_bytes: int = DEFAULT_TARGET_FILE_SIZE
    #: data files a compaction to the target size would leave: per partition, ceil(bytes / target), >= 1
    compacted_data_files: int = 0
    #: rewrite-files' ``min-input-files``: fewer small files than this in a table are left alone
    min_input_files: int = 5
    partitions: int = 0
    #: rows that the delete entries mark deleted: position and equality delete files and deletion vectors
    deleted_rows: int = 0
    manifests: int = 0
    manifest_bytes: int = 0
    #: snapshots older than expire-snapshots' ``older-than`` beyond its ``retain-last`` (what it would drop)
    expirable_snapshots: int = 0
    oldest_snapshot_age_s: float | None = None
    current_snapshot_age_s: float | None = None
    snapshot_max_age_s: float = 5 * 86400.0
    #: the thresholds the gate and the score decide with, per action (core/thresholds.py; None: defaults)
    thresholds: dict[str, dict[str, float]] | None = None
    #: small data files a rewrite-files run would remove, per partition as Iceberg plans it: a partition's
    #: files are rewritten when they number ``min-input-files`` or hold more than a target file (None: a
    #: reading from before this figure; ``excess_data_files`` then stands for it)
    removable_data_files: int | None = None
    #: ``delete_files`` apart (Iceberg's snapshot summary counts the same way): v2 position delete files,
    #: equality delete files and v3 deletion vectors (one per data file with deletes, kept in Puffin files)
    position_delete_files: int = 0
    equality_delete_files: int = 0
    deletion_vectors: int = 0
    #: of ``deleted_rows``: the rows the deletion vectors mark deleted
    dv_deleted_rows: int = 0
    #: the deletion vectors' own bytes (their blobs) and the Puffin files that hold them
    dv_bytes: int = 0
    dv_files: int = 0
    format_version: int | None = None

    @property
    def small_file_ratio(self) -> float:
        return round(self.small_data_files / self.data_files, 4) if self.data_files else 0.0

    @property
    def excess_data_files(self) -> int:
        """Small data files a compaction would remove: beyond what the data's size needs, at most the
        small files. 0 for a table whose every partition already has as few files as its size needs
        (a table smaller than one target file in one file, however small that file is)."""
        return max(0, min(self.small_data_files, self.data_files - self.compacted_data_files))

    @property
    def deleted_row_ratio(self) -> float:
        return round(min(1.0, self.deleted_rows / self.records), 4) if self.records else 0.0

    @property
    def deletes_in_words(self) -> str:
        """The delete entries, their kinds apart: "2 position delete files and 12 deletion vectors"."""
        return in_words(
            self.delete_files, self.position_delete_files, self.equality_delete_files, self.deletion_vectors
        )

    def delete_figures(self) -> dict[str, Any]:
        """The delete figures, kinds apart (what ``tablemgmt show`` prints beside the score)."""
        return {
            "format_version": self.format_version,
            "delete_files": self.delete_files,
            "position_delete_files": self.position_delete_files,
            "equality_delete_files": self.equality_delete_files,
            "deletion_vectors": self.deletion_vectors,
            "deleted_rows": self.deleted_rows,
            "dv_deleted_rows": self.dv_deleted_rows,
            "deleted_row_ratio": self.deleted_row_ratio,
            "records": self.records,
        }


def read_file_stats(catalog: CatalogSpec, table: TableSpec, *, now: float | None = None) -> FileStats:
    """Counts and sizes of the current snapshot's files, read from its manifests with pyiceberg.

    ``catalog`` has its secret references resolved already (the caller's adapter does that).

    A *small file* is a data file under 75 % of the target file size: the bound below which Iceberg's
    ``rewrite_data_files`` rewrites a file by default (``min-file-size-bytes``). The target is the
    table's rewrite-files action's ``target-file-size-bytes`` when the action is declared, else the
    table's ``write.target-file-size-bytes`` (Iceberg's default 512 MiB).
    """
    from airflow_tablemgmt.metadata.iceberg import SnapshotReader

    reader = SnapshotReader(catalog)
    try:
        return _measure(_walk_current(reader, table), table, time.time() if now is None else now)
    except TableMgmtError:
        raise
    except Exception as e:  # pyiceberg/pyarrow/IO errors: say which table and why
        raise HealthUnavailable(f"table {table.id}: cannot read its Iceberg metadata: {e}") from None


def _targets(metadata: Any, table: TableSpec) -> tuple[int, int, float, int]:
    """(target file size, min input files, snapshot max age in seconds, retain-last) of ``table``."""
    rewrite = table.action_settings("rewrite-files")
    if "rewrite-files" in table.actions:
        target = int(getattr(rewrite, "target_file_size_bytes", DEFAULT_TARGET_FILE_SIZE))
    else:
        target = int(metadata.properties.get("write.target-file-size-bytes", DEFAULT_TARGET_FILE_SIZE))
    expire = table.action_settings("expire-snapshots")
    older_than = getattr(expire, "older_than", None)
    max_age = older_than.total_seconds() if older_than is not None else 5 * 86400.0
    if (
        "expire-snapshots" not in table.actions
        and "history.expire.max-snapshot-age-ms" in metadata.properties
    ):
        max_age = int(metadata.properties["history.expire.max-snapshot-age-ms"]) / 1000
    retain = int(getattr(expire, "retain_last", 1))
    return target, int(getattr(rewrite, "min_input_files", 5)), max_age, retain


def _thresholds(table: TableSpec) -> dict[str, dict[str, float]]:
    """Each measured action's thresholds for ``table``: its own, else their defaults (core/thresholds.py)."""
    from airflow_tablemgmt.core.thresholds import FILE_FIGURE_ACTIONS

    out = {}
    for action, spec in FILE_FIGURE_ACTIONS.items():
        settings = table.action_settings(action)
        out[action] = spec.effective(settings.thresholds if action in table.actions else {}, settings)
    return out


def _removable(
    sizes: dict[tuple[Any, ...], int], counts: dict[tuple[Any, ...], list[int]], target: int, min_input: int
) -> int:
    """Small files a compaction removes, partition by partition, in the partitions Iceberg's planner rewrites
    (at least ``min-input-files`` files, or more bytes than one target file)."""
    removable = 0
    for key, (files, small) in counts.items():
        needed = max(1, math.ceil(sizes[key] / target))
        if files >= min_input or sizes[key] > target:
            removable += max(0, min(small, files - needed))
    return removable


def _measure(walk: Walk, table: TableSpec, now: float) -> FileStats:
    metadata, manifests = walk.metadata, walk.manifests
    target, min_input, max_age, retain = _targets(metadata, table)
    thresholds = _thresholds(table)
    threshold = int(target * thresholds["rewrite-files"].get("small-file-fraction", SMALL_FILE_FRACTION))
    snap = metadata.current_snapshot()
    stats = {"data_files": 0, "small": 0, "data_bytes": 0, "records": 0}
    deletes = DeleteCounts()
    per_partition: dict[tuple[Any, ...], int] = {}
    counts: dict[tuple[Any, ...], list[int]] = {}  # partition -> [data files, small data files]
    if snap is not None:
        for f in walk.entries:
            if int(f.content) == _DATA:
                stats["data_files"] += 1
                stats["data_bytes"] += f.file_size_in_bytes
                stats["records"] += f.record_count
                stats["small"] += f.file_size_in_bytes < threshold
                key = (f.spec_id, *cast("Iterable[Any]", f.partition))
                per_partition[key] = per_partition.get(key, 0) + f.file_size_in_bytes
                count = counts.setdefault(key, [0, 0])
                count[0] += 1
                count[1] += f.file_size_in_bytes < threshold
            else:
                deletes.add(f)
    times = sorted((s.timestamp_ms / 1000 for s in metadata.snapshots), reverse=True)
    # The newest ``retain-last`` are kept whatever their age (retain-last >= 1 keeps the current one).
    expirable = sum(1 for t in times[retain:] if now - t > max_age)
    return FileStats(
        snapshot_id=snap.snapshot_id if snap is not None else None,
        snapshots=len(metadata.snapshots),
        data_files=stats["data_files"],
        small_data_files=stats["small"],
        small_file_threshold_bytes=threshold,
        delete_files=deletes.delete_files,
        data_bytes=stats["data_bytes"],
        delete_bytes=deletes.delete_bytes,
        records=stats["records"],
        target_file_size_bytes=target,
        compacted_data_files=sum(max(1, math.ceil(b / target)) for b in per_partition.values()),
        min_input_files=min_input,
        partitions=len(per_partition),
        deleted_rows=deletes.deleted_rows,
        manifests=len(manifests),
        manifest_bytes=sum(int(m.manifest_length) for m in manifests),
        expirable_snapshots=expirable,
        oldest_snapshot_age_s=round(now - times[-1], 1) if times else None,
        current_snapshot_age_s=round(now - snap.timestamp_ms / 1000, 1) if snap is not None else None,
        snapshot_max_age_s=max_age,
        thresholds=thresholds,
        removable_data_files=_removable(per_partition, counts, target, min_input),
        position_delete_files=deletes.position_delete_files,
        equality_delete_files=deletes.equality_delete_files,
        deletion_vectors=deletes.deletion_vectors,
        dv_deleted_rows=deletes.dv_deleted_rows,
        dv_bytes=deletes.dv_bytes,
        dv_files=deletes.dv_files,
        format_version=int(metadata.format_version),
    )


def _walk_current(reader: SnapshotReader, table: TableSpec) -> Walk:
    """The table's current metadata file walked (or its recent walk: ``recent.py``). A hadoop table's
    pointer is read every time; another catalog's table is loaded every time (its answer is the truth)."""
    if reader.catalog.type == CatalogType.HADOOP:
        from pyiceberg.table import StaticTable

        pointer = reader.metadata_pointer(table.identifier)

        def load() -> tuple[Any, Any]:
            static = StaticTable.from_metadata(pointer, reader._io_properties())
            return static.metadata, static.io

        return walk_at(pointer, load)
    loaded = reader._catalog_table(table.identifier)
    return walk_at(loaded.metadata_location, lambda: (loaded.metadata, loaded.io))


# ---- a job's figures: TableShape -------------------------------------------------------------------


@dataclass
class TableShape:
    """Everything but ``live_records``, read from a metadata file without Spark."""

    current_snapshot_id: int | None = None
    snapshots: int = 0
    manifests: int = 0
    location: str | None = None  # the table's location as its metadata records it (not a figure)
    # coerced partition -> [data files, data bytes, physical rows, position delete files, equality delete
    # files, deletion vectors]
    partitions: dict[tuple[Any, ...], list[int]] = field(default_factory=dict)
    format_version: int | None = None  # the table's (not a figure)

    def add(
        self, partition: tuple[Any, ...], content: int, record_count: int, size: int, dv: bool = False
    ) -> None:
        """Count one live file; ``dv``: a position-delete entry that is a v3 deletion vector."""
        counts = self.partitions.setdefault(partition, [0, 0, 0, 0, 0, 0])
        if content == _DATA:
            counts[0] += 1
            counts[1] += size
            counts[2] += record_count
        elif content == _POSITION_DELETES:
            counts[5 if dv else 3] += 1
        elif content == _EQUALITY_DELETES:
            counts[4] += 1

    def total(self, i: int) -> int:
        return sum(c[i] for c in self.partitions.values())

    @property
    def physical_rows(self) -> int:
        return self.total(2)

    @property
    def delete_files(self) -> int:
        """Every delete entry, deletion vectors included (as Iceberg's ``total-delete-files``)."""
        return self.total(3) + self.total(4) + self.total(5)

    def metrics(self, live_records: int) -> dict[str, Any]:
        return {
            "data_files": self.total(0),
            "data_bytes": self.total(1),
            "live_records": live_records,
            "physical_rows": self.physical_rows,
            "delete_files": self.delete_files,
            "position_delete_files": self.total(3),
            "equality_delete_files": self.total(4),
            "deletion_vectors": self.total(5),
            "manifests": self.manifests,
            "snapshots": self.snapshots,
            "current_snapshot_id": self.current_snapshot_id,
            "files_per_partition_max": max((c[0] for c in self.partitions.values()), default=0),
        }


def read_shape(location: str, properties: dict[str, str]) -> TableShape:
    """The shape of the table at metadata file ``location``, read with pyiceberg (FileIO ``properties``)."""
    from pyiceberg.table import StaticTable

    def load() -> tuple[Any, Any]:
        with quiet_pyiceberg():
            static = StaticTable.from_metadata(location, properties)
        return static.metadata, static.io

    walk = walk_at(location, load)
    metadata = walk.metadata
    main = metadata.refs.get("main")
    shape = TableShape(
        current_snapshot_id=main.snapshot_id if main is not None else None,
        snapshots=len(metadata.snapshots),
        location=metadata.location,
        format_version=int(metadata.format_version),
    )
    snapshot = metadata.snapshot_by_id(main.snapshot_id) if main is not None else None
    if snapshot is None:
        return shape
    current = metadata.current_snapshot()
    if current is None or current.snapshot_id != snapshot.snapshot_id:  # never in a valid table: read main's
        io = load()[1]
        manifests = tuple(snapshot.manifests(io))
        walk = Walk(metadata, manifests, tuple(live_data_files(io, manifests)))
    shape.manifests = len(walk.manifests)
    field_ids = {spec.spec_id: [f.field_id for f in spec.fields] for spec in metadata.partition_specs}
    for f in walk.entries:
        ids = field_ids.get(f.spec_id, [])
        # Coerced to the union of all specs: a field a spec lacks is null, and nulls drop out.
        key = tuple(sorted((fid, f.partition[i]) for i, fid in enumerate(ids) if f.partition[i] is not None))
        shape.add(key, int(f.content), int(f.record_count), int(f.file_size_in_bytes), is_deletion_vector(f))
    return shape


@contextmanager
def quiet_pyiceberg() -> Iterator[None]:
    """pyiceberg warns on every read that it found no catalog config file; the callers configure none."""
    logger = logging.getLogger("pyiceberg")
    level = logger.level
    logger.setLevel(max(level, logging.ERROR))
    try:
        yield
    finally:
        logger.setLevel(level)
