"""Issue 36, item 3 and 5: the lease is confirmed right before the job is submitted (the factory's
set-up is part of what it covers), the timing rules hold inside ProcessRunner itself, and waiting for a
live peer is bounded by the lease TTL, not hours (real SQLite store, stand-in submitter)."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.errors import LeaseUnavailable, UnsafeTiming
from airflow_tablemgmt.core.factory import JobSpec, TriggerContext
from airflow_tablemgmt.core.process import ProcessStatus as S
from airflow_tablemgmt.core.tables import TableSpec
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest
from airflow_tablemgmt.store import Store
from tests.unit.lifecycle.stand_ins import ACTION, TABLE, StandInSubmitter, instant, make_store, runner

TIGHT = {
    "heartbeat_every": timedelta(milliseconds=100),
    "lease_ttl": timedelta(milliseconds=400),
    "stale_after": timedelta(milliseconds=250),
}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return make_store(tmp_path)


class SlowSetUp:
    """Wraps the real registry: the factory's ``trigger`` (its set-up) takes ``seconds`` and calls
    ``during`` halfway, as a slow metadata read would."""

    def __init__(self, seconds: float, during: Any = None) -> None:
        self.inner = default_factories()
        self.seconds = seconds
        self.during = during

    def for_action(self, fmt: Any, action: str) -> Any:
        factory = self.inner.for_action(fmt, action)
        outer = self

        class Slow:
            def __getattr__(self, name: str) -> Any:
                return getattr(factory, name)

            def trigger(self, table: TableSpec, action: str, ctx: TriggerContext) -> JobSpec | None:
                time.sleep(outer.seconds / 2)
                if outer.during is not None:
                    outer.during()
                time.sleep(outer.seconds / 2)
                return factory.trigger(table, action, ctx)

        return Slow()


@pytest.mark.parametrize(
    ("settings", "rule"),
    [
        ({"lease_ttl": timedelta(seconds=2), "heartbeat_every": timedelta(seconds=1)}, "3 x heartbeat_every"),
        (
            {"stale_after": timedelta(seconds=1), "heartbeat_every": timedelta(seconds=1)},
            "2 x heartbeat_every",
        ),
        ({"stale_after": timedelta(seconds=120)}, "stale_after < lease_ttl"),
    ],
)
def test_the_runner_refuses_unsafe_timings(store: Store, tmp_path: Path, settings: dict, rule: str) -> None:
    with pytest.raises(UnsafeTiming, match="ProcessRunner") as e:
        ProcessRunner(store, default_factories(), StandInSubmitter(), **settings)
    assert rule in str(e.value)


def test_waiting_for_a_peer_is_bounded_by_the_lease(store: Store) -> None:
    assert ProcessRunner(store, default_factories(), StandInSubmitter()).wait_for_peer == timedelta(minutes=2)
    capped = ProcessRunner(store, default_factories(), StandInSubmitter(), wait_for_peer=timedelta(hours=6))
    assert capped.wait_for_peer == timedelta(minutes=2)


def test_a_lease_taken_over_during_set_up_is_never_submitted(store: Store, tmp_path: Path) -> None:
    taken: list[bool] = []

    def another_worker_takes_the_lapsed_lease() -> None:
        deadline = time.monotonic() + 5
        while not taken and time.monotonic() < deadline:
            if store.leases.acquire(TABLE, "other-worker", timedelta(seconds=30)):
                taken.append(True)
            else:
                time.sleep(0.02)

    sub = StandInSubmitter()
    run = runner(store, sub, tmp_path, SlowSetUp(1.0, another_worker_takes_the_lapsed_lease), **TIGHT)
    with pytest.raises(LeaseUnavailable, match="lapsed during the job's set-up"):
        run.run(RunRequest(TABLE, ACTION, instant(1)))
    assert taken and sub.jobs == []
    p = store.processes.find(TABLE, ACTION, instant(1))
    assert p is not None and p.status == S.PENDING  # the next look runs it once the lease is free
    assert store.leases.get(TABLE).holder == "other-worker"


def test_set_up_longer_than_the_lease_starts_the_watchdog_afresh(store: Store, tmp_path: Path) -> None:
    # Nobody took the lapsed lease: the renewal confirms it, and the watchdog counts from there (before,
    # it counted from the lease's first taking and stopped the job on its first tick).
    import threading

    hold = threading.Event()
    sub = StandInSubmitter(hold=hold)
    run = runner(store, sub, tmp_path, SlowSetUp(1.0), **TIGHT)
    threading.Timer(0.2, hold.set).start()
    outcome = run.run(RunRequest(TABLE, ACTION, instant(2)))
    assert outcome.process.status == S.SUCCESS and sub.kills == 0 and len(sub.jobs) == 1
