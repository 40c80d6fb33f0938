"""Clocks: lease expiry and heartbeat staleness are judged by the database's clock, not a worker's.

Two workers share one store; one of them runs with its Python clock 70 s ahead or behind (the
module-level clocks the store and the lifecycle would use are shifted while that worker acts). A
70-second skew must change nothing, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest

from airflow_tablemgmt import lifecycle
from airflow_tablemgmt.core.errors import LeaseUnavailable
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest
from airflow_tablemgmt.store import clock, leases, processes
from tests.integration.store.test_store_races import (
    ACTION,
    T0,
    TABLE,
    BlockingSubmitter,
    in_thread,
    register,
    wait_until,
)

pytestmark = pytest.mark.integration

S = ProcessStatus
SKEW = timedelta(seconds=70)


@pytest.fixture
def skewed(monkeypatch: pytest.MonkeyPatch) -> Callable[[timedelta], object]:
    """``with skewed(d):`` runs its block with this host's Python clock shifted by ``d``."""

    @contextmanager
    def shift(d: timedelta) -> Iterator[None]:
        def now() -> datetime:
            return datetime.now(UTC) + d

        with monkeypatch.context() as m:
            # Every place a Python-side "now" could come from, including names bound by import.
            for module in (clock, leases, processes, lifecycle):
                m.setattr(module, "utcnow", now, raising=False)
            yield

    return shift


@pytest.mark.parametrize("skew", [SKEW, -SKEW], ids=["ahead", "behind"])
def test_a_skewed_worker_neither_steals_nor_loses_a_live_lease(backend, skewed, skew):
    a, b = backend.store(), backend.store()
    ttl = timedelta(seconds=60)
    # Worker A (skewed) takes the lease; worker B (true clock) must still find it live.
    with skewed(skew):
        assert a.leases.acquire(TABLE, "worker-a", ttl) is True
    assert b.leases.acquire(TABLE, "worker-b", ttl) is False
    # And the other way round: B holds it, the skewed A must not take it over.
    assert a.leases.release(TABLE, "worker-a") is True
    assert b.leases.acquire(TABLE, "worker-b", ttl) is True
    with skewed(skew):
        assert a.leases.acquire(TABLE, "worker-a", ttl) is False
    lease = b.leases.get(TABLE)
    assert lease.holder == "worker-b"
    # The expiry is database time + ttl, whoever's clock is off.
    assert abs((lease.expires_at - b.leases.now()) - ttl) < timedelta(seconds=10)


@pytest.mark.parametrize("skew", [SKEW, -SKEW], ids=["ahead", "behind"])
def test_a_skewed_worker_does_not_declare_a_live_worker_lost(backend, skewed, skew):
    """Worker A runs a job and heartbeats (with or without skew); worker B, with the other clock,
    asks to run the same process. With a 60 s staleness bound, a 70 s skew must not make A's fresh
    heartbeat look stale (or B would close A's row and start a second job)."""
    a_store, b_store = backend.store(), backend.store()
    register(a_store)
    job = BlockingSubmitter("app-a", {"by": "a"})
    stale = timedelta(seconds=60)
    a = ProcessRunner(
        a_store, default_factories(), job, heartbeat_every=timedelta(seconds=0.2), stale_after=stale
    )
    b = ProcessRunner(
        b_store,
        default_factories(),
        BlockingSubmitter("app-b", {}),
        stale_after=stale,
        wait_for_peer=timedelta(seconds=1),
    )
    with skewed(-skew):  # A's clock: the opposite of B's, so the two are 2 x 70 s apart at worst
        thread_a, out_a = in_thread(lambda: a.run(RunRequest(TABLE, ACTION, T0, holder="worker-a")))
        assert job.started.wait(30)
        p = wait_until(
            "A RUNNING",
            lambda: (r := b_store.processes.find(TABLE, ACTION, T0)) and r.status == S.RUNNING and r,
        )
        # Let A's heartbeat thread stamp the row at least once under its skewed clock.
        first = p.heartbeat_at
        wait_until("a heartbeat", lambda: b_store.processes.get(p.id).heartbeat_at != first)
    with skewed(skew):
        with pytest.raises(LeaseUnavailable, match="gave up waiting for the live worker running it"):
            b.run(RunRequest(TABLE, ACTION, T0, holder="worker-b"))
    row = b_store.processes.get(p.id)
    assert (row.status, row.attempt, row.failure_reason) == (S.RUNNING, 1, None)
    job.finish.set()
    thread_a.join(30)
    [outcome] = out_a
    assert isinstance(outcome, lifecycle.RunOutcome), outcome
    assert b_store.processes.get(p.id).status == S.SUCCESS
