"""The hooks' exceptions: what resolving a secret, locating the store or triggering a DAG run can refuse."""

from __future__ import annotations

from airflow_tablemgmt.core.errors import InvalidDeclaration, TableMgmtError


class SecretResolutionError(InvalidDeclaration):
    """A reference that does not resolve. The message names the property and the reference, never a value."""


class SharedStoreRequired(TableMgmtError):
    """A per-host SQLite store under an executor that runs tasks on several hosts."""


class RunExists(Exception):
    """The DAG already has a run with this run id or at this logical date."""


class DagMissing(Exception):
    """Airflow has no such DAG yet (the dag processor has not parsed it)."""


class SubmitFailed(Exception):
    """spark-submit exited non-zero (SparkSubmitHook raises AirflowException with this message)."""
