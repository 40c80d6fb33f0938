"""The driver's cost of a run under spark-submit (or on a classic session a caller hands the job): the
stages its status store holds, summed by ``spark/cost.py``.

The store is Spark's ``AppStatusStore`` (``SparkContext.statusStore``): it is filled by a listener on the
driver whether or not the web UI is on (the job's sessions run with ``spark.ui.enabled=false``), and holds
each stage's task metrics summed. It is read as the REST API would serve it: Spark's own Jackson mapper
turns the ``StageData`` / ``JobData`` lists into JSON in one py4j call, so the driver and the Connect side
(which reads the server's REST API) parse the same documents. Spark's listener bus is asynchronous: the
read first waits (bounded) until the bus has delivered every event posted so far, so the last task's
end is counted.

Scope: a spark-submit application is the run's own, so every stage of it counts (the session's start, the
figures before and after, the action); a session the job did not start is the caller's (tests, a
notebook), so only the jobs carrying the run's job tag count (:func:`tag_jobs`).
"""

from __future__ import annotations

import json
import logging
import uuid
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.spark.connect.policy import is_remote
from airflow_tablemgmt.spark.cost import stage_cost, stage_ids, tagged_jobs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: How long the read waits for Spark's listener bus to deliver the events posted before it.
DRAIN_MS = 10_000


def tag_jobs(spark: SparkSession, tag: str) -> None:
    """Tag the jobs this thread starts from now on (and threads it starts: Spark's local properties are
    inherited) with ``tag``, so :func:`session_cost` can tell them from the caller's other jobs."""
    try:
        spark.sparkContext.addJobTag(tag)
    except Exception:  # noqa: BLE001 - a cost is never worth failing a job for
        log.debug("tagging the run's jobs failed", exc_info=True)


def untag_jobs(spark: SparkSession, tag: str) -> None:
    try:
        spark.sparkContext.removeJobTag(tag)
    except Exception:  # noqa: BLE001
        log.debug("untagging the run's jobs failed", exc_info=True)


def session_cost(spark: SparkSession, tag: str | None = None) -> dict[str, Any] | None:
    """The run's cost document: every stage of the application (``tag`` None), or the stages of the jobs
    tagged ``tag``. None when the store cannot be read (the figure is then missing, never made up)."""
    try:
        stages, jobs = _read_store(spark)
    except Exception as e:  # noqa: BLE001 - py4j wraps Java's exceptions; a cost never fails a job
        log.warning("reading Spark's status store for the run's cost failed: %s", str(e)[:300])
        return None
    if tag is None:
        return stage_cost(stages, jobs=len(jobs), scope="application", source="status-store")
    mine = tagged_jobs(jobs, tag)
    ids = stage_ids(mine)
    return stage_cost(
        (s for s in stages if s.get("stageId") in ids), jobs=len(mine), scope="jobs", source="status-store"
    )


def _read_store(spark: SparkSession) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    sc = spark.sparkContext._jsc.sc()  # noqa: SLF001 - the status store has no Python binding
    try:  # Spark raises a TimeoutException when the bus does not drain in time
        sc.listenerBus().waitUntilEmpty(DRAIN_MS)
    except Exception:  # noqa: BLE001
        log.warning(
            "Spark's listener bus did not drain in %d ms: the run's cost may miss its last tasks", DRAIN_MS
        )
    store = sc.statusStore()
    mapper = _mapper(spark)
    # stageList(statuses, details, withSummaries, quantiles, taskStatus): every stage, Spark's defaults after
    defaults = [getattr(store, f"stageList$default${i}")() for i in (2, 3, 4, 5)]
    stages = json.loads(mapper.writeValueAsString(store.stageList(None, *defaults)))
    jobs = json.loads(mapper.writeValueAsString(store.jobsList(None)))
    return list(stages), list(jobs)


def _mapper(spark: SparkSession) -> Any:
    """Jackson's ObjectMapper with the Scala module: what Spark's REST API writes its documents with."""
    jvm = spark._jvm  # noqa: SLF001
    assert jvm is not None
    mapper = jvm.com.fasterxml.jackson.databind.ObjectMapper()
    scala = getattr(jvm.com.fasterxml.jackson.module.scala, "DefaultScalaModule$")
    mapper.registerModule(getattr(scala, "MODULE$"))
    return mapper


class RunMeter:
    """The cost of one run of ``spark/job/main.py``: :meth:`start` once its session is up, :meth:`read`
    when the run ends (success or failure), :meth:`stop` always. On a Spark Connect session it measures
    nothing: the server's store is read from outside (``spark/connect/cost.py``)."""

    def __init__(self, job: Any, *, own_session: bool) -> None:
        self.own_session = own_session
        self.tag = f"tms-cost-p{getattr(job, 'process_id', None) or 'x'}-a{getattr(job, 'attempt', 1)}-{uuid.uuid4().hex[:8]}"
        self.spark: SparkSession | None = None

    def start(self, spark: SparkSession) -> None:
        if is_remote(spark):
            return
        self.spark = spark
        if not self.own_session:
            tag_jobs(spark, self.tag)

    def read(self, timings: Any = None) -> dict[str, Any] | None:
        if self.spark is None:
            return None
        phase = timings.phase("cost") if timings is not None else nullcontext()
        with phase:
            return session_cost(self.spark, None if self.own_session else self.tag)

    def stop(self) -> None:
        if self.spark is not None and not self.own_session:
            untag_jobs(self.spark, self.tag)
