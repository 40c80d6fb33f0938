"""One error hierarchy for everything a user or an operator can cause."""

from __future__ import annotations


class TableMgmtError(Exception):
    """Base of every error raised by airflow-tablemgmt."""


class InvalidDeclaration(TableMgmtError, ValueError):
    """A table, catalog or action declaration is invalid; the message names the field path."""


class UnknownAction(InvalidDeclaration):
    """An action name that is not registered."""

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"unknown action {name!r}; known actions: {', '.join(sorted(known))}")
        self.name = name
        self.known = known


class InvalidIdentifier(InvalidDeclaration):
    """A catalog, namespace, table or column name that is not a safe SQL identifier."""


class InvalidFreshness(InvalidDeclaration):
    """A dynamic-table freshness that cannot be expressed as a cron schedule."""


class UnreadableTable(TableMgmtError):
    """A stored table row that no longer validates (written by an older version); names the table."""

    def __init__(self, table_id: str, message: str) -> None:
        super().__init__(message)
        self.table_id = table_id


class UnreadableCatalog(TableMgmtError):
    """A stored catalog row that no longer validates (written by an older version); names it."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


class CatalogLocationTaken(InvalidDeclaration):
    """A second catalog over a warehouse (or service) another catalog already reaches."""

    def __init__(self, name: str, existing: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.existing = existing


class TableNotFound(TableMgmtError):
    """No registered table with that identifier."""


class CatalogUnavailable(TableMgmtError):
    """The catalog service failed to answer (a 5xx or 429 from a REST catalog, a lost connection to a JDBC
    catalog's database): an outage to wait out and retry, not a statement about the table."""


class CatalogNotFound(TableMgmtError):
    """No registered catalog with that name."""


class TableManagedByCode(TableMgmtError):
    """The table is declared in dags/tables.yaml; only that file may change it."""

    def __init__(self, table_id: str) -> None:
        super().__init__(f"table {table_id} is managed by dags/tables.yaml; change it there")
        self.table_id = table_id


class ActionNotSupported(TableMgmtError):
    """The table's format has no factory that supports the action."""


class IllegalTransition(TableMgmtError):
    """A process status change that the lifecycle does not allow, or that lost a race."""


class ProcessNotFound(TableMgmtError):
    """No process with that id."""


class LeaseUnavailable(TableMgmtError):
    """Another job holds the table's lease."""


class RecoverProcessFailed(TableMgmtError):
    """The factory cannot recover the process; it is abandoned."""


class JobFailed(TableMgmtError):
    """The Spark job failed; the message carries the relevant part of Spark's error."""


class FactoryLoadError(TableMgmtError):
    """A process-factory plugin failed to load."""


class UnsafeTiming(TableMgmtError, ValueError):
    """Timing settings that would let two jobs run on one table, or a live worker's row be reaped."""
