"""The cheapest question a catalog answers about many tables at once: "did anything change?".

A snapshot watcher's full read (:meth:`~airflow_tablemgmt.metadata.iceberg.SnapshotReader.current_state`)
answers *what* changed; the shared poller (``change_poller.py``) asks this module only *whether* each of its
tables changed, once per tick for all the tables of a catalog, and wakes the watchers whose answer moved.
Each check returns a *token* per table: any hashable value that changes when the table commits (a false
"changed" costs one full read; a missed change is what the watcher's periodic full read catches).

* ``hadoop`` on local disk (:class:`LocalHadoopTokens`): one ``stat`` per table, no read: of
  ``version-hint.text``, which every commit replaces by a rename (a new inode, size or mtime).
* ``jdbc`` (:class:`JdbcListingTokens`): one query per tick for the whole catalog, the
  ``metadata_location`` of every table in Iceberg's ``iceberg_tables`` table.
* every other catalog and format (:class:`PerTableTokens`): the table's metadata pointer, one call per
  table (REST/Hive/Glue: the catalog's load; ``hadoop`` on object storage: the hint's read; path-based
  formats: their own pointer through the reader's cached state).
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Sequence
from typing import Any, Protocol

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogType
from airflow_tablemgmt.metadata.iceberg import VERSION_HINT, SnapshotReader, local_warehouse_path

#: A table that is not there (yet): its token until it appears.
MISSING = "missing"


class TokenSource(Protocol):
    """Answers for many tables of one catalog at once; blocking I/O (the poller calls it in a thread).

    :meth:`probe` turns a table into what :meth:`tokens` takes for it, once per watched table (a path, the
    table itself), so a tick over 10,000 tables neither formats paths nor hashes identifiers again."""

    #: True when one call costs the same for all tables (a listing, local stats): the poller then
    #: checks every table on every tick. False: one catalog call per table, bounded per tick.
    batched: bool

    def probe(self, table: TableIdentifier) -> Any: ...

    def tokens(self, probes: Sequence[Any]) -> list[Hashable]:
        """One token per probe, in order."""
        ...


class LocalHadoopTokens:
    """One ``stat`` of each table's ``version-hint.text`` (≈ 5 µs): Iceberg's hadoop tables replace it by
    a rename on every commit, so its inode, size or mtime moves. A table without a hint (Iceberg then takes
    the newest listed version) is checked by its ``metadata/`` directory, whose mtime moves with every file
    a commit adds."""

    batched = True

    def __init__(self, reader: SnapshotReader) -> None:
        self.reader = reader

    def probe(self, table: TableIdentifier) -> str:
        return f"{self.reader.table_location(table)}/metadata/{VERSION_HINT}"

    def tokens(self, probes: Sequence[Any]) -> list[Hashable]:
        out: list[Hashable] = []
        append, stat = out.append, os.stat
        for hint in probes:
            try:
                h = stat(hint)
                append((h.st_ino, h.st_size, h.st_mtime_ns))
                continue
            except FileNotFoundError:
                pass
            except OSError as e:
                append(("error", e.errno))
                continue
            try:
                d = stat(hint[: -len(VERSION_HINT) - 1])
                append(("listed", d.st_ino, d.st_mtime_ns))
            except FileNotFoundError:
                append(MISSING)
            except OSError as e:
                append(("error", e.errno))
        return out


class JdbcListingTokens:
    """One query for every table of a JDBC catalog: ``metadata_location`` per table, from the
    ``iceberg_tables`` table pyiceberg's ``sql`` catalog reads (the same rows Iceberg's JdbcCatalog writes)."""

    batched = True

    def __init__(self, reader: SnapshotReader) -> None:
        self.reader = reader

    def probe(self, table: TableIdentifier) -> tuple[str, str]:
        return (table.namespace, table.name)

    def tokens(self, probes: Sequence[Any]) -> list[Hashable]:
        from pyiceberg.catalog.sql import IcebergTables
        from sqlalchemy import select
        from sqlalchemy.orm import Session

        catalog: Any = self.reader.catalog_client()
        query = select(
            IcebergTables.table_namespace, IcebergTables.table_name, IcebergTables.metadata_location
        ).where(IcebergTables.catalog_name == catalog.name)
        with Session(catalog.engine) as session:
            listed = {(ns, name): location for ns, name, location in session.execute(query)}
        return [listed.get(key, MISSING) for key in probes]


class PerTableTokens:
    """One call per table: the reader's metadata pointer, or (a reader without one) its cached state."""

    batched = False

    def __init__(self, reader: Any) -> None:
        self.reader = reader

    def probe(self, table: TableIdentifier) -> TableIdentifier:
        return table

    def tokens(self, probes: Sequence[Any]) -> list[Hashable]:
        out: list[Hashable] = []
        for table in probes:
            try:
                if isinstance(self.reader, SnapshotReader):
                    out.append(self.reader.metadata_pointer(table))
                else:
                    out.append(self.reader.current_state(table).snapshot_id)
            except Exception as e:  # noqa: BLE001 - any failure is a change for the watcher to look at
                out.append(("error", type(e).__name__, str(e)))
        return out


def token_source(reader: Any) -> TokenSource:
    """The cheapest check ``reader``'s catalog offers (see the module docstring)."""
    if isinstance(reader, SnapshotReader):
        catalog = reader.catalog
        if catalog.type == CatalogType.HADOOP and local_warehouse_path(catalog.warehouse or "") is not None:
            return LocalHadoopTokens(reader)
        if catalog.type == CatalogType.JDBC:
            return JdbcListingTokens(reader)
    return PerTableTokens(reader)


__all__ = [
    "MISSING",
    "JdbcListingTokens",
    "LocalHadoopTokens",
    "PerTableTokens",
    "TokenSource",
    "token_source",
]
