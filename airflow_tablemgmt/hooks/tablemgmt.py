"""TableMgmtHook: reaches the metadata store through the `tablemgmt_default` connection."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from airflow.exceptions import AirflowNotFoundException
from airflow.sdk import BaseHook

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

STORE_URL_ENV = "TABLEMGMT_STORE_URL"


def default_store_url() -> str:
    """A SQLite file under AIRFLOW_HOME: the embedded default when no connection is configured."""
    home = os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow")
    return f"sqlite:///{os.path.join(home, 'tablemgmt.db')}"


class TableMgmtHook(BaseHook):
    """The store's URL comes from the connection's ``url`` field, else ``$TABLEMGMT_STORE_URL``,
    else a SQLite file under AIRFLOW_HOME."""

    conn_name_attr = "tablemgmt_conn_id"
    default_conn_name = "tablemgmt_default"
    conn_type = "tablemgmt"
    hook_name = "Table Management store"

    def __init__(self, tablemgmt_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tablemgmt_conn_id = tablemgmt_conn_id

    def get_store_url(self) -> str:
        try:
            conn = self.get_connection(self.tablemgmt_conn_id)
        except AirflowNotFoundException:
            conn = None
        if conn is not None:
            extra = conn.extra_dejson
            url = extra.get("url") or (conn.host if conn.host and "://" in conn.host else None)
            if url:
                return str(url)
        return os.environ.get(STORE_URL_ENV) or default_store_url()

    def get_conn(self) -> Store:
        return self.get_store()

    def get_store(self) -> Store:
        from airflow_tablemgmt.store import Store

        return Store.for_url(self.get_store_url())
