"""Errors raised on the Spark side, launcher and job alike; all but :class:`NoExecutors` subclass the
shared ``TableMgmtError`` hierarchy."""

from __future__ import annotations

from airflow_tablemgmt.core.errors import InvalidDeclaration, TableMgmtError


class JavaNotFound(TableMgmtError):
    """No usable Java runtime (8, 11 or 17) for Spark."""


class InvalidJobSpec(InvalidDeclaration):
    """A job spec handed to the Spark job is malformed."""


class ColumnNotFound(InvalidDeclaration):
    """An option names a column the table does not have."""


class UnsupportedColumnType(InvalidDeclaration):
    """An option names a column whose type the action cannot use."""


class ArtifactError(TableMgmtError, RuntimeError):
    """An artifact could not be provided: missing offline, unreachable, or failing its checksum."""


class InvalidQuery(InvalidDeclaration):
    """A dynamic table's query does not parse or resolve, or does not produce a partition column."""


class QueryNotAllowed(InvalidQuery):
    """The query asks for something a dynamic table may not do (reflection, files, a command, a table
    outside the registered catalogs)."""


class QueryFailed(TableMgmtError):
    """Spark failed while running the query. The message is fixed (the error's class, no Spark text):
    Spark's own message may carry whatever the query computed, so it goes only to the task log."""


class QueryTimedOut(TableMgmtError):
    """A refresh ran past its wall clock (``timeout_seconds``); its Spark jobs were cancelled."""


class SandboxUnavailable(TableMgmtError):
    """A job that runs user SQL must start sandboxed (``spark/launch/sandbox.py``) and the kernel does not
    allow it here; ``[tablemgmt] user_sql_sandbox = off`` is the operator's explicit opt-out."""


class SchemaDrift(TableMgmtError):
    """The query's schema is no longer the table's; only a refresh with ``recreate`` may replace it."""


class TableExists(TableMgmtError):
    """``create`` found the table already there; it never replaces a table it did not create."""


class NoExecutors(RuntimeError):
    """The cluster gave the application no executor for longer than the watchdog waits."""
