"""A table's snapshot watcher across real triggerer restarts (api-server, scheduler, dag-processor,
triggerer; LocalExecutor): a commit made while no triggerer ran starts one run when the triggerer is
back, and a restart reports no snapshot twice. The watcher polls from its start and reads what it
remembered (Airflow's asset state store) in the background, so these are the guarantees that must
survive that (``tests/integration/triggers/test_watcher_startup.py`` covers the orderings).
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import BIN, make_table
from tests.e2e.iceberg_reads import read_state
from tests.e2e.test_real_scheduler import AirflowDeployment, _commit_snapshot, _wait_for, local_deployment

pytestmark = pytest.mark.e2e

TABLE = "live.db.events"
DAG_ID = "watch__rewrite-files"
STATE_KEY = f"tablemgmt.watch.{TABLE}"

DAG_FILE = """
from airflow.sdk import DAG
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow_tablemgmt.core.tables import CatalogSpec, parse_table
from airflow_tablemgmt.dag_factory import START_DATE, event_plans, table_asset
from airflow_tablemgmt.factories.discovery import load_factories

catalog = CatalogSpec(name="live", warehouse={warehouse!r})
spec = parse_table({{"catalog": "live", "namespace": "db", "name": "events",
                    "actions": {{"rewrite-files": {{"poll-interval": "2s", "interval": "1 minute"}}}}}})
asset = table_asset(spec, catalog, event_plans(spec, load_factories()))
with DAG(dag_id={dag_id!r}, schedule=asset, start_date=START_DATE, catchup=False,
         is_paused_upon_creation=False) as dag:
    EmptyOperator(task_id="start")
"""


@pytest.fixture
def deployment(tmp_path: Path) -> Any:
    dep = local_deployment(
        tmp_path / "airflow",
        AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="1",
        AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC="1",
        AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC="1",
    )
    try:
        yield dep
    finally:
        dep.stop()


def remembered(dep: AirflowDeployment) -> int | None:
    rows = dep.query("SELECT value FROM asset_state_store WHERE key = :key", key=STATE_KEY)
    if not rows:
        return None
    value = rows[0][0]
    state = json.loads(value) if isinstance(value, str) else value
    sid = (state.get("rewrite-files") or {}).get("snapshot_id")
    return None if sid is None else int(sid)


def trigger_events(dep: AirflowDeployment) -> list[tuple[int, int | None]]:
    """(snapshot_id, previous_snapshot_id) of every asset event the watcher raised, in order."""
    events = []
    for (extra,) in dep.query("SELECT extra FROM asset_event ORDER BY id"):
        data = json.loads(extra) if isinstance(extra, str) else extra
        payload = (data or {}).get("payload") or {}
        if (data or {}).get("from_trigger") and payload.get("table") == TABLE:
            events.append((int(payload["snapshot_id"]), payload.get("previous_snapshot_id")))
    return events


def asset_runs(dep: AirflowDeployment) -> int:
    return dep.query(
        "SELECT count(*) FROM dag_run WHERE dag_id = :d AND run_type = 'asset_triggered'", d=DAG_ID
    )[0][0]


def restart_triggerer(dep: AirflowDeployment) -> int:
    """Stop the triggerer (as a deployment does: SIGTERM) if it runs, start it; the log offset where
    the new one begins."""
    proc = dep.procs.get("triggerer")
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    since = dep.log("triggerer").stat().st_size if dep.log("triggerer").exists() else 0
    dep.start("triggerer", "triggerer")
    return since


def polling_since(dep: AirflowDeployment, since: int) -> bool | None:
    """The triggerer started at byte ``since`` of its log counts its watcher among those polling."""
    with dep.log("triggerer").open("rb") as f:
        f.seek(since)
        return (b"1 snapshot watchers have started polling" in f.read()) or None


@pytest.mark.on_demand(
    reason="tests/integration/triggers/test_watcher_startup.py covers the watcher's start-up orderings "
    "and tests/e2e/test_real_scheduler.py a commit's run under a real triggerer"
)
@pytest.mark.timeout(900)
def test_a_commit_while_the_triggerer_is_down_starts_one_run_and_restarts_report_nothing_twice(
    deployment: AirflowDeployment, tmp_path: Path
) -> None:
    dep = deployment
    try:
        migrate = subprocess.Popen(
            [str(BIN / "airflow"), "db", "migrate"],
            env=dep.env,
            stdout=dep.log("db-migrate").open("wb"),
            stderr=subprocess.STDOUT,
        )
        table = make_table(tmp_path / "wh", TABLE, files=2, rows=100)
        (dep.home / "dags" / "watch_dags.py").write_text(
            DAG_FILE.format(warehouse=str(table.warehouse), dag_id=DAG_ID)
        )
        assert migrate.wait(timeout=300) == 0, dep.log("db-migrate").read_text()[-3000:]
        dep.start("api-server", "api-server", "--port", str(dep.api_port), "--host", "127.0.0.1")
        dep.start("dag-processor", "dag-processor")
        dep.start("scheduler", "scheduler")
        restart_triggerer(dep)
        start = read_state(table.metadata_dir).snapshot_id

        def first_observation() -> int | None:
            dep.check_alive()
            return remembered(dep)

        assert _wait_for("the watcher's first observation", first_observation, timeout=300) == start
        assert trigger_events(dep) == []

        # Down: stop the triggerer, commit, start it again.
        proc = dep.procs["triggerer"]
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        _, while_down = _commit_snapshot(table.warehouse, dep.home / "logs" / "commit1.log")
        restart_triggerer(dep)

        def reported(n: int) -> list[tuple[int, int | None]] | None:
            dep.check_alive()
            events = trigger_events(dep)
            return events if len(events) >= n and asset_runs(dep) >= n else None

        assert _wait_for("the missed commit's event and run", lambda: reported(1), timeout=300) == [
            (while_down, start)
        ]
        _wait_for("the watcher to remember it", lambda: remembered(dep) == while_down or None, timeout=120)

        # Restarted with nothing new: polling again from the remembered snapshot; then one more commit
        # is reported against it, and the one before is not reported again.
        since = restart_triggerer(dep)
        _wait_for("the restarted watcher's first poll", lambda: polling_since(dep, since), timeout=300)
        _, after = _commit_snapshot(table.warehouse, dep.home / "logs" / "commit2.log")
        assert _wait_for("the next commit's event and run", lambda: reported(2), timeout=300) == [
            (while_down, start),
            (after, while_down),
        ]
        assert asset_runs(dep) == 2
    except BaseException:
        dep.print_log_tails(40)
        raise
