"""The production topology as native processes: settings from docker/airflow.env, PostgreSQL databases
made for the run, a Spark standalone master and worker from pyspark's ``spark-class``, and an Airflow
deployment on the CeleryExecutor (api-server, scheduler, dag-processor, triggerer, N celery workers).

Used by tests/distributed/ and benchmarks/scale_out.py. Every process starts in its own process group
and is stopped by its PID (group) when the owner calls ``stop()``.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
import urllib.request
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tests.e2e.conftest import ROOT
from tests.e2e.test_real_scheduler import AirflowDeployment, _free_port, local_deployment

SETTINGS_FILE = ROOT / "docker" / "airflow.env"
PG_ADMIN_URL = os.environ.get(
    "TABLEMGMT_TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
)
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379

# The deployment-specific keys: set by whoever starts the components (compose's `environment:`, this
# module), never in docker/airflow.env. tests/distributed/test_compose_file.py holds compose to the same list.
ENDPOINT_KEYS = (
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN",
    "AIRFLOW__CELERY__BROKER_URL",
    "AIRFLOW__CELERY__RESULT_BACKEND",
    "AIRFLOW__CORE__EXECUTION_API_SERVER_URL",
    "AIRFLOW__API__BASE_URL",
    "AIRFLOW_CONN_SPARK_DEFAULT",
    "AIRFLOW_CONN_TABLEMGMT_DEFAULT",
)
SECRET_KEYS = ("AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY")


def read_settings(path: Path = SETTINGS_FILE) -> dict[str, str]:
    """``KEY=VALUE`` lines of an env file (``#`` comments and blank lines skipped, no interpolation:
    compose's env_file reads values as they are)."""
    settings: dict[str, str] = {}
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{path}:{n}: expected KEY=VALUE, got {raw!r}")
        settings[key.strip()] = value.strip()
    return settings


def generated_secrets() -> dict[str, str]:
    """The three values every component must share, made afresh for one deployment."""
    from cryptography.fernet import Fernet

    return {
        "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(32),
    }


def _get_json(url: str, timeout: float = 5) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def wait_for(what: str, probe: Any, timeout: float, every: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = probe()
        except (OSError, ValueError):
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def _stop_group(proc: subprocess.Popen[bytes], grace: float = 10) -> None:
    """SIGTERM the process group led by ``proc``, then SIGKILL whatever is left of it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


# -- PostgreSQL ------------------------------------------------------------------------------------


@dataclass
class PgDatabases:
    """Databases created for one run on the local server, dropped by ``drop()``."""

    names: dict[str, str]

    @classmethod
    def create(cls, *purposes: str) -> PgDatabases:
        import sqlalchemy as sa

        tag = uuid.uuid4().hex[:10]
        names = {p: f"tms_dist_{p}_{tag}" for p in purposes}
        engine = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
        try:
            with engine.connect() as conn:
                for name in names.values():
                    conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        finally:
            engine.dispose()
        return cls(names)

    def url(self, purpose: str, driver: str = "postgresql+psycopg2") -> str:
        import sqlalchemy as sa

        base = sa.engine.make_url(PG_ADMIN_URL)
        return base.set(drivername=driver, database=self.names[purpose]).render_as_string(hide_password=False)

    def drop(self) -> None:
        import sqlalchemy as sa

        engine = sa.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
        try:
            with engine.connect() as conn:
                for name in self.names.values():
                    conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        finally:
            engine.dispose()


# -- Spark standalone ------------------------------------------------------------------------------


@dataclass
class SparkStandalone:
    """A master and its workers, each ``spark-class`` in the foreground (the JVM is the process).

    ``app_cores``: the cores the master gives an application that does not ask for a number
    (``spark.deploy.defaultCores``); unset, an application takes every free core, and a second one
    waits for executors until the first ends.
    """

    root: Path
    app_cores: int | None = None
    port: int = field(default_factory=_free_port)
    ui_port: int = field(default_factory=_free_port)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        from airflow_tablemgmt.spark.launch.submit import submit_env

        return {**os.environ, **submit_env(), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}

    def _start(self, name: str, *args: str, env: dict[str, str] | None = None) -> None:
        from airflow_tablemgmt.spark.conf import spark_home

        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        out = (self.root / "logs" / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(
            [str(Path(spark_home()) / "bin" / "spark-class"), *args],
            env={**self.env(), **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        out.close()

    def start_master(self) -> None:
        opts = f"-Dspark.deploy.defaultCores={self.app_cores}" if self.app_cores else ""
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui_port),
            env={"SPARK_MASTER_OPTS": opts} if opts else None,
        )

    def start_worker(self, name: str = "worker", cores: int = 2, memory: str = "2g") -> None:
        work = self.root / name
        work.mkdir(parents=True, exist_ok=True)
        self._start(
            name,
            "org.apache.spark.deploy.worker.Worker",
            self.url,
            "--host",
            "127.0.0.1",
            "--cores",
            str(cores),
            "--memory",
            memory,
            "--webui-port",
            str(_free_port()),
            "--work-dir",
            str(work),
        )

    def stop_process(self, name: str, sig: int = signal.SIGTERM) -> None:
        proc = self.procs.pop(name)
        if sig == signal.SIGKILL:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        else:
            _stop_group(proc)

    def status(self) -> dict[str, Any]:
        """The master's JSON status page: workers, active and completed applications."""
        return _get_json(f"http://127.0.0.1:{self.ui_port}/json/")  # type: ignore[no-any-return]

    def wait_for_workers(self, count: int, timeout: float = 120) -> None:
        def alive() -> bool:
            self.check_alive()
            return sum(1 for w in self.status().get("workers", []) if w.get("state") == "ALIVE") >= count

        wait_for(f"{count} Spark worker(s) registered with {self.url}", alive, timeout)

    def applications(self, prefix: str = "") -> list[dict[str, Any]]:
        st = self.status()
        apps = [*st.get("activeapps", []), *st.get("completedapps", [])]
        return [a for a in apps if str(a.get("name", "")).startswith(prefix)]

    def check_alive(self) -> None:
        dead = {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}
        assert not dead, f"Spark processes exited early: {dead} (logs in {self.root / 'logs'})"

    def stop(self) -> None:
        for name in [n for n in self.procs if n != "master"] + [n for n in self.procs if n == "master"]:
            _stop_group(self.procs.pop(name))


def overlapping(apps: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Pairs of applications whose [start, end] intervals on the master overlap (``duration`` of a
    still-running application counts up to now)."""
    now_ms = time.time() * 1000
    spans = sorted(
        (
            int(a["starttime"]),
            int(a["starttime"]) + int(a.get("duration") or (now_ms - int(a["starttime"]))),
            a["id"],
        )
        for a in apps
    )
    return [(a[2], b[2]) for i, a in enumerate(spans) for b in spans[i + 1 :] if b[0] < a[1]]


# -- Airflow on the CeleryExecutor -----------------------------------------------------------------


@dataclass
class CeleryDeployment:
    """An AirflowDeployment (tests/e2e) whose settings come from docker/airflow.env, with PostgreSQL
    for Airflow's metadata and the tablemgmt store, Redis as broker, and celery workers."""

    dep: AirflowDeployment
    store_url: str
    workers: list[str] = field(default_factory=list)

    @classmethod
    def create(
        cls, home: Path, pg: PgDatabases, spark_master: str, *, overrides: dict[str, str] | None = None
    ) -> CeleryDeployment:
        base = local_deployment(home)  # ports, PATH, PYTHONPATH, dags folder: the e2e deployment's own
        api = f"http://127.0.0.1:{base.api_port}"
        store_url = pg.url("store")
        endpoints = {
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": pg.url("airflow"),
            "AIRFLOW__CELERY__BROKER_URL": f"redis://{REDIS_HOST}:{REDIS_PORT}/0",
            "AIRFLOW__CELERY__RESULT_BACKEND": pg.url("airflow", "db+postgresql+psycopg2"),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{api}/execution/",
            "AIRFLOW__API__BASE_URL": api,
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
                {"conn_type": "spark", "host": spark_master, "extra": {"deploy-mode": "client"}}
            ),
            "AIRFLOW_CONN_TABLEMGMT_DEFAULT": json.dumps(
                {"conn_type": "tablemgmt", "extra": {"dsn": store_url}}
            ),
        }
        assert set(endpoints) == set(ENDPOINT_KEYS)
        env = {
            **base.env,
            **read_settings(),
            **endpoints,
            **generated_secrets(),
            # This host only: free ports for the log servers, the driver reachable by the executors.
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port()),
            # A queue of its own: runs sharing this Redis never take each other's tasks.
            "AIRFLOW__OPERATORS__DEFAULT_QUEUE": f"tms-dist-{uuid.uuid4().hex[:8]}",
            "SPARK_LOCAL_IP": "127.0.0.1",
            **(overrides or {}),
        }
        env.pop("TABLEMGMT_STORE_URL", None)  # the connection above is the production path
        dep = replace(base, env=env, db_url=pg.url("airflow"))
        return cls(dep=dep, store_url=store_url)

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.dep.api_port}"

    def start_services(self, workers: int = 2, concurrency: int | None = None) -> None:
        d = self.dep
        d.start("api-server", "api-server", "--port", str(d.api_port), "--host", "127.0.0.1")
        d.start("scheduler", "scheduler")
        d.start("dag-processor", "dag-processor")
        d.start("triggerer", "triggerer")
        for i in range(workers):
            self.start_worker(f"worker-{chr(ord('a') + i)}", concurrency)

    def start_worker(self, name: str, concurrency: int | None = None) -> None:
        d = self.dep
        args = ["celery", "worker", "--celery-hostname", f"{name}@%h", "--pid", str(d.home / f"{name}.pid")]
        if concurrency is not None:
            args += ["--concurrency", str(concurrency)]
        saved = d.env
        d.env = {**saved, "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(_free_port())}
        try:
            d.start(name, *args)
        finally:
            d.env = saved
        self.workers.append(name)

    def wait_ready(self, timeout: float = 240) -> None:
        d = self.dep

        def api_up() -> bool:
            d.check_alive()
            _get_json(f"{self.api}/api/v2/monitor/health", timeout=2)
            return True

        wait_for("the api-server", api_up, timeout)

        def workers_ready() -> bool:
            d.check_alive()
            return all(" ready." in d.log(w).read_text(errors="replace") for w in self.workers)

        wait_for(f"celery workers {self.workers} ready", workers_ready, timeout)

    def wait_dag(self, dag_id: str, timeout: float = 180) -> None:
        d = self.dep

        def dag_active() -> bool:
            d.check_alive()
            rows = d.query("SELECT is_paused, is_stale FROM dag WHERE dag_id = :d", d=dag_id)
            return bool(rows) and rows[0] == (False, False)

        wait_for(f"{dag_id} registered and unpaused", dag_active, timeout)

    def token(self) -> str:
        return str(_get_json(f"{self.api}/auth/token")["access_token"])

    def get(self, path: str) -> Any:
        req = urllib.request.Request(f"{self.api}{path}", headers={"Authorization": f"Bearer {self.token()}"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())

    def run_now(self, table: str, action: str, instant: str) -> dict[str, Any]:
        req = urllib.request.Request(
            f"{self.api}/tablemgmt/v1/tables/{table}/actions/{action}/runs",
            data=json.dumps({"instant": instant}).encode(),
            headers={"Authorization": f"Bearer {self.token()}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]

    def worker_of(self, pid: int) -> str | None:
        """The celery worker that started ``pid`` (a task's process), found up its parent chain: the
        task supervisor puts the task process in a process group of its own, so its group is not the worker's."""
        leaders = {self.dep.procs[w].pid: w for w in self.workers if w in self.dep.procs}
        seen = 0
        while pid > 1 and seen < 32:
            if pid in leaders:
                return leaders[pid]
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return None
            pid = int(stat.rsplit(")", 1)[1].split()[1])  # field 4: ppid (after the parenthesised name)
            seen += 1
        return None

    def kill_worker(self, name: str, task_pid: int | None = None) -> None:
        """kill -9 a celery worker with everything it started, as if its host died: its process group
        (the worker and its pool) and, when given, the group of the task process ``task_pid`` (the task
        supervisor gives each task process a group of its own; spark-submit is in it)."""
        proc = self.dep.procs.pop(name)
        for target in ([os.getpgid(task_pid)] if task_pid else []) + [proc.pid]:
            try:
                os.killpg(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        proc.wait(timeout=10)
        self.workers.remove(name)

    def stop_worker(self, name: str) -> None:
        """Stop a celery worker gracefully (SIGTERM to its group, SIGKILL after the grace period)."""
        _stop_group(self.dep.procs.pop(name), grace=30)
        self.workers.remove(name)

    def task_groups(self) -> set[int]:
        """Process groups of the task processes the celery workers started (each has its own)."""
        groups: set[int] = set()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and self.worker_of(int(entry.name)) is not None:
                try:
                    groups.add(os.getpgid(int(entry.name)))
                except ProcessLookupError:
                    pass
        return groups - {self.dep.procs[w].pid for w in self.workers if w in self.dep.procs}

    def stop(self) -> None:
        tasks = self.task_groups()  # found before their workers are gone
        self.dep.stop()
        for group in tasks:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
