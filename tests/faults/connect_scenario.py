"""What the Spark Connect fault tests share (``test_connect_orphan.py``, ``test_connect_frozen.py``): a
real Connect server, a table of many small files, worker A compacting it in a process of its own, and
worker B, another action on the same table, retrying until it gets the table.

Worker A is ``worker_main.py`` with a Connect hook (what `tablemgmt run` does; a 3 s lease renewed every
1 s). Worker B runs in the test with the real :class:`ProcessRunner`; its job is a stand-in,
:class:`Watching`, which writes nothing to the table, so every file written into the table's directory
after B's job started is A's.

What a round counts (:class:`RoundCounts`):

* **overlap**: A's job still working on the table after B's job started -- a data or metadata file it
  wrote, or a commit it made, at or after that moment;
* **duplicated**: B's job started more than once, table rows duplicated (row count, checksum), or A's
  committed job started again by A's retry;
* **lost**: table rows lost (or changed: same count, another checksum), or a job that committed but
  whose process is not recorded SUCCESS, by A or by A's retry (run after the round with a result
  directory of its own, as on another host: it must record A's commit from the table, not run the job);
* **stuck**: process rows not terminal at the end of the round (after a reap of rows stale for 2 s);
* **late commits**: A's commits after the lease it held had lapsed.

Tables are reused from round to round while A's compaction did not happen (400 files still there), so a
round costs a worker's start and a compaction's beginning rather than a new table.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.errors import LeaseUnavailable
from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.lifecycle import ProcessRunner, RunOutcome, RunRequest
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store
from tests.faults.conftest import Figures
from tests.faults.test_kill9 import WORKER, env, wait_for
from tests.integration.connect.server import ConnectServer, start_connect_server
from tests.integration.connect.test_connect_engine import small_files_table, table_state

FILES = 400
TTL_S = 3.0
TIMINGS = {
    "TABLEMGMT_FAULT_LEASE_TTL": str(TTL_S),
    "TABLEMGMT_FAULT_HEARTBEAT": "1",
    "TABLEMGMT_FAULT_STALE_AFTER": "2",
}
#: How long B's job holds the table at least, watching for A's work; at most, while A still runs.
MIN_HOLD_S = 8.0
MAX_HOLD_S = 40.0
GUARD_MODULE = "airflow_tablemgmt.spark.connect.guard"

ON_DEMAND = pytest.mark.skipif(  # a server start, a 400-file table, ~1 min a round under load: beyond CI
    os.environ.get("TABLEMGMT_CONNECT_FAULTS") != "1", reason="on demand: TABLEMGMT_CONNECT_FAULTS=1"
)


def snapshots(meta_dir: Path) -> list[tuple[int, str]]:
    """(timestamp ms, operation) of every snapshot of the table."""
    from pyiceberg.table import StaticTable

    version = (meta_dir / "version-hint.text").read_text().strip()
    meta = StaticTable.from_metadata(str(meta_dir / f"v{version}.metadata.json")).metadata
    return [(s.timestamp_ms, s.summary.operation.value if s.summary else "") for s in meta.snapshots]


def files_written_since(table_dir: Path, since_ms: int) -> list[str]:
    """The table's files (data and metadata) last written at or after ``since_ms``, each with how long
    after it (``path +<ms>ms``)."""
    out = []
    for path in table_dir.rglob("*"):
        try:
            written_ms = path.stat().st_mtime_ns // 1_000_000
            if path.is_file() and written_ms >= since_ms:
                out.append(f"{path.relative_to(table_dir)} +{written_ms - since_ms}ms")
        except FileNotFoundError:
            continue
    return sorted(out)


class Watching:
    """B's job: records when it started (and how often), then holds the table while ``a_running()``, at
    least :data:`MIN_HOLD_S` and at most :data:`MAX_HOLD_S`, noting A's work it sees meanwhile."""

    def __init__(self, table_dir: Path, a_running: Callable[[], bool]) -> None:
        self.table_dir = table_dir
        self.a_running = a_running
        self.started_ms: int | None = None
        self.starts = 0

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        self.starts += 1
        self.started_ms = int(time.time() * 1000)
        started = time.monotonic()
        if on_started is not None:
            on_started("app-b")
        while time.monotonic() - started < MAX_HOLD_S:
            if time.monotonic() - started >= MIN_HOLD_S and not self.a_running():
                break
            time.sleep(0.2)
        return JobResult(status="SUCCESS", summary={"by": "b"})

    def kill(self) -> None:
        pass


class Counting:
    """The retry's job: counts its starts (A's job run again), changes nothing."""

    def __init__(self) -> None:
        self.starts = 0

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        self.starts += 1
        if on_started is not None:
            on_started("app-retry")
        return JobResult(status="SUCCESS", summary={"by": "retry"})

    def kill(self) -> None:
        pass


@dataclass
class Lake:
    """One Connect server, one store, and the round's table (reused while uncompacted)."""

    tmp: Path
    server: ConnectServer
    url: str
    store: Store
    catalog: CatalogSpec
    made: int = 0
    current: str | None = None
    notes: list[str] = field(default_factory=list)

    def table(self) -> tuple[str, Path, dict[str, Any]]:
        """A table with :data:`FILES` files to compact: the last one if still so, else a new one."""
        if self.current is not None:
            state = table_state(self.server.url, self.catalog, self.current)
            if state["files"] >= FILES:
                return self.current, self.table_dir(self.current), state
        name = f"t{self.made}"
        self.made += 1
        table = small_files_table(self.server.url, self.catalog, name, files=FILES)
        actions = {"rewrite-files": {"min-input-files": 2}, "rewrite-manifests": {}}
        self.store.tables.upsert(
            TableSpec(catalog="lake", namespace="db", name=name, actions=actions), Owner.STORE
        )
        self.current = table
        return table, self.table_dir(table), table_state(self.server.url, self.catalog, table)

    def table_dir(self, table: str) -> Path:
        return self.tmp / "warehouse" / "db" / table.split(".")[-1]

    def start_a(self, table: str, instant: datetime, log: Path) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, str(WORKER), self.url, table, "rewrite-files", instant.isoformat()]
        with log.open("w") as err:
            return subprocess.Popen(
                cmd,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
                env={**env(), **TIMINGS, "TABLEMGMT_FAULT_CONNECT_URL": self.server.url},
            )

    def wait_in_call(self, a: subprocess.Popen[bytes], table: str, instant: datetime, log: Path) -> None:
        """Until A's row is RUNNING and its compaction's CALL is on the server (or A ended)."""

        def running() -> bool:
            p = self.store.processes.find(table, "rewrite-files", instant)
            return a.poll() is not None or (p is not None and str(p.status) == "RUNNING")

        wait_for("A RUNNING", running, timeout=180)
        wait_for("A's CALL", lambda: "CALL" in log.read_text() or a.poll() is not None, timeout=120)

    def take_table(self, table: str, instant: datetime, b_job: Watching, since: float) -> RunOutcome:
        """Worker B: another action on the table, retrying every 0.2 s until it gets the table."""
        b = ProcessRunner(
            self.store,
            default_factories(),
            b_job,
            lease_ttl=timedelta(seconds=TTL_S),
            heartbeat_every=timedelta(seconds=1),
            stale_after=timedelta(seconds=2),
        )
        req = RunRequest(table, "rewrite-manifests", instant, holder="b")
        while True:
            try:
                return b.run(req)
            except LeaseUnavailable:
                assert time.monotonic() - since < 200, "B never got the table"
                time.sleep(0.2)

    def retry_a(self, table: str, instant: datetime) -> tuple[RunOutcome, int]:
        """A's process run again, as Airflow's retry of A's task would, on another host (a result
        directory of its own, so A's result file is not there): its outcome and how often its job was
        started. A committed job must be recorded from the table, not run again."""
        job = Counting()
        retry = ProcessRunner(
            self.store,
            default_factories(),
            job,
            lease_ttl=timedelta(seconds=TTL_S),
            heartbeat_every=timedelta(seconds=1),
            stale_after=timedelta(seconds=2),
            result_dir=self.tmp / "retry-results",
        )
        since = time.monotonic()
        while True:
            try:
                return retry.run(RunRequest(table, "rewrite-files", instant, holder="retry")), job.starts
            except LeaseUnavailable:
                assert time.monotonic() - since < 120, "A's retry never got the table"
                time.sleep(0.2)

    def lease_expiry_ms(self, table: str) -> int | None:
        lease = self.store.leases.get(table)
        if lease is None:
            return None
        at = lease.expires_at if lease.expires_at.tzinfo else lease.expires_at.replace(tzinfo=UTC)
        return int(at.timestamp() * 1000)

    def stuck_rows(self, table: str, instants: list[datetime]) -> int:
        """Rows of this round not terminal once stale rows (2 s) were reaped, as the next run would."""
        from airflow_tablemgmt.services.reap import reap_processes

        time.sleep(2.5)
        reap_processes(self.store, stale_after=timedelta(seconds=2))
        out = 0
        for action, instant in (("rewrite-files", instants[0]), ("rewrite-manifests", instants[1])):
            p = self.store.processes.find(table, action, instant)
            out += 0 if p is None or p.status.is_terminal else 1
        return out


@dataclass
class RoundCounts:
    overlap: int = 0
    duplicated: int = 0
    lost: int = 0
    stuck: int = 0
    late_commits: int = 0

    def add_to(self, figures: Figures) -> None:
        figures.rounds += 1
        figures.concurrent_jobs += self.overlap
        figures.rows_duplicated += self.duplicated
        figures.rows_lost += self.lost
        figures.non_terminal += self.stuck
        figures.late_writes_applied += self.late_commits


def count_round(
    lake: Lake,
    table: str,
    table_dir: Path,
    before: dict[str, Any],
    b_job: Watching,
    a_row: Any,
    lease_expiry_ms: int | None,
    retried: tuple[RunOutcome, int] | None = None,
) -> tuple[RoundCounts, dict[str, Any]]:
    """The round's counts (module docstring) once A and B ended, and A's process was retried
    (``retried``: the retry's outcome and its job's starts; :meth:`Lake.retry_a`)."""
    after = table_state(lake.server.url, lake.catalog, table)
    started = b_job.started_ms or 0
    a_commits = [ts for ts, op in snapshots(table_dir / "metadata") if op == "replace"]
    late_files = files_written_since(table_dir, started) if b_job.started_ms else []
    committed_after_b = [ts for ts in a_commits if ts >= started]
    c = RoundCounts()
    c.overlap = int(bool(late_files or committed_after_b))
    c.duplicated = max(0, b_job.starts - 1) + max(0, after["rows"] - before["rows"])
    c.lost = max(0, before["rows"] - after["rows"])
    c.lost += int(after["rows"] == before["rows"] and after["checksum"] != before["checksum"])
    recorded = a_row is not None and str(a_row.status) == "SUCCESS"
    reran = 0
    if retried is not None and not recorded:
        outcome, reran = retried
        summary = outcome.process.summary or {}
        recorded = str(outcome.process.status) == "SUCCESS" and bool(summary.get("recorded_from_table"))
    c.lost += int(bool(a_commits) and not recorded)
    c.duplicated += reran if a_commits else 0  # a committed job run again
    c.late_commits = sum(1 for ts in a_commits if lease_expiry_ms is not None and ts >= lease_expiry_ms)
    detail = {
        "files": f"{before['files']}->{after['files']}",
        "late_files": late_files[:5],
        "n_late_files": len(late_files),
        "a_commits": len(a_commits),
        "a_row": str(a_row.status) if a_row is not None else None,
        "retry_ran_job": reran,
    }
    return c, detail


def guards_of(pid: int) -> list[int]:
    """The Connect lease guards worker ``pid`` started (its children running the guard module)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and GUARD_MODULE in cmdline:
            out.append(int(entry))
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def start_server_with_ui(log: Path) -> ConnectServer:
    """A Connect server as ``start_connect_server`` starts one, with its UI (status API) on a free port: what
    shows the next holder an interrupted job's Spark tasks end (``spark/connect/tasks.py``), as the
    deployment's server has it. ``TABLEMGMT_CONNECT_UI=0``: without it (the tasks cannot be seen)."""
    import signal

    from airflow_tablemgmt.spark.connect.server import free_port, server_spec, start_server, wait_for_port

    if os.environ.get("TABLEMGMT_CONNECT_UI") == "0":
        return start_connect_server(log)
    port, ui = free_port(), free_port()
    spec = server_spec(
        port=port, master="local[2]", conf={"spark.ui.enabled": "true", "spark.ui.port": str(ui)}
    )
    process = start_server(spec, log)
    try:
        wait_for_port("127.0.0.1", port, 180, process)
    except (TimeoutError, RuntimeError) as e:
        os.killpg(process.pid, signal.SIGKILL)
        raise AssertionError(f"{e}\n{log.read_text(errors='replace')[-3000:]}") from None
    return ConnectServer(f"sc://127.0.0.1:{port}", port, process, log, spec)


@pytest.fixture(scope="module", name="connect_fault_server")
def connect_fault_server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    server = start_server_with_ui(tmp_path_factory.mktemp("connect") / "server.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgres"], name="lake")
def lake_fixture(
    request: pytest.FixtureRequest, connect_fault_server: ConnectServer, tmp_path: Path
) -> Iterator[Lake]:
    """A fresh store (SQLite, or a PostgreSQL schema) and warehouse on the module's server."""
    from urllib.parse import quote

    catalog = CatalogSpec(name="lake", warehouse=str(tmp_path / "warehouse"))
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
        store = Store(url)
    else:
        pg = request.getfixturevalue("pg")
        url = f"{pg.proxied_url}?options={quote(f'-csearch_path={pg.schema}')}"
        store = pg.direct()
    store.catalogs.upsert(catalog, Owner.STORE)
    yield Lake(tmp_path, connect_fault_server, url, store, catalog)
