"""What runs on a Spark Connect session and what does not (the job asks before it starts its work)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.formats import TABLE_FORMAT_PROPERTY
from airflow_tablemgmt.core.tables import REFRESH_ACTION

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def is_remote(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (no driver JVM in this process, no py4j)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def connect_refusal(job: JobSpec) -> str | None:
    """Why ``job`` cannot run on a Spark Connect session, or None.

    A dynamic table's refresh checks its query's analysed plan (``query_policy``: which catalogs and
    tables it reads, no side effects) and reads its source tables from that plan, both through the
    driver's JVM; a remote session has neither, and the check is a security control, so the refresh is
    refused rather than run unchecked. ``delete-orphans`` with ``allow-below-floor`` calls Iceberg's
    ``DeleteOrphanFiles`` action through py4j (the SQL procedure refuses a cutoff under 24 hours).
    Everything else is SQL (``CALL`` procedures, metadata tables) and runs remotely as it is.
    """
    t = job.table if isinstance(job.table, dict) else {}
    name = ".".join(str(t.get(k)) for k in ("catalog", "namespace", "name"))
    properties = job.catalog.get("properties") if isinstance(job.catalog, dict) else None
    fmt = str((properties or {}).get(TABLE_FORMAT_PROPERTY) or "iceberg")
    if fmt != "iceberg":
        return (
            f"{name}: a {fmt} table does not run on Spark Connect: the server's session extensions are "
            "Iceberg's (a static setting of the server); run this table on spark-submit"
        )
    if job.action == REFRESH_ACTION:
        return (
            f"{name}: a dynamic table's refresh does not run on Spark Connect: its query's plan check "
            "(query_policy) needs the Spark driver's JVM; run this table on spark-submit "
            "(leave it out of [tablemgmt] spark_connect_tables)"
        )
    if job.action == "delete-orphans" and str(job.options.get("allow-below-floor", "")).lower() == "true":
        return (
            f"{name}: delete-orphans with allow-below-floor uses Iceberg's DeleteOrphanFiles action through "
            "the Spark driver's JVM, which Spark Connect has not; run it on spark-submit"
        )
    return None
