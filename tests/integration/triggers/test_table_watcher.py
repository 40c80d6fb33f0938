"""One watcher per table: a single snapshot poll feeds every snapshot-driven action of the table, each
action keeping its own throttle and its own remembered snapshot (real Iceberg tables, real commits)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from airflow.triggers.base import TriggerEvent

from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.triggers.snapshot import TableSnapshotTrigger
from tests.integration.iceberg_session import IcebergTables
from tests.integration.triggers.test_snapshot_triggers import (
    EVENT_WAIT,
    DictAssetStateStore,
    FakeClock,
    catalog_dict,
    next_event,
    observed,
    rewrite_files,
    roundtrip,
    stop,
    until,
)

pytestmark = pytest.mark.integration


def test_one_poll_feeds_every_action_each_throttled_to_its_own_interval(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    import airflow_tablemgmt.triggers.snapshot as snapshot_module

    clock = FakeClock(1_800_000_000.0)
    monkeypatch.setattr(snapshot_module, "time", clock)
    table = trig_tables.create("fanout")
    first = trig_tables.snapshot_id(table)
    store = DictAssetStateStore()
    key = f"tablemgmt.watch.{table}"
    # compute-stats reported 1 s ago and is throttled to 8 s; rewrite-files has no throttle.
    stats_fired = clock.now - 1.0
    store.values[key] = {
        "rewrite-files": {"snapshot_id": first, "event_at": None},
        "compute-stats": {"snapshot_id": first, "event_at": stats_fired},
    }
    trigger = TableSnapshotTrigger(
        table_id=str(table),
        catalog=catalog_dict(trig_catalog),
        poll_interval=0.1,
        actions={"rewrite-files": 0.0, "compute-stats": 8.0},
        data_changes_only=True,
    )
    trigger = roundtrip(trigger)  # type: ignore[assignment]  # as the triggerer builds it
    trigger.asset_state_store = store  # type: ignore[assignment]
    reader = observed(trigger, trig_catalog)

    async def scenario() -> tuple[TriggerEvent, TriggerEvent, int]:
        events = trigger.run()
        waiting = asyncio.ensure_future(next_event(events))
        new = await asyncio.to_thread(trig_tables.insert, table)
        first_event = await waiting  # rewrite-files at once; compute-stats held back
        waiting = asyncio.ensure_future(next_event(events))
        seen = reader.polls_seeing(new)
        await asyncio.wait_for(until(lambda: reader.polls_seeing(new) >= seen + 3), EVENT_WAIT)
        assert not waiting.done(), "compute-stats reported inside its 8 s throttle"
        clock.now += 7.0  # 8 s after compute-stats' previous event: the held-back change is reported
        second_event = await waiting
        following = asyncio.ensure_future(next_event(events))
        await asyncio.wait_for(
            until(lambda: store.values[key]["compute-stats"]["event_at"] != stats_fired), EVENT_WAIT
        )
        await stop(following)
        return first_event, second_event, new

    first_event, second_event, new = asyncio.run(scenario())
    assert first_event.payload == {
        "table": str(table),
        "snapshot_id": new,
        "previous_snapshot_id": first,
        "actions": {"rewrite-files": first},
    }
    assert second_event.payload == {
        "table": str(table),
        "snapshot_id": new,
        "previous_snapshot_id": first,
        "actions": {"compute-stats": first},
    }
    # Each action remembers what it was told, in one key of the table asset's state store.
    assert store.values == {
        key: {
            "rewrite-files": {"snapshot_id": new, "event_at": clock.now - 7.0},
            "compute-stats": {"snapshot_id": new, "event_at": stats_fired + 8.0},
        }
    }


def test_a_rewrite_snapshot_wakes_no_action_and_a_new_watcher_starts_from_the_current_one(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec
) -> None:
    table = trig_tables.create("fanout_rw")
    trig_tables.insert(table)  # two data files, so a rewrite has something to do
    store = DictAssetStateStore()
    trigger = TableSnapshotTrigger(
        table_id=str(table),
        catalog=catalog_dict(trig_catalog),
        poll_interval=0.1,
        actions={"rewrite-files": 0.0, "rewrite-manifests": 0.0},
        data_changes_only=True,
    )
    trigger.asset_state_store = store  # type: ignore[assignment]
    reader = observed(trigger, trig_catalog)
    start = trig_tables.snapshot_id(table)

    async def scenario() -> tuple[TriggerEvent, int, int]:
        events = trigger.run()
        waiting = asyncio.ensure_future(next_event(events))
        await asyncio.wait_for(until(lambda: reader.polls_seeing(start) >= 2), EVENT_WAIT)
        assert not waiting.done()  # nothing remembered: the first observation is recorded only
        rewritten = await asyncio.to_thread(rewrite_files, trig_tables, table)
        assert rewritten != start
        await asyncio.wait_for(until(lambda: reader.polls_seeing(rewritten) >= 2), EVENT_WAIT)
        assert not waiting.done(), "a replace snapshot woke an action"
        appended = await asyncio.to_thread(trig_tables.insert, table)
        event = await waiting
        await events.aclose()
        return event, rewritten, appended

    event, rewritten, appended = asyncio.run(scenario())
    assert event.payload["snapshot_id"] == appended
    assert event.payload["actions"] == {"rewrite-files": rewritten, "rewrite-manifests": rewritten}


def test_per_action_arguments_are_validated(trig_catalog: CatalogSpec) -> None:
    kwargs = {"table_id": "trig.db.t", "catalog": catalog_dict(trig_catalog)}
    with pytest.raises(
        ValueError, match=r"actions\['compute-stats'\]: min interval must be >= 0 seconds, got -1"
    ):
        TableSnapshotTrigger(**kwargs, actions={"rewrite-files": 0, "compute-stats": -1})
    with pytest.raises(ValueError, match="actions: give at least one action"):
        TableSnapshotTrigger(**kwargs, actions={})
    with pytest.raises(ValueError, match="min_interval: not with actions"):
        TableSnapshotTrigger(**kwargs, actions={"rewrite-files": 0}, min_interval=5)


def test_watchers_of_one_catalog_share_one_reader_and_a_failed_resolution_is_retried(
    trig_catalog: CatalogSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_tablemgmt.hooks.secrets import SecretResolutionError

    catalog = catalog_dict(trig_catalog)
    first = TableSnapshotTrigger(table_id="trig.db.a", catalog=catalog, actions={"rewrite-files": 0})
    second = TableSnapshotTrigger(table_id="trig.db.b", catalog=catalog, actions={"compute-stats": 0})
    assert first.reader is second.reader  # one pyiceberg catalog / pointer cache per catalog, not per table

    env = "TMS_TEST_SHARED_READER_TOKEN"
    with_ref = {**catalog, "properties": {"header.x-test": f"env:{env}"}}
    monkeypatch.delenv(env, raising=False)
    third = TableSnapshotTrigger(table_id="trig.db.c", catalog=with_ref, actions={"rewrite-files": 0})
    with pytest.raises(SecretResolutionError, match=env):
        _ = third.reader
    monkeypatch.setenv(env, "token-value")
    assert third.reader is not first.reader  # resolved on the next poll, a reader of its own catalog
    assert third.reader.catalog.properties["header.x-test"] == "token-value"


def test_watchers_starting_together_keep_few_state_store_calls_in_flight(trig_catalog: CatalogSpec) -> None:
    """The triggerer's supervisor serves state-store requests one at a time on the channel that also
    carries events, so 10,000 watchers starting at once must not queue 10,000 requests ahead of them."""
    from airflow_tablemgmt.triggers.snapshot import STATE_STORE_CONCURRENCY

    class SlowStore(DictAssetStateStore):
        def __init__(self) -> None:
            super().__init__()
            self.in_flight = self.most = self.calls = 0
            self.release = asyncio.Event()

        async def aget(self, key: str, default: Any = None) -> Any:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            try:
                await self.release.wait()
                return await super().aget(key, default)
            finally:
                self.in_flight -= 1
                self.calls += 1

    async def scenario() -> SlowStore:
        store = SlowStore()
        tasks = []
        for i in range(40):
            trigger = TableSnapshotTrigger(
                table_id=f"trig.db.not_created_{i}",
                catalog=catalog_dict(trig_catalog),
                poll_interval=30,
                actions={"rewrite-files": 0},
            )
            trigger.asset_state_store = store  # type: ignore[assignment]
            tasks.append(asyncio.ensure_future(next_event(trigger.run(), timeout=EVENT_WAIT)))
        # Start-up reads keep one of the gate's slots free for urgent calls (an event's write).
        await asyncio.wait_for(until(lambda: store.in_flight == STATE_STORE_CONCURRENCY - 1), EVENT_WAIT)
        for _ in range(20):  # every other watcher has had its turn to run: none got past the bound
            await asyncio.sleep(0)
        assert store.in_flight == STATE_STORE_CONCURRENCY - 1
        store.release.set()
        await asyncio.wait_for(until(lambda: store.calls == 40), EVENT_WAIT)
        for task in tasks:
            await stop(task)
        return store

    store = asyncio.run(scenario())
    assert store.most == STATE_STORE_CONCURRENCY - 1
