"""Cheap Iceberg snapshot checks without a JVM: which snapshot is current, and did it change?

(Over 400 lines on purpose: one reader class with its three ways to the current metadata, the local
version-hint, the object-store listing and the catalog, whose fallbacks must be read together; the
table's properties are read the same three ways.)

The gate task (DESIGN.md, data flow step 3), :class:`~airflow_tablemgmt.triggers.snapshot.TableSnapshotTrigger`
and :class:`~airflow_tablemgmt.sensors.snapshot.TableSnapshotSensor` all ask one question of a table many
times: is there a snapshot newer than the one I saw? :class:`SnapshotReader` answers it with pyiceberg.

``hadoop`` catalogs have no pyiceberg catalog class. A hadoop table keeps its metadata as
``<warehouse>/<namespace>/<table>/metadata/v<N>.metadata.json`` with the current ``N`` in
``metadata/version-hint.text``; the reader reads that pointer (a small file read) and parses the
metadata file with ``StaticTable.from_metadata`` (much dearer) only when the pointer moved since the
last call for that table. ``benchmarks/snapshot_check.py`` measures both; its figures are in
``benchmarks/README.md``. Like Iceberg's ``HadoopTableOperations`` it looks one version past the hint, because
a writer creates ``v<N+1>.metadata.json`` before it rewrites the hint.

``rest``, ``hive``, ``glue`` and ``jdbc`` catalogs go through pyiceberg's own catalogs (``jdbc`` becomes
pyiceberg's ``sql`` catalog, which reads the same ``iceberg_tables`` table); there the catalog lookup is
the cost and the pointer is the table's ``metadata_location``.

This module imports neither Airflow nor pyspark (``metadata/ruff.toml`` bans both), and pyiceberg only
when a read needs it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote as urlquote
from urllib.parse import urlparse

from airflow_tablemgmt.core.errors import CatalogUnavailable, InvalidDeclaration, TableNotFound
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.storage import pyiceberg_properties
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.io import FileIO

log = logging.getLogger(__name__)

VERSION_HINT = "version-hint.text"
# How many ancestors of the current snapshot a reader keeps per table to tell a data change from a
# rewrite (compaction, manifest rewrite). A watcher remembers the snapshot it last handled, so it only
# walks the commits since its previous poll; a longer gap falls back to "changed".
ANCESTRY_DEPTH = 64
REPLACE = "replace"  # Iceberg's DataOperations.REPLACE: files rewritten, data unchanged
_VERSION_FILE = re.compile(r"^v(\d+)(\.gz)?\.metadata\.json$")

# CatalogSpec.type -> pyiceberg catalog ``type``.
_PYICEBERG_TYPE = {
    CatalogType.REST: "rest",
    CatalogType.HIVE: "hive",
    CatalogType.GLUE: "glue",
    CatalogType.JDBC: "sql",
}
# Iceberg JDBC URL sub-protocol -> SQLAlchemy dialect+driver for pyiceberg's sql catalog.
_JDBC_DIALECTS = {
    "postgresql": "postgresql+psycopg2",
    "mysql": "mysql+pymysql",
    "sqlite": "sqlite",
}


def local_warehouse_path(warehouse: str) -> str | None:
    """The filesystem path of a local warehouse (plain path, ``file:/p`` or ``file:///p``), else None."""
    parsed = urlparse(warehouse)
    if parsed.scheme == "" or (len(parsed.scheme) == 1 and os.name == "nt"):
        return warehouse
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            return None
        return parsed.path
    return None


def sqlalchemy_url(jdbc_uri: str, user: str | None = None, password: str | None = None) -> str:
    """Translate an Iceberg JDBC catalog ``uri`` (``jdbc:postgresql://h/db``) to a SQLAlchemy URL.

    A ``uri`` that is already a SQLAlchemy URL is returned unchanged.
    """
    if not jdbc_uri.startswith("jdbc:"):
        return jdbc_uri
    rest = jdbc_uri[len("jdbc:") :]
    sub, _, target = rest.partition(":")
    dialect = _JDBC_DIALECTS.get(sub)
    if dialect is None:
        raise InvalidDeclaration(
            f"catalog.properties.uri: JDBC sub-protocol {sub!r} in {jdbc_uri!r} has no pyiceberg equivalent; "
            f"supported: {', '.join(sorted(_JDBC_DIALECTS))} (or give a SQLAlchemy URL)"
        )
    if sub == "sqlite":
        # jdbc:sqlite:/abs/path or jdbc:sqlite:file:/abs/path -> sqlite:////abs/path
        path = target.removeprefix("file:")
        return f"sqlite:///{path}"
    target = target.removeprefix("//")
    if user:
        cred = urlquote(user, safe="") + (f":{urlquote(password, safe='')}" if password else "")
        target = f"{cred}@{target}"
    return f"{dialect}://{target}"


@dataclass(frozen=True)
class SnapshotState:
    """The current snapshot of a table and its recent ancestry, newest first: ``(id, operation)``."""

    snapshot_id: int | None
    ancestry: tuple[tuple[int, str | None], ...] = ()

    def data_changed_since(self, since: int | None) -> bool:
        """Whether a snapshot after ``since`` changed data, i.e. is anything but a ``replace``.

        Our own compaction commits are ``replace`` snapshots: a watcher that asks this question is not
        woken by the maintenance it triggered. When ``since`` is not among the kept ancestors (expired,
        rolled back, or further back than :data:`ANCESTRY_DEPTH`) the answer is a conservative yes.
        """
        if self.snapshot_id is None or self.snapshot_id == since:
            return False
        for snapshot_id, operation in self.ancestry:
            if snapshot_id == since:
                return False
            if operation != REPLACE:
                return True
        return True


def _state_of(metadata: Any) -> SnapshotState:
    current = metadata.current_snapshot()
    if current is None:
        return SnapshotState(None)
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    ancestry: list[tuple[int, str | None]] = []
    snap = current
    while snap is not None and len(ancestry) < ANCESTRY_DEPTH:
        op = snap.summary.operation.value if snap.summary is not None else None
        ancestry.append((snap.snapshot_id, op))
        snap = by_id.get(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return SnapshotState(current.snapshot_id, tuple(ancestry))


def _state_of_document(doc: dict[str, Any]) -> SnapshotState:
    """:func:`_state_of` for a metadata JSON document as Iceberg's table spec writes it."""
    current_id = doc.get("current-snapshot-id")
    if current_id is None or current_id == -1:
        return SnapshotState(None)
    by_id = {s["snapshot-id"]: s for s in doc.get("snapshots") or ()}
    ancestry: list[tuple[int, str | None]] = []
    snap = by_id.get(current_id)
    if snap is None:
        return SnapshotState(int(current_id))
    while snap is not None and len(ancestry) < ANCESTRY_DEPTH:
        ancestry.append((int(snap["snapshot-id"]), (snap.get("summary") or {}).get("operation")))
        parent = snap.get("parent-snapshot-id")
        snap = by_id.get(parent) if parent is not None else None
    return SnapshotState(int(current_id), tuple(ancestry))


class SnapshotReader:
    """Current snapshot ids of the tables of one catalog, cached by metadata pointer.

    Thread-safe: triggers call it through ``asyncio.to_thread``. ``metadata_loads`` counts full metadata
    reads (the expensive part) so a caller or a test can see the pointer cache at work.
    """

    def __init__(self, catalog: CatalogSpec) -> None:
        self.catalog = catalog
        self.metadata_loads = 0
        self._lock = threading.Lock()
        self._cache: dict[TableIdentifier, tuple[str, SnapshotState]] = {}
        self._pyiceberg_catalog: Catalog | None = None
        self._file_io: FileIO | None = None
        self._local_root: str | None = None
        if catalog.type == CatalogType.HADOOP:
            assert catalog.warehouse is not None  # CatalogSpec validates it for hadoop
            self._local_root = local_warehouse_path(catalog.warehouse)

    def __repr__(self) -> str:
        return f"SnapshotReader({self.catalog.name!r}, type={self.catalog.type.value})"

    # -- public API -----------------------------------------------------------------------------

    def current_snapshot_id(self, table: TableIdentifier) -> int | None:
        """The table's current snapshot id, or None for a table without a snapshot.

        Raises :class:`TableNotFound` naming the table and where it was looked for.
        """
        return self.current_state(table).snapshot_id

    def current_state(self, table: TableIdentifier) -> SnapshotState:
        """The table's current snapshot and its recent ancestry (see :class:`SnapshotState`)."""
        self._check_catalog(table)
        if self.catalog.type != CatalogType.HADOOP:
            return self._catalog_state(table)
        for attempt in (1, 2):
            pointer = self.metadata_pointer(table)
            cached = self._cache.get(table)
            if cached is not None and cached[0] == pointer:
                return cached[1]
            try:
                state = self._load_state(pointer)
            except FileNotFoundError:
                # A commit between the pointer read and the load may have removed the old metadata
                # file (write.metadata.delete-after-commit.enabled): read the pointer again, once.
                if attempt == 2:
                    raise TableNotFound(
                        f"table {table}: metadata file {pointer} named by {self._hint_path(table)} does not exist"
                    ) from None
                continue
            with self._lock:
                self._cache[table] = (pointer, state)
            return state
        raise AssertionError("unreachable")

    def has_new_snapshot(self, table: TableIdentifier, last_seen: int | None) -> tuple[bool, int | None]:
        """``(changed, current)``: changed when the table has a snapshot and it is not ``last_seen``.

        A table that lost its snapshots (re-created empty) is not "new": ``(False, None)``.
        """
        current = self.current_snapshot_id(table)
        return (current is not None and current != last_seen), current

    def metadata_pointer(self, table: TableIdentifier) -> str:
        """Location of the table's current metadata file: the cheap part of a check.

        For hadoop catalogs this reads ``version-hint.text`` (and looks one version ahead); for the
        other catalogs it is the ``metadata_location`` the catalog returns, which costs a lookup.
        """
        self._check_catalog(table)
        if self.catalog.type != CatalogType.HADOOP:
            return self._catalog_table(table).metadata_location
        if self._local_root is not None:
            return self._local_pointer(table)
        return self._remote_pointer(table)

    def table_location(self, table: TableIdentifier) -> str:
        """``<warehouse>/<namespace>/<table>`` of a hadoop-catalog table."""
        if self.catalog.type != CatalogType.HADOOP:
            return self._catalog_table(table).location()
        assert self.catalog.warehouse is not None
        root = self._local_root if self._local_root is not None else self.catalog.warehouse
        return f"{root.rstrip('/')}/{table.namespace_path}/{table.name}"

    def table_properties(self, table: TableIdentifier) -> dict[str, str]:
        """The table's properties in its current metadata (``gc.enabled``, ``format-version`` ...)."""
        self._check_catalog(table)
        if self.catalog.type != CatalogType.HADOOP:
            return dict(self._catalog_table(table).properties)
        pointer = self.metadata_pointer(table)
        local = local_warehouse_path(pointer)
        if local is not None and not pointer.endswith(".gz"):
            with open(local, "rb") as f:
                return {str(k): str(v) for k, v in (json.load(f).get("properties") or {}).items()}
        from pyiceberg.table import StaticTable

        return dict(StaticTable.from_metadata(pointer, self._io_properties()).metadata.properties)

    def forget(self, table: TableIdentifier | None = None) -> None:
        """Drop the cached pointer of ``table`` (or of every table): the next check reloads metadata."""
        with self._lock:
            if table is None:
                self._cache.clear()
            else:
                self._cache.pop(table, None)

    # -- hadoop tables --------------------------------------------------------------------------

    def _hint_path(self, table: TableIdentifier) -> str:
        return f"{self.table_location(table)}/metadata/{VERSION_HINT}"

    def _local_pointer(self, table: TableIdentifier) -> str:
        meta_dir = f"{self.table_location(table)}/metadata"
        try:
            with open(f"{meta_dir}/{VERSION_HINT}", "rb") as f:
                hint = f.read().decode("utf-8").strip()
        except FileNotFoundError:
            hint = ""
        if hint.isdigit():
            version = int(hint)
        elif hint.endswith(".metadata.json"):
            return f"{meta_dir}/{hint}"
        else:
            # No (or an unreadable) hint: Iceberg then takes the highest version in the directory.
            version = self._max_listed_version(table, meta_dir)
        while True:
            nxt = version + 1
            if os.path.exists(f"{meta_dir}/v{nxt}.metadata.json") or os.path.exists(
                f"{meta_dir}/v{nxt}.gz.metadata.json"
            ):
                version = nxt
                continue
            break
        plain = f"{meta_dir}/v{version}.metadata.json"
        if os.path.exists(plain):
            return plain
        gz = f"{meta_dir}/v{version}.gz.metadata.json"
        if os.path.exists(gz):
            return gz
        raise TableNotFound(
            f"table {table}: {meta_dir}/{VERSION_HINT} names version {version}, but neither {plain} "
            "nor its .gz variant exists"
        )

    def _max_listed_version(self, table: TableIdentifier, meta_dir: str) -> int:
        try:
            names = os.listdir(meta_dir)
        except (FileNotFoundError, NotADirectoryError):
            raise TableNotFound(
                f"table {table}: no Iceberg table in hadoop catalog {self.catalog.name!r}: "
                f"{meta_dir}/{VERSION_HINT} does not exist"
            ) from None
        versions = [int(m.group(1)) for n in names if (m := _VERSION_FILE.match(n))]
        if not versions:
            raise TableNotFound(
                f"table {table}: no Iceberg table in hadoop catalog {self.catalog.name!r}: "
                f"{meta_dir} has no {VERSION_HINT} and no v<N>.metadata.json"
            )
        return max(versions)

    def _io(self) -> FileIO:
        if self._file_io is None:
            from pyiceberg.io import load_file_io

            assert self.catalog.warehouse is not None
            self._file_io = load_file_io(self._io_properties(), self.catalog.warehouse)
        return self._file_io

    def _io_properties(self) -> dict[str, str]:
        # The catalog's storage settings as pyiceberg names them, from the same properties the Spark job
        # gets (core/storage.py); Spark-only (spark.hadoop.fs.s3a.*) and Java-only keys are left out.
        return pyiceberg_properties(self.catalog.warehouse, self.catalog.properties)

    def _remote_pointer(self, table: TableIdentifier) -> str:
        io = self._io()
        meta_dir = f"{self.table_location(table)}/metadata"
        hint_file = io.new_input(f"{meta_dir}/{VERSION_HINT}")
        try:
            with hint_file.open() as stream:
                hint = stream.read().decode("utf-8").strip()
        except FileNotFoundError:
            raise TableNotFound(
                f"table {table}: no Iceberg table in hadoop catalog {self.catalog.name!r}: "
                f"{meta_dir}/{VERSION_HINT} does not exist"
            ) from None
        if hint.endswith(".metadata.json"):
            return f"{meta_dir}/{hint}"
        if not hint.isdigit():
            raise TableNotFound(
                f"table {table}: {meta_dir}/{VERSION_HINT} holds {hint!r}, not a version number"
            )
        version = int(hint)
        while io.new_input(f"{meta_dir}/v{version + 1}.metadata.json").exists():
            version += 1
        return f"{meta_dir}/v{version}.metadata.json"

    def _load_state(self, metadata_location: str) -> SnapshotState:
        local = local_warehouse_path(metadata_location)
        if local is not None and not metadata_location.endswith(".gz"):
            # The snapshot list is all the state needs: read it from the JSON document (Iceberg's
            # table spec) without building pyiceberg's model of the whole metadata, and without
            # importing pyiceberg and pyarrow (≈ 2 s in a fresh process).
            with open(local, "rb") as f:
                doc = json.load(f)
            with self._lock:
                self.metadata_loads += 1
            return _state_of_document(doc)
        from pyiceberg.table import StaticTable

        static = StaticTable.from_metadata(metadata_location, self._io_properties())
        with self._lock:
            self.metadata_loads += 1
        return _state_of(static.metadata)

    # -- catalog-backed tables ------------------------------------------------------------------

    def _catalog_properties(self) -> dict[str, str]:
        props: dict[str, Any] = self._io_properties()
        props["type"] = _PYICEBERG_TYPE[self.catalog.type]
        if self.catalog.warehouse:
            props.setdefault("warehouse", self.catalog.warehouse)
        if self.catalog.type == CatalogType.JDBC:
            user = props.pop("jdbc.user", None)
            password = props.pop("jdbc.password", None)
            if "uri" not in props:
                raise InvalidDeclaration(
                    f"catalog {self.catalog.name}: properties.uri: a jdbc catalog needs the database URL"
                )
            props["uri"] = sqlalchemy_url(props["uri"], user, password)
            # A read path must not create catalog tables in somebody's database.
            props.setdefault("init_catalog_tables", "false")
        return props

    def catalog_client(self) -> Catalog:
        """pyiceberg's catalog for a catalog service (not ``hadoop``): what discovery lists namespaces and
        tables with (``metadata/discovery.py``)."""
        return self._catalog_client()

    def _catalog_client(self) -> Catalog:
        if self._pyiceberg_catalog is None:
            from pyiceberg.catalog import load_catalog

            with self._lock:
                if self._pyiceberg_catalog is None:
                    self._pyiceberg_catalog = load_catalog(self.catalog.name, **self._catalog_properties())
        assert self._pyiceberg_catalog is not None
        return self._pyiceberg_catalog

    def _catalog_table(self, table: TableIdentifier) -> Any:
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        try:
            return self._catalog_client().load_table((*table.namespace_parts, table.name))
        except (NoSuchTableError, NoSuchNamespaceError) as e:
            raise TableNotFound(
                f"table {table}: not found in {self.catalog.type.value} catalog {self.catalog.name!r} "
                f"(looked up {table.namespace}.{table.name}): {e}"
            ) from None
        except Exception as e:
            if _is_outage(e):
                raise CatalogUnavailable(
                    f"table {table}: {self.catalog.type.value} catalog {self.catalog.name!r} did not answer "
                    f"({type(e).__name__}: {e}); will be retried"
                ) from e
            raise

    def _catalog_state(self, table: TableIdentifier) -> SnapshotState:
        loaded = self._catalog_table(table)
        with self._lock:
            self.metadata_loads += 1
        state = _state_of(loaded.metadata)
        with self._lock:
            self._cache[table] = (loaded.metadata_location, state)
        return state

    def _check_catalog(self, table: TableIdentifier) -> None:
        if table.catalog != self.catalog.name:
            raise InvalidDeclaration(
                f"table: {table} is in catalog {table.catalog!r}, but this reader reads catalog "
                f"{self.catalog.name!r}"
            )


def _is_outage(error: Exception) -> bool:
    """Whether ``error`` is the catalog service failing rather than an answer about the table: a REST
    catalog's 5xx, 503 or 429, or a JDBC catalog's database unreachable (SQLAlchemy's ``OperationalError``
    and ``InterfaceError``: pyiceberg's SQL catalog raises them as they are)."""
    from pyiceberg.exceptions import ServerError, ServiceUnavailableError, TooManyRequestsError
    from sqlalchemy.exc import InterfaceError, OperationalError

    return isinstance(
        error, (ServerError, ServiceUnavailableError, TooManyRequestsError, OperationalError, InterfaceError)
    )
