"""Processes: one row per (table, action, instant), guarded transitions, attempts, queries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from airflow_tablemgmt.core.errors import IllegalTransition, ProcessNotFound
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.store import Store

pytestmark = pytest.mark.integration

S = ProcessStatus
TABLE = "lake.sales.orders"
ACTION = "expire-snapshots"
T0 = datetime(2025, 3, 1, 3, 0, tzinfo=UTC)


def run_to(store: Store, process: Process, *path: ProcessStatus, **fields: object) -> Process:
    """Walk ``process`` through ``path``, each step expecting the previous status."""
    for status in path:
        process = store.processes.transition(
            process.id, status, expected=process.status, attempt=process.attempt, **fields
        )
    return process


def test_open_twice_returns_one_process(store):
    first, created = store.processes.open(
        TABLE, ACTION, T0, parameters={"retain-last": 3}, dag_id="d", run_id="r"
    )
    again, created_again = store.processes.open(TABLE, ACTION, T0)
    assert (created, created_again) == (True, False)
    assert again == first
    assert (first.status, first.attempt, first.parameters, first.dag_id) == (
        S.PENDING,
        1,
        {"retain-last": 3},
        "d",
    )
    assert len(store.processes.list(table_id=TABLE)) == 1


def test_open_normalizes_the_instant_to_utc_and_refuses_naive(store):
    ist = timezone(timedelta(hours=5, minutes=30))
    process, _ = store.processes.open(TABLE, ACTION, datetime(2025, 3, 1, 8, 30, tzinfo=ist))
    assert process.instant == T0 and process.instant.tzinfo is UTC
    assert store.processes.find(TABLE, ACTION, T0) == process
    with pytest.raises(ValueError, match="instant: naive datetime"):
        store.processes.open(TABLE, ACTION, datetime(2025, 3, 1))


def test_concurrent_open_from_eight_threads_creates_one_row(backend, race):
    stores = [backend.store() for _ in range(8)]
    stores[0].processes.list()  # schema first, so the race is about the row
    results = race(8, lambda i: stores[i].processes.open(TABLE, ACTION, T0, task_id=f"t{i}"))
    assert not [r for r in results if isinstance(r, BaseException)], results
    assert sorted(created for _, created in results) == [False] * 7 + [True]
    assert len({p.id for p, _ in results}) == 1
    assert len(stores[0].processes.list(table_id=TABLE, limit=None)) == 1


def test_lifecycle_sets_timestamps_and_fields(store):
    process, _ = store.processes.open(TABLE, ACTION, T0)
    submitted = store.processes.transition(
        process.id, S.SUBMITTED, expected=S.PENDING, external_id="app-1", attempt=1
    )
    assert submitted.external_id == "app-1" and submitted.started_at is None
    running = store.processes.transition(process.id, S.RUNNING, expected=S.SUBMITTED, attempt=1)
    assert running.started_at is not None and running.finished_at is None
    done = store.processes.transition(
        process.id,
        S.SUCCESS,
        expected=[S.RUNNING],
        summary={"files-before": 10, "files-after": 2},
        snapshot_id=2**62,
        attempt=1,
    )
    assert done.status == S.SUCCESS
    assert done.summary == {"files-before": 10, "files-after": 2}
    assert done.snapshot_id == 2**62
    assert done.started_at == running.started_at <= done.finished_at
    for value in (done.instant, done.created_at, done.started_at, done.finished_at):
        assert value is not None and value.tzinfo is UTC


def test_explicit_timestamps_are_stored_in_utc(store):
    process, _ = store.processes.open(TABLE, ACTION, T0)
    at = datetime(2025, 3, 1, 9, 0, tzinfo=timezone(timedelta(hours=6)))
    process = run_to(store, process, S.SUBMITTED)
    running = store.processes.transition(
        process.id, S.RUNNING, expected=S.SUBMITTED, started_at=at, attempt=1
    )
    assert running.started_at == datetime(2025, 3, 1, 3, 0, tzinfo=UTC)
    assert running.started_at.tzinfo is UTC


def test_second_conflicting_transition_names_the_actual_status(store):
    process, _ = store.processes.open(TABLE, ACTION, T0)
    store.processes.transition(process.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    with pytest.raises(
        IllegalTransition, match=r"cannot go to CANCELING: it is SUBMITTED at attempt 1, expected PENDING"
    ):
        store.processes.transition(process.id, S.CANCELING, expected=S.PENDING)
    assert store.processes.get(process.id).status == S.SUBMITTED


def test_illegal_transition_is_refused_before_touching_the_row(store):
    process, _ = store.processes.open(TABLE, ACTION, T0)
    done = run_to(store, process, S.SUBMITTED, S.RUNNING, S.SUCCESS)
    with pytest.raises(
        IllegalTransition, match=r"cannot go from SUCCESS to RUNNING; allowed from SUCCESS: none"
    ):
        store.processes.transition(done.id, S.RUNNING, expected=S.SUCCESS, attempt=1)
    with pytest.raises(IllegalTransition, match=r"it is SUCCESS at attempt 1, expected RUNNING"):
        store.processes.transition(done.id, S.FAILED, expected=S.RUNNING, attempt=1)
    assert store.processes.get(done.id) == done


def test_transition_refuses_unknown_fields_and_missing_processes(store):
    process, _ = store.processes.open(TABLE, ACTION, T0)
    with pytest.raises(TypeError, match="unknown field.*status_code"):
        store.processes.transition(process.id, S.SUBMITTED, expected=S.PENDING, status_code=1, attempt=1)
    with pytest.raises(ProcessNotFound, match="no process with id 999999"):
        store.processes.transition(999_999, S.SUBMITTED, expected=S.PENDING, attempt=1)
    with pytest.raises(ProcessNotFound):
        store.processes.get(999_999)


def test_racing_transitions_have_one_winner(backend, race):
    store = backend.store()
    process, _ = store.processes.open(TABLE, ACTION, T0)
    stores = [backend.store() for _ in range(8)]
    results = race(
        8, lambda i: stores[i].processes.transition(process.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    )
    winners = [r for r in results if isinstance(r, Process)]
    losers = [r for r in results if isinstance(r, IllegalTransition)]
    assert (len(winners), len(losers)) == (1, 7), results
    assert all("it is SUBMITTED" in str(e) for e in losers)


def test_new_attempt_reopens_a_failed_process(store):
    process, _ = store.processes.open(TABLE, ACTION, T0)
    failed = run_to(store, process, S.SUBMITTED, S.RUNNING, external_id="app-1")
    failed = store.processes.transition(
        failed.id, S.FAILED, expected=S.RUNNING, failure_reason="OOM", attempt=1
    )

    retry = store.processes.new_attempt(failed.id, expected=[S.FAILED, S.KILLED])
    assert (retry.id, retry.status, retry.attempt) == (failed.id, S.PENDING, 2)
    assert (retry.external_id, retry.summary, retry.failure_reason, retry.finished_at) == (
        None,
        None,
        None,
        None,
    )

    # The first attempt's worker is stale: its attempt-guarded transitions lose.
    with pytest.raises(IllegalTransition, match=r"it is PENDING at attempt 2, expected PENDING at attempt 1"):
        store.processes.transition(retry.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    with pytest.raises(IllegalTransition, match="attempt 1 is no longer running"):
        store.processes.heartbeat(retry.id, 1)
    store.processes.heartbeat(retry.id, 2)
    assert store.processes.get(retry.id).heartbeat_at is not None


def test_new_attempt_refuses_success_and_unexpected_status(store):
    process, _ = store.processes.open(TABLE, ACTION, T0)
    with pytest.raises(IllegalTransition, match="cannot go from SUCCESS to PENDING"):
        store.processes.new_attempt(process.id, expected=S.SUCCESS)
    with pytest.raises(IllegalTransition, match="it is PENDING at attempt 1, expected FAILED"):
        store.processes.new_attempt(process.id, expected=S.FAILED)


def test_racing_retries_create_one_new_attempt(backend, race):
    store = backend.store()
    process, _ = store.processes.open(TABLE, ACTION, T0)
    run_to(store, process, S.SUBMITTED, S.RUNNING, S.KILLED)
    stores = [backend.store() for _ in range(8)]
    results = race(8, lambda i: stores[i].processes.new_attempt(process.id, expected=S.KILLED))
    winners = [r for r in results if isinstance(r, Process)]
    assert len(winners) == 1 and winners[0].attempt == 2, results
    assert all(isinstance(r, IllegalTransition) for r in results if r not in winners)
    assert store.processes.get(process.id).attempt == 2


def test_list_last_successful_and_active(store):
    def opened(table_id: str, action: str, hours: int) -> Process:
        return store.processes.open(table_id, action, T0 + timedelta(hours=hours))[0]

    old_ok = run_to(store, opened(TABLE, ACTION, 0), S.SUBMITTED, S.RUNNING, S.SUCCESS)
    new_ok = run_to(store, opened(TABLE, ACTION, 2), S.SUBMITTED, S.RUNNING, S.SUCCESS)
    run_to(store, opened(TABLE, ACTION, 3), S.SUBMITTED, S.FAILED)
    running = run_to(store, opened(TABLE, ACTION, 4), S.SUBMITTED, S.RUNNING)
    other = opened("lake.sales.items", ACTION, 1)
    compaction = opened(TABLE, "rewrite-data-files", 5)

    assert store.processes.last_successful(TABLE, ACTION) == new_ok
    assert store.processes.last_successful(TABLE, "rewrite-data-files") is None
    assert [p.instant for p in store.processes.list(table_id=TABLE, action=ACTION)] == [
        T0 + timedelta(hours=h) for h in (4, 3, 2, 0)
    ]
    assert store.processes.list(table_id=TABLE, action=ACTION, status=S.SUCCESS) == [new_ok, old_ok]
    assert len(store.processes.list(status=[S.SUCCESS, S.FAILED])) == 3
    assert len(store.processes.list(limit=2)) == 2
    assert store.processes.active() == [other, running, compaction]
    assert store.processes.active(TABLE) == [running, compaction]
    assert store.processes.find(TABLE, ACTION, T0 + timedelta(hours=9)) is None
