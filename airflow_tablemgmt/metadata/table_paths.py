"""Where a path-based table (Delta, Hudi) lives: ``<warehouse>/<namespace>/<name>``, as a hadoop catalog
lays out Iceberg tables. Such a table is declared in a ``hadoop`` catalog whose ``warehouse`` is the
root directory or bucket prefix of the tables."""

from __future__ import annotations

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.metadata.errors import HealthUnavailable


def table_location(catalog: CatalogSpec, table: TableIdentifier) -> str:
    """The table's root directory or URI (no trailing slash)."""
    if not catalog.warehouse:
        raise HealthUnavailable(
            f"catalog {catalog.name!r} has no warehouse: a path-based {table} needs a hadoop catalog whose "
            "warehouse is the tables' root (the table is <warehouse>/<namespace>/<name>)"
        )
    return f"{catalog.warehouse.rstrip('/')}/{table.namespace_path}/{table.name}"


def local_path(location: str) -> str | None:
    """``location`` as a local path when it is one (``/x``, ``file:/x``, ``file:///x``), else None."""
    if location.startswith("file://"):
        return location[len("file://") :]
    if location.startswith("file:"):
        return location[len("file:") :]
    if "://" not in location:
        return location
    return None
