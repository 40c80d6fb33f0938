"""Stand-ins for spark-submit that the test steers, and a table's "commit log" they write to.

The point of these scenarios is the lifecycle (who may run, who may write the process row), so the
store, :class:`~airflow_tablemgmt.lifecycle.ProcessRunner`, its heartbeat thread and the leases are
the real ones; only the Spark job is replaced by :class:`SteeredJob`, which records a *commit* on the
shared :class:`CommitLog` when it finishes without having been killed — what a real Spark
application would have committed to the table.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.lifecycle import ProcessRunner
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store

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


def register(store: Store, table_id: str, action: str, warehouse: str) -> None:
    catalog, namespace, name = table_id.split(".")
    store.catalogs.upsert(CatalogSpec(name=catalog, warehouse=warehouse), Owner.STORE)
    spec = TableSpec.model_validate(
        {"catalog": catalog, "namespace": namespace, "name": name, "actions": {action: {}}}
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
