"""ProcessRunner's state machine on a real SQLite store with a stand-in submitter: success, failure,
retry, reuse, the lease, cancel, and the declared store-aware factory contract."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest

from airflow_tablemgmt.core.errors import JobFailed, LeaseUnavailable
from airflow_tablemgmt.core.factory import StoreAwareFactory, TableOutcome
from airflow_tablemgmt.core.process import ProcessStatus as S
from airflow_tablemgmt.lifecycle import ProcessCanceled, RunRequest
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store
from tests.unit.lifecycle.stand_ins import (
    ACTION,
    SUMMARY,
    TABLE,
    StandInSubmitter,
    StoreAwareStandIn,
    instant,
    make_store,
    registry,
    runner,
)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return make_store(tmp_path)


def test_a_successful_job_records_success_with_its_summary(store: Store, tmp_path: Path) -> None:
    sub = StandInSubmitter()
    outcome = runner(store, sub, tmp_path).run(RunRequest(TABLE, ACTION, instant(1)))
    row = store.processes.get(outcome.process.id)
    assert (row.status, row.attempt, row.summary) == (S.SUCCESS, 1, SUMMARY)
    assert row.snapshot_id == 77 and row.external_id == "local-1"
    assert outcome.summary == SUMMARY and not outcome.reused and outcome.table_state is None
    assert len(sub.jobs) == 1 and sub.jobs[0].process_id == row.id and sub.jobs[0].attempt == 1
    assert store.leases.get(TABLE) is None  # released


def test_the_same_instant_again_reuses_the_success(store: Store, tmp_path: Path) -> None:
    sub = StandInSubmitter()
    first = runner(store, sub, tmp_path).run(RunRequest(TABLE, ACTION, instant(1)))
    again = runner(store, sub, tmp_path).run(RunRequest(TABLE, ACTION, instant(1)))
    assert again.reused and again.process.id == first.process.id and again.summary == SUMMARY
    assert len(sub.jobs) == 1


def test_a_failed_job_records_failed_and_the_next_try_is_attempt_2(store: Store, tmp_path: Path) -> None:
    failing = StandInSubmitter(JobResult(status="FAILED", error="executor lost"))
    with pytest.raises(JobFailed, match="executor lost"):
        runner(store, failing, tmp_path).run(RunRequest(TABLE, ACTION, instant(2)))
    row = store.processes.find(TABLE, ACTION, instant(2))
    assert row is not None and row.status == S.FAILED and "executor lost" in (row.failure_reason or "")

    outcome = runner(store, StandInSubmitter(), tmp_path).run(RunRequest(TABLE, ACTION, instant(2)))
    assert (outcome.process.id, outcome.process.status, outcome.process.attempt) == (row.id, S.SUCCESS, 2)


def test_a_submitter_that_raises_records_failed(store: Store, tmp_path: Path) -> None:
    sub = StandInSubmitter(error=RuntimeError("spark-submit not found"))
    with pytest.raises(RuntimeError, match="spark-submit not found"):
        runner(store, sub, tmp_path).run(RunRequest(TABLE, ACTION, instant(3)))
    row = store.processes.find(TABLE, ACTION, instant(3))
    assert row is not None and row.status == S.FAILED
    assert row.failure_reason == "RuntimeError: spark-submit not found"
    assert store.leases.get(TABLE) is None


def test_a_held_lease_leaves_the_process_pending_and_submits_nothing(store: Store, tmp_path: Path) -> None:
    assert store.leases.acquire(TABLE, "someone-else", timedelta(minutes=2))
    sub = StandInSubmitter()
    with pytest.raises(LeaseUnavailable, match="someone-else"):
        runner(store, sub, tmp_path).run(RunRequest(TABLE, ACTION, instant(4)))
    row = store.processes.find(TABLE, ACTION, instant(4))
    assert row is not None and row.status == S.PENDING and sub.jobs == []


def test_a_second_runner_while_the_first_holds_the_lease_does_not_submit(
    store: Store, tmp_path: Path
) -> None:
    release = threading.Event()
    first = StandInSubmitter(hold=release)
    second = StandInSubmitter()
    pool = ThreadPoolExecutor(1)
    running = pool.submit(runner(store, first, tmp_path).run, RunRequest(TABLE, ACTION, instant(5)))
    try:
        assert first.submitting.wait(10), "the first runner never submitted"
        with pytest.raises(LeaseUnavailable):
            runner(store, second, tmp_path).run(RunRequest(TABLE, ACTION, instant(6), holder="second"))
        assert second.jobs == []
        waiting = store.processes.find(TABLE, ACTION, instant(6))
        assert waiting is not None and waiting.status == S.PENDING
    finally:
        release.set()
    outcome = running.result(timeout=30)
    pool.shutdown()
    assert outcome.process.status == S.SUCCESS
    later = runner(store, second, tmp_path).run(RunRequest(TABLE, ACTION, instant(6), holder="second"))
    assert later.process.status == S.SUCCESS and len(second.jobs) == 1


def test_a_canceled_process_is_never_run_again(store: Store, tmp_path: Path) -> None:
    process, _ = store.processes.open(TABLE, ACTION, instant(7))
    store.processes.transition(process.id, S.CANCELED, expected=S.PENDING, failure_reason="by a user")
    sub = StandInSubmitter()
    with pytest.raises(ProcessCanceled, match="by a user"):
        runner(store, sub, tmp_path).run(RunRequest(TABLE, ACTION, instant(7)))
    assert sub.jobs == []


# -- the declared store-aware factory contract -------------------------------------------------------


def test_the_stand_in_declares_the_store_aware_contract() -> None:
    assert isinstance(StoreAwareStandIn(), StoreAwareFactory)


def test_a_store_aware_factory_makes_the_job_completes_the_summary_and_hears_the_outcome(
    store: Store, tmp_path: Path
) -> None:
    factory = StoreAwareStandIn()
    sub = StandInSubmitter()
    outcome = runner(store, sub, tmp_path, registry(factory)).run(RunRequest(TABLE, ACTION, instant(8)))
    assert sub.jobs[0].options == {"from": "stand-in"}
    assert [p.id for p in factory.triggered] == [outcome.process.id]
    assert outcome.summary == {**SUMMARY, "completed_by": "stand-in"}
    assert store.processes.get(outcome.process.id).summary == outcome.summary
    ((process, summary, error),) = factory.finished
    assert (process.id, process.status, summary, error) == (
        outcome.process.id,
        S.SUCCESS,
        outcome.summary,
        None,
    )
    assert outcome.table_state == TableOutcome(state="ACTIVE")


def test_a_store_aware_factory_hears_a_final_failure_and_the_runner_keeps_its_typed_outcome(
    store: Store, tmp_path: Path
) -> None:
    factory = StoreAwareStandIn()
    run = runner(
        store, StandInSubmitter(JobResult(status="FAILED", error="bad query")), tmp_path, registry(factory)
    )
    with pytest.raises(JobFailed):
        run.run(RunRequest(TABLE, ACTION, instant(9)))
    ((process, summary, error),) = factory.finished
    assert process.status == S.FAILED and summary is None and "bad query" in (error or "")
    assert run.table_outcome is not None and run.table_outcome.state == "SUSPENDED"
    assert run.table_outcome.halted and "is now suspended" in run.table_outcome.halted


def test_a_failure_that_is_not_the_last_try_is_not_reported(store: Store, tmp_path: Path) -> None:
    factory = StoreAwareStandIn()
    run = runner(
        store, StandInSubmitter(JobResult(status="FAILED", error="flaky")), tmp_path, registry(factory)
    )
    with pytest.raises(JobFailed):
        run.run(RunRequest(TABLE, ACTION, instant(10), last_try=False))
    assert factory.finished == [] and run.table_outcome is None


def test_a_store_aware_factory_may_answer_without_a_job(store: Store, tmp_path: Path) -> None:
    factory = StoreAwareStandIn(no_job={"refresh_action": "NO_DATA"})
    sub = StandInSubmitter()
    outcome = runner(store, sub, tmp_path, registry(factory)).run(RunRequest(TABLE, ACTION, instant(11)))
    assert sub.jobs == []
    assert outcome.process.status == S.SUCCESS
    assert outcome.summary == {"refresh_action": "NO_DATA", "completed_by": "stand-in"}
    assert outcome.table_state == TableOutcome(state="ACTIVE")
