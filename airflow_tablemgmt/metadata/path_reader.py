"""The watchers' reader of a path-based format's tables, answering what
:class:`~airflow_tablemgmt.metadata.iceberg.SnapshotReader` answers for the catalogs' own format: the current
"snapshot" and its recent ancestry, with what only rewrote files marked as such, read without a JVM.

A format subclasses :class:`PathFormatReader` with the cheap pointer that changes when its table commits and
the ancestry behind it (formats/hudi/reader.py: the timeline; formats/delta/reader.py: the log); its
descriptor names the subclass (``Format.reader``). A local table and one on S3 (``s3a://``, ``s3://``) are
read alike, the latter with the catalog's ``spark.hadoop.fs.s3a.*`` properties. A table that is not there
raises ``TableNotFound``; a store that cannot be read raises ``StoreUnreachable`` (an ``OSError``: the asset
watcher logs it and polls again), naming the table and its location, never a secret.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.iceberg import REPLACE, SnapshotState
from airflow_tablemgmt.metadata.table_dir import StoreUnreachable
from airflow_tablemgmt.metadata.table_paths import table_location

DATA_CHANGE = "append"  # any operation but REPLACE: SnapshotState.data_changed_since counts it


class PathFormatReader(ABC):
    """A reader over the tables of one ``hadoop`` catalog of a path-based format; thread-safe, caches the
    state per table by the cheap pointer its format offers (Hudi: the timeline's listing; Delta: the
    newest log version)."""

    format = ""

    def __init__(self, catalog: CatalogSpec) -> None:
        self.catalog = catalog
        self.metadata_loads = 0
        self._lock = threading.Lock()
        self._cache: dict[TableIdentifier, tuple[object, SnapshotState]] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.catalog.name!r})"

    def current_snapshot_id(self, table: TableIdentifier) -> int | None:
        return self.current_state(table).snapshot_id

    def has_new_snapshot(self, table: TableIdentifier, last_seen: int | None) -> tuple[bool, int | None]:
        current = self.current_state(table).snapshot_id
        return current is not None and current != last_seen, current

    def current_state(self, table: TableIdentifier) -> SnapshotState:
        location = table_location(self.catalog, table)
        try:
            pointer = self._pointer(location)
            cached = self._cache.get(table)
            if cached is not None and cached[0] == pointer:
                return cached[1]
            ancestry = self._ancestry(location)
        except StoreUnreachable as e:  # an outage (an OSError too): the watcher says so and polls again
            raise StoreUnreachable(f"{self.format} table {table}: {e}") from None
        except HealthUnavailable as e:
            from airflow_tablemgmt.core.errors import TableNotFound

            raise TableNotFound(f"{self.format} table {table}: {e}") from None
        state = SnapshotState(
            ancestry[0][0] if ancestry else None,
            tuple((i, DATA_CHANGE if changed else REPLACE) for i, changed in ancestry),
        )
        with self._lock:
            self.metadata_loads += 1
            self._cache[table] = (pointer, state)
        return state

    @abstractmethod
    def _pointer(self, location: str) -> object:
        """What changes when the table commits (the newest instant or log version)."""

    @abstractmethod
    def _ancestry(self, location: str) -> list[tuple[int, bool]]:
        """The newest commits first: (id, whether it changed data)."""


__all__ = ["DATA_CHANGE", "PathFormatReader"]
