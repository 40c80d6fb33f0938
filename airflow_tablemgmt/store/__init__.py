"""The metadata store: tables ``tms_*``, their repositories and Alembic migrations.

SQL lives only here. Nothing in this package imports Airflow: the hook that resolves the
``tablemgmt_default`` connection just calls ``Store.for_url(url)``.

The repositories' modules are imported on first use (``Store`` builds each repository when first asked for
it; the names below on first access): a task start's parse of the DAG file pays for every module it imports
(issue 40's single-DAG parse), and a table's DAG never needs processes, leases or dynamic tables.
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

if TYPE_CHECKING:
    from airflow_tablemgmt.store.catalogs import CatalogRepository
    from airflow_tablemgmt.store.dynamic import DynamicTable, DynamicTableRepository
    from airflow_tablemgmt.store.leases import Lease, LeaseRepository
    from airflow_tablemgmt.store.processes import ProcessRepository
    from airflow_tablemgmt.store.tables import RegisteredTable, TableRepository, UpsertResult

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


# Each lazily exported name -> the module that defines it.
_LAZY = {
    "CatalogRepository": "catalogs",
    "DynamicTable": "dynamic",
    "DynamicTableRepository": "dynamic",
    "Lease": "leases",
    "LeaseRepository": "leases",
    "ProcessRepository": "processes",
    "RegisteredTable": "tables",
    "TableRepository": "tables",
    "UpsertResult": "tables",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # the next access is a plain attribute
    return value
