"""Table health: file counts and sizes from Iceberg metadata (pyiceberg, no JVM), plus the last
success and failure of each enabled action from the store.

Reading a table's manifests costs one metadata read per manifest, so a table's figures are kept for
:data:`CACHE_SECONDS` (a minute) per process; the process figures are read fresh each time (one
indexed query per action).

A *small file* is a data file under 75 % of the table's target file size
(``write.target-file-size-bytes``, Iceberg's default 512 MiB): the bound below which Iceberg's
``rewrite_data_files`` rewrites a file by default (``min-file-size-bytes``).

Each fresh read also sends the table's ``tablemgmt.table.*`` gauges through Airflow's Stats
(:mod:`airflow_tablemgmt.observability`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.core.process import ProcessStatus

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
    from airflow_tablemgmt.store import Store

CACHE_SECONDS = 60.0
DEFAULT_TARGET_FILE_SIZE = 512 * 1024 * 1024
SMALL_FILE_FRACTION = 0.75


class HealthUnavailable(TableMgmtError):
    """The table's Iceberg metadata could not be read; the message says where and why."""


@dataclass(frozen=True)
class FileStats:
    """What the table's current snapshot holds."""

    snapshot_id: int | None
    snapshots: int
    data_files: int
    small_data_files: int
    small_file_threshold_bytes: int
    delete_files: int
    data_bytes: int
    delete_bytes: int
    records: int

    @property
    def small_file_ratio(self) -> float:
        return round(self.small_data_files / self.data_files, 4) if self.data_files else 0.0


@dataclass(frozen=True)
class ActionHealth:
    action: str
    last_success: datetime | None
    last_success_process: int | None
    last_failure: datetime | None
    last_failure_process: int | None
    last_failure_reason: str | None


@dataclass(frozen=True)
class TableHealth:
    table: str
    files: FileStats | None
    read_at: datetime
    error: str | None = None  # why ``files`` is None: the metadata read failed
    actions: list[ActionHealth] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if self.files is not None:
            out["files"]["small_file_ratio"] = self.files.small_file_ratio
        return out


def read_file_stats(catalog: CatalogSpec, table: TableSpec) -> FileStats:
    """Counts and sizes of the current snapshot's files, read from its manifests with pyiceberg."""
    from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
    from airflow_tablemgmt.metadata.iceberg import SnapshotReader

    reader = SnapshotReader(resolve_catalog_spec(catalog))
    try:
        metadata, io = _load_metadata(reader, table)
    except TableMgmtError:
        raise
    except Exception as e:  # pyiceberg/pyarrow/IO errors: say which table and why
        raise HealthUnavailable(f"table {table.id}: cannot read its Iceberg metadata: {e}") from None
    target = int(metadata.properties.get("write.target-file-size-bytes", DEFAULT_TARGET_FILE_SIZE))
    threshold = int(target * SMALL_FILE_FRACTION)
    snap = metadata.current_snapshot()
    stats = {"data_files": 0, "small": 0, "delete_files": 0, "data_bytes": 0, "delete_bytes": 0, "records": 0}
    if snap is not None:
        from pyiceberg.manifest import ManifestContent

        for manifest in snap.manifests(io):
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                f = entry.data_file
                if manifest.content == ManifestContent.DATA:
                    stats["data_files"] += 1
                    stats["data_bytes"] += f.file_size_in_bytes
                    stats["records"] += f.record_count
                    stats["small"] += f.file_size_in_bytes < threshold
                else:
                    stats["delete_files"] += 1
                    stats["delete_bytes"] += f.file_size_in_bytes
    return FileStats(
        snapshot_id=snap.snapshot_id if snap is not None else None,
        snapshots=len(metadata.snapshots),
        data_files=stats["data_files"],
        small_data_files=stats["small"],
        small_file_threshold_bytes=threshold,
        delete_files=stats["delete_files"],
        data_bytes=stats["data_bytes"],
        delete_bytes=stats["delete_bytes"],
        records=stats["records"],
    )


def _load_metadata(reader: Any, table: TableSpec) -> tuple[Any, Any]:
    from airflow_tablemgmt.core.tables import CatalogType

    if reader.catalog.type == CatalogType.HADOOP:
        from pyiceberg.table import StaticTable

        static = StaticTable.from_metadata(reader.metadata_pointer(table.identifier), reader._io_properties())
        return static.metadata, static.io
    loaded = reader._catalog_table(table.identifier)
    return loaded.metadata, loaded.io


class _Cache:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, FileStats]] = {}

    def get(self, key: str, ttl: float) -> FileStats | None:
        with self._lock:
            hit = self._entries.get(key)
        return hit[1] if hit is not None and self.clock() - hit[0] < ttl else None

    def put(self, key: str, stats: FileStats) -> None:
        with self._lock:
            self._entries[key] = (self.clock(), stats)


_CACHE = _Cache(time.monotonic)


def table_health(
    store: Store,
    table_id: str,
    *,
    ttl: float = CACHE_SECONDS,
    cache: _Cache | None = None,
    read: Callable[[CatalogSpec, TableSpec], FileStats] = read_file_stats,
) -> TableHealth:
    """Health of a live table. An unreadable table still answers, with ``files`` None and ``error``."""
    spec = store.tables.get(table_id)
    cache = cache or _CACHE
    key = f"{store.display_url}|{spec.id}"
    files = cache.get(key, ttl)
    error = None
    fresh = False
    if files is None:
        try:
            files = read(store.catalogs.get(spec.catalog), spec)
            cache.put(key, files)
            fresh = True
        except TableMgmtError as e:
            error = str(e)
    actions = [_action_health(store, spec.id, a) for a in spec.enabled_actions()]
    health = TableHealth(spec.id, files, store.processes.now(), error, actions)
    if fresh:  # a cached read was sent when it was made
        from airflow_tablemgmt import observability

        observability.table_health(health)
    return health


def _action_health(store: Store, table_id: str, action: str) -> ActionHealth:
    ok = store.processes.last_successful(table_id, action)
    failed = store.processes.list(
        table_id=table_id, action=action, status=[ProcessStatus.FAILED, ProcessStatus.KILLED], limit=1
    )
    bad = failed[0] if failed else None
    return ActionHealth(
        action,
        (ok.finished_at or ok.instant) if ok else None,
        ok.id if ok else None,
        (bad.finished_at or bad.instant) if bad else None,
        bad.id if bad else None,
        bad.failure_reason if bad else None,
    )
