"""Which process attempt made a commit, written into the commit itself.

A worker that dies after its job committed but before the store recorded it leaves the result in its
local result file (``lifecycle/results.py``), which a recovering worker on another host cannot see. So the
job also marks its commits in the table's own metadata, and recovery reads the mark from the table
(``lifecycle/table_marks.py``): a committed job is recorded, never run again.

* Iceberg: ``org.apache.iceberg.EnvironmentContext`` -- every snapshot Iceberg produces (a procedure's
  rewrite, a DataFrame write) copies its entries into the snapshot's summary. Iceberg 1.10's procedures
  take no snapshot properties (``CommitMetadata`` reaches DataFrame writes only), and the context is
  global to the JVM, so it is set only in a spark-submit driver, which runs one job; never on a shared
  Spark Connect server.
* Delta: the session's ``spark.databricks.delta.commitInfo.userMetadata``, which lands in each commit's
  ``commitInfo`` (a session setting: also right on Connect, whose sessions are per job).

Hudi and Paimon commits are not marked (their procedures take no commit metadata from the session); a
retry there without the worker's result file runs the job again, as before.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_tablemgmt.core.factory import JobSpec

log = logging.getLogger(__name__)

PROCESS = "tablemgmt.process-id"
ATTEMPT = "tablemgmt.attempt"
ACTION = "tablemgmt.action"
DELTA_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def mark_of(job: JobSpec) -> dict[str, str] | None:
    """The mark of ``job``'s commits; None for a job outside a process (a run by hand)."""
    if job.process_id is None:
        return None
    return {PROCESS: str(job.process_id), ATTEMPT: str(job.attempt), ACTION: job.action}


def apply(spark: SparkSession, job: JobSpec, *, remote: bool) -> None:
    """Mark the commits ``job`` is about to make (best effort: a mark never fails a job)."""
    mark = mark_of(job)
    if mark is None:
        return
    try:
        spark.conf.set(DELTA_USER_METADATA, json.dumps(mark, sort_keys=True))
    except Exception:  # noqa: BLE001
        log.debug("could not set Delta's commit user metadata", exc_info=True)
    if remote:
        return
    try:
        context = _environment_context(spark)
        for key, value in mark.items():
            context.put(key, value)
    except Exception:  # noqa: BLE001 - no Iceberg on the classpath, or no JVM: nothing to mark
        log.debug("could not set Iceberg's environment context", exc_info=True)


def clear(spark: SparkSession, job: JobSpec, *, remote: bool) -> None:
    """Take the mark off again (the session may outlive the job: tests, an embedded caller)."""
    if mark_of(job) is None:
        return
    try:
        spark.conf.unset(DELTA_USER_METADATA)
    except Exception:  # noqa: BLE001
        log.debug("could not unset Delta's commit user metadata", exc_info=True)
    if remote:
        return
    try:
        context = _environment_context(spark)
        for key in (PROCESS, ATTEMPT, ACTION):
            context.remove(key)
    except Exception:  # noqa: BLE001
        log.debug("could not clear Iceberg's environment context", exc_info=True)


def _environment_context(spark: SparkSession) -> Any:
    jvm = spark.sparkContext._jvm  # noqa: SLF001 - the JVM-wide context has no Python API
    assert jvm is not None
    return jvm.org.apache.iceberg.EnvironmentContext
