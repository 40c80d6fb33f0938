"""A killed driver that takes its time to die (issue 23, item 3): the next job on the table never
starts while the old driver lives.

* **Takeover, standalone master (cluster mode).** Worker A is lost (no heartbeat for an hour) while
  its driver runs. Worker B takes the process over: it kills A's driver by id through the real
  :class:`~airflow_tablemgmt.hooks.spark_job.SparkJobHook` (Airflow's SparkSubmitHook building the
  ``spark-submit --kill`` and ``--status`` commands), against a stand-in ``spark-submit`` that
  answers as a standalone master does: the kill is acknowledged at once, and the driver -- a real
  process that traps SIGTERM -- exits 0.5–3 s later; ``--status`` says RUNNING until the process is
  gone, then KILLED. B's own job is a stand-in that records whether A's driver was alive when it
  started. Before the change B released A's lease as soon as the kill was acknowledged.
* **Own kill, local mode (direct spark-submit).** A cancel stops a worker's job: spark-submit and
  the driver it started (a grandchild, as PySpark's Python driver is of the JVM) must both be gone
  before the worker releases the table's lease. Before the change only spark-submit was killed.

Counted: rounds, jobs overlapping (a new job started, or the lease released, while the old driver
lived), processes left non-terminal.
"""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.hooks.spark_job import SparkJobHook
from airflow_tablemgmt.hooks.spark_submit_direct import SparkConnection, alive
from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest, takeover
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store
from tests.faults.conftest import ROUNDS, Figures, PgStores
from tests.faults.workers import WAIT, register, wait_until
from tests.support.threads import in_thread

pytestmark = pytest.mark.faults

S = ProcessStatus
TABLE = "lake.sales.orders"
ACTION = "rewrite-files"
T0 = datetime(2026, 4, 1, tzinfo=UTC)

# A driver process: exits ``delay`` seconds after SIGTERM (as a JVM running its shutdown hooks).
DRIVER = """
import signal, sys, time
delay = float(sys.argv[1])
def term(*_):
    time.sleep(delay)
    sys.exit(143)
signal.signal(signal.SIGTERM, term)
while True:
    time.sleep(0.05)
"""

# spark-submit as a standalone master answers it: --kill acknowledges and signals the driver;
# --status reports RUNNING while the driver's process lives, then KILLED.
MASTER = """
import json, os, signal, sys
args = sys.argv[1:]
state = os.environ["FAKE_SPARK_STATE"]
def pid_of(driver):
    with open(os.path.join(state, driver)) as f:
        return int(f.read())
def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
if "--kill" in args:
    driver = args[args.index("--kill") + 1]
    os.kill(pid_of(driver), signal.SIGTERM)
    print("INFO RestSubmissionClient: Server responded with KillSubmissionResponse:")
    print(json.dumps({"action": "KillSubmissionResponse", "submissionId": driver, "success": True}, indent=2, separators=(",", " : ")))
elif "--status" in args:
    driver = args[args.index("--status") + 1]
    st = "RUNNING" if running(pid_of(driver)) else "KILLED"
    print("INFO RestSubmissionClient: Server responded with SubmissionStatusResponse:")
    print(json.dumps({"action": "SubmissionStatusResponse", "driverState": st, "submissionId": driver, "success": True}, indent=2, separators=(",", " : ")))
else:
    sys.exit(2)
"""

# spark-submit in local mode: starts a driver that ignores SIGTERM (its output not on spark-submit's,
# as PySpark's driver writes through the JVM), reports an application id, and runs until killed.
LOCAL = """
import os, subprocess, sys, time
driver = subprocess.Popen(
    [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"],
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
with open(os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "driver.pid"), "w") as f:
    f.write(str(driver.pid))
print("INFO SparkContext: Submitted spark application id local-1764000000000", flush=True)
time.sleep(600)
"""


def _script(path: Path, code: str) -> Path:
    path.write_text(f"#!{sys.executable}\n{code}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _driver_id(r: int) -> str:
    return f"driver-20260401000000-{r:04d}"


class RecordingHook(SparkJobHook):
    """The real kill-by-id and status queries; the job itself only records whether the old driver
    was alive when it started."""

    def __init__(self, old_driver: subprocess.Popen[bytes]) -> None:
        super().__init__("spark_default")
        self.old_driver = old_driver
        self.started_while_alive: bool | None = None
        self.started_at: float | None = None

    def submit(self, job: JobSpec, on_started: Any = None) -> JobResult:
        self.started_at = time.monotonic()
        self.started_while_alive = self.old_driver.poll() is None
        return JobResult(status="SUCCESS", summary={"by": "B"})


@pytest.fixture
def standalone_master(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _script(bindir / "spark-submit", MASTER)
    state = tmp_path / "master"
    state.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SPARK_STATE", str(state))
    conn = {
        "conn_type": "spark",
        "host": "spark://127.0.0.1",
        "port": 7077,
        "extra": {"deploy-mode": "cluster"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(conn))
    monkeypatch.setattr(takeover, "KILL_CONFIRM_POLL_S", 0.2)
    yield state


@pytest.mark.timeout(120 + 30 * ROUNDS)
def test_a_takeover_starts_its_job_only_once_the_killed_driver_is_gone(
    pg: PgStores, standalone_master: Path, figures: Figures
) -> None:
    store = pg.direct()
    register(store, TABLE, ACTION, "/tmp/tms-faults-wh")
    rng = random.Random(2303)
    lease_ttl = timedelta(seconds=20)
    waits: list[float] = []
    for r in range(max(2, ROUNDS)):
        delay = rng.uniform(0.5, 3.0)
        driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(delay)])
        threading.Thread(target=driver.wait, daemon=True).start()  # reaped as soon as it exits
        app = _driver_id(r)
        (standalone_master / app).write_text(str(driver.pid))
        try:
            when = T0 + timedelta(hours=r)
            process, _ = store.processes.open(TABLE, ACTION, when)
            store.processes.transition(
                process.id,
                S.SUBMITTED,
                expected=S.PENDING,
                attempt=1,
                external_id=app,
                heartbeat_at=datetime.now(UTC) - timedelta(hours=1),
                heartbeat_every_s=1.0,
            )
            assert store.leases.acquire(TABLE, f"process:{process.id}:attempt:1:worker-a:0000", lease_ttl)
            hook = RecordingHook(driver)
            killed_at = time.monotonic()
            outcome = ProcessRunner(
                store,
                default_factories(),
                hook,
                stale_after=timedelta(seconds=5),
                lease_ttl=lease_ttl,
                heartbeat_every=timedelta(seconds=1),
                result_dir=standalone_master.parent / "results",
            ).run(RequestFor(when))
            figures.rounds += 1
            figures.concurrent_jobs += int(bool(hook.started_while_alive))
            figures.non_terminal += 0 if outcome.process.status.is_terminal else 1
            assert hook.started_at is not None
            waits.append(round(hook.started_at - killed_at, 2))
            assert (outcome.process.status, outcome.process.attempt) == (S.SUCCESS, 2)
            assert hook.started_while_alive is False, f"round {r}: B's job started while A's driver lived"
        finally:
            if driver.poll() is None:
                driver.kill()
    figures.notes["takeover_start_after_kill_s"] = waits
    print(f"\n{figures}")


def RequestFor(when: datetime) -> RunRequest:  # noqa: N802 - reads as the request it builds
    return RunRequest(TABLE, ACTION, when, holder="worker-b")


@pytest.mark.timeout(120 + 30 * ROUNDS)
def test_a_canceled_local_job_releases_the_lease_only_once_its_driver_is_gone(
    pg: PgStores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, figures: Figures
) -> None:
    store, observer = pg.direct(), pg.direct()
    register(store, TABLE, ACTION, str(tmp_path / "wh"))
    binary = _script(tmp_path / "spark-submit", LOCAL)
    pid_file = tmp_path / "driver.pid"  # where the stand-in writes its driver's pid
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE", "false")
    for r in range(max(2, ROUNDS)):
        pid_file.unlink(missing_ok=True)
        hook = SparkJobHook("spark_default", workdir=str(tmp_path))
        connection = SparkConnection(master="local[1]", spark_binary=str(binary))
        monkeypatch.setattr(hook, "_direct_connection", lambda c=connection: c)
        run = ProcessRunner(
            store,
            default_factories(),
            hook,
            heartbeat_every=timedelta(seconds=0.2),
            result_dir=tmp_path / "results",
        )
        req = RunRequest(TABLE, ACTION, T0 + timedelta(days=1, hours=r), holder="local")
        t, out = in_thread(lambda run=run, req=req: run.run(req))
        row = wait_until("the job running", lambda req=req: _running(observer, req))
        driver_pid = int(wait_until("the driver's pid", lambda: pid_file.exists() and pid_file.read_text()))
        observer.processes.transition(
            row.id,
            S.CANCELING,
            expected=S.RUNNING,
            attempt=row.attempt,
            failure_reason="canceled by the test",
        )
        released_while_alive = False
        deadline = time.monotonic() + WAIT
        while t.is_alive() and time.monotonic() < deadline:
            lease = observer.leases.get(TABLE)
            if (lease is None or lease.expired(observer.leases.now())) and alive(driver_pid):
                released_while_alive = True
            time.sleep(0.02)
        t.join(WAIT)
        released_while_alive |= alive(driver_pid)
        final = observer.processes.get(row.id)
        figures.rounds += 1
        figures.concurrent_jobs += int(released_while_alive)
        figures.non_terminal += 0 if final.status.is_terminal else 1
        try:
            assert final.status == S.CANCELED, (final, out)
            assert not released_while_alive, (
                f"round {r}: the lease was released while the driver {driver_pid} lived"
            )
        finally:
            try:
                os.kill(driver_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    print(f"\n{figures}")


def _running(store: Store, req: RunRequest) -> Any:
    row = store.processes.find(req.table_id, req.action, req.instant)
    return row if row is not None and row.status == S.RUNNING else None
