"""Hudi clustering in two phases: schedule a ``run_clustering`` plan (file groups rewritten sorted by
columns, linearly or along a z-order or Hilbert curve), then execute exactly that instant.

A writer may commit into a file group of the plan while the clustering runs (its inserts were routed to
that group's small file before the plan existed). Hudi 1.0's default conflict strategy
(``SimpleConcurrentFileWritesConflictResolutionStrategy``) misses that: the writer sees an inflight
clustering as touching no file (its ``.clustering.inflight`` is empty), and the clustering's commit checks
nothing (``isPreCommitRequired()`` is false), so the replacecommit hides the writer's committed rows
(docs/formats.md, *Faults*). The execution therefore runs with ``PreferWriterConflictResolutionStrategy``:
before committing, the clustering compares its file groups with every write that completed after it was
scheduled, and with inflight writes, and fails on an overlap. A failed execution's plan is rolled back
and deleted (``run_rollback_inflight_tableservice``): re-executing it would conflict with the same
committed write forever, and its file groups would stay closed to writers' small-file inserts.

All three procedures run with ``hoodie.metadata.enable`` as the table has it (``table.metadata_as_on_table``):
a plan drawn from a metadata table the writers do not maintain misses their newest commits.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.formats.hudi.actions import HudiClusteringSettings
from airflow_tablemgmt.formats.hudi.job.table import (
    metadata_as_on_table,
    path_arg,
    register,
    timeline_figures,
)
from airflow_tablemgmt.spark.job import literals
from airflow_tablemgmt.spark.job.maintainers.paths import take_location
from airflow_tablemgmt.spark.job.maintainers.settings import parse_settings
from airflow_tablemgmt.spark.protocol import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: Hudi's key (1.0.x) for the conflict strategy, and the one the clustering's execution runs with.
CONFLICT_STRATEGY_KEY = "hoodie.write.lock.conflict.resolution.strategy"
PREFER_WRITER = "org.apache.hudi.client.transaction.PreferWriterConflictResolutionStrategy"
CLUSTERING_WRITE_CONF = {CONFLICT_STRATEGY_KEY: PREFER_WRITER}


def _clusterings(spark: SparkSession, location: str) -> dict[str, str]:
    """instant -> state (REQUESTED, INFLIGHT, COMPLETED) of the table's clusterings."""
    rows = spark.sql(f"CALL show_clustering({path_arg(location)}, limit => 1000)").collect()
    return {str(r["timestamp"]): str(r["state"]) for r in rows}


def procedure_args(location: str, s: HudiClusteringSettings) -> str:
    """``run_clustering``'s arguments but ``op``: the table by path, the sort, and the write settings."""
    conf = ",".join(f"{k}={v}" for k, v in CLUSTERING_WRITE_CONF.items())
    return (
        f"{path_arg(location)}, order => {literals.string(','.join(s.sort_columns))}, "
        f"order_strategy => {literals.string(s.layout.value)}, options => {literals.string(conf)}"
    )


def clustering(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: object = None
) -> dict[str, Any]:
    location = take_location(options, "clustering")
    s = parse_settings(HudiClusteringSettings, options, "clustering")
    args = procedure_args(location, s)
    with timed("metrics_before"):
        before = timeline_figures(location)
        known = _clusterings(spark, location)
    with timed("procedure"), metadata_as_on_table(spark, location) as metadata_table:
        sql = f"CALL run_clustering({args}, op => 'schedule')"
        log.info("%s", sql)
        spark.sql(sql).collect()
        new = sorted(set(_clusterings(spark, location)) - set(known))
        rows: list[dict[str, Any]] = []
        if new:
            instants = ",".join(new)
            sql = f"CALL run_clustering({args}, op => 'execute', instants => {literals.string(instants)})"
            log.info("%s", sql)
            try:
                rows = [r.asDict() for r in spark.sql(sql).collect()]
            except Exception as e:
                rolled_back = [i for i in new if _roll_back(spark, table, location, i)]
                raise RuntimeError(
                    f"clustering {instants} of {location} failed ({_cause(e)}); its plan was rolled back and "
                    f"deleted ({', '.join(rolled_back) or 'not: see the log'}), the next run plans afresh"
                ) from e
        else:
            log.info("clustering %s: nothing to cluster", location)
    with timed("metrics_after"):
        after = timeline_figures(location)
    return {
        "location": location,
        "sort_columns": s.sort_columns,
        "layout": s.layout.value,
        "instants": [str(r.get("timestamp")) for r in rows],
        "file_groups_rewritten": sum(int(r.get("input_group_size") or 0) for r in rows),
        "states": sorted({str(r.get("state")) for r in rows}),
        "conflict_strategy": PREFER_WRITER.rsplit(".", 1)[1],
        "metadata_table": metadata_table,
        "before": before,
        "after": after,
    }


def _cause(e: Exception) -> str:
    """The Java exception and its innermost cause, from a Py4J error's text."""
    lines = [ln.strip() for ln in str(e).splitlines()]
    first = next((ln.lstrip(": ") for ln in lines if "Exception" in ln or "Error" in ln), str(e)[:200])
    causes = [ln.removeprefix("Caused by: ") for ln in lines if ln.startswith("Caused by:")]
    return first[:300] + (f", caused by {causes[-1][:300]}" if causes else "")


def _roll_back(spark: SparkSession, table: TableIdentifier, location: str, instant: str) -> bool:
    """Roll a failed clustering instant back and delete its plan; False if Hudi would not. Hudi 1.0.2's
    procedure lists ``path`` but reads ``table`` only (a ``path`` alone fails casting ``None`` to a string):
    the table is registered for it."""
    try:
        name = register(spark, table, location)
        spark.sql(
            f"CALL run_rollback_inflight_tableservice(table => {literals.string(name)}, "
            f"pending_instant => {literals.string(instant)}, delete_request_instant_file => true)"
        ).collect()
        return True
    except Exception as e:  # noqa: BLE001 - reported with the failure; the next run sees the plan pending
        log.warning("clustering instant %s of %s: rollback failed: %s", instant, location, str(e)[:300])
        return False


clustering.may_create_table = True  # type: ignore[attr-defined]  # reads its own table (see delta/optimize.py)
