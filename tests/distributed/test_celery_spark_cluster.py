"""The production topology, tested: CeleryExecutor, PostgreSQL, a Spark standalone cluster, an Iceberg
REST catalog on S3.

Native processes on this machine mirror docker/docker-compose.yaml and read the same settings file
(docker/airflow.env): Airflow's metadata DB and the tablemgmt store on PostgreSQL (databases made for
the run and dropped after it), the CeleryExecutor with Redis as broker and a ``db+postgresql`` result
backend, a separate api-server, scheduler, dag-processor and triggerer, two celery workers, and a Spark
standalone master and worker started from pyspark's ``spark-class``; ``spark_default`` points at
``spark://127.0.0.1:<port>`` (client deploy mode). The tables live in Iceberg's reference REST catalog
server (tests/support/servers.py) whose warehouse is on SeaweedFS's S3 gateway, as in
docker/docker-compose.yaml: no component shares a directory with another; the S3 keys reach the workers as
``env:`` references. The table is written by Spark through the REST catalog; every effect is read back
through the catalog with pyiceberg. Runs go through the REST API's run-now, as a user's would. Faults: kill -9 of the celery worker running a compaction; the Spark worker stopped mid-job.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from tests.distributed import timing_policy
from tests.distributed.cluster import (
    CeleryDeployment,
    PgDatabases,
    SparkStandalone,
    overlapping,
    wait_for,
)
from tests.e2e.conftest import BIN, ROOT
from tests.e2e.test_real_scheduler import _free_port
from tests.integration.iceberg_session import skip_unless_ci
from tests.support.catalogs import S3_REFS, s3_properties, scan, table_state
from tests.support.servers import ACCESS_KEY, SECRET_KEY, IcebergRestServer, SeaweedS3

pytestmark = [pytest.mark.distributed, pytest.mark.e2e]

TABLE = "dist.db.events"
ACTION = "rewrite-files"
DAG_ID = f"tms__{TABLE}__{ACTION}"
APP_PREFIX = f"tms-{ACTION}-{TABLE}"
POOL = "maintenance"
DYNAMIC = "dist.db.daily"  # a dynamic table over TABLE; its refresh DAG runs its latest daily point at once
REFRESH_DAG_ID = f"tms__{DYNAMIC}__refresh"

# Runs start only through run-now: a yearly cron with no immediate run, no gate task (rewrite-all
# gives every run work to do). Retries come 5 s after a failure; the lease wait outlasts a lost
# worker's lease (30 s TTL here: timing_policy.py; 2 min by default).
TABLES_YAML = """
version: 1
catalogs:
  - name: dist
    type: rest
    properties: {properties}
tables:
  - catalog: dist
    namespace: db
    name: events
    owner: platform
    queue: {pool}
    actions:
      rewrite-files:
        trigger: schedule
        interval: "0 0 1 1 *"
        on-new-snapshot: false
        min-input-files: 2
        rewrite-all: true
        retries: 2
        retry-delay: 5s
        lease-wait: 10m
dynamic-tables:
  - identifier: {dynamic}
    query: SELECT day, count(*) AS events, sum(amount) AS amount FROM dist.db.events GROUP BY day
    freshness: 1 DAY
"""

# Timing only, for a test that must finish in minutes; every other setting is docker/airflow.env's.
# Also timing only: the operators' heartbeat, stale-after, lease TTL and lease poll (an Airflow cluster
# policy, timing_policy.py, installed as the deployment's airflow_local_settings.py).
TEST_TIMING = {
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "20",
    "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "2",
    "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
    "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
}

# How long a job without executors may wait before its attempt must have failed.
STARVED_S = 180

NOT_DONE = ("queued", "scheduled", "running", "deferred", "up_for_retry", "up_for_reschedule", "restarting")


# The S3 key pair the catalog's env: references name (tests/support/catalogs.S3_REFS), exported into
# every Airflow component's environment and this process's (the test reads tables through the catalog).
S3_ENV = {S3_REFS["s3.access-key-id"][4:]: ACCESS_KEY, S3_REFS["s3.secret-access-key"][4:]: SECRET_KEY}

# The Connect engine (docs/spark-connect.md) for one table only: its connection names a port picked now; the
# server (the compose file's `spark-connect`, against the standalone cluster) starts in the test that uses it.
CONNECT_TABLE = "dist.db.viaconnect"
CONNECT_DAG_ID = f"tms__{CONNECT_TABLE}__{ACTION}"
CONNECT_TABLE_YAML = """
  - catalog: dist
    namespace: db
    name: viaconnect
    owner: platform
    queue: {pool}
    actions:
      rewrite-files:
        trigger: schedule
        interval: "0 0 1 1 *"
        on-new-snapshot: false
        min-input-files: 2
        rewrite-all: true
        retries: 1
        retry-delay: 5s
dynamic-tables:"""


def _connect_settings(port: int) -> dict[str, str]:
    return {
        "AIRFLOW_CONN_SPARK_CONNECT_DIST": json.dumps(
            {"conn_type": "spark_connect", "host": "sc://127.0.0.1", "port": port}
        ),
        "AIRFLOW__TABLEMGMT__SPARK_CONNECT_CONN_ID": "spark_connect_dist",
        "AIRFLOW__TABLEMGMT__SPARK_CONNECT_TABLES": CONNECT_TABLE,
    }


@dataclass
class Cluster:
    spark: SparkStandalone
    airflow: CeleryDeployment
    catalog: CatalogSpec
    s3: SeaweedS3
    timings: dict[str, float]
    initial: Any  # the table as made, before any maintenance
    connect_port: int
    tables_yaml: str

    def state(self, table_id: str = TABLE) -> Any:
        """The table read back through the REST catalog (pyiceberg): files, records, checksum, snapshot."""
        return table_state(self.catalog, table_id)

    def store(self) -> Any:
        from airflow_tablemgmt.store import Store

        return Store.for_url(self.airflow.store_url)

    def process(self, run_id: str) -> Any:
        [p] = [p for p in self.store().processes.list(table_id=TABLE, action=ACTION) if p.run_id == run_id]
        return p

    def task(self, run_id: str) -> tuple[str, int, int | None] | None:
        rows = self.airflow.dep.query(
            "SELECT state, try_number, pid FROM task_instance WHERE dag_id = :d AND run_id = :r AND task_id = 'maintain'",
            d=DAG_ID,
            r=run_id,
        )
        return (str(rows[0][0]), int(rows[0][1]), rows[0][2]) if rows else None

    def run_state(self, run_id: str) -> str | None:
        return self.run_state_of(DAG_ID, run_id)

    def run_state_of(self, dag_id: str, run_id: str) -> str | None:
        rows = self.airflow.dep.query(
            "SELECT state FROM dag_run WHERE dag_id = :d AND run_id = :r", d=dag_id, r=run_id
        )
        return str(rows[0][0]) if rows else None

    def wait_run(self, run_id: str, timeout: float) -> str:
        def done() -> str | None:
            self.airflow.dep.check_alive()
            state = self.run_state(run_id)
            return state if state in ("success", "failed") else None

        return str(wait_for(f"dag run {run_id} to finish", done, timeout))

    def xcom(self, run_id: str) -> Any:
        rows = self.airflow.dep.query(
            "SELECT value FROM xcom WHERE dag_id = :d AND run_id = :r AND task_id = 'maintain' AND key = 'return_value'",
            d=DAG_ID,
            r=run_id,
        )
        assert len(rows) == 1, rows
        value = rows[0][0]
        return json.loads(value) if isinstance(value, (str, bytes)) else value

    def assert_nothing_stuck(self) -> None:
        tis = self.airflow.dep.query(
            "SELECT run_id, task_id, state FROM task_instance WHERE dag_id = :d AND state IN :s",
            d=DAG_ID,
            s=NOT_DONE,
        )
        assert tis == [], f"task instances not finished: {tis}"
        open_ = [p for p in self.store().processes.list(table_id=TABLE) if not p.status.is_terminal]
        assert open_ == [], f"processes not terminal: {open_}"
        assert self.store().leases.get(TABLE) is None or self.store().leases.get(TABLE).expired(
            self.store().leases.now()
        ), f"lease still held: {self.store().leases.get(TABLE)}"
        active = [a for a in self.spark.status().get("activeapps", []) if a["name"].startswith(APP_PREFIX)]
        assert active == [], active


def _instant(n: int) -> str:
    """A run-now instant: no cron point of the DAG's schedule."""
    return f"2026-02-0{n}T00:00:00+00:00"


def _tablemgmt(airflow: CeleryDeployment, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "tablemgmt"), *args], env=airflow.dep.env, capture_output=True, text=True, timeout=300
    )


def _pool_set(airflow: CeleryDeployment) -> None:
    res = airflow.dep.cli("pools", "set", POOL, "4", "table maintenance", timeout=180)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]


def _write_table(
    catalog: CatalogSpec, env: dict[str, str], table: str = TABLE
) -> subprocess.CompletedProcess[str]:
    """The table written by Spark (local) through the REST catalog, as scripts/demo_table.py writes the demo's."""
    return subprocess.run(
        [
            str(BIN / "python"),
            "-m",
            "tests.distributed.catalog_table",
            "--catalog",
            catalog.model_dump_json(),
            "--table",
            table,
            "--files",
            "16",
            "--rows",
            "8000",
        ],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if not _reachable(6379):
        skip_unless_ci("Redis is not reachable at 127.0.0.1:6379 (start it with `make services`)")
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    tmp = tmp_path_factory.mktemp("distributed")
    saved_env = {k: os.environ.get(k) for k in S3_ENV}
    os.environ.update(S3_ENV)
    pg = PgDatabases.create("airflow", "store")
    s3 = SeaweedS3(tmp / "s3")
    rest = IcebergRestServer(tmp / "rest", s3)
    # One core per application: the scheduled compaction and the dynamic table's first refresh start
    # together, and each gets an executor on the 2-core worker at once instead of the second waiting
    # for the first to end (on a loaded machine, past the executor watchdog's 60 s).
    spark = SparkStandalone(tmp / "spark", app_cores=1)
    connect_port = _free_port()
    airflow = CeleryDeployment.create(
        tmp / "airflow", pg, spark.url, overrides={**TEST_TIMING, **S3_ENV, **_connect_settings(connect_port)}
    )
    (airflow.dep.home / "config").mkdir()
    shutil.copy(timing_policy.__file__, airflow.dep.home / "config" / "airflow_local_settings.py")
    made: dict[str, Any] = {}

    def storage_and_table() -> None:
        # SeaweedFS, the REST catalog server on it, then the table written by Spark through the catalog.
        s3.start()
        rest.start()
        catalog = CatalogSpec(
            name="dist", type=CatalogType.REST, properties={"uri": rest.uri, **s3_properties(s3)}
        )
        made["catalog"] = catalog
        made["storage up"] = time.monotonic() - t0
        made["table"] = _write_table(catalog, S3_ENV)

    try:
        spark.start_master()
        spark.start_worker()
        # The storage, catalog and table, the store's schema and Airflow's DB migration are made side by side.
        side = [
            threading.Thread(target=storage_and_table),
            threading.Thread(target=lambda: made.update(store=_tablemgmt(airflow, "db", "upgrade"))),
        ]
        for t in side:
            t.start()
        migrate = airflow.dep.cli("db", "migrate", timeout=600)
        assert migrate.returncode == 0, migrate.stdout[-3000:] + migrate.stderr[-3000:]
        timings["airflow db migrate"] = time.monotonic() - t0
        airflow.start_services(workers=2)
        _pool_set(airflow)
        for t in side:
            t.join(timeout=600)
        assert made["store"].returncode == 0, made["store"].stderr[-3000:]
        assert "catalog" in made, "SeaweedFS or the REST catalog server did not start (see the log above)"
        assert made["table"].returncode == 0, made["table"].stdout[-2000:] + made["table"].stderr[-3000:]
        catalog = made["catalog"]
        timings["S3 + REST catalog up"] = made["storage up"]
        timings["table, store, pool"] = time.monotonic() - t0
        spark.wait_for_workers(1)
        airflow.wait_ready()
        timings["services up"] = time.monotonic() - t0
        # Declared once every component is up: the DAG's first scheduled run (catchup=False runs the
        # latest cron point at once) is the first compaction, and it finds the execution API serving.
        before = table_state(catalog, TABLE)
        dags = airflow.dep.home / "dags"
        tables_yaml = TABLES_YAML.format(
            properties=json.dumps(catalog.properties), pool=POOL, dynamic=DYNAMIC
        )
        (dags / "tables.yaml").write_text(tables_yaml)
        shutil.copy(ROOT / "dags" / "tablemgmt_dags.py", dags / "tablemgmt_dags.py")
        airflow.wait_dag(DAG_ID)
        timings["DAG registered"] = time.monotonic() - t0
        yield Cluster(spark, airflow, catalog, s3, timings, before, connect_port, tables_yaml)
    except BaseException:
        _print_logs(airflow, spark)
        for log in (tmp / "s3" / "weed.log", tmp / "rest" / "rest.log"):
            if log.exists():
                print(
                    f"\n===== {log.name} (last 20) =====\n"
                    + "\n".join(log.read_text(errors="replace").splitlines()[-20:])
                )
        raise
    finally:
        airflow.stop()
        spark.stop()
        rest.stop()
        s3.stop()
        pg.drop()
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        print("\ndistributed timings: " + ", ".join(f"{k}: {v:.0f} s" for k, v in timings.items()))


def _reachable(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _print_logs(airflow: CeleryDeployment, spark: SparkStandalone, lines: int = 40) -> None:
    airflow.dep.print_log_tails(lines)
    for path in sorted((spark.root / "logs").glob("*.log")):
        text = path.read_text(errors="replace").splitlines()
        print(f"\n===== spark {path.name} (last {lines}) =====\n" + "\n".join(text[-lines:]))


def _on_failure_logs(cluster: Cluster) -> Any:
    class _Guard:
        def __enter__(self) -> None:
            return None

        def __exit__(self, exc_type: Any, *_: Any) -> bool:
            if exc_type is not None and not exc_type.__module__.startswith("_pytest"):
                _print_logs(cluster.airflow, cluster.spark)
            return False

    return _Guard()


def _wait_running_on_cluster(
    cluster: Cluster, run_id: str, timeout: float = 240
) -> tuple[Any, dict[str, Any]]:
    """The process RUNNING with its application id, and that application RUNNING on the master."""

    def running() -> tuple[Any, dict[str, Any]] | None:
        cluster.airflow.dep.check_alive()
        try:
            p = cluster.process(run_id)
        except ValueError:
            return None
        if p.status.is_terminal:
            raise AssertionError(
                f"process ended before it could be interrupted: {p.status} {p.failure_reason}"
            )
        if str(p.status) != "RUNNING" or not p.external_id:
            return None
        apps = [a for a in cluster.spark.status().get("activeapps", []) if a["id"] == p.external_id]
        return (p, apps[0]) if apps and apps[0].get("state") == "RUNNING" else None

    return wait_for(f"process of {run_id} running on {cluster.spark.url}", running, timeout, every=0.2)  # type: ignore[no-any-return]


@pytest.mark.timeout(900)
def test_rewrite_files_runs_on_the_spark_cluster(cluster: Cluster) -> None:
    t0 = time.monotonic()
    before = cluster.initial
    with _on_failure_logs(cluster):

        def first_run() -> str | None:
            rows = cluster.airflow.dep.query(
                "SELECT run_id FROM dag_run WHERE dag_id = :d ORDER BY id", d=DAG_ID
            )
            return str(rows[0][0]) if rows else None

        run_id = wait_for("the DAG's first scheduled run", first_run, timeout=120)
        assert run_id.startswith("scheduled__"), run_id
        assert cluster.wait_run(run_id, timeout=300) == "success"
        process = cluster.process(run_id)
        # The REST API serves the process the scheduler's run recorded.
        assert cluster.airflow.get(f"/tablemgmt/v1/processes/{process.id}")["status"] == "SUCCESS"
    after = cluster.state()
    cluster.timings["happy path"] = time.monotonic() - t0

    assert (str(process.status), process.attempt, process.dag_id) == ("SUCCESS", 1, DAG_ID)
    # The application ran on the standalone cluster, and the master lists it as finished.
    apps = cluster.spark.applications(APP_PREFIX)
    [app] = [a for a in apps if a["id"] == process.external_id]
    assert app["state"] == "FINISHED", app
    assert app["name"].startswith(APP_PREFIX), app["name"]
    assert process.external_id.startswith("app-"), process.external_id  # a standalone id, not local-*
    # The summary is the task's XCom, and the table's data is what it was.
    assert cluster.xcom(run_id) == json.loads(json.dumps(process.summary, default=str))
    summary = process.summary
    assert summary["before"]["data_files"] == before.data_files >= 16
    assert summary["after"]["data_files"] == after.data_files < before.data_files
    assert summary["before"]["live_records"] == summary["after"]["live_records"] == before.records
    assert (after.records, after.checksum) == (before.records, before.checksum)
    assert after.snapshot_id != before.snapshot_id
    [row] = [p for p in cluster.store().processes.list(table_id=TABLE, action=ACTION) if p.run_id == run_id]
    assert row.id == process.id
    cluster.assert_nothing_stuck()


@pytest.mark.timeout(600)
def test_dynamic_table_refresh_runs_on_the_spark_cluster(cluster: Cluster) -> None:
    import pyarrow.compute as pc

    with _on_failure_logs(cluster):
        cluster.airflow.wait_dag(REFRESH_DAG_ID)

        def refreshed() -> str | None:
            rows = cluster.airflow.dep.query(
                "SELECT run_id, state FROM dag_run WHERE dag_id = :d ORDER BY id", d=REFRESH_DAG_ID
            )
            return str(rows[0][0]) if rows and rows[0][1] in ("success", "failed") else None

        run_id = wait_for("the dynamic table's first refresh", refreshed, timeout=420, every=2)
        assert cluster.run_state_of(REFRESH_DAG_ID, run_id) == "success"
    [process] = [
        p for p in cluster.store().processes.list(table_id=DYNAMIC, action="refresh") if p.run_id == run_id
    ]
    assert str(process.status) == "SUCCESS", process
    [app] = [a for a in cluster.spark.applications() if a["id"] == process.external_id]
    assert app["state"] == "FINISHED", app

    def read(table_id: str) -> Any:
        return scan(cluster.catalog, table_id)  # through the REST catalog, from S3

    # The dynamic table holds its query's answer over the source table (compactions change no row).
    source = read(TABLE).group_by("day").aggregate([("id", "count"), ("amount", "sum")]).sort_by("day")
    daily = read(DYNAMIC).sort_by("day")
    assert daily.column("day").to_pylist() == source.column("day").to_pylist()
    assert daily.column("events").to_pylist() == source.column("id_count").to_pylist()
    assert pc.all(
        pc.less(pc.abs(pc.subtract(daily.column("amount"), source.column("amount_sum"))), 1e-6)
    ).as_py()


@pytest.mark.on_demand(
    reason="a fault scenario on the cluster (≈ 3 min on 2 busy cores); CI kills workers on one host: "
    "faults/test_kill9.py (kill -9 of the worker or its driver, nothing lost, the retry recovers) and "
    "e2e/test_operator_worker_death.py (a killed worker takes its job with it)"
)
@pytest.mark.timeout(900)
def test_killed_celery_worker_compaction_is_retried_on_the_other_worker(cluster: Cluster) -> None:
    t0 = time.monotonic()
    before = cluster.state()
    with _on_failure_logs(cluster):
        started = cluster.airflow.run_now(TABLE, ACTION, _instant(2))
        run_id = started["run_id"]
        process, app = _wait_running_on_cluster(cluster, run_id)
        state, try_number, pid = cluster.task(run_id) or ("?", 0, None)
        assert (state, try_number) == ("running", 1) and pid, (state, try_number, pid)
        # The deployment's timing policy is in force: the lease the killed worker leaves lapses within
        # timing_policy.LEASE_TTL of its last renewal (not the default 2 min).
        store = cluster.store()
        lease = store.leases.get(TABLE)
        assert lease is not None and lease.expires_at - store.leases.now() <= timing_policy.LEASE_TTL, lease
        victim = cluster.airflow.worker_of(int(pid))
        assert victim is not None, f"task process {pid} belongs to none of {cluster.airflow.workers}"
        survivor = next(w for w in cluster.airflow.workers if w != victim)
        cluster.airflow.kill_worker(victim, task_pid=int(pid))
        killed_at = time.monotonic()

        # The retry must run on the surviving worker: watch the task's process while it runs.
        ran_on: dict[int, str] = {}

        def finished() -> str | None:
            task = cluster.task(run_id)
            if task and task[0] == "running" and task[2]:
                owner = cluster.airflow.worker_of(int(task[2]))
                if owner:
                    ran_on[task[1]] = owner
            state = cluster.run_state(run_id)
            return state if state in ("success", "failed") else None

        final = wait_for("the retried run to finish", finished, timeout=420, every=0.5)
        recovered_s = time.monotonic() - killed_at
    after = cluster.state()
    cluster.timings["kill -9 celery worker: kill -> success"] = recovered_s
    cluster.timings["kill -9 scenario"] = time.monotonic() - t0
    print(f"\nkilled {victim} running {app['id']}; retried on {ran_on}; recovered in {recovered_s:.0f} s")

    assert final == "success"
    rows = [p for p in cluster.store().processes.list(table_id=TABLE, action=ACTION) if p.run_id == run_id]
    assert len(rows) == 1, rows  # exactly one process for the instant, however many attempts
    done = rows[0]
    assert (str(done.status), done.id) == ("SUCCESS", process.id) == ("SUCCESS", started["process_id"])
    assert done.attempt >= 2, done
    state, try_number, _ = cluster.task(run_id) or ("?", 0, None)
    assert (state, try_number) == ("success", 2)
    assert ran_on.get(2) == survivor, ran_on
    # Never two Spark applications on the table at once: the killed one ended before the retry's began.
    apps = cluster.spark.applications(APP_PREFIX)
    assert overlapping(apps) == [], apps
    assert {a["id"] for a in apps} >= {app["id"], done.external_id}
    assert done.external_id != app["id"]
    assert cluster.xcom(run_id) == json.loads(json.dumps(done.summary, default=str))
    assert (after.records, after.checksum) == (before.records, before.checksum)
    cluster.assert_nothing_stuck()


@pytest.mark.on_demand(
    reason="a third cluster scenario (~170 s on 2 busy cores); the executor watchdog that fails the attempt is "
    "tests/unit/spark/job/test_watchdog.py, and the retry after a lost attempt is faults/test_kill9.py"
)
@pytest.mark.timeout(900)
def test_spark_worker_lost_mid_job_fails_naming_the_cluster_and_the_retry_succeeds(cluster: Cluster) -> None:
    t0 = time.monotonic()
    before = cluster.state()
    with _on_failure_logs(cluster):
        run_id = cluster.airflow.run_now(TABLE, ACTION, _instant(3))["run_id"]
        process, app = _wait_running_on_cluster(cluster, run_id)
        cluster.spark.stop_process("worker", signal.SIGKILL)
        stopped_at = time.monotonic()

        def first_attempt_failed() -> Any:
            p = cluster.process(run_id)
            return p if p.attempt >= 2 or str(p.status) in ("FAILED", "SUCCESS") else None

        # The job's executor watchdog (spark/job/watchdog.py) cancels it after 60 s without an executor.
        failed = wait_for("the first attempt to fail", first_attempt_failed, timeout=STARVED_S, every=1)
        fail_s = time.monotonic() - stopped_at
        failure = cluster.process(run_id).failure_reason or failed.failure_reason or ""
        cluster.spark.start_worker()
        cluster.spark.wait_for_workers(1)
        final = cluster.wait_run(run_id, timeout=420)
    after = cluster.state()
    cluster.timings["spark worker lost: stop -> attempt failed"] = fail_s
    cluster.timings["spark worker scenario"] = time.monotonic() - t0
    print(f"\nattempt 1 failed {fail_s:.0f} s after the worker stopped: {failure}")

    assert cluster.spark.url in failure, failure
    assert final == "success"
    done = cluster.process(run_id)
    assert (str(done.status), done.id) == ("SUCCESS", process.id)
    assert done.attempt >= 2
    assert overlapping(cluster.spark.applications(APP_PREFIX)) == []
    assert (after.records, after.checksum) == (before.records, before.checksum)
    cluster.assert_nothing_stuck()


@pytest.mark.on_demand(
    reason="a Spark Connect server's start-up on the cluster (> 60 s on 2 busy cores); "
    "tests/integration/connect covers the Connect engine on a local server in CI"
)
@pytest.mark.timeout(1200)
def test_compaction_runs_on_a_spark_connect_server_on_the_cluster(cluster: Cluster, tmp_path: Any) -> None:
    """The compose file's `spark-connect`: a Connect server whose jobs run on the standalone cluster; the
    Celery worker's task is its thin client (the table is selected by [tablemgmt] spark_connect_tables)."""
    from airflow_tablemgmt.spark.connect.server import server_spec, start_server, wait_for_port

    t0 = time.monotonic()
    spec = server_spec(
        port=cluster.connect_port,
        needs=("iceberg", "aws"),
        master=cluster.spark.url,
        conf={"spark.cores.max": "1", "spark.executor.cores": "1", "spark.driver.host": "127.0.0.1"},
    )
    log = tmp_path / "connect.log"
    server = start_server(spec, log, env=cluster.spark.env())
    made: dict[str, Any] = {}
    writer = threading.Thread(
        target=lambda: made.update(table=_write_table(cluster.catalog, S3_ENV, CONNECT_TABLE))
    )
    writer.start()
    try:
        with _on_failure_logs(cluster):
            wait_for_port("127.0.0.1", cluster.connect_port, 600, server)
            writer.join(timeout=600)
            assert made["table"].returncode == 0, made["table"].stderr[-3000:]
            before = cluster.state(CONNECT_TABLE)
            cluster.timings["connect: server up, table written"] = time.monotonic() - t0
            dags = cluster.airflow.dep.home / "dags"
            (dags / "tables.yaml").write_text(
                cluster.tables_yaml.replace("dynamic-tables:", CONNECT_TABLE_YAML.format(pool=POOL), 1)
            )
            cluster.airflow.wait_dag(CONNECT_DAG_ID)

            def finished() -> tuple[str, str] | None:
                cluster.airflow.dep.check_alive()
                rows = cluster.airflow.dep.query(
                    "SELECT run_id, state FROM dag_run WHERE dag_id = :d ORDER BY id", d=CONNECT_DAG_ID
                )
                return (
                    (str(rows[0][0]), str(rows[0][1]))
                    if rows and rows[0][1] in ("success", "failed")
                    else None
                )

            run_id, state = wait_for("the Connect table's first compaction", finished, timeout=600, every=2)
            assert state == "success", state
        cluster.timings["connect compaction"] = time.monotonic() - t0
        after = cluster.state(CONNECT_TABLE)
        [process] = [
            p
            for p in cluster.store().processes.list(table_id=CONNECT_TABLE, action=ACTION)
            if p.run_id == run_id
        ]
        assert str(process.status) == "SUCCESS", process
        import sqlalchemy as sa

        store_db = sa.create_engine(cluster.airflow.store_url, poolclass=sa.pool.NullPool)
        try:
            with store_db.connect() as conn:
                engine = conn.execute(
                    sa.text("SELECT engine FROM tms_process WHERE id = :i"), {"i": process.id}
                ).scalar()
        finally:
            store_db.dispose()
        assert str(engine).startswith("spark-connect"), engine
        # The job ran in the Connect server's application on the cluster, not in a spark-submit of its own.
        connect_apps = [
            a for a in cluster.spark.status().get("activeapps", []) if a["name"] == "tablemgmt-connect"
        ]
        assert connect_apps and connect_apps[0]["state"] == "RUNNING", cluster.spark.status().get(
            "activeapps"
        )
        assert cluster.spark.applications(f"tms-{ACTION}-{CONNECT_TABLE}") == []
        # The effect, read back through the REST catalog: fewer files, the same rows.
        assert after.data_files < before.data_files and before.data_files >= 16, (before, after)
        assert (after.records, after.checksum) == (before.records, before.checksum)
        assert after.snapshot_id != before.snapshot_id
        assert process.summary["after"]["data_files"] == after.data_files
    finally:
        writer.join(timeout=5)
        _stop_group_of(server)
        print(f"\nconnect server log: {log}")


def _stop_group_of(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
