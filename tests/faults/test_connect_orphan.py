"""A worker killed while its job runs on a Spark Connect server: the next holder of the table ends that
job, and starts only once the server reports it ended (issue 36, item 3).

Worker A (``worker_main.py`` with a Spark Connect hook: a separate process, a 3 s lease) compacts a table
of many small files on a real Connect server; once its row is RUNNING and its compaction has started on
the server, A is killed with -9 (the operation runs on in the server's JVM). Worker B, another action on
the same table (rewrite-manifests, as another DAG would run it), retries all along; its job is a stand-in
that records when it started and holds the table for a while. Overlap: A's operation committing after B's
job started. Before the change the lease lapsed after its TTL, B started, and A's compaction committed
beside it: nothing interrupted it, nothing waited for it to end.

Counted: rounds, jobs overlapping (a commit of A after B started), rows lost or duplicated (row count and
checksum), rows left non-terminal besides A's (which the reaper closes later). On demand, like the other
Connect faults: ``TABLEMGMT_CONNECT_FAULTS=1 TABLEMGMT_FAULT_ROUNDS=3``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airflow_tablemgmt.core.errors import LeaseUnavailable
from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store
from tests.faults.conftest import ROUNDS, Figures
from tests.faults.test_kill9 import WORKER, env, wait_for
from tests.integration.connect.server import start_connect_server
from tests.integration.connect.test_connect_engine import small_files_table, table_state

pytestmark = [
    pytest.mark.faults,
    pytest.mark.skipif(  # a server start and a 400-file table: ~3 min under load, beyond the CI budget
        os.environ.get("TABLEMGMT_CONNECT_FAULTS") != "1", reason="on demand: TABLEMGMT_CONNECT_FAULTS=1"
    ),
]

FILES = 400
HOLD_S = 40.0  # how long B's job holds the table, watching for a late commit of A
TIMINGS = {
    "TABLEMGMT_FAULT_LEASE_TTL": "3",
    "TABLEMGMT_FAULT_HEARTBEAT": "1",
    "TABLEMGMT_FAULT_STALE_AFTER": "2",
}


def _snapshots(meta_dir: Path) -> list[tuple[int, str]]:
    from pyiceberg.table import StaticTable

    version = (meta_dir / "version-hint.text").read_text().strip()
    meta = StaticTable.from_metadata(str(meta_dir / f"v{version}.metadata.json")).metadata
    return [(s.timestamp_ms, s.summary.operation.value if s.summary else "") for s in meta.snapshots]


class Watching:
    """B's job: records when it started, then holds the table up to HOLD_S, ending early when A commits."""

    def __init__(self, meta_dir: Path) -> None:
        self.meta_dir = meta_dir
        self.started_ms: int | None = None
        self.late: list[int] = []

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        self.started_ms = int(time.time() * 1000)
        if on_started is not None:
            on_started("app-b")
        deadline = time.monotonic() + HOLD_S
        while time.monotonic() < deadline and not self.late:
            self.late = [
                ts for ts, op in _snapshots(self.meta_dir) if op == "replace" and ts >= self.started_ms
            ]
            time.sleep(0.2)
        return JobResult(status="SUCCESS", summary={"by": "b"})

    def kill(self) -> None:
        pass


@pytest.mark.timeout(400 + 240 * ROUNDS)
def test_a_killed_worker_s_connect_job_ends_before_the_next_holder_starts(
    tmp_path: Path, figures: Figures
) -> None:
    server = start_connect_server(tmp_path / "server.log")
    catalog = CatalogSpec(name="lake", warehouse=str(tmp_path / "warehouse"))
    names = [f"o{r}" for r in range(ROUNDS)]
    url = f"sqlite:///{tmp_path / 'store.db'}"
    notes: list[str] = []
    try:
        tables = [small_files_table(server.url, catalog, n, files=FILES) for n in names]
        store = Store(url)
        store.catalogs.upsert(catalog, Owner.STORE)
        for name in names:
            actions = {"rewrite-files": {"min-input-files": 2}, "rewrite-manifests": {}}
            store.tables.upsert(
                TableSpec(catalog="lake", namespace="db", name=name, actions=actions), Owner.STORE
            )
        for r, table in enumerate(tables):
            before = table_state(server.url, catalog, table)
            meta_dir = tmp_path / "warehouse" / "db" / names[r] / "metadata"
            instant = datetime(2026, 6, 1, tzinfo=UTC) + timedelta(days=r)
            cmd = [sys.executable, str(WORKER), url, table, "rewrite-files", instant.isoformat()]
            with (tmp_path / f"a{r}.log").open("w") as err:
                a = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
                                     env={**env(), **TIMINGS, "TABLEMGMT_FAULT_CONNECT_URL": server.url})  # fmt: skip
            try:

                def running(table: str = table, instant: datetime = instant) -> bool:
                    p = store.processes.find(table, "rewrite-files", instant)
                    return a.poll() is not None or (p is not None and str(p.status) == "RUNNING")  # noqa: B023

                wait_for("A RUNNING", running, timeout=180)
                # Into the compaction: the procedure's operation is on the server (the log names the CALL).
                wait_for("A's CALL", lambda: "CALL" in (tmp_path / f"a{r}.log").read_text() or a.poll() is not None,  # noqa: B023
                         timeout=120)  # fmt: skip
                time.sleep(0.5)
                finished_first = a.poll() is not None
                os.killpg(a.pid, signal.SIGKILL)
                a.wait(30)
                killed_at = time.monotonic()
                b_job = Watching(meta_dir)
                b = ProcessRunner(store, default_factories(), b_job, lease_ttl=timedelta(seconds=3),
                                  heartbeat_every=timedelta(seconds=1), stale_after=timedelta(seconds=2))  # fmt: skip
                req = RunRequest(table, "rewrite-manifests", instant, holder="b")
                while True:
                    try:
                        outcome = b.run(req)
                        break
                    except LeaseUnavailable:
                        assert time.monotonic() - killed_at < 200, "B never got the table"
                        time.sleep(0.2)
            finally:
                if a.poll() is None:
                    os.killpg(a.pid, signal.SIGKILL)
            waited = (b_job.started_ms or 0) / 1000 - (time.time() - (time.monotonic() - killed_at))
            after = table_state(server.url, catalog, table)
            overlapping = len(b_job.late)
            figures.rounds += 1
            figures.concurrent_jobs += overlapping
            figures.rows_lost += max(0, before["rows"] - after["rows"])
            figures.rows_duplicated += max(0, after["rows"] - before["rows"])
            figures.non_terminal += 0 if outcome.process.status.is_terminal else 1
            notes.append(f"round {r}: A finished first={finished_first}, B started {waited:.1f}s after the kill, "
                         f"A's commits after B started {overlapping}, files {before['files']}->{after['files']}")  # fmt: skip
            print(notes[-1])
            assert overlapping == 0, notes[-1]
            assert (after["rows"], after["checksum"]) == (before["rows"], before["checksum"]), notes[-1]
            assert str(outcome.process.status) == "SUCCESS"
    finally:
        server.stop()
    figures.notes = {"rounds": notes}
