"""``Store``: one database (SQLite file or PostgreSQL), its schema, and its repositories.

Each repository's module is imported when the store first hands that repository out: a task start parses the
DAG file, and a table's DAG reads catalogs, tables and policies, never processes or leases (issue 40's
single-DAG parse budget, ``tests/unit/dag_factory/test_task_start_imports.py``)."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import (
    Connection,
    Engine,
    column,
    create_engine,
    event,
    inspect,
    select,
    table,
    text,
)
from sqlalchemy.engine import URL
from sqlalchemy.exc import InterfaceError, NoSuchModuleError, OperationalError
from sqlalchemy.pool import StaticPool

from airflow_tablemgmt.store.errors import StoreSchemaOutdated, StoreUnavailable
from airflow_tablemgmt.store.models import SCHEMA_REVISION, VERSION_TABLE
from airflow_tablemgmt.store.sqlite import enable_wal, is_memory_sqlite, prepare_sqlite_file
from airflow_tablemgmt.store.timeouts import SQLITE_BUSY_TIMEOUT_MS, apply_pg_timeouts
from airflow_tablemgmt.store.urls import (
    EXAMPLE_URLS,
    driver_error,
    parse_store_url,
    unreachable_message,
)

if TYPE_CHECKING:
    from alembic.config import Config

    from airflow_tablemgmt.store.catalogs import CatalogRepository
    from airflow_tablemgmt.store.dynamic import DynamicTableRepository
    from airflow_tablemgmt.store.leases import LeaseRepository
    from airflow_tablemgmt.store.processes import ProcessRepository
    from airflow_tablemgmt.store.tables import TableRepository

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Serializes concurrent upgrades on PostgreSQL ("tms_migr" as a 64-bit key).
_PG_MIGRATION_LOCK = int.from_bytes(b"tms_migr", "big")
_LIVE_STORES: weakref.WeakSet[Store] = weakref.WeakSet()


class Store:
    """The metadata store at ``url``: engine, schema (Alembic) and repositories.

    The schema is brought to the newest revision on first use of a repository unless
    ``auto_upgrade`` is false. ``engine_kwargs`` go to :func:`sqlalchemy.create_engine`
    (``connect_args``, pool settings ...). Within one process use :meth:`for_url`: the DAG
    file and the tasks ask for the store repeatedly and should share one engine.

    SQLite runs in WAL mode with a 30 s busy timeout, so the DAG processor and several task
    processes can read and write one file at once. An in-memory SQLite URL shares a single
    connection between threads (for tests; nothing is persisted).

    A bare ``postgresql://`` URL uses psycopg2 (which this package installs) unless psycopg 3 is
    installed. A SQLite file the store creates is mode 0600, and the directories it creates 0700: the file
    holds the registry and every process's parameters. With ``create=False`` (read-only commands)
    a missing file raises :class:`StoreNotFound` and nothing is created. A malformed URL, a
    missing database driver or an unwritable path raise :class:`StoreUnavailable` here; an
    unreachable server raises it on first use (or :meth:`ping`). Messages never show the password.
    """

    _instances: dict[tuple[str, bool, str, bool], Store] = {}
    _instances_lock = threading.Lock()

    def __init__(
        self,
        url: str,
        *,
        auto_upgrade: bool = True,
        engine_kwargs: Mapping[str, Any] | None = None,
        create: bool = True,
    ) -> None:
        self._url = parse_store_url(url)
        self._auto_upgrade = auto_upgrade
        self._engine = _create_engine(self._url, dict(engine_kwargs or {}), create=create)
        self._schema_lock = threading.Lock()
        self._schema_ready = False
        # Each built (and its module imported) on first use: see the module's docstring.
        self._repositories: dict[str, Any] = {}
        self._repositories_lock = threading.Lock()
        _LIVE_STORES.add(self)

    def __repr__(self) -> str:
        return f"Store({self._url.render_as_string(hide_password=True)!r})"

    # -- construction ----------------------------------------------------------------------

    @staticmethod
    def default_url(airflow_home: str | None = None) -> str:
        """``sqlite:///<AIRFLOW_HOME or ~/airflow>/tablemgmt.db``, the store when no connection is set."""
        home = airflow_home or os.environ.get("AIRFLOW_HOME") or "~/airflow"
        return f"sqlite:///{Path(home).expanduser().resolve() / 'tablemgmt.db'}"

    @classmethod
    def for_url(
        cls,
        url: str,
        *,
        auto_upgrade: bool = True,
        engine_kwargs: Mapping[str, Any] | None = None,
        create: bool = True,
    ) -> Store:
        """The process-wide ``Store`` for ``url`` (and these options), created on first call."""
        key = (url, auto_upgrade, repr(sorted((engine_kwargs or {}).items())), create)
        with cls._instances_lock:
            store = cls._instances.get(key)
            if store is None:
                store = cls._instances[key] = cls(
                    url, auto_upgrade=auto_upgrade, engine_kwargs=engine_kwargs, create=create
                )
            return store

    @classmethod
    def clear_cache(cls) -> None:
        """Dispose and forget every store :meth:`for_url` handed out."""
        with cls._instances_lock:
            stores, cls._instances = list(cls._instances.values()), {}
        for store in stores:
            store.dispose()

    # -- engine and schema -----------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def display_url(self) -> str:
        """The URL with its password hidden: safe for logs and messages."""
        return self._url.render_as_string(hide_password=True)

    def ping(self) -> None:
        """Connect once; :class:`StoreUnavailable` naming host:port (or the file) if that fails."""
        with self._translate_connect_errors():
            with self._engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")

    @contextlib.contextmanager
    def _translate_connect_errors(self) -> Iterator[None]:
        try:
            yield
        except (OperationalError, InterfaceError) as e:  # connection-level, not a bad statement
            raise StoreUnavailable(unreachable_message(self._url, e)) from e

    @staticmethod
    def head_revision() -> str:
        """The newest schema revision this package ships."""
        return SCHEMA_REVISION

    def current_revision(self) -> str | None:
        """The database's schema revision, or None before the first upgrade."""
        # Plain SQL rather than Alembic's MigrationContext: Alembic takes about a second to
        # import, and every task process checks the schema once.
        with self._engine.connect() as conn:
            if not inspect(conn).has_table(VERSION_TABLE):
                return None
            versions = table(VERSION_TABLE, column("version_num"))
            revisions = conn.execute(select(versions.c.version_num)).scalars().all()
        if len(revisions) > 1:
            raise StoreSchemaOutdated(f"{self!r} has several schema heads {sorted(revisions)}; expected one")
        return revisions[0] if revisions else None

    def upgrade(self) -> None:
        """Migrate the schema to the newest revision. Idempotent; concurrent callers serialize.

        The whole upgrade runs in one transaction that first takes a database-wide lock
        (``BEGIN IMMEDIATE`` on SQLite, an advisory lock on PostgreSQL), so when several
        processes start on a fresh database one migrates and the others find it done.
        """
        from alembic import command

        config = alembic_config()
        with self._engine.connect() as conn:
            _lock_for_migration(conn)
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
            conn.commit()
        self._schema_ready = True

    def _ensure_schema(self) -> None:
        if self._schema_ready:
            return
        with self._schema_lock:
            if self._schema_ready:
                return
            with self._translate_connect_errors():
                current = self.current_revision()
            head = SCHEMA_REVISION
            if current != head:
                if not self._auto_upgrade:
                    raise StoreSchemaOutdated(
                        f"{self!r} has schema revision {current or 'none'}, this package needs {head}; "
                        "run Store(url).upgrade() or create the store with auto_upgrade=True"
                    )
                log.info("Upgrading tablemgmt store %r from %s to %s", self, current or "empty", head)
                self.upgrade()
            self._schema_ready = True

    def dispose(self) -> None:
        """Close pooled connections; the store reconnects if used again."""
        self._engine.dispose()

    # -- repositories ----------------------------------------------------------------------

    def _repository(self, name: str) -> Any:
        """The repository ``name`` (one per store), its module imported and the repository built on first
        use, after the schema is checked."""
        self._ensure_schema()
        repository = self._repositories.get(name)
        if repository is None:
            with self._repositories_lock:
                repository = self._repositories.get(name)
                if repository is None:
                    repository = self._repositories[name] = _REPOSITORIES[name]()(self._engine)
        return repository

    @property
    def catalogs(self) -> CatalogRepository:
        return cast("CatalogRepository", self._repository("catalogs"))

    @property
    def tables(self) -> TableRepository:
        return cast("TableRepository", self._repository("tables"))

    @property
    def dynamic(self) -> DynamicTableRepository:
        """Dynamic tables: rows of ``tms_table`` with a ``dynamic`` document."""
        return cast("DynamicTableRepository", self._repository("dynamic"))

    @property
    def processes(self) -> ProcessRepository:
        return cast("ProcessRepository", self._repository("processes"))

    @property
    def leases(self) -> LeaseRepository:
        return cast("LeaseRepository", self._repository("leases"))


def _catalogs() -> type:
    from airflow_tablemgmt.store.catalogs import CatalogRepository

    return CatalogRepository


def _tables() -> type:
    from airflow_tablemgmt.store.tables import TableRepository

    return TableRepository


def _dynamic() -> type:
    from airflow_tablemgmt.store.dynamic import DynamicTableRepository

    return DynamicTableRepository


def _processes() -> type:
    from airflow_tablemgmt.store.processes import ProcessRepository

    return ProcessRepository


def _leases() -> type:
    from airflow_tablemgmt.store.leases import LeaseRepository

    return LeaseRepository


# The repository classes by the store's property names, each imported when first asked for.
_REPOSITORIES: dict[str, Callable[[], type]] = {
    "catalogs": _catalogs,
    "tables": _tables,
    "dynamic": _dynamic,
    "processes": _processes,
    "leases": _leases,
}


def alembic_config() -> Config:
    """An Alembic config for the store's migrations, built in code (there is no alembic.ini)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    return config


def _create_engine(url: URL, kwargs: dict[str, Any], *, create: bool = True) -> Engine:
    try:
        url.get_dialect()
    except NoSuchModuleError:
        raise StoreUnavailable(
            f"store URL {url.render_as_string(hide_password=True)}: unknown database {url.drivername!r}; "
            f"use PostgreSQL (production) or SQLite (the embedded default), e.g. {EXAMPLE_URLS}"
        ) from None
    if url.get_backend_name() != "sqlite":
        kwargs.setdefault("pool_pre_ping", True)
        apply_pg_timeouts(url, kwargs)
        try:
            return create_engine(url, **kwargs)
        except ImportError as e:
            raise driver_error(url, e) from None
    if is_memory_sqlite(url):
        kwargs.setdefault("poolclass", StaticPool)
        kwargs.setdefault("connect_args", {"check_same_thread": False})
    elif url.database and not url.database.startswith("file:"):
        prepare_sqlite_file(Path(url.database).expanduser(), create=create)
    engine = create_engine(url, **kwargs)
    memory = is_memory_sqlite(url)

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            if not memory:
                enable_wal(cursor)
        finally:
            cursor.close()

    return engine


def _lock_for_migration(conn: Connection) -> None:
    dialect = conn.dialect.name
    if dialect == "sqlite":
        # pysqlite would run DDL outside any transaction; take the write lock up front so a
        # second migrator waits (busy timeout) and then sees the finished schema.
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    elif dialect == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})


def _dispose_after_fork() -> None:
    # A forked child (Airflow's task runner forks) must not reuse the parent's sockets/files.
    for store in list(_LIVE_STORES):
        store.engine.dispose(close=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_dispose_after_fork)
