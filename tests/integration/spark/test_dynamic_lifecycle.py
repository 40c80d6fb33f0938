"""Dynamic tables end to end on real Spark + Iceberg (the shared in-process session): create through the
services, partition and full refreshes recorded as processes with Snowflake's history columns, NO_DATA
without a Spark job, auto-suspension after N failed scheduled refreshes, a failed creation that leaves
nothing behind.

The job runs through ``job_main.run`` on the session, exactly what ``spark-submit`` runs in its driver;
``tests/e2e/test_cli_dt.py`` goes through a real ``spark-submit``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, Owner
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest
from airflow_tablemgmt.services import dynamic
from airflow_tablemgmt.services.errors import InvalidInput
from airflow_tablemgmt.spark.job import main as job_main
from airflow_tablemgmt.spark.protocol import JobResult, parse_result
from airflow_tablemgmt.store import Store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration
_names = itertools.count()


class SessionJobs:
    """Runs each job on the shared session through job_main.run (what spark-submit's driver runs)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.jobs: list[JobSpec] = []

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        self.jobs.append(job)
        if on_started is not None:
            on_started(self.spark.sparkContext.applicationId)
        _, line = job_main.run(job, self.spark)
        return parse_result([line])

    def kill(self) -> None:
        pass


@pytest.fixture
def store(tmp_path: Path, catalog: CatalogSpec) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    s.catalogs.upsert(catalog, Owner.STORE)
    return s


@pytest.fixture
def jobs(spark: SparkSession) -> SessionJobs:
    return SessionJobs(spark)


def source(spark: SparkSession, rows: list[tuple[int, str]], namespace: str = "db") -> str:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lake.{namespace}")
    name = f"lake.{namespace}.src_{next(_names)}"
    spark.sql(f"CREATE TABLE {name} (id bigint, day string) USING iceberg")
    insert(spark, name, rows)
    return name


def insert(spark: SparkSession, table: str, rows: list[tuple[int, str]]) -> None:
    values = ", ".join(f"({i}, '{d}')" for i, d in rows)
    spark.sql(f"INSERT INTO {table} VALUES {values}")


def run_refresh(store: Store, jobs: SessionJobs, table_id: str, instant: datetime, **params: Any) -> Any:
    """A scheduled refresh as the refresh task runs it (ProcessRunner, parameters from the DAG run)."""
    from airflow_tablemgmt.core.dynamic.refresh import run_parameters

    dt = store.dynamic.get(table_id)
    parameters = {**run_parameters(str(dt.state), params or None, "scheduled", instant)}
    runner = ProcessRunner(store, default_factories(), jobs)
    return runner.run(RunRequest(table_id, "refresh", instant, holder="test", parameters=parameters))


def test_create_then_periodic_partition_refresh(spark: SparkSession, store: Store, jobs: SessionJobs) -> None:
    src = source(spark, [(1, "2026-02-01"), (2, "2026-02-01"), (3, "2026-02-02")])
    tid = f"lake.db.daily_{next(_names)}"
    dt, process = dynamic.create(
        store,
        {
            "identifier": tid,
            "query": f"SELECT day, count(*) AS n FROM {src} GROUP BY day",
            "freshness": "1 DAY",
            "partitioned-by": ["day"],
            "partition.fields.day.date-formatter": "yyyy-MM-dd",
        },
        jobs,
    )
    assert dt.state == "ACTIVE"
    assert [c.name for c in dt.definition.columns or []] == ["day", "n"]
    assert dt.definition.source_tables == [src]
    assert process.status == ProcessStatus.SUCCESS
    row = dynamic.history_row(process)
    assert row["trigger"] == "CREATION"
    assert row["rows_written"] == 2
    assert row["application_id"] == spark.sparkContext.applicationId
    assert set(row["source_snapshots"]) == {src}
    assert jobs.jobs[0].options["mode"] == "create"

    insert(spark, src, [(4, "2026-02-02"), (5, "2026-02-01")])
    # scheduleTime 2026-02-03 00:00, freshness 1 DAY -> the partition day=2026-02-02 only
    outcome = run_refresh(store, jobs, tid, datetime(2026, 2, 3, tzinfo=UTC))
    assert jobs.jobs[-1].options["partition_values"] == {"day": "2026-02-02"}
    s = outcome.summary
    assert (s["refresh_action"], s["trigger"], s["schedule_time"]) == (
        "PARTITION",
        "SCHEDULED",
        "2026-02-03 00:00:00",
    )
    assert s["partitions_written"] == [{"day": "2026-02-02"}]
    counts = dict(spark.sql(f"SELECT day, n FROM {tid}").collect())  # type: ignore[arg-type]
    assert counts == {"2026-02-01": 2, "2026-02-02": 2}  # 2026-02-01 untouched (still 2, not 3)
    history = dynamic.history(store, tid)  # newest instant first: the creation ran "now"
    assert [dynamic.history_row(p)["trigger"] for p in history] == ["CREATION", "SCHEDULED"]


def test_failed_creation_leaves_nothing(spark: SparkSession, store: Store, jobs: SessionJobs) -> None:
    tid = f"lake.db.broken_{next(_names)}"
    with pytest.raises(Exception, match="lake.db.missing_source|missing_source"):
        dynamic.create(
            store,
            {"identifier": tid, "query": "SELECT * FROM lake.db.missing_source", "freshness": "1 HOUR"},
            jobs,
        )
    assert store.dynamic.find(tid) is None
    assert dynamic.list_(store) == []
    assert not spark.catalog.tableExists(tid)
    [failed] = dynamic.history(store, tid)
    assert failed.status == ProcessStatus.FAILED  # the attempt stays in the history


def test_auto_suspend_after_n_failed_scheduled_refreshes(
    spark: SparkSession, store: Store, jobs: SessionJobs
) -> None:
    src = source(spark, [(1, "2026-02-01")])
    tid = f"lake.db.fragile_{next(_names)}"
    dynamic.create(
        store,
        {
            "identifier": tid,
            "query": f"SELECT id FROM {src}",
            "freshness": "1 HOUR",
            "suspend-after-failures": 2,
        },
        jobs,
    )
    spark.sql(f"DROP TABLE {src}")  # the query now fails at run time
    for hour in (1, 2):
        with pytest.raises(Exception, match="failed"):
            run_refresh(store, jobs, tid, datetime(2026, 2, 1, hour, tzinfo=UTC))
        if hour == 1:
            assert store.dynamic.get(tid).state == "ACTIVE"
    dt = store.dynamic.get(tid)
    assert dt.state == "SUSPENDED"
    assert dt.consecutive_failures == 2
    assert "2 consecutive failed scheduled refreshes" in (dt.suspended_reason or "")
    assert src.split(".")[-1] in (dt.suspended_reason or "").lower()
    resumed = dynamic.resume(store, tid, None)
    assert (resumed.state, resumed.consecutive_failures) == ("ACTIVE", 0)


def test_no_data_refresh_records_a_process_and_runs_no_job(
    spark: SparkSession, store: Store, jobs: SessionJobs
) -> None:
    """In a multi-level namespace (``lake.db.eu``, as REST catalogs nest them): the jobs quote each part,
    the NO_DATA check reads the source with pyiceberg (the file's other tests: one level)."""
    src = source(spark, [(1, "2026-02-01")], namespace="db.eu")
    tid = f"lake.db.eu.full_{next(_names)}"
    dt, _ = dynamic.create(
        store, {"identifier": tid, "query": f"SELECT id FROM {src}", "freshness": "1 HOUR"}, jobs
    )
    assert (dt.definition.namespace, dt.definition.source_tables) == ("db.eu", [src])
    assert jobs.jobs[-1].table == {"catalog": "lake", "namespace": "db.eu", "name": tid.rsplit(".", 1)[1]}
    submitted = len(jobs.jobs)

    quiet = run_refresh(store, jobs, tid, datetime(2026, 2, 1, 1, tzinfo=UTC))
    assert len(jobs.jobs) == submitted  # no Spark job
    assert quiet.process.status == ProcessStatus.SUCCESS
    s = quiet.summary  # also the task's XCom
    assert (s["refresh_action"], s["trigger"], s["application_id"]) == ("NO_DATA", "SCHEDULED", None)
    assert s["rows_written"] == 0 and s["partitions_written"] == []
    assert s["source_snapshots"] == store.processes.list(table_id=tid, limit=2)[1].summary["source_snapshots"]

    insert(spark, src, [(2, "2026-02-01")])
    busy = run_refresh(store, jobs, tid, datetime(2026, 2, 1, 2, tzinfo=UTC))
    assert len(jobs.jobs) == submitted + 1
    # The new row is appended (issue 41: its source only appended since the last refresh read it).
    assert (busy.summary["refresh_action"], busy.summary["rows_written"]) == ("INCREMENTAL", 1)

    manual = dynamic.refresh_now(store, tid, runner=jobs)  # a manual refresh always runs
    assert len(jobs.jobs) == submitted + 2
    assert manual.summary["trigger"] == "MANUAL"


def test_alter_query_needs_recreate_for_a_new_schema_and_drop_purges(
    spark: SparkSession, store: Store, jobs: SessionJobs
) -> None:
    src = source(spark, [(1, "2026-02-01"), (2, "2026-02-02")])
    tid = f"lake.db.altered_{next(_names)}"
    dynamic.create(store, {"identifier": tid, "query": f"SELECT id FROM {src}", "freshness": "1 HOUR"}, jobs)

    same = dynamic.alter(
        store, tid, query=f"SELECT id FROM {src} WHERE id > 1"
    )  # same schema: next refresh uses it
    assert same.process is None and same.table.definition.query.endswith("WHERE id > 1")
    with pytest.raises(
        InvalidInput, match=r"query: the new query's schema \(id bigint, day string\) differs"
    ):
        dynamic.alter(store, tid, query=f"SELECT id, day FROM {src}", runner=jobs)
    assert store.dynamic.get(tid).definition.query.endswith("WHERE id > 1")  # unchanged on error

    recreated = dynamic.alter(store, tid, query=f"SELECT id, day FROM {src}", recreate=True, runner=jobs)
    assert recreated.process is not None and recreated.process.status == ProcessStatus.SUCCESS
    assert [c.name for c in recreated.table.definition.columns or []] == ["id", "day"]
    assert spark.table(tid).columns == ["id", "day"] and spark.table(tid).count() == 2

    dynamic.drop(store, tid, purge=True, runner=jobs)
    assert store.dynamic.find(tid) is None
    assert not spark.catalog.tableExists(tid)
