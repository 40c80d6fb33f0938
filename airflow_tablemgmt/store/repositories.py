"""The store's repositories, one module each; imported together from here or from ``store``."""

from __future__ import annotations

from airflow_tablemgmt.store.catalogs import CatalogRepository
from airflow_tablemgmt.store.leases import Lease, LeaseRepository
from airflow_tablemgmt.store.processes import ProcessRepository
from airflow_tablemgmt.store.tables import RegisteredTable, TableRepository, UpsertResult

__all__ = [
    "CatalogRepository",
    "Lease",
    "LeaseRepository",
    "ProcessRepository",
    "RegisteredTable",
    "TableRepository",
    "UpsertResult",
]
