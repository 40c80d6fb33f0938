"""An event-driven table is maintained by a real Airflow deployment, with no manual trigger.

`dag.test()` runs tasks in-process and lets them reach Airflow's metadata DB; a real scheduler with
the LocalExecutor runs them through the Task SDK and the Execution API, where that is forbidden. This
test starts api-server, scheduler, dag-processor and triggerer against a fresh metadata DB,
declares one table with ``rewrite-files`` (snapshot-driven, so event-triggered by default), commits a
snapshot, and waits for the asset watcher -> asset-triggered run -> gate -> Spark rewrite -> SUCCESS
process in our store; then checks that the rewrite's own commit does not start another run.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.e2e.conftest import BIN, ROOT, make_table
from tests.e2e.iceberg_reads import read_state

pytestmark = pytest.mark.e2e

TABLE = "live.db.events"
ACTION = "rewrite-files"
DAG_ID = f"tms__{TABLE}__{ACTION}"
# One watcher per table: every event-driven action's remembered snapshot lives in one JSON value.
STATE_KEY = f"tablemgmt.watch.{TABLE}"

TABLES_YAML = """
version: 1
catalogs:
  - {{name: live, type: hadoop, warehouse: {warehouse}}}
tables:
  - catalog: live
    namespace: db
    name: events
    owner: e2e-team
    actions:
      rewrite-files: {{min-input-files: 2}}  # the default poll-interval: the shared per-catalog check
"""

COMMIT_SNAPSHOT = """
import json, sys, time
sys.path.insert(0, {scripts!r})
from demo_table import spark_session
spark = spark_session({warehouse!r}, "live")
spark.sql("SELECT 1").collect()  # JVM and catalog warm before the clock matters
spark.sql(
    "INSERT INTO live.db.events SELECT 900000 + id, current_timestamp(), current_date(), 1, 'view', 1.0 "
    "FROM range(10)"
)
committed = time.time()
sid = spark.sql("SELECT snapshot_id FROM live.db.events.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
print(json.dumps({{"committed_at": committed, "snapshot_id": sid}}))
spark.stop()
"""

T = TypeVar("T")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(what: str, probe: Callable[[], T | None], timeout: float, every: float = 1.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


@dataclass
class AirflowDeployment:
    """api-server + scheduler + dag-processor + triggerer in their own process groups."""

    home: Path
    env: dict[str, str]
    db_url: str
    api_port: int
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def log(self, name: str) -> Path:
        return self.home / "logs" / f"{name}.log"

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "airflow"), *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def start(self, name: str, *args: str) -> None:
        out = self.log(name).open("ab")
        self.procs[name] = subprocess.Popen(
            [str(BIN / "airflow"), *args],
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # own process group: teardown reaches the executor's workers too
        )
        out.close()

    def check_alive(self) -> None:
        dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
        assert not dead, f"Airflow services exited early: {dead}"

    def query(self, sql: str, **params: Any) -> list[tuple[Any, ...]]:
        import sqlalchemy as sa

        engine = sa.create_engine(self.db_url, poolclass=sa.pool.NullPool)
        try:
            with engine.connect() as conn:
                return [tuple(r) for r in conn.execute(sa.text(sql), params).fetchall()]
        finally:
            engine.dispose()

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        for p in self.procs.values():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:  # the group may outlive its leader (executor workers, spark-submit)
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=10)

    def print_log_tails(self, lines: int = 60) -> None:
        for path in sorted((self.home / "logs").glob("*.log")):
            text = path.read_text(errors="replace").splitlines()
            print(f"\n===== {path.name} (last {lines} of {len(text)} lines) =====")
            print("\n".join(text[-lines:]))
        for path in sorted((self.home / "logs").rglob("*.log")):
            if path.parent != self.home / "logs" and "dag_id=" in str(path):
                text = path.read_text(errors="replace").splitlines()
                print(f"\n===== task log {path.relative_to(self.home)} (last {lines}) =====")
                print("\n".join(text[-lines:]))


def _base_env() -> dict[str, str]:
    # The test process's own Airflow settings (tests/conftest.py) must not leak into the deployment.
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_", "AIRFLOW_HOME", "TABLEMGMT_", "_AIRFLOW"))
    }


def local_deployment(home: Path, **settings: str) -> AirflowDeployment:
    """A LocalExecutor deployment under ``home`` (SQLite metadata DB, its own port and JWT secret, DAGs
    unpaused, examples off); ``settings`` add or override environment entries. Shared by the e2e tests
    and the benchmarks that start a real scheduler, so they cannot drift apart."""
    (home / "logs").mkdir(parents=True)
    (home / "dags").mkdir()
    # SQLite: Airflow 3.3 accepts it with the LocalExecutor, and a PostgreSQL metadata DB would also
    # need an async driver (asyncpg) that this environment does not install.
    db_url = f"sqlite:///{home / 'airflow.db'}"
    api_port = _free_port()
    env = {
        **_base_env(),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{api_port}",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "TABLEMGMT_STORE_URL": f"sqlite:///{home / 'tablemgmt.db'}",
        **settings,
    }
    return AirflowDeployment(home=home, env=env, db_url=db_url, api_port=api_port)


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[AirflowDeployment]:
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


def _utc(value: datetime | str) -> datetime:
    """A dag_run timestamp as read by plain SQL (SQLite hands back text)."""
    dt = datetime.fromisoformat(value) if isinstance(value, str) else value
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _runs_with_tasks(dep: AirflowDeployment) -> list[tuple[str, str, dict[str, str]]]:
    runs = dep.query("SELECT run_id, run_type, state FROM dag_run WHERE dag_id = :d ORDER BY id", d=DAG_ID)
    return [
        (
            run_type,
            state,
            dict(
                dep.query(
                    "SELECT task_id, state FROM task_instance WHERE dag_id = :d AND run_id = :r",
                    d=DAG_ID,
                    r=rid,
                )
            ),
        )
        for rid, run_type, state in runs
    ]


def _commit_snapshot(warehouse: Path, log: Path) -> tuple[float, int]:
    code = COMMIT_SNAPSHOT.format(scripts=str(ROOT / "scripts"), warehouse=str(warehouse))
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": str(ROOT)},
    )
    log.write_text(res.stdout + "\n" + res.stderr)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    return float(out["committed_at"]), int(out["snapshot_id"])


@pytest.mark.timeout(420)
def test_event_driven_table_is_maintained_by_real_scheduler(
    deployment: AirflowDeployment, tmp_path: Path
) -> None:

    t0 = time.monotonic()
    dep = deployment
    try:
        _run_scenario(dep, tmp_path, t0)
    except BaseException:
        dep.print_log_tails()
        raise
    print(f"total: {time.monotonic() - t0:.1f} s")


def _run_scenario(dep: AirflowDeployment, tmp_path: Path, t0: float) -> None:
    from airflow_tablemgmt.core.process import ProcessStatus
    from airflow_tablemgmt.store import Store

    migrate = subprocess.Popen(
        [str(BIN / "airflow"), "db", "migrate"],
        env=dep.env,
        stdout=dep.log("db-migrate").open("wb"),
        stderr=subprocess.STDOUT,
    )
    table = make_table(tmp_path / "wh", TABLE, files=20, rows=2000)
    (dep.home / "dags" / "tables.yaml").write_text(TABLES_YAML.format(warehouse=table.warehouse))
    (dep.home / "dags" / "tablemgmt_dags.py").write_bytes((ROOT / "dags" / "tablemgmt_dags.py").read_bytes())
    assert migrate.wait(timeout=300) == 0, dep.log("db-migrate").read_text()[-3000:]
    print(f"\nsetup (table + db migrate): {time.monotonic() - t0:.1f} s")

    dep.start("api-server", "api-server", "--port", str(dep.api_port), "--host", "127.0.0.1")
    dep.start("scheduler", "scheduler")
    dep.start("dag-processor", "dag-processor")
    dep.start("triggerer", "triggerer")

    def api_up() -> bool:
        dep.check_alive()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{dep.api_port}/api/v2/monitor/health", timeout=2):
                return True
        except OSError:
            return False

    _wait_for("the api-server", api_up, timeout=120)

    def dag_active() -> bool:
        dep.check_alive()
        rows = dep.query("SELECT is_paused, is_stale FROM dag WHERE dag_id = :dag_id", dag_id=DAG_ID)
        return bool(rows) and rows[0] == (False, False)

    _wait_for(f"{DAG_ID} registered and unpaused", dag_active, timeout=120)

    def watcher_recorded() -> Any:
        dep.check_alive()
        rows = dep.query("SELECT value FROM asset_state_store WHERE key = :key", key=STATE_KEY)
        if not rows:
            return None
        value = rows[0][0]
        state = json.loads(value) if isinstance(value, str) else value
        return (state.get("rewrite-files") or {}).get("snapshot_id")

    first_seen = _wait_for("the asset watcher's first observation", watcher_recorded, timeout=120)
    print(f"services up, watcher saw snapshot {first_seen}: {time.monotonic() - t0:.1f} s")

    # The time half of AssetOrTimeSchedule (the daily fallback) starts one run at once (catchup=False);
    # its rewrite commit is a ``replace`` snapshot, which the watcher records without an event. Let
    # it settle, so the run we measure is the one caused by our commit alone.
    def settled() -> int | None:
        dep.check_alive()
        runs = dep.query("SELECT id, state FROM dag_run WHERE dag_id = :dag_id", dag_id=DAG_ID)
        if not runs or any(state not in ("success", "failed") for _, state in runs):
            return None
        if dep.query("SELECT 1 FROM asset_dag_run_queue WHERE target_dag_id = :dag_id", dag_id=DAG_ID):
            return None
        if str(watcher_recorded()) != str(read_state(table.metadata_dir).snapshot_id):
            return None
        return max(run_id for run_id, _ in runs)

    def settled_twice() -> int | None:  # stable across 5 s: no watcher event still on its way
        first = settled()
        if first is None:
            return None
        time.sleep(5)
        return first if settled() == first else None

    last_run = _wait_for("startup runs to settle", settled_twice, timeout=180, every=2)
    print(f"startup runs settled: {time.monotonic() - t0:.1f} s")
    for run_type, state, tis in _runs_with_tasks(dep):
        print(f"  startup run: {run_type} {state} {tis}")

    committed_at, snapshot_id = _commit_snapshot(table.warehouse, dep.home / "logs" / "commit.log")
    print(f"committed snapshot {snapshot_id}: {time.monotonic() - t0:.1f} s")

    def asset_run() -> tuple[Any, ...] | None:
        dep.check_alive()
        rows = dep.query(
            "SELECT run_id, state, start_date, queued_at FROM dag_run WHERE dag_id = :dag_id "
            "AND run_type = 'asset_triggered' AND id > :last ORDER BY id",
            dag_id=DAG_ID,
            last=last_run,
        )
        # Queued after our commit (1 s slack for the commit-to-timestamp gap): not a late startup event.
        ours = [r for r in rows if _utc(r[3]).timestamp() >= committed_at - 1.0]
        return ours[0] if ours and ours[0][1] in ("success", "failed") else None

    run_id, state, start_date, queued_at = _wait_for(
        "the asset-triggered run to finish", asset_run, timeout=180
    )
    tis = dict(
        dep.query(
            "SELECT task_id, state FROM task_instance WHERE dag_id = :dag_id AND run_id = :run_id",
            dag_id=DAG_ID,
            run_id=run_id,
        )
    )
    assert (state, tis) == ("success", {"maintain": "success"}), tis  # the gate is maintain's start

    latency = _utc(start_date).timestamp() - committed_at
    print(
        f"event latency: {latency:.1f} s commit -> run start (queued after {_utc(queued_at).timestamp() - committed_at:.1f} s)"
    )
    assert latency < 120

    store = Store.for_url(dep.env["TABLEMGMT_STORE_URL"])
    processes = store.processes.list(table_id=TABLE, action=ACTION)
    [process] = [p for p in processes if p.run_id == run_id]
    assert process.status == ProcessStatus.SUCCESS, process
    assert process.dag_id == DAG_ID
    summary = process.summary
    assert summary["after"]["data_files"] < summary["before"]["data_files"], summary
    assert summary["before"]["live_records"] == summary["after"]["live_records"]

    # The rewrite committed a replace snapshot: the watcher records it (state store) and starts no run.
    rewritten = read_state(table.metadata_dir).snapshot_id
    assert rewritten != snapshot_id
    _wait_for("the watcher to record the rewrite", lambda: str(watcher_recorded()) == str(rewritten), 60)
    time.sleep(6)  # six more checks of the table at the default 1 s poll
    later = dep.query(
        "SELECT run_id, run_type FROM dag_run WHERE dag_id = :dag_id AND id > :last AND run_id != :ours",
        dag_id=DAG_ID,
        last=last_run,
        ours=run_id,
    )
    assert later == [], f"the maintenance commit started another run: {later}"
    queued = dep.query("SELECT 1 FROM asset_dag_run_queue WHERE target_dag_id = :dag_id", dag_id=DAG_ID)
    assert queued == []

    # The dag-processor's later parses took the table's DAGs from the cache of built DAGs (its
    # environment is stable from one parse to the next, so the cache key holds).
    parse_logs = "".join(
        p.read_text(errors="replace")
        for p in (dep.home / "logs" / "dag_processor").rglob("tablemgmt_dags.py.log")
    )
    hits = [
        int(m) for m in re.findall(r"tablemgmt DAG cache .*?: (\d+) table\(s\) from the cache", parse_logs)
    ]
    assert any(h >= 1 for h in hits), f"no parse used the DAG cache: {hits}"
