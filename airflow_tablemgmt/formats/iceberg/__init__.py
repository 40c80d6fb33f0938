"""Apache Iceberg, the catalogs' own format: what it maintains (through Iceberg's Spark procedures), read
with pyiceberg without a JVM.

This module is the format's descriptor (the ``iceberg`` entry point of ``airflow_tablemgmt.formats``); it
imports no factory, reader or Spark code, which its references name for first use.
"""

from __future__ import annotations

from airflow_tablemgmt.core.actions import REFRESH
from airflow_tablemgmt.core.factory import FormatSession
from airflow_tablemgmt.core.formats import Format
from airflow_tablemgmt.core.triggers import Interval, TriggerStrategy
from airflow_tablemgmt.formats.iceberg.actions import (
    ACTIONS,
    COMPUTE_STATS,
    DELETE_ORPHANS,
    EXPIRE_DATA,
    EXPIRE_SNAPSHOTS,
    REWRITE_DELETES,
    REWRITE_FILES,
    REWRITE_MANIFESTS,
)

NAME = "iceberg"
EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
_HERE = __name__

# Defaults chosen so a freshly registered table gets sensible upkeep without tuning:
# compaction-type work only when something was written (on_new_snapshot), cleanup daily.
STRATEGIES: dict[str, TriggerStrategy] = {
    REWRITE_FILES.name: TriggerStrategy(Interval.parse("1h"), on_new_snapshot=True, parallelism=4),
    REWRITE_DELETES.name: TriggerStrategy(Interval.parse("1h"), on_new_snapshot=True, parallelism=4),
    REWRITE_MANIFESTS.name: TriggerStrategy(Interval.parse("1d"), on_new_snapshot=True, parallelism=2),
    EXPIRE_SNAPSHOTS.name: TriggerStrategy(Interval.parse("1d"), on_new_snapshot=False, parallelism=4),
    DELETE_ORPHANS.name: TriggerStrategy(Interval.parse("1d"), on_new_snapshot=False, parallelism=2),
    EXPIRE_DATA.name: TriggerStrategy(Interval.parse("1d"), on_new_snapshot=False, parallelism=2),
    COMPUTE_STATS.name: TriggerStrategy(Interval.parse("1d"), on_new_snapshot=True, parallelism=2),
}

FORMAT = Format(
    name=NAME,
    title="Iceberg",
    root=("metadata",),
    root_files=r"^(version-hint\.text|v\d+(\.gz)?\.metadata\.json)$",
    marker="metadata/ with version-hint.text or v<N>.metadata.json",
    description="Apache Iceberg (every catalog type)",
    actions=ACTIONS,
    strategies=STRATEGIES,
    # Iceberg's runtime is a need of every catalog (spark/launch/artifacts.py): no jars of its own here.
    session=FormatSession(EXTENSIONS, None, ("iceberg",), module=f"{_HERE}.job", uses_catalog=True),
    factory=f"{_HERE}.factory:IcebergProcessFactory",
    engines=("spark-submit", "spark-connect"),
    hosts=(REFRESH.name,),  # dynamic tables are Iceberg tables
    health="airflow_tablemgmt.metadata.files:read_file_stats",
    views={tab: f"{_HERE}.views:read_{tab}" for tab in ("details", "files", "snapshots")},
    marks=f"{_HERE}.marks:commits",
    reader="airflow_tablemgmt.metadata.iceberg:SnapshotReader",
)
