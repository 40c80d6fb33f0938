"""A watcher on the shared poll still remembers through Airflow's asset state store (``watch_store.py``): its
first observation is stored, a commit made while no triggerer ran is reported once after a restart with the
remembered previous snapshot, and nothing is reported twice. Synthetic hadoop tables on local disk, no JVM
(``tests/integration/triggers`` has the same with Spark's commits)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from airflow.triggers.base import TriggerEvent

from airflow_tablemgmt.triggers.snapshot import TableSnapshotTrigger
from tests.unit.triggers.test_change_poller import WAIT, catalog_json, commit, until

ACTIONS = {"rewrite-files": 0.0, "compute-stats": 0.0}


class DictStore:
    """Stands in for the triggerer-injected accessors of one watched asset (``aget``/``aset``)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    async def aget(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    async def aset(self, key: str, value: Any) -> None:
        self.values[key] = value


def watcher(warehouse: Path, store: DictStore) -> TableSnapshotTrigger:
    trigger = TableSnapshotTrigger(
        table_id="lake.db.t", catalog=catalog_json(warehouse), poll_interval=0.05, actions=ACTIONS
    )
    trigger.asset_state_store = store  # type: ignore[assignment]
    return trigger


def remembered(store: DictStore) -> dict[str, Any]:
    return {a: e["snapshot_id"] for a, e in store.values.get("tablemgmt.watch.lake.db.t", {}).items()}


def test_a_restart_reports_a_commit_made_while_down_once_and_nothing_twice(tmp_path: Path) -> None:
    first = commit(tmp_path, "t")
    store = DictStore()

    async def run_until_stored(expected: int) -> list[TriggerEvent]:
        events: list[TriggerEvent] = []
        gen = watcher(tmp_path, store).run()

        async def collect() -> None:
            async for event in gen:
                events.append(event)

        task = asyncio.ensure_future(collect())
        await until(lambda: set(remembered(store).values()) == {expected}, WAIT)
        await asyncio.sleep(0.3)  # several more checks: nothing else to report
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return events

    assert asyncio.run(run_until_stored(first)) == []  # the first observation is stored, not reported
    while_down = commit(tmp_path, "t")
    [event] = asyncio.run(run_until_stored(while_down))
    assert event.payload == {
        "table": "lake.db.t",
        "snapshot_id": while_down,
        "previous_snapshot_id": first,
        "actions": {"compute-stats": first, "rewrite-files": first},
    }
    assert asyncio.run(run_until_stored(while_down)) == []  # reported once, not again after a restart


class HeldStore(DictStore):
    """Answers reads only once released: a triggerer's supervisor busy with thousands of start-up calls."""

    def __init__(self, values: dict[str, Any]) -> None:
        super().__init__()
        self.values = values
        self.released = asyncio.Event()

    async def aget(self, key: str, default: Any = None) -> Any:
        await self.released.wait()
        return await super().aget(key, default)


def test_a_watcher_whose_state_arrives_late_reports_the_commit_made_while_down_at_once(
    tmp_path: Path,
) -> None:
    """The table does not change after the restart, so the poller never wakes the watcher: the store's late
    answer must (it waited for the next change or the periodic full read before)."""
    first = commit(tmp_path, "t")
    saved = {a: {"snapshot_id": first, "event_at": None} for a in ACTIONS}
    store = HeldStore({"tablemgmt.watch.lake.db.t": saved})
    while_down = commit(tmp_path, "t")

    async def scenario() -> TriggerEvent:
        trigger = watcher(tmp_path, store)
        events = trigger.run()
        waiting = asyncio.ensure_future(anext(events))
        await until(lambda: trigger._subscription is not None)
        sub = trigger._subscription
        assert sub is not None
        await until(lambda: sub.poller.checks_of(sub.table) >= 3, WAIT)  # polling, the read held
        assert not waiting.done()
        store.released.set()
        event = await asyncio.wait_for(waiting, WAIT)
        await events.aclose()
        return event

    event = asyncio.run(scenario())
    assert (event.payload["snapshot_id"], event.payload["previous_snapshot_id"]) == (while_down, first)


class Supervisor:
    """The triggerer's supervisor as the watchers see it: one channel serving state-store calls one at a time,
    in the order they arrive, each taking a moment; every watched asset's accessors go through it."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.calls: list[tuple[str, str]] = []  # ("get" | "set", key), in the order served
        self._channel = asyncio.Lock()  # FIFO

    async def aget(self, key: str, default: Any = None) -> Any:
        async with self._channel:
            await asyncio.sleep(0.01)
            self.calls.append(("get", key))
            return self.values.get(key, default)

    async def aset(self, key: str, value: Any) -> None:
        async with self._channel:
            await asyncio.sleep(0.01)
            self.calls.append(("set", key))
            self.values[key] = value


def test_first_observations_are_stored_as_their_reads_answer_not_after_every_watchers_read(
    tmp_path: Path,
) -> None:
    """60 watchers start at once with nothing stored (a first deployment, or tables enrolled since): each
    first observation is written right after its own read is answered, ahead of the other watchers' start-up
    reads. Queued behind all of them, no first observation reached the store in a 10,000-table triggerer's
    first minutes, and a restart then forgot them: a commit made while it was down became the next
    triggerer's first observation, never reported."""
    n = 60
    names = [f"t{i:02d}" for i in range(n)]
    for name in names:
        commit(tmp_path, name)
    supervisor = Supervisor()

    async def scenario() -> None:
        tasks = []
        for name in names:
            trigger = TableSnapshotTrigger(
                table_id=f"lake.db.{name}",
                catalog=catalog_json(tmp_path),
                poll_interval=0.05,
                actions=ACTIONS,
            )
            trigger.asset_state_store = supervisor  # type: ignore[assignment]
            tasks.append(asyncio.ensure_future(anext(trigger.run())))
        keys = {f"tablemgmt.watch.lake.db.{name}" for name in names}
        try:
            await until(lambda: keys <= set(supervisor.values), 30.0)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(scenario())
    order = {call: i for i, call in enumerate(supervisor.calls)}
    reads = [i for (kind, _), i in order.items() if kind == "get"]
    writes = [i for (kind, _), i in order.items() if kind == "set"]
    assert len(reads) == n and len(writes) == n  # one read and one first observation per watcher
    assert min(writes) < max(reads) - n // 2  # the first writes did not wait for every read
    # each soon after its own read (the calls served while its watcher took the answer in), not behind all
    # the other watchers' reads (a lag of n calls each, before)
    lag = [order[("set", key)] - order[("get", key)] for kind, key in supervisor.calls if kind == "get"]
    assert max(lag) < n // 3, lag
