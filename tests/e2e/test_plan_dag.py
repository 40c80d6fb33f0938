"""A policy's planned (policy, action) DAG end to end (ADR 0004): the project's DAG file parsed by Airflow's DagBag
builds ``tms__plan__fleet__rewrite-files``, and ``dag.test()`` runs its ``plan`` task and its ``run_batch`` task
mapped over the batches, on real Iceberg tables written by pyiceberg (a SQL catalog on SQLite) and a real store.

Without a JVM: the tables the plan selects are ones whose stored health is stale (measured before someone else
compacted them), so the health gate, reading each table again right before its job, skips them (the gate is the
last word); one of them is leased by another job and is skipped with that reason; a table never measured is
measured by the plan task and not selected. With a JVM (the second test): two unhealthy tables are compacted by
the default local Spark engine, the healthy one is not selected."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablemgmt.core.policies import parse_policy
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType, Owner, TableSpec

pytestmark = pytest.mark.e2e

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
ACTION = "rewrite-files"
DAG_ID = "tms__plan__fleet__rewrite-files"
ELSEWHERE = "tms__lake.db.t_leased__rewrite-files/manual__elsewhere/maintain/1"


def _lake(tmp_path: Path) -> tuple[Any, CatalogSpec]:
    from pyiceberg.catalog.sql import SqlCatalog

    db, warehouse = tmp_path / "catalog.db", tmp_path / "warehouse"
    warehouse.mkdir()
    client = SqlCatalog("lake", uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    client.create_namespace("db")
    client.create_namespace("other")
    spec = CatalogSpec(
        name="lake",
        type=CatalogType.JDBC,
        warehouse=f"file://{warehouse}",
        properties={"uri": f"jdbc:sqlite:{db}"},
    )
    return client, spec


def _table(client: Any, ident: str, files: int) -> None:
    table = client.create_table(ident, schema=SCHEMA)
    for i in range(files):
        table.append(pa.table({"id": [i * 10 + j for j in range(10)], "v": ["x"] * 10}, schema=SCHEMA))


def _task_instances(dag_id: str, run_id: str) -> list[Any]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=dag_id, run_id=run_id).all()
        session.expunge_all()
        return tis


def test_the_plan_selects_from_stored_health_and_the_batches_skip_what_the_gate_and_the_lease_say(
    airflow_db: str, dags_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    from airflow_tablemgmt.core.process import ProcessStatus
    from airflow_tablemgmt.services import health
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.enrolment import EnrolmentRepository
    from airflow_tablemgmt.store.planning import PlanningRepository
    from airflow_tablemgmt.store.policies import PolicyRepository

    monkeypatch.setenv("TABLEMGMT_HEALTH_GATE", "1")  # the product's default (the suite turns it off)
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__PLAN_BATCH_SIZE", "2")
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__DAG_CACHE_DIR", "off")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv("TABLEMGMT_STORE_URL", url)
    client, catalog = _lake(tmp_path)
    store = Store.for_url(url)
    store.catalogs.upsert(catalog, Owner.STORE)
    policy = {"name": "fleet", "match": {"catalog": "lake", "format": "iceberg"}, "actions": {ACTION: {}}}
    PolicyRepository.of(store).upsert(parse_policy(policy), Owner.STORE)

    stale = ["t1", "t2", "t3", "t4", "t_leased"]  # healthy now, stored health says 8 small files
    _table(client, "other.small", 8)  # not enrolled: where the stale figures come from
    small = health.read_file_stats(catalog, TableSpec(catalog="lake", namespace="other", name="small"))
    enrol = EnrolmentRepository.of(store)
    for name in [*stale, "t_unmeasured"]:
        _table(client, f"db.{name}", 1)
        enrol.enrol(
            TableSpec(catalog="lake", namespace="db", name=name, actions={ACTION: {}}), "fleet", "matched"
        )
    for name in stale:
        health.remember(store, f"lake.db.{name}", small)
    assert store.leases.acquire("lake.db.t_leased", ELSEWHERE, timedelta(minutes=10))

    bag = DagBag(dag_folder=str(dags_folder))
    dag = bag.get_dag(DAG_ID)
    assert dag is not None, (bag.import_errors, sorted(bag.dag_ids))
    assert not [d for d in bag.dag_ids if d.startswith("tms__lake.db.")]  # no DAG per enrolled table
    run = dag.test()
    assert run.state == "success"

    tis = _task_instances(DAG_ID, run.run_id)
    batches = sorted(ti.map_index for ti in tis if ti.task_id == "run_batch")
    assert batches == [0, 1, 2]  # 5 selected tables in batches of 2: three mapped tasks
    labels = sorted(ti.rendered_map_index for ti in tis if ti.task_id == "run_batch")
    assert labels == ["lake.db.t1 +1", "lake.db.t3 +1", "lake.db.t_leased"], labels  # the grid's names
    assert {ti.task_id: str(ti.state) for ti in tis} == {"plan": "success", "run_batch": "success"}

    everything = store.processes.list(action=ACTION, limit=100)
    processes = {p.table_id: p for p in everything if p.task_id == "run_batch"}
    assert sorted(processes) == sorted(f"lake.db.{n}" for n in stale)  # the unmeasured table was not selected
    # ... and its history says why: the plan's skip, its reason the health gate's (measured by the plan)
    plan_skips = {p.table_id: p for p in everything if p.task_id == "plan"}
    assert sorted(plan_skips) == ["lake.db.t_unmeasured"] and len(everything) == len(stale) + 1
    left_out = plan_skips["lake.db.t_unmeasured"]
    assert left_out.status == ProcessStatus.SUCCESS and (left_out.summary or {})["gate"] == "plan"
    assert (left_out.summary or {})["reason"].startswith("not planned: ") and left_out.run_id == run.run_id
    for table_id, p in processes.items():
        assert p.status == ProcessStatus.SUCCESS and (p.summary or {}).get("skipped"), (table_id, p)
        assert p.run_id == run.run_id and p.dag_id == DAG_ID and p.task_id == "run_batch"
        assert p.parameters["plan"]["map_index"] in (0, 1, 2) and p.parameters["plan"]["run_id"] == run.run_id
    leased = processes.pop("lake.db.t_leased").summary or {}
    assert leased["gate"] == "lease" and ELSEWHERE in leased["reason"] and "next plan" in leased["reason"]
    for p in processes.values():  # the gate read each again: nothing to compact
        assert (p.summary or {})["gate"] == "health" and "does not pay" in (p.summary or {})["reason"]
    assert store.leases.get("lake.db.t_leased").holder == ELSEWHERE  # type: ignore[union-attr]

    # the plan task measured the unmeasured table; each batch measured its tables again after their process
    rows = {r.table_id: r for r in PlanningRepository.of(store).rows("fleet")}
    assert rows["lake.db.t_unmeasured"].figures is not None
    assert all((rows[f"lake.db.{n}"].figures or {}).get("data_files") == 1 for n in stale)

    # so the next run has nothing to do: no batch is mapped and no process opened
    quiet = dag.test()
    assert quiet.state == "success"
    assert {ti.task_id: str(ti.state) for ti in _task_instances(DAG_ID, quiet.run_id)} == {
        "plan": "success",
        "run_batch": "skipped",
    }
    # the tables the batches ran are left out now: each recorded once with why (their newest process was the
    # batch's); the unmeasured one's reason did not change: nothing new for it
    again = [p for p in store.processes.list(action=ACTION, limit=100) if p.run_id == quiet.run_id]
    assert sorted(p.table_id for p in again) == sorted(f"lake.db.{n}" for n in stale)
    assert {(p.task_id, (p.summary or {})["gate"]) for p in again} == {("plan", "plan")}
    third = dag.test()  # nothing changed since: no row at all
    assert [p for p in store.processes.list(action=ACTION, limit=100) if p.run_id == third.run_id] == []
    store.dispose()
    client.engine.dispose()


@pytest.mark.on_demand(
    reason="one spark-submit driver compacting two tables through dag.test() (144 s at load 11-12); CI runs the "
    "planned DAG's whole path without a JVM (the test above: plan, mapped batches, the gate, the lease), one "
    "batch driver over two tables in integration/services/test_batch_driver.py and the compaction job itself in "
    "e2e/test_cli.py"
)
def test_the_mapped_batch_compacts_the_unhealthy_tables_with_local_spark(
    airflow_db: str, dags_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three pyiceberg tables in a JDBC catalog on the suite's PostgreSQL, enrolled by discovery: the plan
    measures them (none has stored health), selects the two with 8 small files, and one mapped batch compacts
    them one after another with the default engine (spark-submit, local Spark) in one driver; the healthy one
    is not selected (a plan skip says why)."""
    from airflow.dag_processing.dagbag import DagBag

    from airflow_tablemgmt.core.identifiers import TableIdentifier
    from airflow_tablemgmt.core.process import ProcessStatus
    from airflow_tablemgmt.services.enrolment import discover
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.policies import PolicyRepository
    from tests.integration.catalogs.conftest import postgres_database
    from tests.support.catalogs import content, seed

    monkeypatch.setenv("TABLEMGMT_HEALTH_GATE", "1")
    monkeypatch.setenv("TMS_TEST_PG_PASSWORD", "unused")  # the catalog's password reference (trust auth)
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__DAG_CACHE_DIR", "off")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv("TABLEMGMT_STORE_URL", url)
    with postgres_database("tms_plan") as database:
        catalog = CatalogSpec(
            name="lake",
            type=CatalogType.JDBC,
            warehouse=f"file://{tmp_path / 'warehouse'}",
            properties={
                "uri": f"jdbc:postgresql://127.0.0.1:5432/{database}",
                "jdbc.user": "postgres",
                "jdbc.password": "env:TMS_TEST_PG_PASSWORD",
            },
        )
        tables = {"u1": 8, "u2": 8, "healthy": 1}
        before = {n: content(catalog, seed(catalog, n, appends=k)) for n, k in tables.items()}
        assert {n: c[2] for n, c in before.items()} == {"u1": 8, "u2": 8, "healthy": 1}  # data files
        store = Store.for_url(url)
        store.catalogs.upsert(catalog, Owner.STORE)
        policy = {"name": "fleet", "match": {"catalog": "lake", "format": "iceberg"}, "actions": {ACTION: {}}}
        PolicyRepository.of(store).upsert(parse_policy(policy), Owner.STORE)
        assert discover(store, policy="fleet").count("enrolled") == 3

        bag = DagBag(dag_folder=str(dags_folder))
        dag = bag.get_dag(DAG_ID)
        assert dag is not None, (bag.import_errors, sorted(bag.dag_ids))
        run = dag.test()
        assert run.state == "success"
        tis = _task_instances(DAG_ID, run.run_id)
        assert sorted(ti.map_index for ti in tis if ti.task_id == "run_batch") == [0]  # one batch of two

        everything = store.processes.list(action=ACTION, limit=100)
        processes = {p.table_id: p for p in everything if p.task_id == "run_batch"}
        assert sorted(processes) == ["lake.db.u1", "lake.db.u2"]  # the healthy table was not selected
        skipped = [p for p in everything if p.task_id == "plan"]  # and its history says why
        assert [(p.table_id, (p.summary or {}).get("gate")) for p in skipped] == [("lake.db.healthy", "plan")]
        for name in ("u1", "u2"):
            p = processes[f"lake.db.{name}"]
            assert p.status == ProcessStatus.SUCCESS and not (p.summary or {}).get("skipped"), p
            assert p.parameters["plan"]["map_index"] == 0 and p.run_id == run.run_id
            rows, ids, files, _ = content(catalog, TableIdentifier("lake", "db", name))
            assert (rows, ids) == before[name][:2] and files == 1, (name, rows, ids, files)
        assert content(catalog, TableIdentifier("lake", "db", "healthy")) == before["healthy"]
        # one spark-submit driver ran the batch's two tables, each its own process (plan_shared_driver)
        assert len({processes[f"lake.db.{n}"].external_id for n in ("u1", "u2")}) == 1
        store.dispose()


SCHEDULED_TABLES = 200  # 199 with stale health, one of them leased elsewhere


@pytest.mark.on_demand(
    reason="a real Airflow deployment (api-server, scheduler, dag-processor) over 200 tables (≈ 4.5 min at load "
    "16-20); CI runs "
    "the same DAG with dag.test() (the first test) and the scheduler path of task code in e2e/test_real_scheduler.py"
)
@pytest.mark.timeout(600)
def test_a_real_scheduler_runs_the_planned_dag_over_a_few_hundred_tables(tmp_path: Path) -> None:
    """The planned DAG under a real scheduler (LocalExecutor: task code through the Task SDK, no metadata-DB
    access), its batches expanded by the scheduler: 200 enrolled pyiceberg tables whose stored health is stale,
    one leased elsewhere. The plan selects all 200, four mapped batches of 50 run them; the health gate skips
    each as it reads it again, the leased one is a recorded skip naming its holder."""
    import subprocess
    import time

    from airflow_tablemgmt.core.process import ProcessStatus
    from airflow_tablemgmt.services import health
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.enrolment import EnrolmentRepository
    from airflow_tablemgmt.store.policies import PolicyRepository
    from tests.e2e.conftest import BIN, ROOT
    from tests.e2e.test_real_scheduler import _wait_for, local_deployment

    t0 = time.monotonic()
    dep = local_deployment(
        tmp_path / "airflow",
        AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="1",
        AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC="1",
        AIRFLOW__TABLEMGMT__DAG_CACHE_DIR="off",
        TABLEMGMT_HEALTH_GATE="1",
    )
    try:
        migrate = subprocess.Popen(
            [str(BIN / "airflow"), "db", "migrate"],
            env=dep.env,
            stdout=dep.log("db-migrate").open("wb"),
            stderr=subprocess.STDOUT,
        )
        client, catalog = _lake(tmp_path)
        store = Store.for_url(dep.env["TABLEMGMT_STORE_URL"])
        store.catalogs.upsert(catalog, Owner.STORE)
        policy = {"name": "fleet", "match": {"catalog": "lake", "format": "iceberg"}, "actions": {ACTION: {}}}
        PolicyRepository.of(store).upsert(parse_policy(policy), Owner.STORE)
        _table(client, "other.small", 8)
        small = health.read_file_stats(catalog, TableSpec(catalog="lake", namespace="other", name="small"))
        enrol = EnrolmentRepository.of(store)
        names = [f"t{i:03d}" for i in range(SCHEDULED_TABLES - 1)] + ["t_leased"]
        for name in names:
            _table(client, f"db.{name}", 1)
            spec = TableSpec(catalog="lake", namespace="db", name=name, actions={ACTION: {}})
            enrol.enrol(spec, "fleet", "matched")
        health.remember_many(store, {f"lake.db.{n}": small for n in names})
        assert store.leases.acquire("lake.db.t_leased", ELSEWHERE, timedelta(minutes=30))
        (dep.home / "dags" / "tablemgmt_dags.py").write_bytes(
            (ROOT / "dags" / "tablemgmt_dags.py").read_bytes()
        )
        assert migrate.wait(timeout=300) == 0, dep.log("db-migrate").read_text()[-3000:]
        print(f"\nsetup ({len(names)} tables + db migrate): {time.monotonic() - t0:.1f} s")

        dep.start("api-server", "api-server", "--port", str(dep.api_port), "--host", "127.0.0.1")
        dep.start("scheduler", "scheduler")
        dep.start("dag-processor", "dag-processor")

        def dag_active() -> bool:
            dep.check_alive()
            rows = dep.query("SELECT is_paused, is_stale FROM dag WHERE dag_id = :d", d=DAG_ID)
            return bool(rows) and rows[0] == (False, False)

        _wait_for(f"{DAG_ID} registered and unpaused", dag_active, timeout=180)
        enrolled_dags = dep.query("SELECT count(*) FROM dag WHERE dag_id LIKE 'tms__lake.db.%'")
        assert enrolled_dags == [(0,)]  # no DAG per enrolled table

        def a_run_finished() -> Any:
            dep.check_alive()
            rows = dep.query("SELECT run_id, state FROM dag_run WHERE dag_id = :d ORDER BY id", d=DAG_ID)
            if not rows:
                trigger = dep.cli("dags", "trigger", DAG_ID)
                assert trigger.returncode == 0, trigger.stderr[-2000:]
                return None
            return rows[0] if rows[0][1] in ("success", "failed") else None

        run_id, state = _wait_for("the first planned run to finish", a_run_finished, timeout=420, every=3)
        print(f"first run {run_id} {state}: {time.monotonic() - t0:.1f} s")
        tis = dep.query(
            "SELECT task_id, map_index, state FROM task_instance WHERE dag_id = :d AND run_id = :r",
            d=DAG_ID,
            r=run_id,
        )
        assert state == "success", tis
        assert sorted(m for t, m, _ in tis if t == "run_batch") == [0, 1, 2, 3]  # 200 tables, batches of 50
        assert {s for _, _, s in tis} == {"success"}

        processes = {
            p.table_id: p for p in store.processes.list(action=ACTION, limit=1000) if p.run_id == run_id
        }
        assert sorted(processes) == sorted(f"lake.db.{n}" for n in names)
        leased = processes.pop("lake.db.t_leased")
        assert leased.status == ProcessStatus.SUCCESS and (leased.summary or {})["gate"] == "lease"
        assert ELSEWHERE in (leased.summary or {})["reason"]
        assert {(p.status, (p.summary or {}).get("gate")) for p in processes.values()} == {
            (ProcessStatus.SUCCESS, "health")
        }
        assert {p.parameters["plan"]["map_index"] for p in processes.values()} == {0, 1, 2, 3}
        store.dispose()
        client.engine.dispose()
    except BaseException:
        dep.print_log_tails()
        raise
    finally:
        dep.stop()
    print(f"total: {time.monotonic() - t0:.1f} s")


def test_a_commit_to_an_enrolled_table_starts_the_planned_dag_which_plans_that_table(
    dags_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events for policy tables (ADR 0004 decision 5), without a JVM or a triggerer process: the project's DAG
    file, parsed by Airflow's DagBag, schedules the event-driven planned DAG on its policy's asset, whose
    watchers are the enrolled tables' own; the real watcher of one table, rebuilt as the triggerer stores it,
    reports a commit of 8 small files to it; the run's ``plan`` task, given that event as Airflow hands it over
    (``triggering_asset_events``), measures that table now (its stored figures predate the commit) and maps it
    in a batch, and plans no other table (a stale one whose stored figures would pay waits for a scheduled run)."""
    import asyncio
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk import AssetOrTimeSchedule
    from airflow.sdk.api.datamodels._generated import AssetReferenceAssetEventDagRun
    from airflow.sdk.execution_time.comms import AssetEventDagRunReferenceResult
    from airflow.sdk.execution_time.context import TriggeringAssetEventsAccessor

    from airflow_tablemgmt.dag_factory.plan import plan_in_context
    from airflow_tablemgmt.services import health
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.enrolment import EnrolmentRepository
    from airflow_tablemgmt.store.policies import PolicyRepository
    from tests.integration.triggers.test_snapshot_triggers import DictAssetStateStore, next_event, roundtrip

    monkeypatch.setenv("AIRFLOW__TABLEMGMT__DAG_CACHE_DIR", "off")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv("TABLEMGMT_STORE_URL", url)
    client, catalog = _lake(tmp_path)
    store = Store.for_url(url)
    store.catalogs.upsert(catalog, Owner.STORE)
    policy = {"name": "fleet", "match": {"catalog": "lake", "format": "iceberg"}, "actions": {ACTION: {}}}
    PolicyRepository.of(store).upsert(parse_policy(policy), Owner.STORE)
    _table(client, "other.small", 8)
    small = health.read_file_stats(catalog, TableSpec(catalog="lake", namespace="other", name="small"))
    enrol = EnrolmentRepository.of(store)
    for name in ("changed", "quiet", "stale"):
        _table(client, f"db.{name}", 1)
        enrol.enrol(TableSpec(catalog="lake", namespace="db", name=name, actions={ACTION: {}}), "fleet", "m")
        health.table_health(store, f"lake.db.{name}", ttl=0)  # measured: 1 file, nothing to compact
    health.remember(store, "lake.db.stale", small)  # stored figures that would pay

    bag = DagBag(dag_folder=str(dags_folder))
    dag = bag.dags.get(DAG_ID)  # the parse only: no Airflow database needed
    assert dag is not None, (bag.import_errors, sorted(bag.dag_ids))
    assert isinstance(dag.timetable, AssetOrTimeSchedule), dag.timetable
    asset = dag.timetable.asset_condition
    watchers = {w.trigger.table_id: w.trigger for w in asset.watchers}
    assert sorted(watchers) == ["lake.db.changed", "lake.db.quiet", "lake.db.stale"]

    trigger = roundtrip(watchers["lake.db.changed"])  # as the triggerer builds it from its stored row
    state = DictAssetStateStore()
    seen = client.load_table("db.changed").current_snapshot().snapshot_id
    state.values[trigger.watch_key] = {ACTION: {"snapshot_id": seen, "event_at": None}}
    trigger.asset_state_store = state
    table = client.load_table("db.changed")
    for i in range(8):  # someone's streaming job: 8 small commits
        table.append(pa.table({"id": [100 + i], "v": ["y"]}, schema=SCHEMA))

    async def first_event() -> Any:
        events = trigger.run()
        try:
            return await next_event(events)
        finally:
            await events.aclose()

    event = asyncio.run(first_event())
    assert event.payload["table"] == "lake.db.changed" and ACTION in event.payload["actions"]

    reference = AssetEventDagRunReferenceResult(
        asset=AssetReferenceAssetEventDagRun(name=asset.name, uri=asset.uri, extra={}),
        extra={"from_trigger": True, "payload": event.payload},  # what Airflow's trigger handling stores
        source_task_id=None,
        source_dag_id=None,
        source_run_id=None,
        source_map_index=None,
        source_aliases=[],
        timestamp=datetime.now(UTC),
    )
    pushed: dict[str, Any] = {}
    context = {
        "dag_run": SimpleNamespace(conf={}),
        "ti": SimpleNamespace(xcom_push=lambda key, value: pushed.__setitem__(key, value)),
        "triggering_asset_events": TriggeringAssetEventsAccessor.build([reference]),
    }
    batches = plan_in_context(store, context, "fleet", ACTION)
    assert batches == [["lake.db.changed"]]  # measured now: 9 small files, it pays
    summary = pushed["plan"]
    assert summary["changed"] == ["lake.db.changed"] and summary["counts"]["measured"] == 1
    assert [p["table"] for p in summary["pays"]] == ["lake.db.changed"]
    # a run without events (the fallback schedule, a manual run) plans every table from stored health
    pushed.clear()
    everything = plan_in_context(store, {**context, "triggering_asset_events": {}}, "fleet", ACTION)
    # (the changed table's figures, measured by the event's run, pay; stale's stored ones too; quiet's do not)
    assert sorted(t for b in everything for t in b) == ["lake.db.changed", "lake.db.stale"]
    store.dispose()
    client.engine.dispose()
