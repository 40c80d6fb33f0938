"""The metadata store: tables ``tms_*``, their repositories and Alembic migrations.

SQL lives only here. Nothing in this package imports Airflow: the hook that resolves the
``tablemgmt_default`` connection just calls ``Store.for_url(url)``.

The dynamic-table repository is imported on first use (a maintenance run never needs it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.store.engine import Store
from airflow_tablemgmt.store.errors import (
    CatalogManagedByCode,
    StoreNotFound,
    StoreSchemaOutdated,
    StoreUnavailable,
    TableManagedByStore,
)
from airflow_tablemgmt.store.repositories import (
    CatalogRepository,
    Lease,
    LeaseRepository,
    ProcessRepository,
    RegisteredTable,
    TableRepository,
    UpsertResult,
)

if TYPE_CHECKING:
    from airflow_tablemgmt.store.dynamic import DynamicTable, DynamicTableRepository

__all__ = [
    "CatalogManagedByCode",
    "DynamicTable",
    "DynamicTableRepository",
    "CatalogRepository",
    "Lease",
    "LeaseRepository",
    "ProcessRepository",
    "RegisteredTable",
    "Store",
    "StoreNotFound",
    "StoreSchemaOutdated",
    "StoreUnavailable",
    "TableManagedByStore",
    "TableRepository",
    "UpsertResult",
]


def __getattr__(name: str) -> Any:
    if name in ("DynamicTable", "DynamicTableRepository"):
        from airflow_tablemgmt.store import dynamic

        return getattr(dynamic, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
