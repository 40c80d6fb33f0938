"""Another worker's process (real SQLite store, stand-in submitters): a lost attempt is closed and
retried, its application killed by id where the submitter can, an earlier try of the same task is
an orphan at once, and a live peer's outcome is waited for instead of running twice."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airflow_tablemgmt.core.errors import LeaseUnavailable
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.core.process import ProcessStatus as S
from airflow_tablemgmt.lifecycle import KillsById, ObservesApplications, RunRequest, takeover
from airflow_tablemgmt.store import Store
from tests.unit.lifecycle.stand_ins import (
    ACTION,
    FAST,
    TABLE,
    AcknowledgingOnlySubmitter,
    KillingSubmitter,
    StandInSubmitter,
    instant,
    make_store,
    runner,
)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return make_store(tmp_path)


def submitted_by_another_worker(
    store: Store,
    when: datetime,
    *,
    beat_ago: timedelta,
    app_id: str | None = "app-lost",
    every_s: float = 20.0,
    **ids: object,
) -> Process:
    """A process another worker claimed (attempt 1, SUBMITTED), its last heartbeat ``beat_ago``."""
    process, _ = store.processes.open(TABLE, ACTION, when, parameters=dict(ids.pop("parameters", {}) or {}))
    return store.processes.transition(
        process.id,
        S.SUBMITTED,
        expected=S.PENDING,
        attempt=1,
        heartbeat_at=datetime.now(UTC) - beat_ago,
        heartbeat_every_s=every_s,
        external_id=app_id,
        **ids,
    )


def test_a_lost_worker_s_attempt_is_closed_and_the_process_runs_as_attempt_2(
    store: Store, tmp_path: Path
) -> None:
    lost = submitted_by_another_worker(store, instant(1), beat_ago=timedelta(hours=1))
    sub = StandInSubmitter()
    outcome = runner(store, sub, tmp_path).run(RunRequest(TABLE, ACTION, instant(1)))
    assert (outcome.process.id, outcome.process.attempt, outcome.process.status) == (lost.id, 2, S.SUCCESS)
    assert len(sub.jobs) == 1 and sub.jobs[0].attempt == 2


def test_a_lost_attempt_s_lease_is_waited_for_unless_its_application_is_killed_by_id(
    store: Store, tmp_path: Path
) -> None:
    lost = submitted_by_another_worker(store, instant(2), beat_ago=timedelta(hours=1))
    lost_holder = f"process:{lost.id}:attempt:1:worker-a:0000"
    assert store.leases.acquire(TABLE, lost_holder, timedelta(minutes=2))

    plain = StandInSubmitter()
    assert not isinstance(plain, KillsById)
    with pytest.raises(LeaseUnavailable):
        runner(store, plain, tmp_path).run(RunRequest(TABLE, ACTION, instant(2)))
    row = store.processes.get(lost.id)
    assert (row.status, row.attempt) == (S.PENDING, 2) and plain.jobs == []


def test_killing_the_lost_application_by_id_releases_its_lease(store: Store, tmp_path: Path) -> None:
    lost = submitted_by_another_worker(store, instant(3), beat_ago=timedelta(hours=1))
    assert store.leases.acquire(TABLE, f"process:{lost.id}:attempt:1:worker-a:0000", timedelta(minutes=2))
    killer = KillingSubmitter()
    assert isinstance(killer, KillsById)
    outcome = runner(store, killer, tmp_path).run(RunRequest(TABLE, ACTION, instant(3)))
    assert killer.killed_ids == ["app-lost"]
    assert (outcome.process.attempt, outcome.process.status) == (2, S.SUCCESS)


def test_the_lost_lease_is_released_only_once_the_killed_application_is_reported_ended(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(takeover, "KILL_CONFIRM_POLL_S", 0.01)
    lost = submitted_by_another_worker(store, instant(9), beat_ago=timedelta(hours=1))
    assert store.leases.acquire(TABLE, f"process:{lost.id}:attempt:1:worker-a:0000", timedelta(minutes=2))
    killer = KillingSubmitter(ends_after_polls=3)  # the driver takes a while to die after the kill
    outcome = runner(store, killer, tmp_path).run(RunRequest(TABLE, ACTION, instant(9)))
    assert killer.polls == ["app-lost"] * 4
    assert killer.ended_at is not None and killer.submitted_at >= killer.ended_at
    assert (outcome.process.attempt, outcome.process.status) == (2, S.SUCCESS)


def test_an_acknowledged_kill_of_an_application_never_reported_ended_keeps_the_lost_lease(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(takeover, "KILL_CONFIRM_POLL_S", 0.01)
    monkeypatch.setattr(takeover, "KILL_CONFIRM_WAIT_S", 0.2)
    lost = submitted_by_another_worker(store, instant(10), beat_ago=timedelta(hours=1))
    holder = f"process:{lost.id}:attempt:1:worker-a:0000"
    assert store.leases.acquire(TABLE, holder, timedelta(minutes=2))
    killer = KillingSubmitter(ends_after_polls=None)
    with pytest.raises(LeaseUnavailable):
        runner(store, killer, tmp_path).run(RunRequest(TABLE, ACTION, instant(10)))
    assert killer.killed_ids == ["app-lost"] and len(killer.polls) >= 2 and killer.jobs == []
    assert store.leases.get(TABLE).holder == holder


def test_an_acknowledged_kill_without_a_way_to_see_the_end_keeps_the_lost_lease(
    store: Store, tmp_path: Path
) -> None:
    lost = submitted_by_another_worker(store, instant(11), beat_ago=timedelta(hours=1))
    holder = f"process:{lost.id}:attempt:1:worker-a:0000"
    assert store.leases.acquire(TABLE, holder, timedelta(minutes=2))
    killer = AcknowledgingOnlySubmitter()
    assert isinstance(killer, KillsById) and not isinstance(killer, ObservesApplications)
    with pytest.raises(LeaseUnavailable):
        runner(store, killer, tmp_path).run(RunRequest(TABLE, ACTION, instant(11)))
    assert killer.killed_ids == ["app-lost"] and killer.jobs == []
    assert store.leases.get(TABLE).holder == holder


def test_an_unacknowledged_kill_keeps_the_lost_lease(store: Store, tmp_path: Path) -> None:
    lost = submitted_by_another_worker(store, instant(4), beat_ago=timedelta(hours=1))
    assert store.leases.acquire(TABLE, f"process:{lost.id}:attempt:1:worker-a:0000", timedelta(minutes=2))
    killer = KillingSubmitter(acknowledge=False)
    with pytest.raises(LeaseUnavailable):
        runner(store, killer, tmp_path).run(RunRequest(TABLE, ACTION, instant(4)))
    assert killer.killed_ids == ["app-lost"] and killer.jobs == []


def test_an_earlier_try_of_the_same_task_is_an_orphan_even_with_a_fresh_heartbeat(
    store: Store, tmp_path: Path
) -> None:
    ids = {"dag_id": "d", "run_id": "r", "task_id": "t"}
    earlier = submitted_by_another_worker(
        store, instant(5), beat_ago=timedelta(0), parameters={"airflow_try": 1}, **ids
    )
    sub = StandInSubmitter()
    outcome = runner(store, sub, tmp_path).run(RunRequest(TABLE, ACTION, instant(5), try_number=2, **ids))
    assert (outcome.process.id, outcome.process.attempt, outcome.process.status) == (earlier.id, 2, S.SUCCESS)


def test_a_live_peer_s_success_is_waited_for_and_reused(store: Store, tmp_path: Path) -> None:
    peer = submitted_by_another_worker(store, instant(6), beat_ago=timedelta(0))
    store.processes.transition(peer.id, S.RUNNING, expected=S.SUBMITTED, attempt=1)

    def peer_finishes() -> None:
        store.processes.transition(peer.id, S.SUCCESS, expected=S.RUNNING, attempt=1, summary={"by": "peer"})

    timer = threading.Timer(0.3, peer_finishes)
    timer.start()
    sub = StandInSubmitter()
    try:
        outcome = runner(store, sub, tmp_path, **FAST).run(RunRequest(TABLE, ACTION, instant(6)))
    finally:
        timer.join()
    assert outcome.reused and outcome.summary == {"by": "peer"} and sub.jobs == []


def test_waiting_for_a_live_peer_gives_up_at_its_deadline(store: Store, tmp_path: Path) -> None:
    submitted_by_another_worker(store, instant(7), beat_ago=timedelta(seconds=1))
    sub = StandInSubmitter()
    run = runner(store, sub, tmp_path, wait_for_peer=timedelta(milliseconds=300), **FAST)
    # LeaseUnavailable: the operator defers and looks again, instead of holding a slot for the peer's job
    with pytest.raises(LeaseUnavailable, match="gave up waiting"):
        run.run(RunRequest(TABLE, ACTION, instant(7)))
    assert sub.jobs == []


def test_a_peer_that_stops_heartbeating_while_waited_for_is_taken_over(store: Store, tmp_path: Path) -> None:
    peer = submitted_by_another_worker(store, instant(8), beat_ago=timedelta(0), every_s=0.05)
    sub = StandInSubmitter()
    run = runner(store, sub, tmp_path, stale_after=timedelta(milliseconds=500), **FAST)
    outcome = run.run(RunRequest(TABLE, ACTION, instant(8)))
    assert (outcome.process.id, outcome.process.attempt, outcome.process.status) == (peer.id, 2, S.SUCCESS)
    assert len(sub.jobs) == 1
