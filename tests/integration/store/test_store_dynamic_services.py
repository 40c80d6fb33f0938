"""services.dynamic on SQLite and PostgreSQL (no Spark): refresh requests, suspend/resume, alter
freshness, drop, history. The creation job runs in tests/integration/spark/test_dynamic_*.py."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from airflow_tablemgmt.core.dynamic import DynamicTableSpec
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, Owner
from airflow_tablemgmt.services import dynamic
from airflow_tablemgmt.services.errors import Conflict, InvalidInput, NotFound
from airflow_tablemgmt.store import Store

pytestmark = pytest.mark.integration
TID = "lake.db.daily"
DAG = f"tms__{TID}__refresh"


class Airflow:
    """Airflow's side as the services see it: DAG runs created with conf, pause flags."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, datetime, dict[str, Any]]] = []
        self.paused: dict[str, bool] = {}

    def trigger(self, dag_id: str, logical_date: datetime, conf: Mapping[str, Any]) -> str:
        self.runs.append((dag_id, logical_date, dict(conf)))
        return f"tablemgmt__refresh__{logical_date.isoformat()}"

    def pause(self, dag_id: str, paused: bool) -> None:
        self.paused[dag_id] = paused


@pytest.fixture
def dstore(store: Store) -> Store:
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse="/tmp/w"), Owner.STORE)
    spec = DynamicTableSpec.model_validate(
        {
            "identifier": TID,
            "query": "SELECT id, day FROM lake.db.src",
            "freshness": "1 DAY",
            "partitioned-by": ["day"],
            "partition.fields.day.date-formatter": "yyyy-MM-dd",
            "schema": [{"name": "id", "type": "bigint"}, {"name": "day", "type": "string"}],
            "source-tables": ["lake.db.src"],
        }
    )
    store.dynamic.upsert(spec, Owner.STORE, state="ACTIVE")
    return store


@pytest.fixture
def airflow() -> Airflow:
    return Airflow()


def refresh(store: Store, airflow: Airflow, **kw: Any) -> dynamic.RefreshRequested:
    args: dict[str, Any] = {
        "is_periodic": True,
        "schedule_time": "2026-02-02 00:00:00",
        "static_partitions": {},
        "dynamic_options": {},
    }
    args.update(kw)
    return dynamic.refresh(store, TID, trigger=airflow.trigger, **args)


def test_periodic_refresh_without_schedule_time_is_flinks_error(dstore: Store, airflow: Airflow) -> None:
    with pytest.raises(InvalidInput) as e:
        refresh(dstore, airflow, schedule_time=None)
    assert str(e.value) == "Schedule time must be specified for periodic refresh."
    assert airflow.runs == []


def test_unknown_partition_key_is_rejected_naming_the_keys(dstore: Store, airflow: Airflow) -> None:
    with pytest.raises(
        InvalidInput, match=r"staticPartitions: 'hour' is not a partition key .* partition keys: day"
    ):
        refresh(dstore, airflow, is_periodic=False, static_partitions={"hour": "01"})
    assert dstore.processes.list(table_id=TID) == []


def test_bad_schedule_time_names_the_format(dstore: Store, airflow: Airflow) -> None:
    with pytest.raises(
        InvalidInput, match="scheduleTime: '2026/02/02' is not a time; expected yyyy-MM-dd HH:mm:ss"
    ):
        refresh(dstore, airflow, schedule_time="2026/02/02")


def test_periodic_refresh_opens_the_process_at_the_schedule_time_once(
    dstore: Store, airflow: Airflow
) -> None:
    first = refresh(dstore, airflow)
    assert first.process.instant == datetime(2026, 2, 2, tzinfo=UTC)
    assert first.process.status == ProcessStatus.PENDING
    assert first.process.parameters["trigger"] == "MANUAL"
    assert first.process.parameters["schedule_time"] == "2026-02-02 00:00:00"
    assert first.dag_id == DAG and not first.reused
    [(dag_id, when, conf)] = airflow.runs
    assert (dag_id, when) == (DAG, datetime(2026, 2, 2, tzinfo=UTC))
    assert conf == {
        "trigger": "MANUAL",
        "is_periodic": True,
        "static_partitions": {},
        "dynamic_options": {},
        "schedule_time": "2026-02-02 00:00:00",
    }
    again = refresh(dstore, airflow)
    assert again.reused and again.process.id == first.process.id
    assert len(airflow.runs) == 1  # no second DAG run


def test_manual_refresh_is_now_with_its_partitions_and_options(dstore: Store, airflow: Airflow) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    req = refresh(
        dstore,
        airflow,
        is_periodic=False,
        schedule_time=None,
        static_partitions={"day": "2026-01-31"},
        dynamic_options={"spark.sql.shuffle.partitions": 4},
    )
    assert req.process.instant >= before
    assert req.process.parameters["static_partitions"] == {"day": "2026-01-31"}
    assert airflow.runs[0][2]["dynamic_options"] == {"spark.sql.shuffle.partitions": "4"}


def test_failed_trigger_fails_the_process(dstore: Store) -> None:
    def refuse(dag_id: str, logical_date: datetime, conf: Mapping[str, Any]) -> str:
        raise RuntimeError("no such DAG yet")

    with pytest.raises(RuntimeError):
        dynamic.refresh(
            dstore,
            TID,
            is_periodic=True,
            schedule_time="2026-02-02 00:00:00",
            static_partitions=None,
            dynamic_options=None,
            trigger=refuse,
        )
    [p] = dstore.processes.list(table_id=TID)
    assert p.status == ProcessStatus.FAILED and "no such DAG yet" in (p.failure_reason or "")


def test_a_refresh_whose_run_could_not_be_created_is_asked_again(dstore: Store, airflow: Airflow) -> None:
    """The same periodic scheduleTime asked again after Airflow refused the run must trigger it now,
    not answer with the failed job forever."""

    def refuse(dag_id: str, logical_date: datetime, conf: Mapping[str, Any]) -> str:
        raise RuntimeError("api-server busy")

    with pytest.raises(RuntimeError):
        dynamic.refresh(
            dstore,
            TID,
            is_periodic=True,
            schedule_time="2026-02-02 00:00:00",
            static_partitions=None,
            dynamic_options=None,
            trigger=refuse,
        )
    again = refresh(dstore, airflow)
    assert not again.reused and again.process.status == ProcessStatus.PENDING
    assert again.process.attempt == 2 and again.process.failure_reason is None
    assert len(airflow.runs) == 1
    [p] = dstore.processes.list(table_id=TID)  # still one process for the instant
    assert p.id == again.process.id
    assert refresh(dstore, airflow).reused and len(airflow.runs) == 1


def test_suspend_twice_is_an_error_and_resume_clears_the_count(dstore: Store, airflow: Airflow) -> None:
    dstore.dynamic.record_result(TID, success=False, scheduled=True, reason="x")
    dt = dynamic.suspend(dstore, TID, airflow.pause)
    assert dt.state == "SUSPENDED" and airflow.paused == {DAG: True}
    with pytest.raises(Conflict, match=f"dynamic table {TID} is already suspended"):
        dynamic.suspend(dstore, TID, airflow.pause)
    dt = dynamic.resume(dstore, TID, airflow.pause, {"spark.executor.memory": "2g"})
    assert (dt.state, dt.consecutive_failures, dt.dynamic_options) == (
        "ACTIVE",
        0,
        {"spark.executor.memory": "2g"},
    )
    assert airflow.paused == {DAG: False}
    with pytest.raises(Conflict, match="is not suspended"):
        dynamic.resume(dstore, TID, airflow.pause)


def test_alter_freshness_reschedules(dstore: Store) -> None:
    result = dynamic.alter(dstore, TID, freshness="6 HOUR")
    assert result.changed == ["freshness"]
    assert dstore.tables.get(TID).actions["refresh"]["interval"] == "0 */6 * * *"
    assert dynamic.get(dstore, TID).cron == "0 */6 * * *"
    with pytest.raises(InvalidInput, match="freshness"):
        dynamic.alter(dstore, TID, freshness="7 HOUR")
    assert dynamic.get(dstore, TID).cron == "0 */6 * * *"  # nothing invalid reaches the store


def test_code_owned_table_refuses_alter_and_drop(dstore: Store) -> None:
    spec = dstore.dynamic.get(TID).definition
    dstore.dynamic.upsert(spec, Owner.CODE)
    with pytest.raises(Conflict, match="managed by"):
        dynamic.alter(dstore, TID, freshness="1 HOUR")
    with pytest.raises(Conflict, match="managed by"):
        dynamic.drop(dstore, TID)


def test_drop_pauses_first_then_removes_and_keeps_history(dstore: Store, airflow: Airflow) -> None:
    refresh(dstore, airflow)
    dynamic.drop(dstore, TID, pauser=airflow.pause)
    assert airflow.paused == {DAG: True}
    with pytest.raises(NotFound, match="removed"):
        dynamic.get(dstore, TID)
    assert [p.instant for p in dynamic.history(dstore, TID)] == [datetime(2026, 2, 2, tzinfo=UTC)]
    assert dynamic.list_(dstore) == []


def test_unknown_table_is_not_found_with_a_hint(dstore: Store) -> None:
    with pytest.raises(
        NotFound, match="dynamic table lake.db.dayly is not registered; did you mean lake.db.daily"
    ):
        dynamic.get(dstore, "lake.db.dayly")
    with pytest.raises(NotFound):
        dynamic.history(dstore, "lake.db.nope")


def test_create_validates_before_anything_runs(dstore: Store) -> None:
    with pytest.raises(InvalidInput, match="refresh-mode: 'continuous' is not a refresh mode; allowed: AUTO"):
        dynamic.create(
            dstore,
            {
                "identifier": "lake.db.x",
                "query": "SELECT 1",
                "freshness": "1 HOUR",
                "refresh-mode": "continuous",
            },
        )
    with pytest.raises(Conflict, match="already exists"):
        dynamic.create(dstore, {"identifier": TID, "query": "SELECT 1", "freshness": "1 HOUR"})
    with pytest.raises(InvalidInput, match="downstream"):
        dynamic.create(
            dstore,
            {"identifier": "lake.db.y", "query": "SELECT * FROM lake.db.src", "freshness": "downstream"},
        )
    assert [v.table.id for v in dynamic.list_(dstore)] == [TID]


def test_cycle_is_rejected(dstore: Store) -> None:
    a = DynamicTableSpec.model_validate(
        {"identifier": "lake.db.a", "query": "SELECT * FROM lake.db.b", "freshness": "1 HOUR"}
    )
    dstore.dynamic.upsert(a, Owner.STORE, state="ACTIVE")
    with pytest.raises(
        InvalidInput,
        match=r"cycle: lake.db.a -> lake.db.b -> lake.db.a|cycle: lake.db.b -> lake.db.a -> lake.db.b",
    ):
        dynamic.create(
            dstore, {"identifier": "lake.db.b", "query": "SELECT * FROM lake.db.a", "freshness": "downstream"}
        )
