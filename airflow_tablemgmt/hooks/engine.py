"""Which engine runs a table's jobs: spark-submit (the default) or a Spark Connect server.

``[tablemgmt] spark_connect_conn_id`` names a ``spark_connect`` connection; when set, the tables that
``[tablemgmt] spark_connect_tables`` selects run on that server. The selection is a comma-separated list
of shell patterns matched against the table id (``catalog.namespace.name``) and against the catalog
name alone: ``lake`` (a whole catalog), ``lake.db.*``, ``lake.db.events``; empty or ``*`` means every
table (globally). Both are read like every ``[tablemgmt]`` option (``AIRFLOW__TABLEMGMT__...``
environment variables first). Dynamic tables' refreshes never run on Connect (their query plan check
needs the driver's JVM): they stay on spark-submit whatever the selection says.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from airflow_tablemgmt.core.tables import REFRESH_ACTION
from airflow_tablemgmt.hooks.airflow_settings import UNKNOWN, setting_or_airflow

if TYPE_CHECKING:
    from airflow_tablemgmt.hooks.spark_connect import SparkConnectJobHook
    from airflow_tablemgmt.hooks.spark_job import SparkJobHook
    from airflow_tablemgmt.store import Store


def connect_conn_id() -> str | None:
    value = (setting_or_airflow("tablemgmt", "spark_connect_conn_id") or "").strip()
    return value if value and value != UNKNOWN else None


def selected(table_id: str, patterns: str | None) -> bool:
    """Whether ``table_id`` is among the comma-separated ``patterns`` (empty: every table)."""
    items = [p.strip() for p in (patterns or "").split(",") if p.strip()]
    if not items:
        return True
    catalog = table_id.split(".", 1)[0]
    return any(fnmatchcase(table_id, p) or fnmatchcase(catalog, p) for p in items)


def engine_for(table_id: str, action: str) -> str | None:
    """The ``spark_connect`` connection id that runs ``action`` on ``table_id``, or None (spark-submit)."""
    conn_id = connect_conn_id()
    if conn_id is None or action == REFRESH_ACTION:
        return None
    return conn_id if selected(table_id, setting_or_airflow("tablemgmt", "spark_connect_tables")) else None


def submitter_for(
    table_id: str, action: str, spark_conn_id: str = "spark_default", store: Store | None = None
) -> SparkJobHook | SparkConnectJobHook:
    """What runs ``action`` on ``table_id``: a Spark Connect client or spark-submit on ``spark_conn_id``.
    ``store`` (the run's): a Connect job leases one of the server's slots there (its slot limit)."""
    conn_id = engine_for(table_id, action)
    if conn_id is not None:
        from airflow_tablemgmt.hooks.spark_connect import SparkConnectJobHook

        return SparkConnectJobHook(conn_id, store=store)
    from airflow_tablemgmt.hooks.spark_job import SparkJobHook

    return SparkJobHook(spark_conn_id)
