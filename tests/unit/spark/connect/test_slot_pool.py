"""A Spark Connect server's slot limit (``store/connect_slots.py``, ``spark/connect/pool.py``) on a real
SQLite store: leasing, expiry, refusal when full, reuse of a session only for the same settings, and the
process row's engine column."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airflow_tablemgmt.core.process import ProcessStatus as S
from airflow_tablemgmt.hooks.spark_connect import slot_settings
from airflow_tablemgmt.spark.connect.errors import ConnectBusy, ConnectUnavailable
from airflow_tablemgmt.spark.connect.pool import SlotPool, settings_hash
from airflow_tablemgmt.spark.connect.session import ConnectRun
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.connect_slots import ConnectSlotRepository
from airflow_tablemgmt.store.processes import engine_of

SERVER = "sc://connect:15002"
TTL = timedelta(seconds=60)
A = settings_hash({"spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog", "k": "1"})
B = settings_hash({"spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog", "k": "2"})


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'store.db'}")
    yield s
    s.dispose()


@pytest.fixture
def slots(store: Store) -> ConnectSlotRepository:
    return ConnectSlotRepository.of(store)


def test_the_hash_covers_every_setting_and_its_value() -> None:
    assert A != B
    assert settings_hash({"a": "1", "b": "2"}) == settings_hash({"b": "2", "a": "1"})
    assert len(A) == 64 and "SparkCatalog" not in A


def test_at_most_n_holders_and_the_next_is_refused(slots: ConnectSlotRepository) -> None:
    held = [slots.acquire(SERVER, 2, A, f"t{i}", TTL) for i in range(2)]
    assert all(h is not None for h in held)
    assert {h.slot for h in held if h} == {0, 1}
    assert len({h.session_id for h in held if h}) == 2  # two tasks never share a session
    assert slots.acquire(SERVER, 2, A, "t3", TTL) is None
    assert slots.held(SERVER) == 2
    assert slots.acquire("sc://other:15002", 2, A, "t3", TTL) is not None  # another server's slots


def test_a_released_session_is_reused_only_for_the_same_settings(slots: ConnectSlotRepository) -> None:
    first = slots.acquire(SERVER, 1, A, "t1", TTL)
    assert first is not None and not first.reused
    assert slots.release(SERVER, first.slot, "t1", keep_session=True)
    again = slots.acquire(SERVER, 1, A, "t2", TTL)
    assert again is not None and again.reused and again.session_id == first.session_id
    assert slots.release(SERVER, again.slot, "t2", keep_session=True)
    other = slots.acquire(SERVER, 1, B, "t3", TTL)  # other settings: the slot, a new session
    assert other is not None and not other.reused and other.session_id != first.session_id
    assert slots.release(SERVER, other.slot, "t3", keep_session=True)
    back = slots.acquire(SERVER, 1, A, "t4", TTL)  # A's session was replaced by B's
    assert (
        back is not None and not back.reused and back.session_id not in (first.session_id, other.session_id)
    )


def test_the_same_settings_prefer_their_slot_over_a_free_one(slots: ConnectSlotRepository) -> None:
    a = slots.acquire(SERVER, 3, A, "ta", TTL)
    b = slots.acquire(SERVER, 3, B, "tb", TTL)
    assert a and b
    slots.release(SERVER, a.slot, "ta", keep_session=True)
    slots.release(SERVER, b.slot, "tb", keep_session=True)
    got = slots.acquire(SERVER, 3, B, "tb2", TTL)
    assert got is not None and got.reused and got.slot == b.slot


def test_a_failed_jobs_session_is_not_reused(slots: ConnectSlotRepository) -> None:
    first = slots.acquire(SERVER, 1, A, "t1", TTL)
    assert first and slots.release(SERVER, first.slot, "t1", keep_session=False)
    again = slots.acquire(SERVER, 1, A, "t2", TTL)
    assert again is not None and not again.reused and again.session_id != first.session_id


def test_an_expired_lease_is_taken_over_with_a_new_session(slots: ConnectSlotRepository) -> None:
    dead = slots.acquire(SERVER, 1, A, "dead", timedelta(milliseconds=200))
    assert dead is not None
    assert slots.acquire(SERVER, 1, A, "t2", TTL) is None
    time.sleep(0.4)
    taken = slots.acquire(SERVER, 1, A, "t2", TTL)
    # Its job may still run on the old session: the new holder never attaches to that session.
    assert taken is not None and not taken.reused and taken.session_id != dead.session_id
    assert not slots.release(SERVER, dead.slot, "dead", keep_session=True)  # no longer the dead one's
    assert not slots.renew(SERVER, dead.slot, "dead", TTL)
    assert slots.renew(SERVER, taken.slot, "t2", TTL)


def test_racing_tasks_get_distinct_slots(store: Store, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    got: list[object] = []
    barrier = threading.Barrier(6)

    def take(i: int) -> None:
        repo = ConnectSlotRepository.of(Store(url))
        barrier.wait()
        got.append(repo.acquire(SERVER, 3, A, f"t{i}", TTL))

    threads = [threading.Thread(target=take, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    won = [g for g in got if g is not None]
    assert len(got) == 6 and len(won) == 3
    assert len({g.slot for g in won}) == 3 and len({g.session_id for g in won}) == 3


def test_the_pool_waits_for_a_slot_then_fails_clearly(slots: ConnectSlotRepository) -> None:
    pool = SlotPool(slots, SERVER, slots=1, wait=1.0, poll=0.1)
    first = pool.lease(A, "t1")
    started = time.monotonic()
    with pytest.raises(ConnectBusy, match=r"sc://connect:15002 is busy: all 1 of its slots") as e:
        pool.lease(A, "t2")
    assert 0.9 <= time.monotonic() - started < 30
    assert isinstance(e.value, ConnectUnavailable)  # retried like an unreachable server
    threading.Timer(0.3, lambda: first.release(keep_session=True)).start()
    second = pool.lease(A, "t3")  # freed while it waited
    assert second.slot.reused and second.slot.session_id == first.slot.session_id
    second.release(keep_session=True)


def test_a_stop_while_waiting_ends_the_wait(slots: ConnectSlotRepository) -> None:
    pool = SlotPool(slots, SERVER, slots=1, wait=60.0, poll=0.1)
    pool.lease(A, "t1")
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    started = time.monotonic()
    with pytest.raises(ConnectBusy, match="stopped while waiting"):
        pool.lease(A, "t2", stop)
    assert time.monotonic() - started < 30


def test_the_lease_is_renewed_while_the_job_runs(slots: ConnectSlotRepository) -> None:
    pool = SlotPool(slots, SERVER, slots=1, wait=0.0, ttl=timedelta(seconds=0.6))
    lease = pool.lease(A, "t1")
    time.sleep(1.5)  # past two TTLs: only the renewals keep it
    assert slots.acquire(SERVER, 1, A, "t2", TTL) is None
    lease.release(keep_session=True)
    assert slots.acquire(SERVER, 1, A, "t2", TTL) is not None


def test_slot_settings_come_from_the_connection_extras() -> None:
    assert slot_settings({}) == (8, 120.0)
    assert slot_settings({"slots": "3", "slot_wait": 5}) == (3, 5.0)
    with pytest.raises(ValueError, match=r"extra slots: '0' is not a whole number >= 1"):
        slot_settings({"slots": "0"})
    with pytest.raises(ValueError, match=r"extra slots: 2.5 is not a whole number"):
        slot_settings({"slots": 2.5})
    with pytest.raises(ValueError, match=r"extra slot_wait: 'soon' is not seconds >= 0"):
        slot_settings({"slot_wait": "soon"})
    with pytest.raises(ValueError, match="slots: the server's slot limit must be 1..1000, got 0"):
        ConnectSlotRepository.__new__(ConnectSlotRepository).acquire(SERVER, 0, A, "t", TTL)


def test_the_process_row_records_the_engine_that_ran_it(store: Store) -> None:
    run = ConnectRun("sc://connect:15002/;token=secret", "tms-p1-a1", session_id="s-1")
    assert run.application_id == "connect:sc://connect:15002#s-1/tms-p1-a1"
    assert engine_of(run.application_id) == "spark-connect sc://connect:15002"
    assert engine_of("local-1764000000000") == "spark-submit"
    proc, _ = store.processes.open("lake.db.t", "rewrite-files", datetime(2026, 1, 1, tzinfo=UTC))
    store.processes.transition(proc.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    ran = store.processes.transition(
        proc.id, S.RUNNING, expected=S.SUBMITTED, attempt=1, external_id=run.application_id
    )
    assert ran.engine == "spark-connect sc://connect:15002"
    assert "secret" not in ran.engine and store.processes.get(proc.id).engine == ran.engine


def test_tablemgmt_processes_shows_the_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_tablemgmt.cli import main

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    store = Store(url)
    proc, _ = store.processes.open("lake.db.t", "rewrite-files", datetime(2026, 1, 1, tzinfo=UTC))
    store.processes.transition(proc.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    store.processes.transition(
        proc.id,
        S.RUNNING,
        expected=S.SUBMITTED,
        attempt=1,
        external_id="connect:sc://connect:15002#s-1/tms-p1-a1",
    )
    store.dispose()
    assert main(["--store-url", url, "processes"]) == 0
    out = capsys.readouterr().out
    assert "ENGINE" in out.splitlines()[0] and "spark-connect sc://connect:15002" in out


def test_a_batch_s_jobs_hold_one_slot_in_turn_and_give_it_back_after_a_failure(
    slots: ConnectSlotRepository,
) -> None:
    """Issue 40: a planned batch runs one job at a time, so its jobs hold one slot in turn (``kept.py``): leased
    by the first, kept between clean jobs without a store round trip, given back after a failed job (the next
    job leases anew) and at the batch's end."""
    from airflow_tablemgmt.spark.connect.kept import BatchSessions

    pool = SlotPool(slots, SERVER, slots=2, wait=0)
    leased: list[str] = []

    def lease(holder: str) -> object:
        leased.append(holder)
        return pool.lease(A, holder)

    batch = BatchSessions()
    try:
        first = batch.slot(SERVER, lambda: lease("job-1"))
        batch.slot_back(SERVER, first, clean=True)
        second = batch.slot(SERVER, lambda: lease("job-2"))
        assert second is first and leased == ["job-1"] and slots.held(SERVER) == 1
        batch.slot_back(SERVER, second, clean=False)  # a failed job: given back
        assert slots.held(SERVER) == 0
        third = batch.slot(SERVER, lambda: lease("job-3"))
        assert third is not first and leased == ["job-1", "job-3"] and slots.held(SERVER) == 1
        batch.slot_back(SERVER, third, clean=True)
        assert slots.held(SERVER) == 1  # kept for the next table
    finally:
        batch.close()
    assert slots.held(SERVER) == 0  # the batch's end gives it back
