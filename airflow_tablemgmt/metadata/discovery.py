"""What tables a catalog holds, listed without a JVM: the discovery pass's read (``services/enrolment.py``).

Two ways, by where a catalog keeps its tables:

- **a catalog service** (``rest``, ``hive``, ``glue``, ``jdbc``): pyiceberg's own catalog lists the namespaces,
  recursively (a namespace of several levels, ``sales.eu``, is a child of ``sales``), then each namespace's
  tables, and loads each table for its properties (the opt-out ``tablemgmt.maintenance=disabled`` and the
  policies' property matches are table properties);
- **a warehouse of directories** (``hadoop``): the warehouse is walked, and a directory whose entries are an
  installed format's root markers (``Format.root``: the catalogs' own ``metadata/``, a log directory, a
  timeline, ...) is a table of that format, named by its path (``<warehouse>/<a>/<b>/<name>`` is ``a.b.name``;
  a filesystem catalog's database directory ``<db>.db`` is the namespace ``db``). A table's properties come
  from its format's Details view (``Format.views['details']``), the catalogs' own format's from its metadata
  file.

A listing says what it could not read (:attr:`CatalogListing.failures`) and which tables it found but could
not read (:attr:`CatalogListing.unreadable`): a caller retires a table only from a *complete* listing, so a
catalog that is down, a namespace that could not be listed or a table whose metadata is mid-write never
retires anything.

The catalog is handed in with its secret references resolved (``hooks/secrets.py``); nothing here logs a
property value.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from airflow_tablemgmt.core.formats import DEFAULT_FORMAT, FORMATS
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType, TableSpec
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.table_check import found_format
from airflow_tablemgmt.metadata.table_dir import TableDir, open_table_dir

log = logging.getLogger(__name__)

#: How deep a walk or a namespace listing goes below the warehouse / the catalog's root: deeper trees are
#: reported as a failure (the listing is then incomplete and retires nothing), never walked forever.
MAX_DEPTH = 8
#: A filesystem catalog's database directory: ``<db>.db`` holds the tables of namespace ``db``.
DATABASE_SUFFIX = ".db"
_REASON_LEN = 300
#: Tables of a catalog service loaded at once (each load is a round trip to the service).
LOAD_THREADS = 8


@dataclass(frozen=True)
class DiscoveredTable:
    """One table a catalog holds: its name, format, properties and location."""

    catalog: str
    namespace: str
    name: str
    format: str
    properties: Mapping[str, str] = field(default_factory=dict)
    location: str | None = None

    @property
    def id(self) -> str:
        return f"{self.catalog}.{self.namespace}.{self.name}"


@dataclass(frozen=True)
class Unreadable:
    """A table (or an entry) that was found but could not be read or named; ``table_id`` when it could be named."""

    where: str
    reason: str
    table_id: str | None = None


@dataclass(frozen=True)
class CatalogListing:
    """What one catalog holds, and what the listing could not read."""

    catalog: str
    tables: tuple[DiscoveredTable, ...] = ()
    unreadable: tuple[Unreadable, ...] = ()
    failures: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Every namespace (every directory) was listed: a table not in :attr:`present` is gone."""
        return not self.failures

    @property
    def present(self) -> set[str]:
        """The ids of every table found, the unreadable ones included (they exist, their state is unknown)."""
        return {t.id for t in self.tables} | {u.table_id for u in self.unreadable if u.table_id}


def _short(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:_REASON_LEN]


def _valid_id(catalog: str, namespace: tuple[str, ...], name: str) -> str | None:
    """``catalog.namespace.name`` if every part is a valid identifier (what a table row may hold), else None."""
    try:
        return str(TableIdentifier(catalog, ".".join(namespace), name))
    except Exception:  # noqa: BLE001 - InvalidIdentifier: a name this service cannot hold
        return None


def list_catalog(catalog: CatalogSpec) -> CatalogListing:
    """Every table ``catalog`` holds (see the module docstring). Never raises for what it reads: a catalog
    that cannot be reached is a listing with a failure and no tables."""
    if catalog.type == CatalogType.HADOOP:
        return _Walk(catalog).run()
    return _list_service(catalog)


# ---- a catalog service, through pyiceberg -------------------------------------------------------------


def _list_service(catalog: CatalogSpec) -> CatalogListing:
    from airflow_tablemgmt.metadata.iceberg import SnapshotReader

    failures: list[str] = []
    tables: list[DiscoveredTable] = []
    unreadable: list[Unreadable] = []
    try:
        client = SnapshotReader(catalog).catalog_client()
        top = [tuple(ns) for ns in client.list_namespaces()]
    except Exception as e:  # noqa: BLE001 - unreachable service, refused credentials, bad settings
        return CatalogListing(catalog.name, failures=(f"catalog {catalog.name}: not listed: {_short(e)}",))
    seen: set[tuple[str, ...]] = set()
    idents: list[tuple[str, ...]] = []
    stack: list[tuple[str, ...]] = sorted(set(top), reverse=True)  # a flat answer (every level) is walked too
    while stack:
        namespace = stack.pop()
        if namespace in seen:
            continue
        seen.add(namespace)
        shown = ".".join(namespace)
        if len(namespace) > MAX_DEPTH:
            failures.append(f"namespace {shown}: deeper than {MAX_DEPTH} levels, not listed")
            continue
        try:
            children = [tuple(ns) for ns in client.list_namespaces(namespace)]
        except Exception as e:  # noqa: BLE001 - a catalog without nested namespaces may refuse the call
            children = []
            if not _flat_refusal(e):
                failures.append(f"namespace {shown}: sub-namespaces not listed: {_short(e)}")
        # a child is one level longer and starts with its parent (some services answer with every namespace)
        stack += [c for c in children if len(c) == len(namespace) + 1 and c[: len(namespace)] == namespace]
        try:
            identifiers = [tuple(t) for t in client.list_tables(namespace)]
        except Exception as e:  # noqa: BLE001
            failures.append(f"namespace {shown}: tables not listed: {_short(e)}")
            continue
        idents += identifiers
    # Loading each table (for its properties) is the pass's cost: a catalog service's round trip per table,
    # overlapped; a Hive Metastore's one thrift client is not shared between threads.
    threads = 1 if catalog.type == CatalogType.HIVE else LOAD_THREADS
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for found in pool.map(lambda ident: _load_service_table(catalog, client, ident), idents):
            if isinstance(found, Unreadable):
                unreadable.append(found)
            else:
                tables.append(found)
    return CatalogListing(
        catalog.name, tuple(sorted(tables, key=lambda t: t.id)), tuple(unreadable), tuple(failures)
    )


def _flat_refusal(e: BaseException) -> bool:
    """A catalog with one level of namespaces answering a child listing with 'no such namespace' or 'not
    supported': no sub-namespaces, not a failure."""
    return type(e).__name__ in ("NoSuchNamespaceError", "NotImplementedError", "ValidationError")


def _load_service_table(
    catalog: CatalogSpec, client: Any, ident: tuple[str, ...]
) -> DiscoveredTable | Unreadable:
    namespace, name = ident[:-1], ident[-1]
    table_id = _valid_id(catalog.name, namespace, name)
    where = ".".join(ident)
    if table_id is None:
        return Unreadable(where, "its name is not one this service can hold (letters, digits, underscores)")
    try:
        table = client.load_table(ident)
    except Exception as e:  # noqa: BLE001 - a table of another format (Hive), or metadata mid-write
        return Unreadable(where, f"not loaded: {_short(e)}", table_id)
    return DiscoveredTable(
        catalog.name,
        ".".join(namespace),
        name,
        DEFAULT_FORMAT,
        {str(k): str(v) for k, v in (table.properties or {}).items()},
        str(table.location()),
    )


# ---- a warehouse of directories ---------------------------------------------------------------------


class _Walk:
    """The walk of a ``hadoop`` catalog's warehouse, stopping at each table's root."""

    def __init__(self, catalog: CatalogSpec) -> None:
        self.catalog = catalog
        self.tables: list[DiscoveredTable] = []
        self.unreadable: list[Unreadable] = []
        self.failures: list[str] = []

    def run(self) -> CatalogListing:
        assert self.catalog.warehouse is not None  # CatalogSpec requires it of a hadoop catalog
        try:
            root = open_table_dir(self.catalog.warehouse, self.catalog.properties, kind="warehouse")
            entries = root.list("")
        except HealthUnavailable as e:
            return CatalogListing(self.catalog.name, failures=(f"warehouse {self.catalog.warehouse}: {e}",))
        self._namespace_level(root, (), entries)
        return CatalogListing(
            self.catalog.name,
            tuple(sorted(self.tables, key=lambda t: t.id)),
            tuple(self.unreadable),
            tuple(self.failures),
        )

    def _namespace_level(self, root: TableDir, parts: tuple[str, ...], entries: list[Any]) -> None:
        for entry in sorted(entries, key=lambda e: e.name):
            if not entry.is_dir or entry.name.startswith((".", "_")):
                continue
            rel = "/".join((*parts, entry.name))
            try:
                inside = root.list(rel)
            except HealthUnavailable as e:
                self.failures.append(f"{rel}: not listed: {e}")
                continue
            names = {i.name: i.is_dir for i in inside}

            def listing(directory: str, _rel: str = rel) -> list[str] | None:
                try:
                    return [i.name for i in root.list(f"{_rel}/{directory}")]
                except HealthUnavailable:
                    return None

            fmt = found_format(names, listing)
            if fmt is not None:
                self._table(root, parts, entry.name, fmt)
            elif len(parts) + 1 >= MAX_DEPTH:
                self.failures.append(f"{rel}: deeper than {MAX_DEPTH} levels, not walked")
            else:
                self._namespace_level(root, (*parts, entry.name), inside)

    def _table(self, root: TableDir, parts: tuple[str, ...], name: str, fmt: str) -> None:
        namespace = _namespace_of(parts)
        location = "/".join((root.location, *parts, name))
        table_id = _valid_id(self.catalog.name, namespace, name) if namespace else None
        if table_id is None:
            why = (
                "at the warehouse's root (no namespace)"
                if not namespace
                else "a name this service cannot hold"
            )
            self.unreadable.append(Unreadable(location, f"a {fmt} table {why}; not enrolled"))
            return
        try:
            properties = _properties(self.catalog, TableIdentifier.parse(table_id), fmt)
        except Exception as e:  # noqa: BLE001 - a log or metadata file mid-write: found, state unknown
            self.unreadable.append(Unreadable(location, f"properties not read: {_short(e)}", table_id))
            return
        self.tables.append(
            DiscoveredTable(self.catalog.name, ".".join(namespace), name, fmt, properties, location)
        )


def _namespace_of(parts: tuple[str, ...]) -> tuple[str, ...]:
    """The directories between the warehouse and a table as its namespace (``<db>.db`` is ``db``)."""
    if parts and parts[-1].endswith(DATABASE_SUFFIX) and len(parts[-1]) > len(DATABASE_SUFFIX):
        return (*parts[:-1], parts[-1][: -len(DATABASE_SUFFIX)])
    return parts


def _properties(catalog: CatalogSpec, ident: TableIdentifier, fmt: str) -> dict[str, str]:
    """The table's properties: the catalogs' own format's from its metadata file, another format's from its
    Details view (``properties``); a format without that view: none."""
    if fmt == DEFAULT_FORMAT:
        from airflow_tablemgmt.metadata.iceberg import SnapshotReader

        return SnapshotReader(catalog).table_properties(ident)
    descriptor = FORMATS.get(fmt)
    reference = descriptor.views.get("details")
    if reference is None:
        return {}
    read: Callable[[CatalogSpec, TableSpec], dict[str, Any]] = descriptor.load(reference)
    spec = TableSpec.model_construct(
        catalog=ident.catalog, namespace=ident.namespace, name=ident.name, format=fmt, actions={}
    )
    props = read(catalog, spec).get("properties") or {}
    return {str(k): str(v) for k, v in props.items()} if isinstance(props, Mapping) else {}


__all__ = ["CatalogListing", "DiscoveredTable", "MAX_DEPTH", "Unreadable", "list_catalog"]
