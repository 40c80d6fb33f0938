"""A store connection that hangs (rather than fails) while a worker runs its job (issue 23, item 1).

Worker A reaches PostgreSQL through a proxy that, mid-job, stops forwarding without closing anything
for 1-4 s (``TcpProxy.hang``): A's heartbeat blocks inside its store call and no error is ever
raised. Worker B, on a direct connection, tries the same process again and again, as a deferred
task would, and takes it over as soon as A's lease lapses. A must have killed its own job first
(its lease watchdog), so the two jobs never overlap and exactly one commits.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.exc import OperationalError

from airflow_tablemgmt.core.errors import LeaseUnavailable
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.lifecycle import RunOutcome, RunRequest
from airflow_tablemgmt.lifecycle.model import LEASE_TTL as LEASE_TTL_DEFAULT
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.timeouts import (
    PG_CONNECT_DEFAULTS,
    PG_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    PG_STATEMENT_TIMEOUT_MS,
)
from tests.faults.conftest import ROUNDS, Figures, PgStores
from tests.faults.workers import WAIT, CommitLog, SteeredJob, register, runner, wait_until
from tests.support.postgres import PG_URL
from tests.support.threads import in_thread

pytestmark = pytest.mark.faults

S = ProcessStatus
TABLE = "lake.sales.orders"
ACTION = "rewrite-files"
T0 = datetime(2026, 3, 1, tzinfo=UTC)
HEARTBEAT = timedelta(seconds=0.25)
LEASE_TTL = timedelta(seconds=1.5)  # watchdog deadline: 1.25 s


@pytest.mark.timeout(90 + 40 * ROUNDS)
def test_a_hung_store_connection_never_lets_two_jobs_overlap(pg: PgStores, figures: Figures) -> None:
    observer = pg.direct()
    register(observer, TABLE, ACTION, "/tmp/tms-faults-wh")
    rng = random.Random(23)
    taken_over = recorded_for_a = 0

    def one_round(r: int) -> None:
        nonlocal taken_over, recorded_for_a
        log = CommitLog()
        req = RunRequest(TABLE, ACTION, T0 + timedelta(hours=r), holder="hang")
        job_a = SteeredJob("A", log, stall_commit=True)
        run_a = runner(
            pg.proxied(),
            job_a,
            heartbeat_every=HEARTBEAT,
            lease_ttl=LEASE_TTL,
            stale_after=timedelta(seconds=1),
        )
        t_a, out_a = in_thread(lambda: run_a.run(req))
        assert job_a.started.wait(WAIT), out_a
        row = wait_until("A RUNNING", lambda: observer.processes.find(TABLE, ACTION, req.instant))
        wait_until("A RUNNING", lambda: observer.processes.get(row.id).status == S.RUNNING)

        done = threading.Event()
        b_outcome: list[object] = []

        def worker_b() -> None:  # a deferred task trying again every 0.1 s
            job_b = SteeredJob(f"B{r}", log)
            run_b = runner(
                pg.direct(),
                job_b,
                heartbeat_every=HEARTBEAT,
                lease_ttl=LEASE_TTL,
                stale_after=timedelta(seconds=1),
            )
            while not done.is_set():
                try:
                    b_outcome.append(run_b.run(req))
                    return
                except LeaseUnavailable:
                    time.sleep(0.1)
                except Exception as e:  # noqa: BLE001 - recorded, the assertions judge it
                    b_outcome.append(e)
                    return

        hang_s = rng.uniform(1.0, 4.0)
        pg.proxy.hang()
        t_b = threading.Thread(target=worker_b, daemon=True)
        t_b.start()
        time.sleep(hang_s)
        pg.proxy.resume()
        job_a.before_commit.set()  # A not killed by now: it finishes its job
        t_a.join(WAIT)
        t_b.join(WAIT)
        done.set()
        final = observer.processes.get(row.id)
        figures.rounds += 1
        figures.concurrent_jobs += max(0, log.max_concurrent - 1) + max(0, len(log.commits) - 1)
        figures.non_terminal += 0 if final.status.is_terminal else 1
        taken_over += int(final.attempt > 1)
        recorded_for_a += int(final.attempt > 1 and log.commits == ["A"])
        assert log.max_concurrent == 1 and len(log.commits) == 1, (hang_s, log.commits, out_a, b_outcome)
        assert final.status == S.SUCCESS, (final, out_a, b_outcome)
        assert b_outcome and isinstance(b_outcome[0], RunOutcome), b_outcome
        if "A" not in log.commits:  # A stopped its job itself
            assert "lease" in str(out_a[0]), out_a

    for r in range(ROUNDS):
        one_round(r)
    figures.notes["taken_over"] = taken_over
    # A's job committed just past its deadline; B recorded A's result instead of running again.
    figures.notes["recorded_from_the_stopped_worker"] = recorded_for_a
    print(f"\n{figures}")


@pytest.mark.timeout(60 + 20 * ROUNDS)
def test_a_worker_that_lost_its_lease_closes_its_own_row(pg: PgStores, figures: Figures) -> None:
    """No one takes over: the worker that stopped (its store hung past the watchdog's deadline) closes
    its own row when the store answers again, so no row is left RUNNING for a reaper (item 7)."""
    observer = pg.direct()
    register(observer, TABLE, ACTION, "/tmp/tms-faults-wh")
    for r in range(ROUNDS):
        log = CommitLog()
        req = RunRequest(TABLE, ACTION, T0 - timedelta(days=1 + r), holder="alone")
        job = SteeredJob("A", log, stall_commit=True)
        run = runner(
            pg.proxied(),
            job,
            heartbeat_every=HEARTBEAT,
            lease_ttl=LEASE_TTL,
            stale_after=timedelta(seconds=1),
        )
        t, out = in_thread(lambda: run.run(req))  # noqa: B023
        assert job.started.wait(WAIT), out
        row = wait_until("A RUNNING", lambda: observer.processes.find(TABLE, ACTION, req.instant))  # noqa: B023
        wait_until("A RUNNING", lambda: observer.processes.get(row.id).status == S.RUNNING)  # noqa: B023
        pg.proxy.hang()
        killed = job.killed.wait(WAIT)
        pg.proxy.resume()
        t.join(WAIT)
        final = observer.processes.get(row.id)
        figures.rounds += 1
        figures.non_terminal += 0 if final.status.is_terminal else 1
        assert killed and log.commits == [], log.commits
        assert (final.status, final.attempt) == (S.FAILED, 1), (final, out)
        assert "worker stopped: no lease renewal" in (final.failure_reason or ""), final.failure_reason
    figures.notes["rows_stuck"] = figures.non_terminal
    print(f"\n{figures}")


def test_the_store_engine_bounds_every_wait(pg: PgStores) -> None:
    """libpq's connect timeout, TCP keepalives, tcp_user_timeout and a statement timeout are set on
    every PostgreSQL connection the store opens (the fixture's own options are kept)."""
    store = pg.direct()
    with store.engine.connect() as conn:
        timeout = conn.exec_driver_sql("SHOW statement_timeout").scalar()
        path = conn.exec_driver_sql("SHOW search_path").scalar()
        dsn = conn.connection.dbapi_connection.get_dsn_parameters()  # type: ignore[union-attr]
        idle = conn.exec_driver_sql("SHOW idle_in_transaction_session_timeout").scalar()
    assert timeout == f"{PG_STATEMENT_TIMEOUT_MS // 1000}s", timeout
    assert idle == f"{PG_IDLE_IN_TRANSACTION_TIMEOUT_MS // 1000}s", idle
    assert PG_IDLE_IN_TRANSACTION_TIMEOUT_MS < LEASE_TTL_DEFAULT.total_seconds() * 1000
    assert path == pg.schema
    for key in (
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
    ):
        assert dsn.get(key) == str(PG_CONNECT_DEFAULTS[key]), (key, dsn)
    assert dsn.get("connect_timeout") == "3"  # the caller's own value wins over the default


# A worker that freezes between its renewal's UPDATE and its COMMIT: the real ``LeaseRepository.renew``,
# stopped by an engine event right after the UPDATE ran. The store's idle-transaction bound is lowered in
# this child only (the default, 30 s, is checked above), so the test waits seconds, not half a minute.
_FROZEN_RENEWAL = """
import os, signal, sys
from datetime import timedelta
from sqlalchemy import event
from airflow_tablemgmt.store import Store, timeouts
timeouts.PG_IDLE_IN_TRANSACTION_TIMEOUT_MS = 2000
url, schema, table, holder = sys.argv[1:5]
store = Store(url, engine_kwargs={"connect_args": {"options": f"-csearch_path={schema}"}})
@event.listens_for(store.engine, "after_cursor_execute")
def freeze(conn, cursor, statement, *args):
    if statement.lstrip().upper().startswith("UPDATE"):
        print("frozen", os.getpid(), flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
try:
    renewed = store.leases.renew(table, holder, timedelta(seconds=60))
except Exception as e:
    print("renewal failed:", type(e).__name__, flush=True)
    sys.exit(3)
print("renewed", renewed, flush=True)
"""


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def test_a_worker_frozen_inside_a_lease_renewal_does_not_hold_the_lease_past_its_expiry(pg: PgStores) -> None:
    """The frozen transaction holds the lease row's lock; the server ends it (idle in transaction), the
    renewal is rolled back, and another worker takes the lapsed lease over while the first is still frozen."""
    store = pg.direct()
    assert store.leases.acquire(TABLE, "frozen", timedelta(seconds=2))
    child = subprocess.Popen(
        [sys.executable, "-c", _FROZEN_RENEWAL, PG_URL, pg.schema, TABLE, "frozen"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until("the renewal frozen after its UPDATE", lambda: _stopped(child.pid))
        frozen_at = time.monotonic()
        taken = wait_until(
            "the lapsed lease taken over",
            lambda: _try_acquire(store, TABLE, "next"),
            timeout=PG_STATEMENT_TIMEOUT_MS / 1000,
        )
        waited = time.monotonic() - frozen_at
        assert taken and waited < 15, (
            waited
        )  # the 2 s bound plus the lease's own 2 s, not the freeze's length
        assert _stopped(child.pid)  # still frozen: the server, not the worker, let go
        lease = store.leases.get(TABLE)
        assert lease is not None and lease.holder == "next"
    finally:
        child.send_signal(signal.SIGCONT)
        out, _ = child.communicate(timeout=60)
    # Woken, the frozen worker learns its renewal never happened: it no longer holds the lease.
    assert child.returncode == 3 and "renewal failed" in out, out
    assert store.leases.get(TABLE).holder == "next"  # type: ignore[union-attr]


def _try_acquire(store: Store, table: str, holder: str) -> bool:
    try:
        return store.leases.acquire(table, holder, timedelta(seconds=60))
    except OperationalError:  # blocked on the frozen lock until the statement timeout: try again
        return False
