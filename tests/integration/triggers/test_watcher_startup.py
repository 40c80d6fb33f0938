"""A watcher polls as soon as it starts: its remembered state (Airflow's asset state store, one
round trip through the triggerer's supervisor per call) is read in the background and never gates
polling. A triggerer carrying 10,000 tables would otherwise take tens of minutes before its last
watcher looked at its table. What the state store decides must not change: a commit made while no
triggerer ran is still reported, and a restart reports nothing twice (real Iceberg tables, real
commits)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from airflow.triggers.base import TriggerEvent

from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.triggers.snapshot import STATE_STORE_CONCURRENCY, TableSnapshotTrigger
from tests.integration.iceberg_session import IcebergTables
from tests.integration.triggers.test_snapshot_triggers import (
    EVENT_WAIT,
    DictAssetStateStore,
    catalog_dict,
    next_event,
    observed,
    roundtrip,
    stop,
    until,
)

pytestmark = pytest.mark.integration

ACTIONS = {"rewrite-files": 0.0, "compute-stats": 0.0}


class HeldStore(DictAssetStateStore):
    """A state store whose reads wait until the test lets them through (all of them, or one key's),
    the way a supervisor serving thousands of queued requests answers late. Counts calls."""

    def __init__(self, values: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.values.update(values or {})
        self.released = asyncio.Event()
        self.free_keys: set[str] = set()
        self.held = 0
        self.reads: list[str] = []
        self.writes: list[tuple[str, Any]] = []

    async def aget(self, key: str, default: Any = None) -> Any:
        self.reads.append(key)
        if key not in self.free_keys:
            self.held += 1
            try:
                await self.released.wait()
            finally:
                self.held -= 1
        return await super().aget(key, default)

    async def aset(self, key: str, value: Any) -> None:
        self.writes.append((key, value))
        await super().aset(key, value)


def watcher(table: str, catalog: CatalogSpec, store: Any, poll: float = 0.1) -> TableSnapshotTrigger:
    trigger = TableSnapshotTrigger(
        table_id=table, catalog=catalog_dict(catalog), poll_interval=poll, actions=ACTIONS
    )
    trigger = roundtrip(trigger)  # type: ignore[assignment]  # as the triggerer builds it
    trigger.asset_state_store = store  # type: ignore[assignment]
    return trigger


def test_a_commit_is_reported_while_the_state_reads_of_other_watchers_are_still_queued(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec
) -> None:
    """39 watchers start first and their state reads are not answered; the last one's table gets a
    commit: it is reported (with what the store remembered as the previous snapshot) at once."""
    table = trig_tables.create("queued")
    start = trig_tables.snapshot_id(table)
    key = f"tablemgmt.watch.{table}"
    saved = {action: {"snapshot_id": start, "event_at": None} for action in ACTIONS}
    store = HeldStore({key: saved})
    store.free_keys.add(key)

    async def scenario() -> tuple[TriggerEvent, int, int]:
        others = [
            asyncio.ensure_future(
                next_event(watcher(f"trig.db.not_created_{i}", trig_catalog, store, 30).run())
            )
            for i in range(39)
        ]
        await asyncio.wait_for(until(lambda: store.held == STATE_STORE_CONCURRENCY - 1), EVENT_WAIT)
        trigger = watcher(str(table), trig_catalog, store)
        reader = observed(trigger, trig_catalog)
        events = trigger.run()
        waiting = asyncio.ensure_future(next_event(events))
        await asyncio.wait_for(until(lambda: reader.polls_seeing(start) >= 2), EVENT_WAIT)
        assert not waiting.done()
        new = await asyncio.to_thread(trig_tables.insert, table)
        event = await waiting
        held = store.held
        following = asyncio.ensure_future(next_event(events))
        await asyncio.wait_for(
            until(lambda: store.values[key]["rewrite-files"]["snapshot_id"] == new), EVENT_WAIT
        )
        for task in [following, *others]:
            await stop(task)
        return event, new, held

    event, new, held = asyncio.run(scenario())
    assert event.payload == {
        "table": str(table),
        "snapshot_id": new,
        "previous_snapshot_id": start,
        "actions": {"rewrite-files": start, "compute-stats": start},
    }
    assert held == STATE_STORE_CONCURRENCY - 1  # the other watchers' reads were still unanswered


def test_a_restart_reports_a_commit_made_while_down_once_and_nothing_twice(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec
) -> None:
    table = trig_tables.create("restart")
    start = trig_tables.snapshot_id(table)
    key = f"tablemgmt.watch.{table}"
    values: dict[str, Any] = {}

    def remembered() -> dict[str, Any]:
        return {action: values[key][action]["snapshot_id"] for action in ACTIONS} if key in values else {}

    async def first_run() -> tuple[TriggerEvent, int]:
        store = HeldStore()
        store.values = values
        store.released.set()
        trigger = watcher(str(table), trig_catalog, store)
        events = trigger.run()
        waiting = asyncio.ensure_future(next_event(events))
        # Nothing remembered: the first observation is stored (in the background), no event.
        await asyncio.wait_for(until(lambda: remembered() == dict.fromkeys(ACTIONS, start)), EVENT_WAIT)
        assert not waiting.done()
        committed = await asyncio.to_thread(trig_tables.insert, table)
        event = await waiting
        following = asyncio.ensure_future(next_event(events))
        await asyncio.wait_for(until(lambda: remembered() == dict.fromkeys(ACTIONS, committed)), EVENT_WAIT)
        await stop(following)
        return event, committed

    event, first = asyncio.run(first_run())
    assert event.payload["snapshot_id"] == first and event.payload["previous_snapshot_id"] == start

    async def restart(expect_event: bool) -> tuple[TriggerEvent | None, HeldStore]:
        """A restarted watcher: polls while its state read is unanswered, then gets the answer."""
        store = HeldStore()
        store.values = values
        trigger = watcher(str(table), trig_catalog, store)
        reader = observed(trigger, trig_catalog)
        current = trig_tables.snapshot_id(table)
        events = trigger.run()
        waiting = asyncio.ensure_future(next_event(events))
        await asyncio.wait_for(until(lambda: reader.polls_seeing(current) >= 3), EVENT_WAIT)
        assert store.held == 1 and not waiting.done()  # polling, not waiting for the store
        store.released.set()
        if expect_event:
            event = await waiting
            following = asyncio.ensure_future(next_event(events))
            await asyncio.wait_for(until(lambda: remembered() == dict.fromkeys(ACTIONS, current)), EVENT_WAIT)
            await stop(following)
            return event, store
        await asyncio.wait_for(until(lambda: store.held == 0), EVENT_WAIT)
        seen = reader.polls_seeing(current)
        await asyncio.wait_for(until(lambda: reader.polls_seeing(current) >= seen + 3), EVENT_WAIT)
        assert not waiting.done(), "a restart reported a snapshot that was already reported"
        await stop(waiting)
        return None, store

    # Restarted with nothing new: no event, and nothing written (the store already holds it).
    again, store = asyncio.run(restart(expect_event=False))
    assert again is None and store.writes == []
    assert remembered() == dict.fromkeys(ACTIONS, first)

    # Committed while no triggerer ran: reported once, after the restart, against what was remembered.
    while_down = trig_tables.insert(table)
    event, store = asyncio.run(restart(expect_event=True))
    assert event is not None
    assert event.payload == {
        "table": str(table),
        "snapshot_id": while_down,
        "previous_snapshot_id": first,
        "actions": dict.fromkeys(ACTIONS, first),
    }

    # And once only: the next restart reports nothing.
    again, store = asyncio.run(restart(expect_event=False))
    assert again is None and store.writes == []


def test_a_fresh_watcher_that_sees_a_commit_before_its_state_read_is_answered_reports_it(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec
) -> None:
    """Nothing remembered yet and the read still queued: the first poll is the baseline, a later
    snapshot is a change (reported), and the store ends up with it."""
    table = trig_tables.create("fresh")
    start = trig_tables.snapshot_id(table)
    key = f"tablemgmt.watch.{table}"
    store = HeldStore()

    async def scenario() -> tuple[TriggerEvent, int]:
        trigger = watcher(str(table), trig_catalog, store)
        reader = observed(trigger, trig_catalog)
        events = trigger.run()
        waiting = asyncio.ensure_future(next_event(events))
        await asyncio.wait_for(until(lambda: reader.polls_seeing(start) >= 2), EVENT_WAIT)
        new = await asyncio.to_thread(trig_tables.insert, table)
        await asyncio.wait_for(until(lambda: reader.polls_seeing(new) >= 1), EVENT_WAIT)
        store.released.set()  # the read is answered only after the change was seen
        event = await waiting
        following = asyncio.ensure_future(next_event(events))
        await asyncio.wait_for(until(lambda: key in store.values), EVENT_WAIT)
        await asyncio.wait_for(
            until(lambda: store.values[key]["compute-stats"]["snapshot_id"] == new), EVENT_WAIT
        )
        await stop(following)
        return event, new

    event, new = asyncio.run(scenario())
    assert event.payload["snapshot_id"] == new
    assert event.payload["actions"] == dict.fromkeys(ACTIONS, start)
