"""The NO_DATA decision of a dynamic table's periodic full refresh, read with pyiceberg (no JVM).

A periodic full refresh needs no Spark job when no source table has a snapshot newer than the ones the
last successful refresh read (its summary's ``source_snapshots``, recorded by ``spark.refresh`` before
its query ran). :func:`current_snapshots` reads the sources' current snapshot ids through
:class:`~airflow_tablemgmt.metadata.iceberg.SnapshotReader` (one reader per catalog, kept for the
process, so a hadoop table whose metadata pointer did not move is not parsed again);
:func:`has_new_data` compares. :func:`check_sources` does both in one call and also looks at the
snapshots in between: when every one of them is a ``replace`` (a compaction such as this provider's
``rewrite-files``: files rewritten, rows unchanged), the source has no new *data*.

Partition refreshes for a new schedule time always run; this module is not asked about them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from airflow_tablemgmt.core.errors import CatalogNotFound
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.metadata.iceberg import SnapshotReader, SnapshotState

_LOCK = threading.Lock()
_READERS: dict[str, SnapshotReader] = {}

CatalogSpecs = Mapping[str, CatalogSpec] | Iterable[CatalogSpec]


def reader_for(catalog: CatalogSpec) -> SnapshotReader:
    """The process's reader of ``catalog``; a new one when the catalog's settings changed."""
    with _LOCK:
        reader = _READERS.get(catalog.name)
        if reader is None or reader.catalog != catalog:
            reader = _READERS[catalog.name] = SnapshotReader(catalog)
        return reader


def forget_readers() -> None:
    """Drop every kept reader (and their pointer caches): the next read starts cold."""
    with _LOCK:
        _READERS.clear()


def _by_name(catalog_specs: CatalogSpecs) -> dict[str, CatalogSpec]:
    if isinstance(catalog_specs, Mapping):
        return {str(k): v for k, v in catalog_specs.items()}
    return {c.name: c for c in catalog_specs}


def current_states(catalog_specs: CatalogSpecs, table_ids: Iterable[str]) -> dict[str, SnapshotState]:
    """Each table's current snapshot and recent ancestry.

    Raises ``InvalidIdentifier`` for an id that is not ``catalog.namespace.table``, ``CatalogNotFound``
    for a catalog not in ``catalog_specs`` and ``TableNotFound`` for a missing table, each naming the
    table. A caller deciding NO_DATA should run the refresh on any of them (the Spark job then fails
    with its own error if the table is really gone).
    """
    catalogs = _by_name(catalog_specs)
    out: dict[str, SnapshotState] = {}
    for table_id in table_ids:
        table = TableIdentifier.parse(table_id)
        catalog = catalogs.get(table.catalog)
        if catalog is None:
            raise CatalogNotFound(
                f"source table {table_id}: catalog {table.catalog!r} is not registered; "
                f"registered: {', '.join(sorted(catalogs)) or 'none'}"
            )
        out[table_id] = reader_for(catalog).current_state(table)
    return out


def current_snapshots(catalog_specs: CatalogSpecs, table_ids: Iterable[str]) -> dict[str, int | None]:
    """``{table_id: current snapshot id}`` (None for a table without a snapshot). Errors: :func:`current_states`."""
    return {t: s.snapshot_id for t, s in current_states(catalog_specs, table_ids).items()}


def _snapshot_id(value: object) -> int | None:
    # Summaries travel as JSON; REST and some stores carry big ids as strings.
    return None if value is None else int(str(value))


def has_new_data(
    last: Mapping[str, object] | None,
    current: Mapping[str, int | None],
    states: Mapping[str, SnapshotState] | None = None,
) -> bool:
    """Whether a source has data the last successful refresh did not read.

    True when nothing was recorded (``last`` empty or None: no successful refresh yet, or a query with
    no source table, whose result may change with the clock), when the set of sources changed (an
    altered query), or when a source's current snapshot is not the one recorded. With ``states`` (from
    :func:`current_states`), snapshots after the recorded one that are all ``replace`` commits
    (compactions) do not count as new data.
    """
    if not last or not current:
        return True
    recorded = {t: _snapshot_id(v) for t, v in last.items()}
    if set(recorded) != set(current):
        return True
    for table_id, snapshot_id in current.items():
        seen = recorded[table_id]
        if snapshot_id == seen:
            continue
        state = (states or {}).get(table_id)
        if state is not None and seen is not None and not state.data_changed_since(seen):
            continue
        return True
    return False


@dataclass(frozen=True)
class SourceCheck:
    """The decision and what it was made on: record ``snapshots`` as the NO_DATA process's sources."""

    has_new_data: bool
    snapshots: dict[str, int | None] = field(default_factory=dict)


def check_sources(catalog_specs: CatalogSpecs, last: Mapping[str, object] | None) -> SourceCheck:
    """Read the sources named in ``last`` (the last successful refresh's ``source_snapshots``) and decide.

    Errors as :func:`current_states`.
    """
    if not last:
        return SourceCheck(True, {})
    states = current_states(catalog_specs, last)
    current = {t: s.snapshot_id for t, s in states.items()}
    return SourceCheck(has_new_data(last, current, states), current)
