"""Workers for the fault scenarios: stand-ins for spark-submit that the test steers, and real worker
processes.

Most scenarios are about the lifecycle (who may run, who may write the process row), so the store,
:class:`~airflow_tablemgmt.lifecycle.ProcessRunner`, its heartbeat thread and the leases are the real
ones; only the Spark job is replaced by :class:`SteeredJob`, which records a *commit* on the shared
:class:`CommitLog` when it finishes without having been killed — what a real Spark application would
have committed to the table.

The scenarios that freeze or kill a worker run it as a process of its own instead
(``worker_main.py``: what `tablemgmt run` does, real spark-submit) with :func:`start_worker` /
:func:`run_worker`, on either store (:func:`worker_store`), against a real table that every round
rewrites again (:data:`REWRITE_AGAIN`), so one table serves all rounds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.lifecycle import ProcessRunner
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store
from tests.support.postgres import PG_URL

WAIT = 30.0  # bound on every wait in these scenarios


class CommitLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.commits: list[str] = []
        self.running: set[str] = set()
        self.max_concurrent = 0

    def start(self, who: str) -> None:
        with self._lock:
            self.running.add(who)
            self.max_concurrent = max(self.max_concurrent, len(self.running))

    def end(self, who: str, committed: bool) -> None:
        with self._lock:
            self.running.discard(who)
            if committed:
                self.commits.append(who)


class SteeredJob:
    """A job that may stall before reporting its application id and before committing.

    ``before_start`` / ``before_commit`` are gates the test opens; ``kill()`` (what the runner calls to
    stop the Spark application) opens both and makes the job end without committing.
    """

    def __init__(self, name: str, log: CommitLog, *, stall_start: bool = False, stall_commit: bool = False):
        self.name = name
        self.log = log
        self.before_start = threading.Event()
        self.before_commit = threading.Event()
        if not stall_start:
            self.before_start.set()
        if not stall_commit:
            self.before_commit.set()
        self.entered = threading.Event()
        self.started = threading.Event()
        self.killed = threading.Event()

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        self.entered.set()
        self.log.start(self.name)
        committed = False
        try:
            self.before_start.wait(WAIT)
            if on_started is not None and not self.killed.is_set():
                on_started(f"app-{self.name}")
            self.started.set()
            self.before_commit.wait(WAIT)
            committed = not self.killed.is_set()
        finally:
            self.log.end(self.name, committed)
        if not committed:
            return JobResult(status="FAILED", error=f"{self.name} killed", error_class="Killed")
        return JobResult(
            status="SUCCESS", summary={"by": self.name}, raw={"application_id": f"app-{self.name}"}
        )

    def kill(self) -> None:
        self.killed.set()
        self.before_start.set()
        self.before_commit.set()


def register(
    store: Store, table_id: str, action: str, warehouse: str, options: Mapping[str, Any] | None = None
) -> None:
    """Register ``table_id`` (a hadoop catalog on ``warehouse``) with ``action`` and its ``options``."""
    catalog, namespace, name = table_id.split(".")
    store.catalogs.upsert(CatalogSpec(name=catalog, warehouse=warehouse), Owner.STORE)
    actions = {action: dict(options or {})}
    spec = TableSpec.model_validate(
        {"catalog": catalog, "namespace": namespace, "name": name, "actions": actions}
    )
    store.tables.upsert(spec, Owner.STORE)


def runner(store: Store, job: Any, **kw: Any) -> ProcessRunner:
    kw.setdefault("heartbeat_every", timedelta(seconds=0.2))
    kw.setdefault("lease_ttl", timedelta(seconds=30))
    kw.setdefault("wait_for_peer", timedelta(seconds=WAIT))
    # ProcessRunner enforces the timing rules: a worker given no stale_after judges rows by one that fits
    # its own beat and lease (at least 2 beats, below the lease TTL).
    kw.setdefault("stale_after", max(2 * kw["heartbeat_every"], kw["lease_ttl"] * 2 / 3))
    return ProcessRunner(store, default_factories(), job, **kw)


def wait_until(what: str, check: Callable[[], Any], timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except Exception:  # noqa: BLE001 - e.g. the row does not exist yet
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


# -- real worker processes (worker_main.py), on SQLite or PostgreSQL --------------------------------

WORKER = Path(__file__).with_name("worker_main.py")
#: rewrite-files options under which every round commits on the same table: all its files are rewritten
#: (not only small ones) and the job runs whether or not the table changed since the last success.
REWRITE_AGAIN = {"min-input-files": 2, "rewrite-all": True, "on-new-snapshot": False}


def worker_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A worker process's environment: this one's, the venv's ``bin`` first on ``PATH`` (spark-submit's
    Python), output unbuffered, plus ``extra`` (a scenario's timings, another ``$AIRFLOW_HOME``)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "PYTHONUNBUFFERED": "1", **(extra or {})}


def worker_command(url: str, table_id: str, action: str, instant: datetime) -> list[str]:
    return [sys.executable, str(WORKER), url, table_id, action, instant.isoformat()]


def start_worker(
    url: str,
    table_id: str,
    action: str,
    instant: datetime,
    *,
    log: Path,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a worker in a session of its own: its process group (id = its pid) holds the worker,
    spark-submit, the driver JVM and the PySpark driver. Its stderr goes to ``log``."""
    with log.open("w") as err:
        return subprocess.Popen(
            worker_command(url, table_id, action, instant),
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=worker_env(env),
            start_new_session=True,
        )


def run_worker(
    url: str,
    table_id: str,
    action: str,
    instant: datetime,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run a worker to its end; exit 0 done, 3 the table's lease is held, 2 another failure."""
    return subprocess.run(
        worker_command(url, table_id, action, instant),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=worker_env(env),
    )


@dataclass
class WorkerStore:
    """A store as the test and its worker processes see it: ``url`` for a worker, ``store`` the test's."""

    kind: str
    url: str
    store: Store


def worker_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> WorkerStore:
    """A fresh store of ``kind`` (``sqlite``: a file in ``tmp_path``; ``postgresql``: the ``pg``
    fixture's schema, which a worker selects through the URL's ``options``)."""
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'tablemgmt.db'}"
        return WorkerStore(kind, url, Store(url))
    pg = request.getfixturevalue("pg")
    url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}options={quote(f'-csearch_path={pg.schema}')}"
    return WorkerStore(kind, url, pg.direct())
