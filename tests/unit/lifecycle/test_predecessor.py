"""Issue 36, item 3 (the lifecycle's side; the Connect server's side is tests/faults/test_connect_orphan.py):
a Spark Connect job's id outlives its attempt in the row's parameters; a lapsed lease whose holder ran a
Connect job is taken over only once that job is reported ended; the reaper interrupts what it closes.
Real SQLite store; the Connect server is replaced by a recorder of what would be ended."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airflow_tablemgmt.core.errors import LeaseUnavailable
from airflow_tablemgmt.core.process import ProcessStatus as S
from airflow_tablemgmt.lifecycle import RunRequest, predecessor, takeover
from airflow_tablemgmt.services.reap import reap_processes
from airflow_tablemgmt.store import Store
from tests.unit.lifecycle.stand_ins import ACTION, TABLE, StandInSubmitter, instant, make_store, runner

APP = "connect:sc://127.0.0.1:15002#3f0c6c8e-0000-4000-8000-000000000000/tms-p1-a1"


class Server:
    """What the Connect server would say: which jobs were ended, and whether they are reported ended."""

    def __init__(self, ends: bool) -> None:
        self.ends = ends
        self.asked: list[tuple[str, float]] = []

    def end(self, apps: list[str], bound_s: float, url: str | None = None) -> list[str]:
        self.asked += [(a, bound_s) for a in apps]
        return [] if self.ends else list(apps)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return make_store(tmp_path)


def connect_job_lost(store: Store, when: datetime, lease_for: timedelta) -> str:
    """Another action's attempt 1 ran on Connect (recorded as it starts), its worker gone, its lease
    lapsing after ``lease_for``. Returns its lease holder."""
    p, _ = store.processes.open(TABLE, "rewrite-manifests", when)
    store.processes.transition(p.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    params = predecessor.with_application(p.parameters or {}, 1, APP)
    store.processes.transition(
        p.id,
        S.RUNNING,
        expected=S.SUBMITTED,
        attempt=1,
        external_id=APP,
        parameters=params,
        heartbeat_at=datetime.now(UTC) - timedelta(hours=1),
    )
    holder = f"process:{p.id}:attempt:1:worker-a:0000"
    assert store.leases.acquire(TABLE, holder, lease_for)
    return holder


def test_a_connect_job_s_id_is_kept_by_attempt_in_the_parameters() -> None:
    assert predecessor.with_application({"x": 1}, 2, APP) == {"x": 1, "applications": {"2": APP}}
    assert predecessor.with_application({}, 1, "local-1764000000000") is None


def test_a_lapsed_connect_lease_is_not_taken_until_its_job_is_reported_ended(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = connect_job_lost(store, instant(1), timedelta(milliseconds=50))
    time.sleep(0.2)  # the lease has lapsed
    server = Server(ends=False)
    monkeypatch.setattr(predecessor, "end_applications", server.end)
    sub = StandInSubmitter()
    with pytest.raises(LeaseUnavailable, match="did not report it ended"):
        runner(store, sub, tmp_path).run(RunRequest(TABLE, ACTION, instant(1)))
    assert sub.jobs == [] and [a for a, _ in server.asked] == [APP]
    assert store.leases.get(TABLE).holder == holder  # left as it was: the next look checks again

    server.ends = True
    outcome = runner(store, sub, tmp_path).run(RunRequest(TABLE, ACTION, instant(1)))
    assert outcome.process.status == S.SUCCESS and len(sub.jobs) == 1 and len(server.asked) == 2


def test_a_live_or_released_lease_asks_nothing(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = Server(ends=True)
    monkeypatch.setattr(predecessor, "end_applications", server.end)
    holder = connect_job_lost(store, instant(2), timedelta(minutes=2))
    with pytest.raises(LeaseUnavailable, match="is leased by"):
        runner(store, StandInSubmitter(), tmp_path).run(RunRequest(TABLE, ACTION, instant(2)))
    store.leases.release(TABLE, holder)
    runner(store, StandInSubmitter(), tmp_path).run(RunRequest(TABLE, ACTION, instant(2)))
    assert server.asked == []


def test_a_lost_attempt_s_connect_job_is_ended_before_its_lease_is_released(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p, _ = store.processes.open(TABLE, ACTION, instant(3))
    store.processes.transition(p.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    store.processes.transition(
        p.id,
        S.RUNNING,
        expected=S.SUBMITTED,
        attempt=1,
        external_id=APP,
        parameters=predecessor.with_application({}, 1, APP),
        heartbeat_at=datetime.now(UTC) - timedelta(hours=1),
    )
    assert store.leases.acquire(TABLE, f"process:{p.id}:attempt:1:worker-a:0000", timedelta(minutes=2))
    server = Server(ends=True)
    monkeypatch.setattr(takeover, "end_applications", server.end)
    sub = StandInSubmitter()
    outcome = runner(store, sub, tmp_path).run(RunRequest(TABLE, ACTION, instant(3)))
    assert [a for a, _ in server.asked] == [APP]  # observed ended, so its lease was released at once
    assert (outcome.process.attempt, outcome.process.status) == (2, S.SUCCESS)
    assert outcome.process.parameters["applications"] == {"1": APP}  # kept for whoever comes next


def test_the_reaper_interrupts_the_connect_jobs_it_closes(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect_job_lost(store, instant(4), timedelta(minutes=2))
    server = Server(ends=False)
    monkeypatch.setattr(predecessor, "end_applications", server.end)
    reaped = reap_processes(store, stale_after=timedelta(seconds=90))
    assert [r.status for r in reaped] == ["FAILED"] and server.asked == [(APP, 0.0)]


def test_a_connect_lease_that_lapses_between_the_look_and_the_acquire_is_not_taken_unobserved(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race measured on PostgreSQL (tests/faults/test_connect_frozen.py): the look found the Connect
    holder's lease live, the lease lapsed before the acquire's statement, and the acquire took it over with
    nobody having seen the holder's job end. Here the lease lapses right after the look (the store's clock
    is what the look reads): this look must not take it, and the next one ends the job first."""
    holder = connect_job_lost(store, instant(5), timedelta(milliseconds=300))
    server = Server(ends=True)
    monkeypatch.setattr(predecessor, "end_applications", server.end)
    looked = store.leases.now

    def look_then_lapse() -> datetime:
        now = looked()
        time.sleep(0.4)  # the lease lapses between the look and the acquire
        return now

    monkeypatch.setattr(store.leases, "now", look_then_lapse)
    sub = StandInSubmitter()
    with pytest.raises(LeaseUnavailable, match="is leased by"):
        runner(store, sub, tmp_path).run(RunRequest(TABLE, ACTION, instant(5)))
    assert sub.jobs == [] and server.asked == [] and store.leases.get(TABLE).holder == holder
    monkeypatch.setattr(store.leases, "now", looked)
    outcome = runner(store, sub, tmp_path).run(RunRequest(TABLE, ACTION, instant(5)))
    assert [a for a, _ in server.asked] == [APP]  # the next look saw it lapsed and ended the job first
    assert outcome.process.status == S.SUCCESS and len(sub.jobs) == 1
