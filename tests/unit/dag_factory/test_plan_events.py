"""A planned DAG's event runs (ADR 0004 decision 5, ``dag_factory/plan_events.py``): the ``plan`` task of an
asset-triggered run plans the tables of its triggering events and of the policy's events that arrived after its
queue row was written, which Airflow (3.3) puts in no run; event runs of one planned DAG overlap.

The events are read through the Task SDK's own reader (the one behind ``inlet_events``), its supervisor channel
answered here as the execution API answers ``asset-events/by-asset``. No JVM, no Airflow process."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_tablemgmt.core.naming import plan_dag_id

ACTION = "rewrite-files"
DAG_ID = plan_dag_id("fleet", ACTION)
RUN_AFTER = datetime(2026, 11, 29, 2, 0, 0, tzinfo=UTC)
RUN_ID = f"asset_triggered__{RUN_AFTER.isoformat()}_abc"


def _payload(table: str, actions: list[str] | None = None) -> dict[str, Any]:
    """An event as Airflow stores a watcher's (``Trigger.submit_event``)."""
    return {"from_trigger": True, "payload": {"table": table, "actions": actions or [ACTION]}}


def _triggering(*tables: str) -> Any:
    from airflow.sdk.api.datamodels._generated import AssetReferenceAssetEventDagRun
    from airflow.sdk.execution_time.comms import AssetEventDagRunReferenceResult
    from airflow.sdk.execution_time.context import TriggeringAssetEventsAccessor

    return TriggeringAssetEventsAccessor.build(
        [
            AssetEventDagRunReferenceResult(
                asset=AssetReferenceAssetEventDagRun(
                    name="tablemgmt.policy.fleet", uri="tablemgmt.policy.fleet", extra={}
                ),
                extra=_payload(t),
                source_task_id=None,
                source_dag_id=None,
                source_run_id=None,
                source_map_index=None,
                source_aliases=[],
                timestamp=RUN_AFTER,
            )
            for t in tables
        ]
    )


def _event(
    event_id: int, table: str, consumed_by: list[tuple[str, str]], actions: list[str] | None = None
) -> Any:
    """An ``asset-events/by-asset`` answer's event: ``consumed_by`` (dag_id, run_id) its ``created_dagruns``."""
    from airflow.sdk.api.datamodels._generated import AssetEventResponse, AssetResponse, DagRunAssetReference

    at = RUN_AFTER + timedelta(seconds=event_id)
    return AssetEventResponse(
        id=event_id,
        timestamp=at,
        extra=_payload(table, actions),
        asset=AssetResponse(name="tablemgmt.policy.fleet", uri="tablemgmt.policy.fleet", group="tablemgmt"),
        created_dagruns=[
            DagRunAssetReference(
                run_id=run_id,
                dag_id=dag_id,
                logical_date=None,
                start_date=at,
                end_date=None,
                state="running",
                data_interval_start=None,
                data_interval_end=None,
                partition_key=None,
            )
            for dag_id, run_id in consumed_by
        ],
    )


class _Supervisor:
    """The task's channel to its supervisor, answering the asset-events read as the execution API does."""

    def __init__(self, events: list[Any]) -> None:
        self.events = events
        self.sent: list[Any] = []

    def send(self, msg: Any) -> Any:
        from airflow.sdk.api.datamodels._generated import AssetEventsResponse
        from airflow.sdk.execution_time.comms import AssetEventsResult

        self.sent.append(msg)
        after = msg.after
        return AssetEventsResult.from_asset_events_response(
            AssetEventsResponse(
                asset_events=[e for e in self.events if after is None or e.timestamp >= after]
            )
        )


@pytest.fixture
def planned(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``plan_run``'s arguments as ``plan_in_context`` passes them (the planning itself is tested apart:
    tests/unit/services/test_plan_runs.py), and the XCom it pushes."""
    from airflow_tablemgmt.metadata.planning import Plan
    from airflow_tablemgmt.services import plan_runs, plan_skips

    seen: dict[str, Any] = {}

    def plan_run(store: Any, policy: str, action: str, *, tables: Any = None, changed: Any = None) -> Any:
        seen.update(policy=policy, tables=tables, changed=changed)
        return plan_runs.PlannedRun(Plan(action), [], changed=changed)

    monkeypatch.setattr(plan_runs, "plan_run", plan_run)
    monkeypatch.setattr(plan_skips, "record_skips", lambda *a, **k: SimpleNamespace(written=0, deferred=0))
    return seen


def _context(
    run_type: str, triggering: Any, pushed: dict[str, Any], conf: dict[str, Any] | None = None
) -> Any:
    return {
        "dag_run": SimpleNamespace(
            dag_id=DAG_ID, run_id=RUN_ID, run_type=run_type, run_after=RUN_AFTER, conf=conf or {}
        ),
        "ti": SimpleNamespace(
            dag_id=DAG_ID,
            run_id=RUN_ID,
            task_id="plan",
            xcom_push=lambda key, value: pushed.__setitem__(key, value),
        ),
        "triggering_asset_events": triggering,
    }


def test_an_event_after_the_runs_queue_row_is_planned_by_that_run(
    planned: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow started the run with the event of ``a`` (up to its queue row's creation); ``b``'s event came
    after the row was written and before the run was created, so it is in no run: this run plans it. An event
    another run of this DAG consumed is that run's; one only the policy's other actions' DAGs consumed, or of
    another action, is read as for any run."""
    from airflow.sdk.api.datamodels._generated import DagRunType
    from airflow.sdk.execution_time import task_runner

    from airflow_tablemgmt.dag_factory.plan import plan_in_context

    supervisor = _Supervisor(
        [
            _event(0, "lake.db.a", [(DAG_ID, RUN_ID)]),  # this run's own (its triggering event)
            _event(1, "lake.db.b", []),  # after the queue row: in no run
            _event(2, "lake.db.c", [(DAG_ID, "asset_triggered__later")]),  # the next run's
            _event(3, "lake.db.d", [(plan_dag_id("fleet", "compute-stats"), "asset_triggered__x")]),
            _event(4, "lake.db.e", [], actions=["compute-stats"]),  # not this action's
        ]
    )
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", supervisor, raising=False)
    pushed: dict[str, Any] = {}
    context = _context(DagRunType.ASSET_TRIGGERED, _triggering("lake.db.a"), pushed)

    plan_in_context(object(), context, "fleet", ACTION)

    assert planned["changed"] == ["lake.db.a", "lake.db.b", "lake.db.d"]
    [read] = supervisor.sent  # one read: the policy's asset since the run's run_after
    assert (read.name, read.after) == ("tablemgmt.policy.fleet", RUN_AFTER)
    plan = pushed["plan"]
    assert plan["late_events"] == [1, 3, 4] and plan["late_tables"] == ["lake.db.b", "lake.db.d"]
    assert plan["counts"]["late_events"] == 3


def test_other_runs_read_no_events(planned: dict[str, Any]) -> None:
    """A full plan (the fallback interval), a manual run and a run naming its tables read nothing beyond their
    own events."""
    from airflow_tablemgmt.dag_factory.plan import plan_in_context

    def read(name: str, after: datetime) -> list[Any]:
        raise AssertionError("read")

    pushed: dict[str, Any] = {}
    plan_in_context(object(), _context("scheduled", {}, pushed), "fleet", ACTION, read_events=read)
    assert planned["changed"] is None and "late_events" not in pushed["plan"]
    plan_in_context(object(), _context("manual", {}, pushed), "fleet", ACTION, read_events=read)
    assert planned["changed"] is None
    named = _context("asset_triggered", _triggering("lake.db.a"), pushed, conf={"tables": ["lake.db.z"]})
    plan_in_context(object(), named, "fleet", ACTION, read_events=read)
    assert planned["tables"] == ["lake.db.z"] and planned["changed"] is None


def test_a_failed_read_fails_the_plan_which_airflow_retries(planned: dict[str, Any]) -> None:
    """Nothing is dropped: the task fails (Airflow retries it, its own events included) rather than plan
    without the late ones."""
    from airflow_tablemgmt.dag_factory.plan import plan_in_context

    def read(name: str, after: datetime) -> list[Any]:
        raise RuntimeError("API_SERVER_ERROR: 500")

    context = _context("asset_triggered", _triggering("lake.db.a"), {})
    with pytest.raises(RuntimeError, match="500"):
        plan_in_context(object(), context, "fleet", ACTION, read_events=read)
    assert planned == {}


def test_event_runs_of_a_planned_dag_overlap_and_interval_runs_do_not(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An event-driven planned DAG runs up to ``plan_max_active_runs`` runs at once (Airflow's own default, 16),
    so an event's run starts while earlier ones run; the batches stay bounded across its runs
    (``max_active_tis_per_dag``). A DAG on an interval keeps one run at a time."""
    from airflow_tablemgmt.core.policies import parse_policy
    from airflow_tablemgmt.dag_factory.plan import BATCH_TASK, build_plan_dags

    policy = parse_policy(
        {
            "name": "fleet",
            "match": {"catalog": "lake", "format": "iceberg"},
            "actions": {ACTION: {}, "expire-snapshots": {}},
        }
    )
    dags = build_plan_dags([policy])
    evented, timed = dags[DAG_ID], dags[plan_dag_id("fleet", "expire-snapshots")]
    assert evented.max_active_runs == 16 and timed.max_active_runs == 1
    assert evented.get_task(BATCH_TASK).max_active_tis_per_dag == 4
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__PLAN_MAX_ACTIVE_RUNS", "3")
    assert build_plan_dags([policy])[DAG_ID].max_active_runs == 3
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__PLAN_MAX_ACTIVE_RUNS", "0")
    with caplog.at_level("ERROR"):
        assert build_plan_dags([policy])[DAG_ID].max_active_runs == 16
    assert "plan_max_active_runs: '0' is not allowed; allowed: a whole number >= 1" in caplog.text
