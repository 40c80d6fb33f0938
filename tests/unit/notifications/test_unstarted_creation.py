"""A dynamic table's creation run that Airflow fails before it starts (issue 36, Required 5): the refresh
task's failure callback records a FAILED creation process naming why, the table stays CREATING (the state
every later run of its refresh DAG creates from) and the next run is a creation; the reaper's closing of a
creation's PENDING row says the same. Real SQLite store; the callback's context is what Airflow's DAG
processor hands a callback for a task it failed before it ran (no exception; ti, task, dag_run)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_tablemgmt.core.dynamic.refresh import CREATION
from airflow_tablemgmt.core.factory import JobSpec, TriggerContext
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, Owner
from airflow_tablemgmt.factories.dynamic import DynamicTableProcessFactory
from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook
from airflow_tablemgmt.notifications.callback import on_task_failure
from airflow_tablemgmt.services import dynamic
from airflow_tablemgmt.services.reap import reap_processes
from airflow_tablemgmt.store import Store

S = ProcessStatus
T = "lake.agg.daily"
DAG = f"tms__{T}__refresh"
DEFINITION: dict[str, Any] = {
    "catalog": "lake",
    "namespace": "agg",
    "name": "daily",
    "query": "SELECT day, count(*) AS events FROM lake.db.events GROUP BY day",
    "freshness": "1 DAY",
}


@pytest.fixture
def store(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'tms.db'}")
    s.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), Owner.STORE)
    monkeypatch.setattr(TableMgmtHook, "get_store", lambda self, create=True: s)
    return s


def _context(run_id: str, logical_date: datetime, conf: dict[str, Any], run_type: str) -> dict[str, Any]:
    """What the DAG processor's callback gets for a task failed before it ran: no ``exception``."""
    task = SimpleNamespace(table=T, action="refresh", tablemgmt_conn_id="tablemgmt_default")
    ti = SimpleNamespace(dag_id=DAG, run_id=run_id, task_id="maintain", try_number=2)
    dag_run = SimpleNamespace(run_id=run_id, conf=conf, run_type=run_type, run_after=logical_date)
    return {"task": task, "ti": ti, "dag_run": dag_run, "logical_date": logical_date}


def _queued_creation(store: Store) -> tuple[int, datetime, str, dict[str, Any]]:
    """REST's create: the table CREATING, its PENDING creation process and the DAG run's conf."""
    dynamic.declare(store, DEFINITION)
    runs: list[tuple[str, datetime, dict[str, Any]]] = []

    def trigger(dag_id: str, when: datetime, conf: Any) -> str:
        runs.append((dag_id, when, dict(conf)))
        return f"tablemgmt__refresh__{when.isoformat()}"

    requested = dynamic.queue_creation(store, T, trigger)
    ((_, when, conf),) = runs
    assert requested.run_id is not None
    return requested.process.id, when, requested.run_id, conf


def test_a_rest_creation_that_never_started_is_recorded_and_the_next_run_creates(store: Store) -> None:
    pid, when, run_id, conf = _queued_creation(store)
    on_task_failure(_context(run_id, when, conf, "manual"))
    p = store.processes.get(pid)
    assert p.status == S.FAILED, "the never-started creation's PENDING row is closed by the callback"
    assert f"the creation run {run_id} never started" in (p.failure_reason or "")
    assert "stays CREATING: the next run of its refresh DAG creates it" in (p.failure_reason or "")
    # Not removed (its definition never ran, so it is not at fault) and still what every run creates from.
    assert store.dynamic.get(T).state == "CREATING"
    shown = dynamic.get(store, T).to_dict()
    assert shown["state"] == "CREATING" and shown["last_refresh"]["state"] == "FAILED"
    assert "never started" in shown["last_refresh"]["reason"]
    # The refresh DAG's next (scheduled) run is the retry: its task makes it a creation, whose job creates.
    factory, table = DynamicTableProcessFactory(), store.tables.get(T)
    later = when + timedelta(days=1)
    plan = factory.run_parameters(store, table, "refresh", conf={}, run_type="scheduled", instant=later)
    assert plan.skip_reason is None and plan.parameters is not None
    assert plan.parameters["trigger"] == CREATION
    retry, _ = store.processes.open(T, "refresh", later, parameters=plan.parameters)
    job = factory.trigger_process(store, table, retry, TriggerContext(later, store.catalogs.get("lake")))
    assert isinstance(job, JobSpec) and job.options["mode"] == "create"


def test_a_scheduled_creation_that_never_started_gets_a_failed_process(store: Store) -> None:
    """A tables.yaml table's first scheduled run: no process row existed at all."""
    definition = dynamic.parse_definition(DEFINITION)
    store.dynamic.upsert(definition, Owner.CODE, state="CREATING")
    when = datetime(2026, 11, 27, tzinfo=UTC)
    on_task_failure(_context("scheduled__2026-11-27T00:00:00+00:00", when, {}, "scheduled"))
    (p,) = store.processes.list(table_id=T)
    assert (p.status, p.instant, p.parameters["trigger"], p.dag_id) == (S.FAILED, when, CREATION, DAG)
    assert p.run_id == "scheduled__2026-11-27T00:00:00+00:00" and "never started" in (p.failure_reason or "")
    assert store.dynamic.get(T).state == "CREATING"


def test_a_failure_after_the_job_started_is_left_to_its_own_record(store: Store) -> None:
    pid, when, run_id, conf = _queued_creation(store)
    store.processes.transition(pid, S.SUBMITTED, expected=S.PENDING, attempt=1)
    store.processes.transition(pid, S.RUNNING, expected=S.SUBMITTED, attempt=1)
    store.processes.transition(pid, S.FAILED, expected=S.RUNNING, attempt=1, failure_reason="job said no")
    context = {**_context(run_id, when, conf, "manual"), "exception": RuntimeError("job said no")}
    on_task_failure(context)
    assert store.processes.get(pid).failure_reason == "job said no"
    assert len(store.processes.list(table_id=T)) == 1


def test_an_active_tables_failed_refresh_records_nothing_new(store: Store) -> None:
    dynamic.declare(store, DEFINITION)
    store.dynamic.set_state(T, "ACTIVE")
    on_task_failure(_context("scheduled__x", datetime(2026, 11, 27, tzinfo=UTC), {}, "scheduled"))
    assert store.processes.list(table_id=T) == []


def test_a_task_that_failed_before_taking_its_process_names_the_exception(store: Store) -> None:
    pid, when, run_id, conf = _queued_creation(store)
    context = {**_context(run_id, when, conf, "manual"), "exception": RuntimeError("store unreachable")}
    on_task_failure(context)
    p = store.processes.get(pid)
    assert p.status == S.FAILED
    assert f"the creation run {run_id} ended before its job started: store unreachable" in (
        p.failure_reason or ""
    )


def test_the_reaper_closing_a_creations_pending_row_says_the_table_stays_creating(store: Store) -> None:
    pid, _, _, _ = _queued_creation(store)
    (reaped,) = reap_processes(store, pending_after=timedelta(microseconds=1))
    assert (reaped.process_id, reaped.was, reaped.status) == (pid, "PENDING", "FAILED")
    assert "stays CREATING: the next run of its refresh DAG creates it" in reaped.reason
    assert store.dynamic.get(T).state == "CREATING"  # a STORE table is not removed for a run that never ran


def test_airflows_dag_processor_callback_for_a_task_failed_before_it_ran_records_it(store: Store) -> None:
    """The path Airflow takes (scheduler: executor reported a QUEUED task failed, e.g. ``Invalid auth
    token`` after a long queue wait -> TaskCallbackRequest -> the DAG processor runs the task's
    ``on_failure_callback``), on the real refresh DAG the DAG factory builds, with Airflow's own context."""
    import uuid

    import structlog
    from airflow.api_fastapi.execution_api.datamodels.taskinstance import (
        DagRun,
        TaskInstance,
        TIRunContext,
    )
    from airflow.callbacks.callback_requests import TaskCallbackRequest
    from airflow.dag_processing.processor import _execute_task_callbacks
    from airflow.utils.state import DagRunState, TaskInstanceState
    from airflow.utils.types import DagRunType

    from airflow_tablemgmt.dag_factory.build import build_dags
    from airflow_tablemgmt.factories.discovery import load_factories

    pid, when, run_id, conf = _queued_creation(store)
    dags = build_dags([store.tables.get(T)], load_factories(), catalogs={"lake": store.catalogs.get("lake")})
    assert DAG in dags.dags, dags.errors
    # The DAG has a next run of its own (the freshness cron): the retry of the creation.
    assert getattr(dags.dags[DAG].timetable, "expression", None) == "0 0 * * *"
    request = TaskCallbackRequest(
        filepath="dag_file.py",
        bundle_name="dags-folder",
        bundle_version=None,
        ti=TaskInstance(
            id=uuid.uuid4(),
            task_id="maintain",
            dag_id=DAG,
            run_id=run_id,
            try_number=2,
            dag_version_id=uuid.uuid4(),
        ),
        msg="Executor reported that the task instance finished with state failed, but the task "
        "instance's state attribute is queued. Extra info: Invalid auth token",
        task_callback_type=TaskInstanceState.FAILED,
        context_from_server=TIRunContext(
            dag_run=DagRun(
                dag_id=DAG,
                run_id=run_id,
                logical_date=when,
                data_interval_start=when,
                data_interval_end=when,
                run_after=when,
                start_date=when,
                end_date=None,
                run_type=DagRunType.MANUAL,
                state=DagRunState.RUNNING,
                conf=conf,
                consumed_asset_events=[],
                partition_key=None,
            ),
            max_tries=1,
            variables=[],
            connections=[],
            xcom_keys_to_clear=[],
        ),
    )
    _execute_task_callbacks(dags, request, structlog.get_logger())  # type: ignore[arg-type]
    p = store.processes.get(pid)
    assert p.status == S.FAILED and f"the creation run {run_id} never started" in (p.failure_reason or "")
    assert store.dynamic.get(T).state == "CREATING"
