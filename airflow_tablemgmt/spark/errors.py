"""Errors raised on the Spark side; each subclasses the shared ``TableMgmtError`` hierarchy."""

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
