"""The store's exceptions: refusals of a write (a catalog or table owned by code, in use, not a dynamic
table, a guarded state change that lost) and an unreachable or outdated store. They subclass
:class:`~airflow_tablemgmt.core.errors.TableMgmtError` like every other error."""

from __future__ import annotations

from collections.abc import Collection

from airflow_tablemgmt.core.errors import TableMgmtError


class CatalogManagedByCode(TableMgmtError):
    """The catalog is declared in dags/tables.yaml; only that file may change it."""

    def __init__(self, name: str) -> None:
        super().__init__(f"catalog {name} is managed by dags/tables.yaml; change it there")
        self.name = name


class CatalogInUse(TableMgmtError):
    """The catalog still has tables (dynamic tables included); it is removed only once none uses it."""

    def __init__(self, name: str, tables: list[str]) -> None:
        shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
        super().__init__(
            f"name: catalog {name} is used by {shown}; remove those tables first (tablemgmt remove, "
            "DELETE /tables/{id} or /dynamic-tables/{id}, or their entries in tables.yaml)"
        )
        self.name = name
        self.tables = tables


class TableManagedByStore(TableMgmtError):
    """The table was registered through REST or the CLI; dags/tables.yaml may not remove it."""

    def __init__(self, table_id: str) -> None:
        super().__init__(f"table {table_id} was registered through the REST API or the CLI; remove it there")
        self.table_id = table_id


class TableManagedByPolicy(TableMgmtError):
    """The table was enrolled by a policy's discovery; it leaves by the opt-out, not by a removal (the next
    discovery would enrol it again)."""

    def __init__(self, table_id: str, policy: str | None) -> None:
        super().__init__(
            f"table {table_id} is managed by policy {policy}: set its table property "
            "tablemgmt.maintenance=disabled (discovery then retires it), or declare it yourself "
            "(a declaration takes it over)"
        )
        self.table_id = table_id
        self.policy = policy


class StoreSchemaOutdated(TableMgmtError):
    """The store's database schema is not at the revision this package needs."""


class StoreUnavailable(TableMgmtError):
    """The store cannot be opened or reached: bad URL, missing driver, unwritable path, server down.

    Messages name the URL with its password hidden, never the password itself.
    """


class StoreNotFound(StoreUnavailable):
    """A read-only open found no SQLite store file (and created none)."""


class NotADynamicTable(TableMgmtError):
    """The id names a registered table that is not a dynamic table (or the other way round)."""


class DynamicStateChanged(TableMgmtError):
    """A guarded state change found the table in another state than the one expected."""

    def __init__(self, table_id: str, state: str, expected: Collection[str]) -> None:
        super().__init__(f"dynamic table {table_id} is {state}; expected {' or '.join(sorted(expected))}")
        self.table_id = table_id
        self.state = state
