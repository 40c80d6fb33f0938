"""A store connection that hangs (rather than fails) while a worker runs its job (issue 23, item 1).

Worker A reaches PostgreSQL through a proxy that, mid-job, stops forwarding without closing anything
for 1-4 s (``TcpProxy.hang``): A's heartbeat blocks inside its store call and no error is ever
raised. Worker B, on a direct connection, tries the same process again and again, as a deferred
task would, and takes it over as soon as A's lease lapses. A must have killed its own job first
(its lease watchdog), so the two jobs never overlap and exactly one commits.
"""

from __future__ import annotations

import random
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from airflow_tablemgmt.core.errors import LeaseUnavailable
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.lifecycle import RunOutcome, RunRequest
from airflow_tablemgmt.store.timeouts import PG_CONNECT_DEFAULTS, PG_STATEMENT_TIMEOUT_MS
from tests.faults.conftest import ROUNDS, Figures, PgStores
from tests.faults.workers import WAIT, CommitLog, SteeredJob, register, runner, wait_until
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
    assert timeout == f"{PG_STATEMENT_TIMEOUT_MS // 1000}s", timeout
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
