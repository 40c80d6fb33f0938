"""Hudi compaction of a merge-on-read table in RFC-43's two phases.

1. An instant to execute: the one the job spec names (``compaction-instant``: chosen by the factory from
   the timeline, or recorded on the process by an interrupted attempt), else the oldest pending one, else
   a new one scheduled now (``run_compaction(op => 'schedule')``, with ``min-delta-commits`` as Hudi's
   ``hoodie.compact.inline.max.delta.commits``). A pending compaction is never left behind a new one.
2. Execute exactly that instant (``run_compaction(op => 'run', timestamp => <instant>)``).

The summary records the instant scheduled and the one executed. Every call takes the table by its path
(``path =>``): no session-catalog name, which Hudi would resolve by reading the table (hudi/table.py).

The commit names the attempt that made it (``spark/job/commit_mark.py``). ``run_compaction`` commits with
no extra metadata (``commitCompaction(instant, metadata, Option.empty())``), and Hudi 1.0's compaction
copies none from its plan, so in a spark-submit driver the instant is executed as the procedure executes
it -- Hudi's write client built by ``HoodieCLIUtils.createHoodieWriteClient``, ``compact(instant)``, the
same write-error check, ``commitCompaction`` -- with the job's mark as the commit's extra metadata. On Spark
Connect (no driver JVM) the procedure runs it, unmarked.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.formats.hudi.actions import COMPACTION_INSTANT_OPTION, HudiCompactionSettings
from airflow_tablemgmt.formats.hudi.job.table import (
    metadata_as_on_table,
    path_arg,
    timeline_figures,
)
from airflow_tablemgmt.spark.errors import InvalidJobSpec
from airflow_tablemgmt.spark.job import commit_mark, literals
from airflow_tablemgmt.spark.job.maintainers.paths import take_location
from airflow_tablemgmt.spark.job.maintainers.settings import parse_settings
from airflow_tablemgmt.spark.protocol import timed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def show_sql(location: str) -> str:
    return f"CALL show_compaction({path_arg(location)})"


def schedule_sql(location: str, min_delta_commits: int) -> str:
    """Schedule a compaction if ``min_delta_commits`` delta commits wait (Hudi's inline threshold)."""
    threshold = f"hoodie.compact.inline.max.delta.commits={min_delta_commits}"
    return f"CALL run_compaction(op => 'schedule', {path_arg(location)}, options => {literals.string(threshold)})"


def run_sql(location: str, instant: str) -> str:
    """Execute exactly ``instant`` (digits only: checked before it reaches the SQL)."""
    return f"CALL run_compaction(op => 'run', {path_arg(location)}, timestamp => {int(instant)})"


def execute(spark: SparkSession, location: str, instant: str) -> bool:
    """Execute and commit ``instant``; True when its commit carries the job's mark (through Hudi's write
    client, as ``run_compaction`` does it), False when the procedure ran it unmarked (no mark, no JVM)."""
    extra = commit_mark.entries()
    jvm = _driver_jvm(spark) if extra else None
    if jvm is None:
        spark.sql(run_sql(location, instant)).collect()
        return False
    from py4j.protocol import Py4JError, Py4JJavaError

    try:
        _execute_marked(spark, jvm, location, instant, extra)
    except Py4JJavaError:
        raise  # Hudi's own failure, as the procedure would have raised it
    except Py4JError as e:  # not Hudi's API as expected (another Hudi version): the procedure, unmarked
        log.warning(
            "compaction %s: instant %s through Hudi's write client failed (%s); running "
            "run_compaction instead, its commit unmarked",
            location,
            instant,
            str(e)[:300],
        )
        spark.sql(run_sql(location, instant)).collect()
        return False
    log.info("compaction %s: instant %s committed, marked %s", location, instant, extra)
    return True


def _execute_marked(
    spark: SparkSession, jvm: Any, location: str, instant: str, extra: dict[str, str]
) -> None:
    """``run_compaction``'s execution of ``instant``, committed with ``extra`` as its extra metadata."""
    cli = jvm.org.apache.hudi.HoodieCLIUtils
    conf = cli.extractOptions("hoodie.auto.commit=false")  # committed below, with the mark
    session = spark._jsparkSession  # noqa: SLF001 - Hudi's write client has no Python API
    client = cli.createHoodieWriteClient(session, location, conf, jvm.scala.Option.empty())
    try:
        written = client.compact(str(int(instant)))
        metadata = written.getCommitMetadata().get()
        errors = sum(int(s.getTotalWriteErrors()) for s in metadata.getWriteStats())
        if errors:
            raise RuntimeError(f"compaction {instant} of {location}: {errors} records failed to write")
        marks = jvm.java.util.HashMap()
        for key, value in extra.items():
            marks.put(key, value)
        client.commitCompaction(str(int(instant)), metadata, jvm.org.apache.hudi.common.util.Option.of(marks))
    finally:
        client.close()


def _driver_jvm(spark: SparkSession) -> Any:
    """The driver's JVM gateway; None on Spark Connect (no JVM on this side)."""
    try:
        return spark.sparkContext._jvm  # noqa: SLF001
    except Exception:  # noqa: BLE001 - a Connect session has no sparkContext
        return None


def _compactions(spark: SparkSession, location: str) -> dict[str, str]:
    """instant -> state (REQUESTED, INFLIGHT, COMPLETED) of the table's compactions."""
    rows = spark.sql(show_sql(location)).collect()
    return {str(r["timestamp"]): str(r["state"]) for r in rows}


def compaction(
    spark: SparkSession, table: TableIdentifier, options: dict[str, Any], *, early: object = None
) -> dict[str, Any]:
    location = take_location(options, "compaction")
    wanted = options.pop(COMPACTION_INSTANT_OPTION, None)
    s = parse_settings(HudiCompactionSettings, options, "compaction")
    if wanted is not None and not str(wanted).isdigit():
        raise InvalidJobSpec(f"compaction.{COMPACTION_INSTANT_OPTION}: {wanted!r} is not a Hudi instant")
    with timed("metrics_before"):
        before = timeline_figures(location)
        known = _compactions(spark, location)
    pending = sorted(i for i, state in known.items() if state != "COMPLETED")
    scheduled: str | None = None
    with timed("procedure"), metadata_as_on_table(spark, location):
        if wanted is not None and known.get(str(wanted)) == "COMPLETED":
            instant = None  # an earlier attempt completed it: nothing left to execute
            log.info("compaction %s: instant %s already completed", location, wanted)
        elif wanted is not None or pending:
            instant = str(wanted) if wanted is not None else pending[0]
        else:
            spark.sql(schedule_sql(location, s.min_delta_commits)).collect()
            new = sorted(set(_compactions(spark, location)) - set(known))
            instant = scheduled = new[-1] if new else None
            log.info("compaction %s: scheduled %s", location, scheduled or "nothing (below the threshold)")
        if instant is not None:
            execute(spark, location, instant)
    with timed("metrics_after"):
        after = timeline_figures(location)
        state = _compactions(spark, location).get(instant or "", None)
    if instant is not None and state != "COMPLETED":
        raise RuntimeError(f"compaction instant {instant} of {location} is {state} after running it")
    return {
        "location": location,
        "scheduled_instant": scheduled,
        "executed_instant": instant,
        "adopted_pending": instant is not None and scheduled is None,
        "before": before,
        "after": after,
    }


compaction.may_create_table = True  # type: ignore[attr-defined]  # reads its own table (see delta/optimize.py)
