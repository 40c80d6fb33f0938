"""Errors of the metadata readers."""

from __future__ import annotations

from airflow_tablemgmt.core.errors import TableMgmtError


class HealthUnavailable(TableMgmtError):
    """The table's Iceberg metadata could not be read; the message says where and why."""
