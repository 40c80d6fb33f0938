"""The reaper: nothing stays stuck in PENDING / SUBMITTED / RUNNING / CANCELING once its worker is gone."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast

import pytest
from sqlalchemy import Table, update

from airflow_tablemgmt.core.errors import LeaseUnavailable
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.models import ProcessRow
from tests.integration.store.test_store_races import ACTION, T0, TABLE, BlockingSubmitter, register

pytestmark = pytest.mark.integration

S = ProcessStatus
STALE = timedelta(seconds=90)
_T = cast(Table, ProcessRow.__table__)


def backdate(store: Store, process_id: int, ago: timedelta, *columns: str) -> datetime:
    """Set ``columns`` of a row to database-now minus ``ago`` (as a worker that stopped would leave them)."""
    at = store.processes.now() - ago
    with store.engine.begin() as conn:
        conn.execute(update(_T).where(_T.c.id == process_id).values(**dict.fromkeys(columns, at)))
    return at


def process_in(store: Store, hours: int, *path: ProcessStatus, **fields: Any) -> Process:
    p, _ = store.processes.open(TABLE, ACTION, T0 + timedelta(hours=hours))
    for status in path:
        if status == S.CANCELING:
            p = store.processes.transition(p.id, status, expected=p.status, failure_reason="cancel by bob")
        else:
            p = store.processes.transition(p.id, status, expected=p.status, attempt=p.attempt, **fields)
    return p


def test_reaper_closes_rows_whose_worker_is_gone_and_only_those(store):
    submitted = process_in(store, 0, S.SUBMITTED)
    running = process_in(store, 1, S.SUBMITTED, S.RUNNING)
    canceling = process_in(store, 2, S.SUBMITTED, S.RUNNING, S.CANCELING)
    pending_old = process_in(store, 3)
    pending_waiting = process_in(store, 4)  # waits for a lease: old, but within the PENDING bound
    live = process_in(store, 5, S.SUBMITTED, S.RUNNING)
    done = process_in(store, 6, S.SUBMITTED, S.RUNNING, S.SUCCESS)

    beats = {
        p.id: backdate(store, p.id, STALE + timedelta(seconds=30), "heartbeat_at")
        for p in (submitted, running, canceling, done)
    }
    backdate(store, pending_old.id, timedelta(hours=1), "created_at", "heartbeat_at")
    backdate(store, pending_waiting.id, timedelta(minutes=5), "created_at", "heartbeat_at")
    backdate(store, live.id, timedelta(seconds=10), "heartbeat_at")

    reaped = store.processes.reap(STALE, pending_after=timedelta(minutes=15))

    assert sorted(r.process.id for r in reaped) == sorted(
        [submitted.id, running.id, canceling.id, pending_old.id]
    )
    by_id = {r.process.id: r for r in reaped}
    for p, was, now in [
        (submitted, S.SUBMITTED, S.FAILED),
        (running, S.RUNNING, S.FAILED),
        (canceling, S.CANCELING, S.CANCELED),
        (pending_old, S.PENDING, S.FAILED),
    ]:
        row = store.processes.get(p.id)
        assert (by_id[p.id].was, row.status, row.finished_at is not None) == (was, now, True)
        assert row.failure_reason.startswith("reaped: ") or "reaped: " in row.failure_reason
        assert f"attempt 1 was {was}" in row.failure_reason
    for pid in (submitted.id, running.id):
        reason = store.processes.get(pid).failure_reason
        assert f"last heartbeat at {beats[pid].isoformat()}" in reason and "more than 90s ago" in reason
    assert store.processes.get(canceling.id).failure_reason.startswith("cancel by bob; reaped: ")
    assert "more than 900s ago" in store.processes.get(pending_old.id).failure_reason
    for p in (pending_waiting, live, done):
        assert store.processes.get(p.id).status == p.status
    assert store.processes.reap(STALE, pending_after=timedelta(minutes=15)) == []  # idempotent


def test_reaper_bounds_must_be_positive(store):
    with pytest.raises(ValueError, match="stale_after: must be positive"):
        store.processes.reap(timedelta(0))
    with pytest.raises(ValueError, match="pending_after: must be positive"):
        store.processes.reap(STALE, pending_after=timedelta(seconds=-1))


def test_a_task_waiting_for_a_lease_keeps_its_pending_row_alive(store):
    """Each time a task finds the table leased (and then defers), it stamps its PENDING row, so the
    reaper never closes the row of a task that is still waiting."""
    register(store)
    p, _ = store.processes.open(TABLE, ACTION, T0)
    backdate(store, p.id, timedelta(hours=2), "created_at", "heartbeat_at")
    assert store.leases.acquire(TABLE, "someone-else", timedelta(minutes=10))
    runner = ProcessRunner(store, default_factories(), BlockingSubmitter("never", {}), stale_after=STALE)
    with pytest.raises(LeaseUnavailable, match="stays PENDING"):
        runner.run(RunRequest(TABLE, ACTION, T0, holder="waiting-task"))
    assert store.processes.reap(STALE, pending_after=timedelta(minutes=15)) == []
    assert store.processes.get(p.id).status == S.PENDING
