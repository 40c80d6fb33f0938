"""A planned batch (``services/batches.py``, ADR 0004 decisions 3 and 4) on real Iceberg tables written by pyiceberg
(a SQL catalog on SQLite, no JVM), through the real lifecycle and a real SQLite store, the health gate on: each
table gets its own process (recording the DAG run and map index), a table whose lease another job holds is a
recorded skip left for the next plan, a failed job fails only its table and the batch names it at the end, a
retry of the batch reuses what succeeded. The job engine is the one stand-in (it records what it got)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType, Owner, TableSpec
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.formats.base import HEALTH_GATE_ENV
from airflow_tablemgmt.lifecycle import ProcessRunner
from airflow_tablemgmt.services.batches import LEASE_GATE, BatchFailed, BatchRun, Outcome, TableRun, run_batch
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.enrolment import EnrolmentRepository

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
ACTION = "rewrite-files"
AT = datetime(2026, 3, 1, 1, tzinfo=UTC)
# unhealthy: 8 small files (> min-small-files 5), healthy: 1 file
TABLES = {"a_small": 8, "b_healthy": 1, "c_leased": 8, "d_fails": 8, "e_small": 8}


class Engine:
    """The stand-in job engine: records each job's table, fails those in ``failing``."""

    def __init__(self, failing: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.jobs: list[str] = []
        self.failing = failing

    def submitter(self) -> Any:
        engine = self

        class Submitter:
            def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
                name = job.table["name"]
                engine.jobs.append(name)
                if on_started is not None:
                    on_started(f"local-{name}")
                if name in engine.failing:
                    return JobResult(status="FAILED", error="the stand-in engine failed it")
                return JobResult(status="SUCCESS", summary={"rewritten_data_files_count": 8})

            def kill(self) -> None:
                pass

        return Submitter()


@pytest.fixture(autouse=True)
def gate_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HEALTH_GATE_ENV, "1")  # the suite runs with it off (tests/conftest.py)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    from pyiceberg.catalog.sql import SqlCatalog

    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    warehouse = f"file://{tmp_path / 'wh'}"
    cat = SqlCatalog("lake", uri=uri, warehouse=warehouse)
    cat.create_namespace("db")
    for name, appends in TABLES.items():
        table = cat.create_table(f"db.{name}", schema=SCHEMA)
        for i in range(appends):
            table.append(pa.table({"id": [i * 10 + j for j in range(10)], "v": ["x"] * 10}, schema=SCHEMA))
    s = Store.for_url(f"sqlite:///{tmp_path / 'tms.db'}")
    s.catalogs.upsert(
        CatalogSpec(name="lake", type=CatalogType.JDBC, warehouse=warehouse, properties={"uri": uri}),
        Owner.STORE,
    )
    enrol = EnrolmentRepository.of(s)
    for name in TABLES:
        spec = TableSpec(catalog="lake", namespace="db", name=name, actions={ACTION: {}})
        enrol.enrol(spec, "fleet", "matched")
    yield s
    s.dispose()
    cat.engine.dispose()


def _run(**kw: Any) -> BatchRun:
    return BatchRun(
        **{
            "policy": "fleet",
            "action": ACTION,
            "instant": AT,
            "dag_id": "tms__plan__fleet__rewrite-files",
            "run_id": "scheduled__2026-03-01T01:00:00+00:00",
            "task_id": "run_batch",
            "map_index": 3,
            "try_number": 1,
            "last_try": False,
            **kw,
        }
    )


def _runner(store: Store, engine: Engine) -> Callable[[str], ProcessRunner]:
    return lambda table_id: ProcessRunner(store, default_factories(), engine.submitter())


def test_each_table_runs_on_its_own_and_one_failure_or_lease_does_not_stop_the_batch(store: Store) -> None:
    engine = Engine(failing={"d_fails"})
    other = "tms__lake.db.c_leased__rewrite-files/manual/maintain/1"
    assert store.leases.acquire("lake.db.c_leased", other, timedelta(minutes=5))  # held elsewhere
    seen: list[tuple[str, Outcome, BaseException | None]] = []

    def after(s: Store, run: BatchRun, done: TableRun, error: BaseException | None) -> None:
        seen.append((done.table_id, done.outcome, error))

    tables = [f"lake.db.{n}" for n in TABLES]
    result = run_batch(store, _run(), tables, runner_for=_runner(store, engine), after_table=after)

    outcome = {t.table_id.rpartition(".")[2]: t for t in result.tables}
    assert {n: t.outcome for n, t in outcome.items()} == {
        "a_small": Outcome.SUCCESS,
        "b_healthy": Outcome.SKIPPED,  # the health gate read it again: nothing to compact
        "c_leased": Outcome.SKIPPED,
        "d_fails": Outcome.FAILED,
        "e_small": Outcome.SUCCESS,  # after the failure: the batch went on
    }
    assert engine.jobs == ["a_small", "d_fails", "e_small"]  # one job each, one after another
    # every table has its own process at the run's instant, recording the DAG run and the map index
    for name, t in outcome.items():
        p = store.processes.get(t.process_id)  # type: ignore[arg-type]
        assert (p.table_id, p.action, p.instant) == (f"lake.db.{name}", ACTION, AT)
        assert p.parameters["plan"] == {
            "policy": "fleet",
            "dag_id": "tms__plan__fleet__rewrite-files",
            "run_id": "scheduled__2026-03-01T01:00:00+00:00",
            "task_id": "run_batch",
            "map_index": 3,
        }, name
    assert store.processes.get(outcome["a_small"].process_id).status == ProcessStatus.SUCCESS  # type: ignore[arg-type]
    healthy = store.processes.get(outcome["b_healthy"].process_id)  # type: ignore[arg-type]
    assert (healthy.summary or {})["gate"] == "health" and "does not pay" in (healthy.summary or {})["reason"]
    # the leased table: a recorded skip naming the holder, left for the next plan; the lease is still theirs
    leased = store.processes.get(outcome["c_leased"].process_id)  # type: ignore[arg-type]
    skip = leased.summary or {}
    assert leased.status == ProcessStatus.SUCCESS and skip["skipped"]
    assert skip["gate"] == LEASE_GATE and other in skip["reason"]
    assert "left for the next plan" in outcome["c_leased"].reason
    assert store.leases.get("lake.db.c_leased").holder == other  # type: ignore[union-attr]
    failed = store.processes.get(outcome["d_fails"].process_id)  # type: ignore[arg-type]
    assert failed.status == ProcessStatus.FAILED and "stand-in engine failed it" in (
        failed.failure_reason or ""
    )
    # the leases the batch took are given back
    assert all(store.leases.get(f"lake.db.{n}") is None for n in ("a_small", "d_fails", "e_small"))
    assert [(t, o) for t, o, _ in seen] == [(t.table_id, t.outcome) for t in result.tables]
    assert seen[3][2] is not None  # the failure's error reaches the alerts
    assert result.counts() == {"success": 2, "skipped": 2, "failed": 1, "canceled": 0}
    with pytest.raises(
        BatchFailed, match=r"1 of 5 table\(s\) of this batch failed .* lake\.db\.d_fails \(process"
    ):
        result.raise_if_failed()


def test_a_retry_of_the_batch_reuses_what_succeeded_and_retries_the_failure(store: Store) -> None:
    engine = Engine(failing={"d_fails"})
    tables = ["lake.db.a_small", "lake.db.d_fails"]
    first = run_batch(store, _run(), tables, runner_for=_runner(store, engine))
    assert [t.outcome for t in first.tables] == [Outcome.SUCCESS, Outcome.FAILED]
    engine.failing = set()
    again = run_batch(store, _run(try_number=2, last_try=True), tables, runner_for=_runner(store, engine))
    assert [t.outcome for t in again.tables] == [Outcome.SUCCESS, Outcome.SUCCESS]
    assert "reused" in again.tables[0].reason
    assert engine.jobs == ["a_small", "d_fails", "d_fails"]  # the success was not run twice
    retried = store.processes.get(again.tables[1].process_id)  # type: ignore[arg-type]
    assert retried.id == first.tables[1].process_id and retried.attempt == 2
    assert retried.status == ProcessStatus.SUCCESS
    again.raise_if_failed()  # nothing failed


def test_a_table_no_longer_this_policys_or_gated_opens_no_process(store: Store) -> None:
    engine = Engine()
    enrol = EnrolmentRepository.of(store)
    assert enrol.retire("lake.db.a_small", "fleet", "gone from the catalog")
    store.tables.upsert(
        TableSpec(catalog="lake", namespace="db", name="e_small", actions={ACTION: {}}), Owner.STORE
    )  # declared meanwhile: its own DAGs run it
    enrol.enrol(  # the policy no longer gives it the action
        TableSpec(catalog="lake", namespace="db", name="b_healthy", actions={"expire-snapshots": {}}),
        "fleet",
        "matched",
    )

    def gate(s: Store, table_id: str, action: str) -> str | None:
        return (
            "still at snapshot 7, which process 1 already handled" if table_id.endswith("c_leased") else None
        )

    tables = ["lake.db.a_small", "lake.db.e_small", "lake.db.c_leased", "lake.db.b_healthy"]
    from airflow_tablemgmt.services.batch_wiring import time_limit_for

    limits = time_limit_for(store, ACTION)  # the real wiring's, which reads each table's own limit
    result = run_batch(
        store, _run(), tables, runner_for=_runner(store, engine), snapshot_gate=gate, limit_for=limits
    )
    assert [(t.outcome, t.process_id) for t in result.tables] == [(Outcome.SKIPPED, None)] * 4
    reasons = [t.reason for t in result.tables]
    assert reasons[0].startswith("no longer registered")
    assert reasons[1] == "now managed by its store declaration, whose own DAGs run it"
    assert reasons[2] == "still at snapshot 7, which process 1 already handled"
    assert reasons[3] == f"{ACTION} is no longer enabled on it"
    assert engine.jobs == [] and store.processes.list(limit=10) == []


def test_a_table_past_its_time_limit_fails_alone(store: Store) -> None:
    """Each table has its own limit (Airflow's timer around its run, the job killed at it): the next table runs."""
    import time

    from airflow_tablemgmt.operators.time_limit import TimeLimitedSubmitter
    from airflow_tablemgmt.services.batch_wiring import table_time_limit, time_limit_for

    spec = TableSpec(catalog="lake", namespace="db", name="a_small", actions={ACTION: {"timeout": "2s"}})
    assert EnrolmentRepository.of(store).enrol(spec, "fleet", "its timeout changed") == "updated"
    killed: list[str] = []

    class Slow:
        def __init__(self, table_id: str) -> None:
            self.table_id = table_id

        def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
            if on_started is not None:
                on_started(f"local-{job.table['name']}")
            if job.table["name"] == "a_small":
                time.sleep(30)  # interrupted at the table's 2 s limit
            return JobResult(status="SUCCESS", summary={"rewritten_data_files_count": 8})

        def kill(self) -> None:
            killed.append(self.table_id)

    def runner_for(table_id: str) -> ProcessRunner:
        limited = TimeLimitedSubmitter(Slow(table_id), table_time_limit(store, table_id, ACTION))
        return ProcessRunner(store, default_factories(), limited)

    started = time.monotonic()
    result = run_batch(
        store,
        _run(),
        ["lake.db.a_small", "lake.db.e_small"],
        runner_for=runner_for,
        limit_for=time_limit_for(store, ACTION),
    )
    assert time.monotonic() - started < 20
    assert [t.outcome for t in result.tables] == [Outcome.FAILED, Outcome.SUCCESS]
    assert "time limit" in result.tables[0].reason and "2s" in result.tables[0].reason, result.tables[
        0
    ].reason
    failed = store.processes.get(result.tables[0].process_id)  # type: ignore[arg-type]
    assert failed.status == ProcessStatus.FAILED and "2s" in (failed.failure_reason or "")
    assert killed == ["lake.db.a_small"]


def test_the_snapshot_gate_skips_a_table_its_last_success_left_at_the_same_snapshot(store: Store) -> None:
    from airflow_tablemgmt.services import health
    from airflow_tablemgmt.services.batch_wiring import snapshot_gate

    tid = "lake.db.a_small"
    assert snapshot_gate(store, tid, ACTION) is None  # rewrite-files is snapshot-driven; never handled yet
    current = health.read_file_stats(store.catalogs.get("lake"), store.tables.get(tid)).snapshot_id  # type: ignore[union-attr]

    class Leaves:
        def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
            return JobResult(status="SUCCESS", summary={"snapshot_id": current})

        def kill(self) -> None:
            pass

    def runner(table_id: str) -> ProcessRunner:
        return ProcessRunner(store, default_factories(), Leaves())

    first = run_batch(store, _run(), [tid], runner_for=runner, snapshot_gate=snapshot_gate)
    assert first.tables[0].outcome == Outcome.SUCCESS
    later = run_batch(
        store, _run(instant=AT + timedelta(hours=1)), [tid], runner_for=runner, snapshot_gate=snapshot_gate
    )
    (skipped,) = later.tables
    assert skipped.outcome == Outcome.SKIPPED and skipped.process_id is None
    assert f"is still at snapshot {current}, which process {first.tables[0].process_id}" in skipped.reason


def test_a_run_now_of_an_enrolled_table_is_resumed_by_its_planned_runs_batch(store: Store) -> None:
    """REST's run-now opens the process up front (PENDING) and triggers the planned DAG naming the table; the
    batch of that run opens the same key and runs that very process."""
    from airflow_tablemgmt.services.run_now import request_run

    dag_id = "tms__plan__fleet__rewrite-files"
    done = request_run(store, "lake.db.a_small", ACTION, AT, lambda d, when, conf=None: "manual__run-now")
    engine = Engine()
    run = _run(run_id="manual__run-now")
    result = run_batch(store, run, ["lake.db.a_small"], runner_for=_runner(store, engine))
    (table,) = result.tables
    assert table.outcome == Outcome.SUCCESS and table.process_id == done.process.id
    p = store.processes.get(done.process.id)
    assert (p.status, p.dag_id, p.run_id, p.task_id) == (
        ProcessStatus.SUCCESS,
        dag_id,
        "manual__run-now",
        "run_batch",
    )
    assert engine.jobs == ["a_small"]


def test_a_batch_on_spark_submit_runs_its_tables_in_one_driver_each_under_its_own_lease_and_process(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch's real wiring for spark-submit tables (``BatchRunners``: one ``BatchDriver`` for the batch,
    each table its own ``BatchTableSubmitter``, the real ``ProcessRunner``), spark-submit being a stand-in that
    runs the real driver loop without a JVM (``tests/support/batch_driver.py``): the jobs of the tables the
    gates let through run in ONE driver, each with its own process row, lease (confirmed to the driver's guard
    for that table) and result; the failing one fails alone; the driver ends with the batch."""
    from airflow_tablemgmt.hooks.spark_submit_direct import SparkConnection
    from airflow_tablemgmt.services.batch_wiring import BatchRunners
    from tests.support.batch_driver import install

    monkeypatch.setenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE", "false")
    runners = BatchRunners(store, ACTION, shared=True)
    assert runners.driver is not None
    runners.driver.workdir = str(tmp_path)
    connection = SparkConnection(master="local[1]", spark_binary=str(install(tmp_path)))
    monkeypatch.setattr(runners.driver, "_direct_connection", lambda: connection)
    other = "tms__lake.db.c_leased__rewrite-files/manual/maintain/1"
    assert store.leases.acquire("lake.db.c_leased", other, timedelta(minutes=5))
    tables = [f"lake.db.{n}" for n in TABLES]
    try:
        result = run_batch(store, _run(), tables, runner_for=runners)
    finally:
        runners.close()

    outcome = {t.table_id.rpartition(".")[2]: t for t in result.tables}
    assert {n: t.outcome for n, t in outcome.items()} == {
        "a_small": Outcome.SUCCESS,
        "b_healthy": Outcome.SKIPPED,
        "c_leased": Outcome.SKIPPED,
        "d_fails": Outcome.FAILED,
        "e_small": Outcome.SUCCESS,
    }
    drivers = (tmp_path / "drivers.log").read_text().split()
    assert len(drivers) == 1 and runners.driver.tables_run == 3  # a_small, d_fails, e_small: one driver
    done = {n: store.processes.get(outcome[n].process_id) for n in ("a_small", "d_fails", "e_small")}  # type: ignore[arg-type]
    for name in ("a_small", "e_small"):
        p = done[name]
        assert p.status == ProcessStatus.SUCCESS and p.summary["driver_pid"] == int(drivers[0])  # type: ignore[index]
        assert p.summary["process_id"] == p.id  # the job was this table's process's own
        assert p.external_id == f"local-{drivers[0]}"
    assert done["d_fails"].status == ProcessStatus.FAILED
    assert "the stand-in job failed d_fails" in (done["d_fails"].failure_reason or "")
    assert all(store.leases.get(f"lake.db.{n}") is None for n in ("a_small", "d_fails", "e_small"))
    assert store.leases.get("lake.db.c_leased").holder == other  # type: ignore[union-attr]
    pid = int(drivers[0])
    assert not Path(f"/proc/{pid}").exists() or " Z " in Path(f"/proc/{pid}/stat").read_text()  # ended


def test_after_a_table_its_health_is_measured_once_and_its_unhealthy_alert_decides_on_that(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's after-step (``batch_wiring.after_table``) measures the table and remembers it for the next
    plan, and the ``unhealthy`` alert decides on that same measurement: one metadata read, where there
    were two (the alert read the table again)."""
    from airflow_tablemgmt.core.notify import NotifySpec
    from airflow_tablemgmt.factories import health as factory_health
    from airflow_tablemgmt.notifications import health as alerts
    from airflow_tablemgmt.services import health as services_health
    from airflow_tablemgmt.services.batch_wiring import after_table
    from airflow_tablemgmt.store.table_health import TableHealthRepository

    reads: list[str] = []
    original = factory_health.read_health

    def counted(catalog: CatalogSpec, spec: TableSpec) -> Any:
        reads.append(spec.id)
        return original(catalog, spec)

    monkeypatch.setattr(factory_health, "read_health", counted)
    monkeypatch.setattr(services_health, "read_health", counted)
    route = NotifySpec.model_validate(
        {"notifiers": [{"class": "x.Notifier", "kwargs": {}}], "events": ["unhealthy"], "health-below": 100}
    )
    monkeypatch.setattr(alerts, "global_notify", lambda: route)
    sent: list[Any] = []
    monkeypatch.setattr(alerts, "send", lambda notifiers, note, context: sent.append(note) or 1)

    table = "lake.db.a_small"
    process, _ = store.processes.open(table, ACTION, AT)
    after_table({})(store, _run(), TableRun(table, Outcome.SUCCESS, "succeeded", process.id), None)

    assert reads == [table]  # once: the alert took the batch's measurement
    stored = TableHealthRepository.of(store).get_many([table])[table]
    assert [(n.table, n.health_score) for n in sent] == [(table, stored.score)]  # 8 small files: below 100
