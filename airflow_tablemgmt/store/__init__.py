"""The metadata store: tables ``tms_*``, their repositories and Alembic migrations.

SQL lives only here. Nothing in this package imports Airflow: the hook that resolves the
``tablemgmt_default`` connection just calls ``Store.for_url(url)``.
"""

from __future__ import annotations

from airflow_tablemgmt.store.dynamic import DynamicTable, DynamicTableRepository
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
