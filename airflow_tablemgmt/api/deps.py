"""Per-request dependencies: the store, opened through the same ``tablemgmt_default`` connection
the tasks use."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store


def get_store() -> Store:
    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

    return TableMgmtHook().get_store()


def user_name(user: object) -> str:
    get_name = getattr(user, "get_name", None)
    return str(get_name()) if callable(get_name) else "unknown"
