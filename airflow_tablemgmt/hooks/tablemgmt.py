"""TableMgmtHook: reaches the metadata store through the `tablemgmt_default` connection."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.exceptions import AirflowNotFoundException
from airflow.sdk import BaseHook

from airflow_tablemgmt.hooks.errors import SharedStoreRequired

if TYPE_CHECKING:
    from airflow.sdk import Connection

    from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)

STORE_URL_ENV = "TABLEMGMT_STORE_URL"
ALLOW_LOCAL_SQLITE = "allow_local_sqlite"
# Executors whose tasks all run on this host (the DebugExecutor is dag.test()'s), so one SQLite file
# is shared by every task. Any other executor may run a task on another host with its own file.
SINGLE_HOST_EXECUTORS = frozenset({"LocalExecutor", "SequentialExecutor", "DebugExecutor"})
_PG_EXAMPLE = "postgresql+psycopg2://USER:PASSWORD@HOST:5432/tablemgmt"


def default_store_url() -> str:
    """A SQLite file under AIRFLOW_HOME: the embedded default when no connection is configured."""
    home = os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow")
    return f"sqlite:///{os.path.join(home, 'tablemgmt.db')}"


def configured_executors() -> list[str]:
    """The class names of Airflow's configured executors (``[core] executor``, a comma list whose
    entries are aliases, ``module.Class`` paths or ``alias:module.Class``)."""
    from airflow.configuration import conf

    names = []
    for entry in (conf.get("core", "executor", fallback="LocalExecutor") or "").split(","):
        entry = entry.strip()
        if entry:
            names.append(entry.rsplit(":", 1)[-1].rsplit(".", 1)[-1])
    return names or ["LocalExecutor"]


@dataclass(frozen=True)
class StoreLocation:
    """Where the store is and how that was decided."""

    url: str
    source: str  # "connection <id>", "$TABLEMGMT_STORE_URL" or the default
    allow_local_sqlite: bool = False


class TableMgmtHook(BaseHook):
    """The store's URL comes from the ``tablemgmt_default`` connection, else ``$TABLEMGMT_STORE_URL``,
    else a SQLite file under AIRFLOW_HOME.

    In the connection the URL is the ``dsn`` field (a sensitive field: masked in the UI and redacted by
    the API); the older ``url`` extra and a URL in ``host`` are still read. A connection given as a
    database URI (``AIRFLOW_CONN_TABLEMGMT_DEFAULT='postgresql+psycopg2://...'``) works too, and the
    connection's ``password`` fills in a URL that has none. The URL's password is masked in every log.

    Under an executor that runs tasks on several hosts (Celery, Kubernetes, ...) a SQLite store would
    be a different file on each host, and the table leases would protect nothing: :meth:`get_store`
    refuses it unless the connection's extra sets ``{"allow_local_sqlite": true}`` (for a file on
    storage every host shares).
    """

    conn_name_attr = "tablemgmt_conn_id"
    default_conn_name = "tablemgmt_default"
    conn_type = "tablemgmt"
    hook_name = "Table Management store"

    def __init__(self, tablemgmt_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tablemgmt_conn_id = tablemgmt_conn_id

    def locate_store(self) -> StoreLocation:
        try:
            conn = self.get_connection(self.tablemgmt_conn_id)
        except AirflowNotFoundException:
            conn = None
        location = None
        if conn is not None:
            url = _url_from_connection(conn)
            if url:
                allow = _truthy(_extra(conn.extra_dejson, ALLOW_LOCAL_SQLITE))
                location = StoreLocation(url, f"connection {self.tablemgmt_conn_id}", allow)
        if location is None and os.environ.get(STORE_URL_ENV):
            location = StoreLocation(os.environ[STORE_URL_ENV], f"${STORE_URL_ENV}")
        if location is None:
            location = StoreLocation(default_store_url(), "the default: no tablemgmt_default connection")
        _mask_url_secrets(location.url)
        return location

    def get_store_url(self) -> str:
        return self.locate_store().url

    def get_conn(self) -> Store:
        return self.get_store()

    def get_store(self, *, create: bool = True) -> Store:
        """The store, refusing a per-host SQLite file under a multi-host executor (see the class doc)."""
        from airflow_tablemgmt.store import Store

        location = self.locate_store()
        check_shared_store(location)
        return Store.for_url(location.url, create=create)


def check_shared_store(location: StoreLocation, executors: list[str] | None = None) -> None:
    """Raise :class:`SharedStoreRequired` for a SQLite store when tasks may run on other hosts."""
    if not location.url.startswith("sqlite") or location.allow_local_sqlite:
        return
    executors = executors if executors is not None else configured_executors()
    remote = [e for e in executors if e not in SINGLE_HOST_EXECUTORS]
    if not remote:
        return
    from airflow_tablemgmt.store.urls import hide_password

    raise SharedStoreRequired(
        f"the tablemgmt store is a SQLite file on this host ({hide_password(location.url)}, from "
        f"{location.source}), but Airflow's executor is {', '.join(executors)}: tasks on other hosts "
        "would each use their own file and table leases would protect nothing. Configure a shared "
        "PostgreSQL store, e.g. `airflow connections add tablemgmt_default --conn-type tablemgmt "
        f'--conn-extra \'{{"dsn": "{_PG_EXAMPLE}"}}\'` or '
        f"AIRFLOW_CONN_TABLEMGMT_DEFAULT='{_PG_EXAMPLE}'. If this SQLite file is on storage every host "
        f'shares, set extra {{"{ALLOW_LOCAL_SQLITE}": true}} on the tablemgmt_default connection'
    )


def _url_from_connection(conn: Connection) -> str | None:
    from sqlalchemy.engine import make_url

    extra = conn.extra_dejson
    url = (
        _extra(extra, "dsn")
        or _extra(extra, "url")  # before the field was the sensitive "dsn"
        or (conn.host if conn.host and "://" in conn.host else None)
    )
    if not url and conn.conn_type and conn.conn_type != TableMgmtHook.conn_type and conn.host:
        # A URI connection: AIRFLOW_CONN_TABLEMGMT_DEFAULT='postgresql+psycopg2://user:pw@host/db'.
        from sqlalchemy.engine import URL

        driver = "postgresql" if conn.conn_type == "postgres" else conn.conn_type
        return URL.create(
            driver, conn.login or None, conn.password or None, conn.host, conn.port, conn.schema or None
        ).render_as_string(hide_password=False)
    if not url:
        return None
    url = str(url)
    if conn.password:
        try:
            parsed = make_url(url)
        except Exception:
            return url  # the store reports a malformed URL itself
        if parsed.password is None and parsed.get_backend_name() != "sqlite":
            url = parsed.set(password=conn.password).render_as_string(hide_password=False)
    return url


def _mask_url_secrets(url: str) -> None:
    """Register the URL's password (and the whole URL) with Airflow's secrets masker."""
    from sqlalchemy.engine import make_url

    try:
        password = make_url(url).password
    except Exception:
        return
    if not password:
        return
    from airflow.sdk.log import mask_secret

    mask_secret(str(password))
    mask_secret(url)


def _extra(extra: dict[str, Any], name: str) -> Any:
    # Older Airflow forms stored custom fields prefixed with the connection type.
    return extra.get(name) if extra.get(name) is not None else extra.get(f"extra__tablemgmt__{name}")


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on"))
