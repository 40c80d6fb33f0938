"""``Store``: one database (SQLite file or PostgreSQL), its schema, and its repositories."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import re
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Connection,
    Engine,
    column,
    create_engine,
    event,
    inspect,
    make_url,
    select,
    table,
    text,
)
from sqlalchemy.engine import URL
from sqlalchemy.exc import ArgumentError, DBAPIError, InterfaceError, NoSuchModuleError, OperationalError
from sqlalchemy.pool import StaticPool

from airflow_tablemgmt.store.catalogs import CatalogRepository
from airflow_tablemgmt.store.errors import StoreNotFound, StoreSchemaOutdated, StoreUnavailable
from airflow_tablemgmt.store.leases import LeaseRepository
from airflow_tablemgmt.store.models import SCHEMA_REVISION, VERSION_TABLE
from airflow_tablemgmt.store.processes import ProcessRepository
from airflow_tablemgmt.store.tables import TableRepository
from airflow_tablemgmt.store.timeouts import SQLITE_BUSY_TIMEOUT_MS, apply_pg_timeouts

if TYPE_CHECKING:
    from alembic.config import Config

    from airflow_tablemgmt.store.dynamic import DynamicTableRepository

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
        self._catalogs = CatalogRepository(self._engine)
        self._tables = TableRepository(self._engine)
        self._dynamic: DynamicTableRepository | None = None  # built on first use
        self._processes = ProcessRepository(self._engine)
        self._leases = LeaseRepository(self._engine)
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

    @property
    def catalogs(self) -> CatalogRepository:
        self._ensure_schema()
        return self._catalogs

    @property
    def tables(self) -> TableRepository:
        self._ensure_schema()
        return self._tables

    @property
    def dynamic(self) -> DynamicTableRepository:
        """Dynamic tables: rows of ``tms_table`` with a ``dynamic`` document."""
        self._ensure_schema()
        if self._dynamic is None:
            from airflow_tablemgmt.store.dynamic import DynamicTableRepository

            self._dynamic = DynamicTableRepository(self._engine)
        return self._dynamic

    @property
    def processes(self) -> ProcessRepository:
        self._ensure_schema()
        return self._processes

    @property
    def leases(self) -> LeaseRepository:
        self._ensure_schema()
        return self._leases


def alembic_config() -> Config:
    """An Alembic config for the store's migrations, built in code (there is no alembic.ini)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    return config


def _is_memory_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


# Which pip package provides a SQLAlchemy driver module, for the "driver not installed" message.
_DRIVER_PACKAGES = {
    "psycopg2": "psycopg2-binary",
    "psycopg": "psycopg[binary]",
    "pg8000": "pg8000",
    "asyncpg": "asyncpg",
    "mysqldb": "mysqlclient",
    "pymysql": "pymysql",
    "mysql": "mysql-connector-python",
    "mariadb": "mariadb",
}
_USERINFO = re.compile(r"(//[^/:@]*:)[^@/]*@")
_EXAMPLE_URLS = "postgresql+psycopg2://user@host:5432/tablemgmt or sqlite:////absolute/path/tablemgmt.db"


def hide_password(url: str) -> str:
    """``url`` with the password of its user-info part replaced by ``***``, even when unparseable."""
    return _USERINFO.sub(r"\1***@", url)


def parse_store_url(url: str) -> URL:
    """``url`` as a SQLAlchemy URL, or :class:`StoreUnavailable` saying what a store URL looks like."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError, TypeError):
        raise StoreUnavailable(
            f"store URL {hide_password(str(url))!r} is not a database URL; expected e.g. {_EXAMPLE_URLS}"
        ) from None
    if parsed.drivername == "postgresql" and not _importable("psycopg") and _importable("psycopg2"):
        # SQLAlchemy 2.1 maps a bare postgresql:// to psycopg 3; this package ships psycopg2.
        parsed = parsed.set(drivername="postgresql+psycopg2")
    return parsed


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def unreachable_message(url: URL, error: DBAPIError) -> str:
    """Why the server at ``url`` could not be reached: host:port (or the file) and the driver's reason."""
    if url.get_backend_name() == "sqlite":
        where = url.database or ":memory:"
    else:
        where = f"{url.host or 'localhost'}:{url.port or _default_port(url)}"
    reason = str(error.orig).strip().splitlines()[0] if str(error.orig).strip() else type(error.orig).__name__
    if url.password:
        reason = reason.replace(str(url.password), "***")
    return (
        f"cannot reach the store at {where} ({url.render_as_string(hide_password=True)}): {reason}. "
        "Check that the database is running and that --store-url / the tablemgmt_default connection "
        "points at it"
    )


def _default_port(url: URL) -> str:
    return {"postgresql": "5432", "mysql": "3306", "mssql": "1433", "oracle": "1521"}.get(
        url.get_backend_name(), "?"
    )


def _driver_error(url: URL, error: ImportError) -> StoreUnavailable:
    module = (getattr(error, "name", None) or "").split(".")[0].lower()
    backend, driver = url.get_backend_name(), url.get_driver_name()
    package = _DRIVER_PACKAGES.get(module) or _DRIVER_PACKAGES.get(driver) or module or driver
    hint = f"pip install {package}"
    if backend == "mysql" and package == "mysqlclient":
        hint += " (or use mysql+pymysql:// and pip install pymysql)"
    if backend == "postgresql" and package != "psycopg2-binary":
        hint += " (or use postgresql+psycopg2://, whose driver ships with this package)"
    return StoreUnavailable(
        f"the store URL {url.render_as_string(hide_password=True)} needs the {driver} driver for {backend}, "
        f"which is not installed: {hint}"
    )


def _create_engine(url: URL, kwargs: dict[str, Any], *, create: bool = True) -> Engine:
    try:
        url.get_dialect()
    except NoSuchModuleError:
        raise StoreUnavailable(
            f"store URL {url.render_as_string(hide_password=True)}: unknown database {url.drivername!r}; "
            f"use PostgreSQL (production) or SQLite (the embedded default), e.g. {_EXAMPLE_URLS}"
        ) from None
    if url.get_backend_name() != "sqlite":
        kwargs.setdefault("pool_pre_ping", True)
        apply_pg_timeouts(url, kwargs)
        try:
            return create_engine(url, **kwargs)
        except ImportError as e:
            raise _driver_error(url, e) from None
    if _is_memory_sqlite(url):
        kwargs.setdefault("poolclass", StaticPool)
        kwargs.setdefault("connect_args", {"check_same_thread": False})
    elif url.database and not url.database.startswith("file:"):
        _prepare_sqlite_file(Path(url.database).expanduser(), create=create)
    engine = create_engine(url, **kwargs)
    memory = _is_memory_sqlite(url)

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            if not memory:
                _enable_wal(cursor)
        finally:
            cursor.close()

    return engine


def _prepare_sqlite_file(path: Path, *, create: bool) -> None:
    """Create the store file 0600 (its missing directories 0700) before SQLite opens it.

    SQLite would create it with the process umask (usually world-readable); its WAL and shm
    files take the database file's mode, so they are private too. Without ``create`` a
    missing file is an error and nothing is created.
    """
    if path.exists():
        return
    if not create:
        raise StoreNotFound(
            f"no store at {path}; run `tablemgmt db upgrade` to create it, or point --store-url / "
            "the tablemgmt_default connection at an existing store"
        )
    try:
        missing = []
        parent = path.parent
        while not parent.exists():
            missing.append(parent)
            parent = parent.parent
        for directory in reversed(missing):
            try:
                os.mkdir(directory, 0o700)
            except FileExistsError:
                if not directory.is_dir():
                    raise
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            pass  # another process created it first
    except OSError as e:
        raise StoreUnavailable(
            f"cannot create the SQLite store at {path}: {e.strerror or e}"
            f"{f' ({e.filename})' if e.filename and str(e.filename) != str(path) else ''}; "
            "choose a writable path in --store-url / the tablemgmt_default connection"
        ) from None


def _enable_wal(cursor: Any) -> None:
    """Switch the file to WAL (a persistent setting) unless it already is.

    The switch needs an exclusive lock, and SQLite answers "database is locked" at once,
    without its busy handler, while another process holds one (e.g. while it migrates a fresh
    file): retry until the busy timeout.
    """
    if cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
        return
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


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
