"""Superseded workers and cancel, at the store and through ProcessRunner (SQLite and PostgreSQL).

A *stalled worker* is simulated with a submitter whose job blocks on an event: it stands in for
spark-submit because the point here is the lifecycle (who may write the row), not Spark. The store,
the runner, its heartbeat thread and the leases are the real ones.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

from airflow_tablemgmt import lifecycle
from airflow_tablemgmt.core.errors import IllegalTransition, LeaseUnavailable
from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.lifecycle import ProcessCanceled, ProcessRunner, RunRequest
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store
from tests.support.threads import in_thread

pytestmark = pytest.mark.integration

S = ProcessStatus
TABLE = "lake.sales.orders"
ACTION = "rewrite-files"  # mutates: takes the table's lease
T0 = datetime(2025, 3, 1, 3, 0, tzinfo=UTC)
WAIT = 30.0  # bound on every wait for an event in this module


def register(store: Store, table_id: str = TABLE) -> None:
    catalog, namespace, name = table_id.split(".")
    store.catalogs.upsert(CatalogSpec(name=catalog, warehouse="/tmp/tms-race-warehouse"), Owner.STORE)
    spec = TableSpec.model_validate(
        {"catalog": catalog, "namespace": namespace, "name": name, "actions": {ACTION: {}}}
    )
    store.tables.upsert(spec, Owner.STORE)


class BlockingSubmitter:
    """A job that reports an application id, then runs until ``finish`` is set (or it is killed)."""

    def __init__(self, app_id: str, summary: dict[str, Any]) -> None:
        self.app_id = app_id
        self.summary = summary
        self.started = threading.Event()
        self.finish = threading.Event()
        self.killed = threading.Event()

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        if on_started is not None:
            on_started(self.app_id)
        self.started.set()
        self.finish.wait(WAIT)
        if self.killed.is_set():
            return JobResult(status="FAILED", error="killed", error_class="Killed")
        return JobResult(status="SUCCESS", summary=self.summary)

    def kill(self) -> None:
        self.killed.set()
        self.finish.set()


def runner(store: Store, submitter: Any, **kw: Any) -> ProcessRunner:
    kw.setdefault("heartbeat_every", timedelta(seconds=0.2))
    kw.setdefault("lease_ttl", max(timedelta(seconds=30), 3 * kw["heartbeat_every"]))
    # ProcessRunner enforces the timing rules: by default a row is judged by a stale_after that fits.
    kw.setdefault("stale_after", max(2 * kw["heartbeat_every"], kw["lease_ttl"] * 2 / 3))
    return ProcessRunner(store, default_factories(), submitter, **kw)


def wait_until(what: str, check: Callable[[], Any]) -> Any:
    done = threading.Event()
    deadline = WAIT
    while deadline > 0:
        value = check()
        if value:
            return value
        done.wait(0.05)
        deadline -= 0.05
    raise AssertionError(f"timed out after {WAIT}s waiting for {what}")


# -- store level ------------------------------------------------------------------------------


def _attempt2_running(store: Store) -> int:
    p, _ = store.processes.open(TABLE, ACTION, T0)
    store.processes.transition(p.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    store.processes.transition(p.id, S.RUNNING, expected=S.SUBMITTED, attempt=1, external_id="app-1")
    store.processes.transition(p.id, S.FAILED, expected=S.RUNNING, attempt=1, failure_reason="worker lost")
    store.processes.new_attempt(p.id, expected=S.FAILED)
    store.processes.transition(p.id, S.SUBMITTED, expected=S.PENDING, attempt=2)
    store.processes.transition(p.id, S.RUNNING, expected=S.SUBMITTED, attempt=2, external_id="app-2")
    return p.id


def test_a_worker_outcome_must_name_its_attempt(store):
    """Attempt 1 cannot mark attempt 2's row SUCCESS: an unguarded outcome write is refused."""
    pid = _attempt2_running(store)
    with pytest.raises(TypeError, match="attempt"):
        store.processes.transition(pid, S.SUCCESS, expected=S.RUNNING, summary={"by": "attempt 1"})
    with pytest.raises(IllegalTransition, match="RUNNING at attempt 2, expected RUNNING at attempt 1"):
        store.processes.transition(pid, S.SUCCESS, expected=S.RUNNING, attempt=1, summary={"by": "attempt 1"})
    with pytest.raises(IllegalTransition):
        store.processes.heartbeat(pid, 1)
    row = store.processes.get(pid)
    assert (row.status, row.attempt, row.summary, row.external_id) == (S.RUNNING, 2, None, "app-2")


def test_canceled_is_terminal(store):
    p, _ = store.processes.open(TABLE, ACTION, T0)
    store.processes.transition(p.id, S.CANCELED, expected=S.PENDING, failure_reason="canceled by alice")
    with pytest.raises(IllegalTransition, match="CANCELED"):
        store.processes.new_attempt(p.id, expected=S.CANCELED)
    row = store.processes.get(p.id)
    assert (row.status, row.attempt, row.failure_reason) == (S.CANCELED, 1, "canceled by alice")


def test_heartbeat_reports_a_cancel_request(store):
    p, _ = store.processes.open(TABLE, ACTION, T0)
    store.processes.transition(p.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    assert store.processes.heartbeat(p.id, 1) == S.SUBMITTED
    store.processes.transition(p.id, S.CANCELING, expected=S.SUBMITTED, failure_reason="cancel requested")
    assert store.processes.heartbeat(p.id, 1) == S.CANCELING


# -- through ProcessRunner ----------------------------------------------------------------------


def test_stalled_attempt_cannot_overwrite_the_live_attempt(backend):
    """Attempt 1 stalls; the process is closed and retried as attempt 2. When attempt 1 wakes up
    its heartbeat fails: it kills its job, raises, and attempt 2's row keeps attempt 2's outcome."""
    store_a, store_b = backend.store(), backend.store()
    register(store_a)
    stalled = BlockingSubmitter("app-stalled", {"by": "attempt 1"})
    # Attempt 1's job blocks: a stalled worker. The lease TTL leaves its lease watchdog (which stops a job
    # whose renewals have not succeeded for the TTL minus a beat) out of this: on a loaded machine a 1 s
    # TTL let the watchdog end attempt 1 before the test saw it RUNNING.
    a = runner(store_a, stalled, heartbeat_every=timedelta(seconds=0.2), lease_ttl=timedelta(seconds=10))
    thread_a, out_a = in_thread(lambda: a.run(RunRequest(TABLE, ACTION, T0, holder="worker-a")))
    assert stalled.started.wait(WAIT)
    p = wait_until(
        "attempt 1 RUNNING",
        lambda: (r := store_b.processes.find(TABLE, ACTION, T0)) and r.status == S.RUNNING and r,
    )

    # Someone (the reaper, an operator) declares attempt 1 lost and a retry starts attempt 2.
    store_b.processes.transition(p.id, S.FAILED, expected=S.RUNNING, attempt=1, failure_reason="lost")
    store_b.processes.new_attempt(p.id, expected=S.FAILED)

    thread_a.join(WAIT)
    assert not thread_a.is_alive()
    [err] = out_a
    assert isinstance(err, lifecycle.WorkerSuperseded), err
    assert "attempt 1" in str(err) and "killed" in str(err)
    assert stalled.killed.is_set()  # it killed its own job
    row = store_b.processes.get(p.id)
    assert (row.status, row.attempt, row.summary) == (S.PENDING, 2, None)


def test_lost_lease_kills_the_job_and_writes_nothing(backend):
    """Another worker takes the table's lease: the runner's renewal fails, it kills its job and
    leaves the row to whoever owns the table now (no SUCCESS written over it)."""
    store_a, store_b = backend.store(), backend.store()
    register(store_a)
    job = BlockingSubmitter("app-a", {"by": "worker a"})
    a = runner(store_a, job)
    thread_a, out_a = in_thread(lambda: a.run(RunRequest(TABLE, ACTION, T0, holder="worker-a")))
    assert job.started.wait(WAIT)
    lease = store_b.leases.get(TABLE)
    assert lease is not None and ":worker-a:" in lease.holder
    # Simulate the lease lapsing and a peer taking it over (the peer's delete + insert).
    assert store_b.leases.release(TABLE, lease.holder)
    assert store_b.leases.acquire(TABLE, "peer", timedelta(minutes=5))

    thread_a.join(WAIT)
    assert not thread_a.is_alive()
    [err] = out_a
    assert isinstance(err, lifecycle.WorkerSuperseded) and "lease" in str(err), err
    assert job.killed.is_set()
    row = store_b.processes.find(TABLE, ACTION, T0)
    assert row is not None and row.summary is None and row.status != S.SUCCESS
    assert store_b.leases.get(TABLE).holder == "peer"  # not released by the loser


def test_cancel_during_a_run_kills_the_job_and_ends_canceled(backend):
    store_a, store_b = backend.store(), backend.store()
    register(store_a)
    job = BlockingSubmitter("app-c", {"by": "worker"})
    a = runner(store_a, job)
    thread_a, out_a = in_thread(lambda: a.run(RunRequest(TABLE, ACTION, T0, holder="worker-a")))
    assert job.started.wait(WAIT)
    p = wait_until(
        "RUNNING", lambda: (r := store_b.processes.find(TABLE, ACTION, T0)) and r.status == S.RUNNING and r
    )
    store_b.processes.transition(
        p.id, S.CANCELING, expected=S.RUNNING, failure_reason="cancel requested by bob"
    )

    thread_a.join(WAIT)
    assert not thread_a.is_alive()
    [err] = out_a
    assert isinstance(err, ProcessCanceled) and "canceled" in str(err), err
    assert job.killed.is_set()
    row = store_b.processes.get(p.id)
    assert row.status == S.CANCELED and row.finished_at is not None
    assert "cancel requested by bob" in (row.failure_reason or "")
    assert store_b.leases.get(TABLE) is None

    # A later try of the same task does not re-open it.
    again = runner(store_b, BlockingSubmitter("app-never", {}))
    with pytest.raises(ProcessCanceled, match=f"process {p.id} was canceled"):
        again.run(RunRequest(TABLE, ACTION, T0, holder="worker-b"))
    assert store_b.processes.get(p.id).status == S.CANCELED


def test_takeover_waits_for_the_lost_attempts_live_lease(backend):
    """A retry of a RUNNING process whose worker stopped heartbeating does not release the old
    attempt's live lease: the process stays PENDING (attempt 2) until that lease lapses."""
    store = backend.store()
    register(store)
    p, _ = store.processes.open(TABLE, ACTION, T0)
    store.processes.transition(p.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    store.processes.transition(p.id, S.RUNNING, expected=S.SUBMITTED, attempt=1, external_id="app-old")
    old_holder = f"process:{p.id}:attempt:1:worker-a"
    assert store.leases.acquire(TABLE, old_holder, timedelta(minutes=5))

    b = runner(store, BlockingSubmitter("app-new", {}), stale_after=timedelta(seconds=1))
    with store.engine.begin() as conn:  # the old worker's last heartbeat: long ago (database time)
        conn.execute(text("UPDATE tms_process SET heartbeat_at = :t"), {"t": T0.replace(tzinfo=None)})
    with pytest.raises(LeaseUnavailable, match="stays PENDING"):
        b.run(RunRequest(TABLE, ACTION, T0, holder="worker-b"))
    row = store.processes.get(p.id)
    assert (row.status, row.attempt) == (S.PENDING, 2)
    assert store.leases.get(TABLE).holder == old_holder  # still the old attempt's


class KillableSubmitter(BlockingSubmitter):
    """A submitter whose engine can kill an application by id (as a standalone cluster master can)."""

    def __init__(self, *args: Any, acknowledge: bool) -> None:
        super().__init__(*args)
        self.acknowledge = acknowledge
        self.killed_ids: list[str] = []

    def kill_application(self, application_id: str) -> bool:
        self.killed_ids.append(application_id)
        return self.acknowledge

    def application_finished(self, application_id: str) -> bool:
        """The master reports the killed application ended (the lease is released only then)."""
        return application_id in self.killed_ids


@pytest.mark.parametrize("acknowledged", [True, False], ids=["kill-acknowledged", "kill-unsupported"])
def test_takeover_kills_the_lost_application_by_id_before_reusing_its_lease(store, acknowledged):
    """Where the engine acknowledges killing the lost attempt's application by id and then reports it
    ended, the lease is released and attempt 2 runs at once; otherwise attempt 2 waits for the lease
    (stays PENDING)."""
    register(store)
    p, _ = store.processes.open(TABLE, ACTION, T0)
    store.processes.transition(p.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    store.processes.transition(p.id, S.RUNNING, expected=S.SUBMITTED, attempt=1, external_id="driver-old")
    assert store.leases.acquire(TABLE, f"process:{p.id}:attempt:1:worker-a", timedelta(minutes=5))
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE tms_process SET heartbeat_at = :t"), {"t": T0.replace(tzinfo=None)})
    job = KillableSubmitter("app-new", {"by": "attempt 2"}, acknowledge=acknowledged)
    job.finish.set()
    b = runner(store, job, stale_after=timedelta(seconds=1))
    if acknowledged:
        outcome = b.run(RunRequest(TABLE, ACTION, T0, holder="worker-b"))
        assert (outcome.process.status, outcome.process.attempt, outcome.summary) == (
            S.SUCCESS,
            2,
            {"by": "attempt 2"},
        )
    else:
        with pytest.raises(LeaseUnavailable, match="stays PENDING"):
            b.run(RunRequest(TABLE, ACTION, T0, holder="worker-b"))
        assert store.leases.get(TABLE).holder == f"process:{p.id}:attempt:1:worker-a"
    assert job.killed_ids == ["driver-old"]


class StallingSubmitter(BlockingSubmitter):
    """Stalls before Spark reports its application (``go``), then runs until killed or finished."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.entered = threading.Event()
        self.go = threading.Event()

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        self.entered.set()
        self.go.wait(WAIT)
        return super().submit(job, on_started)


def test_a_worker_superseded_while_its_job_starts_kills_it_at_once(backend):
    """A frozen worker (its heartbeat thread never runs) is superseded before Spark reports its
    application; when the report comes, the worker learns it lost the row and kills the job
    right away instead of letting it run to a commit."""
    store_a, store_b = backend.store(), backend.store()
    register(store_a)
    job = StallingSubmitter("app-late", {"by": "attempt 1"})
    a = runner(store_a, job, heartbeat_every=timedelta(hours=1))
    thread_a, out_a = in_thread(lambda: a.run(RunRequest(TABLE, ACTION, T0, holder="worker-a")))
    assert job.entered.wait(WAIT)
    p = store_b.processes.find(TABLE, ACTION, T0)
    assert (p.status, p.attempt) == (S.SUBMITTED, 1)
    store_b.processes.transition(p.id, S.FAILED, expected=S.SUBMITTED, attempt=1, failure_reason="lost")
    store_b.processes.new_attempt(p.id, expected=S.FAILED)
    job.go.set()
    thread_a.join(WAIT)
    assert not thread_a.is_alive()
    [err] = out_a
    assert isinstance(err, lifecycle.WorkerSuperseded) and "superseded while its job started" in str(err), err
    assert job.killed.is_set()
    row = store_b.processes.get(p.id)
    assert (row.status, row.attempt, row.external_id, row.summary) == (S.PENDING, 2, None, None)
