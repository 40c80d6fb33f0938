"""The watchers' readers of path-based formats: a Hudi table's timeline and a Delta table's log, read
without a JVM, answering what :class:`~airflow_tablemgmt.metadata.iceberg.SnapshotReader` answers for
Iceberg (the current "snapshot" and its recent ancestry, with what only rewrote files marked as such).

The generic watcher (``snapshot.py``) and the gate do not know these formats: they take the reader
:func:`reader_for` returns for a catalog, and a catalog names its table's format in the
``tablemgmt.table-format`` property only when this module has a reader for it (:func:`watched_catalog`),
so an Iceberg table's trigger keeps its stored form.

* Hudi: the snapshot id is the newest completed commit (``deltacommit``, ``commit``, ``replacecommit``);
  a compaction or clustering (requested as such on the timeline) is a rewrite, so ``data_changes_only``
  watchers are not woken by the maintenance they triggered. RFC-43's threshold ("delta commits since the
  last compaction") is applied where the run starts: the factory skips a compaction below
  ``min-delta-commits`` without a JVM.
* Delta: the snapshot id is the table version; a commit that adds or removes no file with ``dataChange``
  (OPTIMIZE, VACUUM, a property change) is a rewrite.

Both read a local table and one on S3 (``s3a://``, ``s3://``) alike, the latter with the catalog's
``spark.hadoop.fs.s3a.*`` properties (resolved where the reader is made: ``triggers/readers.py``). A table
that is not there raises ``TableNotFound``; a store that cannot be read raises ``StoreUnreachable`` (an
``OSError``: the asset watcher logs it and polls again), naming the table and its location, never a secret.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable

from airflow_tablemgmt.core.format_actions import TABLE_FORMAT_PROPERTY
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.iceberg import ANCESTRY_DEPTH, REPLACE, SnapshotReader, SnapshotState
from airflow_tablemgmt.metadata.table_dir import StoreUnreachable
from airflow_tablemgmt.metadata.table_paths import table_location

DATA_CHANGE = "append"  # any operation but REPLACE: SnapshotState.data_changed_since counts it


class _PathFormatReader(ABC):
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


class HudiTimelineReader(_PathFormatReader):
    format = "hudi"

    def _pointer(self, location: str) -> object:
        from airflow_tablemgmt.metadata.hudi import timeline_listing

        return timeline_listing(location, self.catalog.properties)

    def _ancestry(self, location: str) -> list[tuple[int, bool]]:
        from airflow_tablemgmt.metadata.hudi import read_timeline

        return read_timeline(location, self.catalog.properties).ancestry(ANCESTRY_DEPTH)


class DeltaLogReader(_PathFormatReader):
    format = "delta"

    def _pointer(self, location: str) -> object:
        from airflow_tablemgmt.metadata.delta import latest_version

        return latest_version(location, self.catalog.properties)

    def _ancestry(self, location: str) -> list[tuple[int, bool]]:
        from airflow_tablemgmt.metadata.delta import ancestry

        return ancestry(location, ANCESTRY_DEPTH, self.catalog.properties)


#: The formats read here, by their ``TableFormat`` value.
READERS: dict[str, Callable[[CatalogSpec], _PathFormatReader]] = {
    HudiTimelineReader.format: HudiTimelineReader,
    DeltaLogReader.format: DeltaLogReader,
}


def watched_catalog(catalog: CatalogSpec, table_format: str) -> CatalogSpec:
    """The catalog a watcher of a ``table_format`` table carries: marked with the format when this module
    reads it, else unchanged (so Iceberg triggers keep their stored kwargs)."""
    if str(table_format) not in READERS:
        return catalog
    return catalog.model_copy(
        update={"properties": {**catalog.properties, TABLE_FORMAT_PROPERTY: str(table_format)}}
    )


def reader_for(catalog: CatalogSpec) -> SnapshotReader | _PathFormatReader:
    """The reader of the format ``catalog`` is marked with (:func:`watched_catalog`), else Iceberg's."""
    factory = READERS.get(str(catalog.properties.get(TABLE_FORMAT_PROPERTY) or ""))
    return factory(catalog) if factory is not None else SnapshotReader(catalog)


__all__ = ["DeltaLogReader", "HudiTimelineReader", "READERS", "reader_for", "watched_catalog"]
