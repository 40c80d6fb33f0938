"""A policy's event that Airflow puts in no run is planned anyway, under a real scheduler (ADR 0004 decision 5,
``dag_factory/plan_events.py``). No JVM.

Airflow (3.3) creates an asset-triggered run for the events up to the moment its DAG's queue row
(``asset_dag_run_queue``) was written, and an event arriving after that finds the row there and joins no run
until the DAG's next event. Here two tables' events are stored, as the triggerer stores a watcher's, before the
scheduler starts (the second while the first's queue row waits, as it does while a run is being created or the
DAG is at ``max_active_runs``); the scheduler then creates one run, consuming the first event only. That run's
``plan`` task plans both tables: the second from the policy's events after its queue row that no run of the DAG
consumed, read through the Task SDK. Before, the second table waited for another commit or the full plan."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.policies import parse_policy
from airflow_tablemgmt.core.tables import Owner, TableSpec

pytestmark = pytest.mark.e2e

ACTION = "rewrite-files"
DAG_ID = f"tms__plan__fleet__{ACTION}"
ASSET = "tablemgmt.policy.fleet"

# What the triggerer does with a watcher's event (``Trigger.submit_event``), one event per table, 0.5 s apart.
REGISTER = """
import json, sys, time
from sqlalchemy import select
from airflow.assets.manager import AssetManager
from airflow.models.asset import AssetModel
from airflow.utils.session import create_session
for table in sys.argv[1:]:
    with create_session() as session:
        asset = session.scalar(select(AssetModel).where(AssetModel.name == {asset!r}))
        event = AssetManager.register_asset_change(
            asset=asset.to_serialized(),
            extra={{"from_trigger": True, "payload": {{"table": table, "actions": {{{action!r}: None}}}}}},
            session=session,
        )
        session.flush()
        print(json.dumps({{"table": table, "id": event.id}}))
    time.sleep(0.5)
"""


def _pause_discovery(db_url: str) -> None:
    """The policy's discovery DAG is not under test (it would list the catalog in a task of its own)."""
    import sqlalchemy as sa

    engine = sa.create_engine(db_url, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE dag SET is_paused = 1 WHERE dag_id LIKE 'tms__discover__%'"))
    finally:
        engine.dispose()


def _json(value: Any) -> Any:
    """An XCom value as plain SQL reads it (SQLite: JSON text, possibly of a JSON string)."""
    while isinstance(value, (str, bytes)):
        value = json.loads(value)
    return value


@pytest.mark.on_demand(
    reason="a real Airflow deployment (api-server, dag-processor, scheduler; no JVM), 119 s at load 10-14; CI "
    "runs the same plan task logic through the Task SDK's own event reader in "
    "unit/dag_factory/test_plan_events.py::test_an_event_after_the_runs_queue_row_is_planned_by_that_run and "
    "the scheduler path of task code in e2e/test_real_scheduler.py"
)
@pytest.mark.timeout(400)
def test_an_event_after_the_runs_queue_row_is_planned_by_that_run(tmp_path: Path) -> None:
    from airflow_tablemgmt.services import health
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.enrolment import EnrolmentRepository
    from airflow_tablemgmt.store.policies import PolicyRepository
    from tests.e2e.conftest import BIN, ROOT
    from tests.e2e.test_plan_dag import _lake, _table
    from tests.e2e.test_real_scheduler import _wait_for, local_deployment

    t0 = time.monotonic()
    dep = local_deployment(
        tmp_path / "airflow",
        AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="1",
        AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC="1",
        AIRFLOW__TABLEMGMT__DAG_CACHE_DIR="off",
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
        enrol = EnrolmentRepository.of(store)
        for name in ("a", "b"):
            _table(client, f"db.{name}", 1)  # one file: measured, nothing to compact (no job, no JVM)
            enrol.enrol(
                TableSpec(catalog="lake", namespace="db", name=name, actions={ACTION: {}}), "fleet", "m"
            )
            health.table_health(store, f"lake.db.{name}", ttl=0)
        store.dispose()
        (dep.home / "dags" / "tablemgmt_dags.py").write_bytes(
            (ROOT / "dags" / "tablemgmt_dags.py").read_bytes()
        )
        assert migrate.wait(timeout=300) == 0, dep.log("db-migrate").read_text()[-3000:]
        print(f"\nset up and migrated: {time.monotonic() - t0:.1f} s")

        dep.start("api-server", "api-server", "--port", str(dep.api_port), "--host", "127.0.0.1")
        dep.start("dag-processor", "dag-processor")

        def registered() -> bool:
            dep.check_alive()
            dag = dep.query("SELECT is_paused FROM dag WHERE dag_id = :d", d=DAG_ID)
            active = dep.query("SELECT 1 FROM asset_active WHERE name = :n", n=ASSET)
            return bool(dag) and not dag[0][0] and bool(active)

        _wait_for(f"{DAG_ID} and its policy's asset registered", registered, timeout=180)
        print(f"\nregistered: {time.monotonic() - t0:.1f} s")
        _pause_discovery(dep.db_url)
        assert dep.query("SELECT max_active_runs FROM dag WHERE dag_id = :d", d=DAG_ID) == [(16,)]

        register = subprocess.run(
            [sys.executable, "-c", REGISTER.format(asset=ASSET, action=ACTION), "lake.db.a", "lake.db.b"],
            env=dep.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert register.returncode == 0, register.stderr[-3000:]
        lines = [line for line in register.stdout.splitlines() if line.startswith('{"table"')]
        ids = {e["table"]: e["id"] for e in map(json.loads, lines)}
        assert sorted(ids) == ["lake.db.a", "lake.db.b"], register.stdout[-3000:]
        # one queue row: b's event found a's row there (insert on conflict do nothing)
        assert dep.query("SELECT count(*) FROM asset_dag_run_queue WHERE target_dag_id = :d", d=DAG_ID) == [
            (1,)
        ]

        print(f"events stored: {time.monotonic() - t0:.1f} s")
        dep.start("scheduler", "scheduler")

        def planned() -> tuple[str, Any] | None:
            dep.check_alive()
            rows = dep.query(
                "SELECT r.run_id, x.value FROM dag_run r LEFT JOIN xcom x ON x.dag_run_id = r.id "
                "AND x.task_id = 'plan' AND x.key = 'plan' WHERE r.dag_id = :d AND r.run_type = 'asset_triggered'",
                d=DAG_ID,
            )
            failed = dep.query(
                "SELECT run_id FROM task_instance WHERE dag_id = :d AND task_id = 'plan' AND state = 'failed'",
                d=DAG_ID,
            )
            assert not failed, failed
            done = [(run_id, _json(value)) for run_id, value in rows if value is not None]
            return done[0] if done else None

        run_id, plan = _wait_for("the event run's plan", planned, timeout=180)
        print(f"planned: {time.monotonic() - t0:.1f} s: {plan['counts']}")
        runs = dep.query(
            "SELECT run_id FROM dag_run WHERE dag_id = :d AND run_type = 'asset_triggered'", d=DAG_ID
        )
        assert runs == [(run_id,)]
        consumed = dep.query(
            "SELECT x.event_id FROM dagrun_asset_event x JOIN dag_run r ON r.id = x.dag_run_id WHERE r.run_id = :r",
            r=run_id,
        )
        assert consumed == [(ids["lake.db.a"],)]  # Airflow's run: the events up to its queue row's creation
        assert plan["changed"] == ["lake.db.a", "lake.db.b"], plan  # b planned by the run all the same
        assert plan["late_tables"] == ["lake.db.b"] and plan["late_events"] == [ids["lake.db.b"]], plan
        assert plan["counts"]["measured"] == 2  # each measured again (its figures predate the commit)
        client.engine.dispose()
    except BaseException:
        dep.print_log_tails()
        raise
    finally:
        dep.stop()
