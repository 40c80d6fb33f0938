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


def _dynamic_tables(self: Store) -> DynamicTableRepository:
    """The store's dynamic tables (rows of ``tms_table`` with a ``dynamic`` document)."""
    repo: DynamicTableRepository | None = self.__dict__.get("_dynamic")
    if repo is None:
        repo = self.__dict__["_dynamic"] = DynamicTableRepository(self.engine)
    self._ensure_schema()
    return repo


# Wired here rather than in engine.py's constructor, so the repository ships in its own module;
# ``store.dynamic`` reads like ``store.tables``.
Store.dynamic = property(_dynamic_tables)  # type: ignore[attr-defined]

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
