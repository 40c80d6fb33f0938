"""Errors of the metadata readers."""

from __future__ import annotations

from airflow_tablemgmt.core.errors import TableMgmtError


class HealthUnavailable(TableMgmtError):
    """The table's Iceberg metadata could not be read; the message says where and why."""


class PathNotFound(HealthUnavailable):
    """The file or directory is not there (the table may not exist, or not be of this format)."""


class StoreUnreachable(HealthUnavailable, OSError):
    """The store could not be read (unreachable endpoint, refused credentials, a timeout). An ``OSError``
    too, so a watcher treats it as an outage and keeps polling."""
