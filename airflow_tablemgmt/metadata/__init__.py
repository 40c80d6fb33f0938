"""Cheap reads of table-format metadata (no JVM, no Airflow): snapshot ids for gates and triggers."""

from airflow_tablemgmt.metadata.iceberg import SnapshotReader

__all__ = ["SnapshotReader"]
