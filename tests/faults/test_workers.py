"""Racing, stalled and partitioned workers, and a store that goes away mid-run (PostgreSQL).

Each worker is a real :class:`ProcessRunner` with its own ``Store`` (its own engine and connections,
as on another host) and a :class:`~tests.faults.workers.SteeredJob` in place of spark-submit. The
contract (issue 9, items 8 and "Proof"): exactly one job commits; a worker whose lease was taken over
cannot write its row; a store outage fails the run with a reason, leaves no half-written row, and the
next try recovers.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from airflow_tablemgmt.core.errors import LeaseUnavailable, TableMgmtError
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.lifecycle import RunOutcome, RunRequest, attempt
from tests.faults.conftest import ROUNDS, Figures, PgStores
from tests.faults.workers import WAIT, CommitLog, SteeredJob, register, runner, wait_until
from tests.support.threads import in_thread

pytestmark = pytest.mark.faults

S = ProcessStatus
TABLE = "lake.sales.orders"
ACTION = "rewrite-files"  # mutating: takes the table's lease
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def instant(i: int) -> datetime:
    return T0 + timedelta(hours=i)


@pytest.mark.timeout(60 + 30 * ROUNDS)
def test_workers_racing_on_one_instant_run_one_job(pg: PgStores, figures: Figures) -> None:
    n = 4
    stores = [pg.direct() for _ in range(n)]
    register(stores[0], TABLE, ACTION, "/tmp/tms-faults-wh")

    def one_round(r: int) -> None:
        log = CommitLog()
        jobs = [SteeredJob(f"w{i}", log) for i in range(n)]
        barrier = threading.Barrier(n)
        req = RunRequest(TABLE, ACTION, instant(r), holder="race")

        def work(i: int) -> RunOutcome:
            run = runner(stores[i], jobs[i])
            barrier.wait(WAIT)
            return run.run(req)

        threads = [in_thread(lambda i=i: work(i)) for i in range(n)]  # type: ignore[misc]
        for t, _ in threads:
            t.join(2 * WAIT)
        outcomes = [out[0] for _, out in threads]
        [row] = [p for p in stores[0].processes.list(table_id=TABLE) if p.instant == req.instant]
        figures.concurrent_jobs += max(0, log.max_concurrent - 1) + max(0, len(log.commits) - 1)
        figures.non_terminal += 0 if row.status.is_terminal else 1
        figures.rounds += 1
        assert len(log.commits) == 1 and log.max_concurrent == 1, (log.commits, outcomes)
        assert (row.status, row.attempt, row.summary) == (S.SUCCESS, 1, {"by": log.commits[0]}), outcomes
        for o in outcomes:  # the others reuse the winner's outcome or are refused with a reason
            assert isinstance(o, RunOutcome | TableMgmtError), o
            if isinstance(o, RunOutcome):
                assert o.process.id == row.id

    for r in range(ROUNDS):
        one_round(r)
    print(f"\n{figures}")


@pytest.mark.timeout(60 + 60 * ROUNDS)
def test_a_stalled_worker_past_its_lease_changes_nothing(
    pg: PgStores, figures: Figures, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worker A stalls (process frozen: no heartbeat) before Spark reports its application id; its
    lease lapses and B takes the process over. When A wakes up, its writes must not land on B's
    attempt, and A's job must not commit."""
    store_a, store_b, observer = pg.direct(), pg.direct(), pg.direct()
    frozen: list[object] = []
    real_watchdog, real_heartbeat = attempt.start_watchdog, attempt.heartbeat

    # A frozen process: neither its heartbeat thread nor its lease watchdog gets to run.
    def watchdog(runner, *args):  # type: ignore[no-untyped-def]
        dog = real_watchdog(runner, *args)
        if runner in frozen:
            dog.stop()
        return dog

    def heartbeat(runner, attempt, process, table_id, holder, needs_lease, stop, dog):  # type: ignore[no-untyped-def]
        if runner in frozen:
            stop.wait()
            return
        real_heartbeat(runner, attempt, process, table_id, holder, needs_lease, stop, dog)

    monkeypatch.setattr(attempt, "start_watchdog", watchdog)
    monkeypatch.setattr(attempt, "heartbeat", heartbeat)
    register(observer, TABLE, ACTION, "/tmp/tms-faults-wh")

    def one_round(r: int) -> None:
        log = CommitLog()
        req = RunRequest(TABLE, ACTION, instant(r), holder="stall")
        job_a = SteeredJob("A", log, stall_start=True)
        job_b = SteeredJob("B", log, stall_start=True)
        # A frozen (see above); its lease is short.
        run_a = runner(store_a, job_a, heartbeat_every=timedelta(seconds=0.2), lease_ttl=timedelta(seconds=1))
        frozen.append(run_a)
        t_a, out_a = in_thread(lambda: run_a.run(req))
        assert job_a.entered.wait(WAIT)
        row = observer.processes.find(TABLE, ACTION, req.instant)
        assert row is not None and (row.status, row.attempt) == (S.SUBMITTED, 1)
        wait_until("A's lease to lapse", lambda: observer.leases.get(TABLE).expired(observer.leases.now()))

        run_b = runner(store_b, job_b, stale_after=timedelta(seconds=0.5))
        t_b, out_b = in_thread(lambda: run_b.run(req))
        assert job_b.entered.wait(WAIT), out_b
        taken = observer.processes.get(row.id)
        assert (taken.status, taken.attempt) == (S.SUBMITTED, 2)

        job_a.before_start.set()  # A wakes up: Spark reports its application, then it would commit
        job_a.before_commit.set()
        t_a.join(WAIT)
        after_a = observer.processes.get(row.id)
        late = (after_a.status, after_a.attempt, after_a.external_id) != (S.SUBMITTED, 2, None)

        job_b.before_start.set()
        t_b.join(WAIT)
        final = observer.processes.get(row.id)
        figures.rounds += 1
        figures.late_writes_applied += int(late)
        figures.concurrent_jobs += max(0, len(log.commits) - 1)
        figures.non_terminal += 0 if final.status.is_terminal else 1
        assert not late, f"stalled attempt 1 wrote attempt 2's row: {after_a}"
        assert log.commits == ["B"], (log.commits, out_a, out_b)
        assert (final.status, final.attempt, final.summary, final.external_id) == (
            S.SUCCESS,
            2,
            {"by": "B"},
            "app-B",
        ), (final, out_a, out_b)
        assert isinstance(out_a[0], BaseException) and isinstance(out_b[0], RunOutcome), (out_a, out_b)

    for r in range(ROUNDS):
        one_round(r)
    print(f"\n{figures}")


@pytest.mark.timeout(60 + 60 * ROUNDS)
def test_a_partitioned_worker_that_lost_its_lease_kills_its_job(pg: PgStores, figures: Figures) -> None:
    """A's route to the store is cut mid-job: its heartbeats fail, its lease lapses, B takes over and
    commits. When the route comes back, A's heartbeat learns it lost the process and must kill its
    Spark application (here: the steered job) instead of committing a second rewrite."""
    store_a, store_b, observer = pg.proxied(), pg.direct(), pg.direct()
    register(observer, TABLE, ACTION, "/tmp/tms-faults-wh")

    def one_round(r: int) -> None:
        log = CommitLog()
        req = RunRequest(TABLE, ACTION, instant(r), holder="partition")
        job_a = SteeredJob("A", log, stall_commit=True)
        run_a = runner(store_a, job_a, heartbeat_every=timedelta(seconds=0.2), lease_ttl=timedelta(seconds=4))
        t_a, out_a = in_thread(lambda: run_a.run(req))
        assert job_a.started.wait(WAIT), out_a
        row = wait_until("A RUNNING", lambda: observer.processes.find(TABLE, ACTION, req.instant))
        wait_until("A RUNNING", lambda: observer.processes.get(row.id).status == S.RUNNING)

        pg.proxy.cut()
        wait_until("A's lease to lapse", lambda: observer.leases.get(TABLE).expired(observer.leases.now()))
        job_b = SteeredJob("B", log)
        out_b = [None]
        try:
            out_b[0] = runner(store_b, job_b, stale_after=timedelta(seconds=1)).run(req)
        finally:
            pg.proxy.restore()
        killed = job_a.killed.wait(10)  # A's next heartbeats reach the store again and see the takeover
        job_a.before_commit.set()  # not killed by now: let it finish, and count what it does
        t_a.join(WAIT)
        final = observer.processes.get(row.id)
        figures.rounds += 1
        figures.concurrent_jobs += max(0, len(log.commits) - 1)
        figures.non_terminal += 0 if final.status.is_terminal else 1
        assert isinstance(out_b[0], RunOutcome), out_b
        assert (final.status, final.attempt, final.summary) == (S.SUCCESS, 2, {"by": "B"}), (final, out_a)
        assert killed and log.commits == ["B"], (
            f"A lost its lease but was not stopped (killed={killed}); commits: {log.commits}; A: {out_a}"
        )

    for r in range(ROUNDS):
        one_round(r)
    print(f"\n{figures}")


@pytest.mark.timeout(60 + 60 * ROUNDS)
def test_store_unreachable_mid_run_fails_clearly_and_the_next_try_recovers(
    pg: PgStores, figures: Figures
) -> None:
    observer = pg.direct()
    register(observer, TABLE, ACTION, "/tmp/tms-faults-wh")

    def one_round(r: int) -> None:
        log = CommitLog()
        req = RunRequest(TABLE, ACTION, instant(r), holder="outage")
        job = SteeredJob("A", log, stall_commit=True)
        run_a = runner(pg.proxied(), job, lease_ttl=timedelta(seconds=2))
        t_a, out_a = in_thread(lambda: run_a.run(req))
        assert job.started.wait(WAIT), out_a
        row = wait_until("the RUNNING row", lambda: observer.processes.find(TABLE, ACTION, req.instant))
        wait_until("RUNNING", lambda: observer.processes.get(row.id).status == S.RUNNING)

        pg.proxy.cut()
        job.before_commit.set()  # the job finishes while the store is unreachable
        t_a.join(WAIT)
        assert not t_a.is_alive()
        [error] = out_a
        stuck = observer.processes.get(row.id)
        pg.proxy.restore()

        # No half-written row: the attempt is still the RUNNING one, without an outcome.
        half = (stuck.status, stuck.attempt, stuck.summary, stuck.finished_at) != (S.RUNNING, 1, None, None)
        recovered = runner(pg.proxied(), SteeredJob("retry", log), stale_after=timedelta(seconds=0.5))
        wait_until("the lost attempt's heartbeat to go stale", lambda: _stale(observer, row.id, 0.5))
        for _ in range(
            10
        ):  # the next try; again (as the operator defers) while the lost attempt's lease holds
            try:
                outcome = recovered.run(req)
                break
            except LeaseUnavailable:
                wait_until("the lost attempt's lease to lapse", lambda: _lease_free(observer))
        final = observer.processes.get(row.id)
        figures.rounds += 1
        figures.non_terminal += 0 if final.status.is_terminal else 1
        figures.late_writes_applied += int(half)
        assert isinstance(error, BaseException), error
        assert not half, stuck
        assert outcome.process.id == row.id and (final.status, final.attempt) == (S.SUCCESS, 2), final
        # A's job had committed: the next try records its result instead of running it again.
        assert log.commits == ["A"], log.commits
        assert final.summary == {"by": "A", "recorded_from_attempt": 1}, final.summary
        text = f"{type(error).__name__}: {error}"
        assert "store" in text.lower() and f"127.0.0.1:{pg.proxy.port}" in text, (
            f"the failure should say the store at 127.0.0.1:{pg.proxy.port} was unreachable, got {text}"
        )

    for r in range(ROUNDS):
        one_round(r)
    print(f"\n{figures}")


def _lease_free(store) -> bool:  # type: ignore[no-untyped-def]
    lease = store.leases.get(TABLE)
    return lease is None or lease.expired(store.leases.now())


def _stale(store, process_id: int, seconds: float) -> bool:  # type: ignore[no-untyped-def]
    p = store.processes.get(process_id)
    beat = p.heartbeat_at or p.started_at or p.created_at
    # The store's clock judges staleness, as the workers do.
    return beat is not None and store.processes.now() - beat > timedelta(seconds=seconds)
