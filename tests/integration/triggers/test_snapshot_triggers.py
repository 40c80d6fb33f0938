"""Snapshot triggers and the snapshot sensor against real Iceberg tables committed by Spark."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
from typing import TYPE_CHECKING, Any

import pytest
from airflow.sdk import Asset, AssetWatcher
from airflow.sdk.exceptions import AirflowSensorTimeout, TaskDeferred
from airflow.serialization.decoders import smart_decode_trigger_kwargs
from airflow.serialization.encoders import encode_trigger
from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_tablemgmt.core.errors import InvalidDeclaration, TableNotFound
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.metadata.iceberg import SnapshotReader, SnapshotState
from airflow_tablemgmt.sensors.snapshot import TableSnapshotSensor, as_snapshot_id
from airflow_tablemgmt.triggers.snapshot import TableSnapshotChangedTrigger, TableSnapshotTrigger

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from tests.integration.iceberg_session import IcebergTables

pytestmark = pytest.mark.integration

EVENT_WAIT = 30.0  # seconds; an event normally arrives within one poll after Spark's commit


class DictAssetStateStore:
    """Stands in for the triggerer-injected ``AssetStateStoreAccessors`` of one watched asset
    (same ``aget``/``aset`` calls), so the tests run without a triggerer and an API server."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    async def aget(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    async def aset(self, key: str, value: Any) -> None:
        if value is None:
            raise ValueError("Cannot set value as None")
        self.values[key] = value


def catalog_dict(catalog: CatalogSpec) -> dict[str, Any]:
    return catalog.model_dump(mode="json", by_alias=True)


async def next_event(events: AsyncIterator[TriggerEvent], timeout: float = EVENT_WAIT) -> TriggerEvent:
    return await asyncio.wait_for(anext(events), timeout)


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.05)


async def stop(waiting: asyncio.Future[Any]) -> None:
    """Cancel a pending ``anext`` (the generator ends with the cancellation, as in the triggerer)."""
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting


def roundtrip(trigger: BaseTrigger) -> BaseTrigger:
    """Encode and decode the way Airflow stores a trigger, then rebuild it from its classpath."""
    encoded = encode_trigger(trigger)  # type: ignore[arg-type]
    kwargs = {k: smart_decode_trigger_kwargs(v) for k, v in encoded["kwargs"].items()}
    module, _, name = encoded["classpath"].rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert rebuilt.serialize() == trigger.serialize()
    return rebuilt  # type: ignore[no-any-return]


class ObservedReader(SnapshotReader):
    """A real reader that also records each poll's outcome, so a test waits on "the watcher has
    seen X" instead of sleeping for as long as that usually takes.

    A steady watcher reads its table only when its catalog's shared poller sees the table change
    (``triggers/change_poller.py``); each of the poller's checks since the last read counts as one more
    poll seeing what that read saw."""

    def __init__(self, catalog: CatalogSpec) -> None:
        super().__init__(catalog)
        self.seen: list[int | None | str] = []  # snapshot id per read, "missing" when the table was not found
        self.trigger: TableSnapshotTrigger | None = None
        self._checks_at_read = 0

    def _checks(self) -> int:
        sub = None if self.trigger is None else self.trigger._subscription
        return 0 if sub is None or sub.closed else sub.poller.checks_of(sub.table)

    def current_state(self, table: TableIdentifier) -> SnapshotState:
        try:
            state = super().current_state(table)
        except TableNotFound:
            self.seen.append("missing")
            self._checks_at_read = self._checks()
            raise
        self.seen.append(state.snapshot_id)
        self._checks_at_read = self._checks()
        return state

    def polls_seeing(self, value: int | None | str) -> int:
        reads = sum(1 for v in self.seen if v == value)
        if self.seen and self.seen[-1] == value:
            reads += max(0, self._checks() - self._checks_at_read)
        return reads


def observed(trigger: TableSnapshotTrigger, catalog: CatalogSpec) -> ObservedReader:
    reader = ObservedReader(catalog)
    reader.trigger = trigger
    trigger._reader = reader
    return reader


class FakeClock:
    """The trigger's wall clock (``time.time``), moved by the test; polling still sleeps for real."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


# -- TableSnapshotTrigger (AssetWatcher) ---------------------------------------------------------


def test_watcher_fires_on_a_commit_made_after_it_started(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec
) -> None:
    table = trig_tables.create("watch")
    before = trig_tables.snapshot_id(table)
    trigger = TableSnapshotTrigger(table_id=str(table), catalog=catalog_dict(trig_catalog), poll_interval=0.2)
    reader = observed(trigger, trig_catalog)

    async def scenario() -> tuple[TriggerEvent, int]:
        events = trigger.run()
        waiting = asyncio.ensure_future(next_event(events))
        # Nothing remembered: the first observation is recorded, not reported (nor are the next polls).
        await asyncio.wait_for(until(lambda: reader.polls_seeing(before) >= 3), EVENT_WAIT)
        assert not waiting.done()
        new = await asyncio.to_thread(trig_tables.insert, table)
        event = await waiting
        await events.aclose()
        return event, new

    event, new = asyncio.run(scenario())
    assert event.payload == {"table": str(table), "snapshot_id": new, "previous_snapshot_id": before}


def test_watcher_seeded_with_the_current_snapshot_waits_for_the_next(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec
) -> None:
    table = trig_tables.create("seeded")
    before = trig_tables.snapshot_id(table)
    trigger = TableSnapshotTrigger(
        table_id=str(table), catalog=catalog_dict(trig_catalog), poll_interval=0.2, last_snapshot_id=before
    )

    reader = observed(trigger, trig_catalog)

    async def scenario() -> tuple[TriggerEvent, int]:
        events = trigger.run()
        waiting = asyncio.ensure_future(next_event(events))
        await asyncio.wait_for(until(lambda: reader.polls_seeing(before) >= 3), EVENT_WAIT)
        assert not waiting.done()  # three polls saw the remembered snapshot: no event
        new = await asyncio.to_thread(trig_tables.insert, table)
        event = await waiting
        second = asyncio.ensure_future(next_event(events))
        newer = await asyncio.to_thread(trig_tables.insert, table)
        event2 = await second
        await events.aclose()
        assert event2.payload == {"table": str(table), "snapshot_id": newer, "previous_snapshot_id": new}
        return event, new

    event, new = asyncio.run(scenario())
    assert event.payload["snapshot_id"] == new and event.payload["previous_snapshot_id"] == before


def test_watcher_remembers_in_the_asset_state_store_across_restarts(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec
) -> None:
    table = trig_tables.create("store")
    store = DictAssetStateStore()
    kwargs = {"table_id": str(table), "catalog": catalog_dict(trig_catalog), "poll_interval": 0.2}

    async def first_run() -> None:
        trigger = TableSnapshotTrigger(**kwargs)
        trigger.asset_state_store = store  # type: ignore[assignment]
        events = trigger.run()
        waiting = asyncio.ensure_future(next_event(events))
        await asyncio.wait_for(until(lambda: bool(store.values)), EVENT_WAIT)
        await asyncio.sleep(0.4)  # two more polls of an unchanged table: no event
        assert not waiting.done()
        await stop(waiting)

    key = f"tablemgmt.last_snapshot_id.{table}"
    asyncio.run(first_run())
    seen = trig_tables.snapshot_id(table)
    assert store.values == {key: seen}

    # Committed while no triggerer watched: the next trigger reports it at once.
    new = trig_tables.insert(table)

    async def after_restart() -> TriggerEvent:
        trigger = TableSnapshotTrigger(**kwargs)
        trigger.asset_state_store = store  # type: ignore[assignment]
        events = trigger.run()
        event = await next_event(events)
        # The triggerer asks for the next event at once; that is when the new id is stored.
        following = asyncio.ensure_future(next_event(events))
        await asyncio.wait_for(until(lambda: store.values.get(key) == new), EVENT_WAIT)
        await stop(following)
        return event

    event = asyncio.run(after_restart())
    assert event.payload == {"table": str(table), "snapshot_id": new, "previous_snapshot_id": seen}
    fired_at = store.values.pop(f"tablemgmt.last_event_at.{table}")
    assert abs(fired_at - time.time()) < EVENT_WAIT
    assert store.values == {key: new}


def rewrite_files(tables: IcebergTables, table: TableIdentifier) -> int:
    """A compaction commit (operation ``replace``): what our own rewrite-files leaves behind."""
    tables.spark.sql(
        f"CALL {table.catalog}.system.rewrite_data_files(table => '{table.namespace}.{table.name}', "
        "options => map('min-input-files', '2', 'rewrite-all', 'true'))"
    ).collect()
    snapshot = tables.snapshot_id(table)
    assert snapshot is not None
    return snapshot


def test_watcher_with_data_changes_only_ignores_rewrites_and_fires_on_the_next_append(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec
) -> None:
    table = trig_tables.create("rewrites")
    trig_tables.insert(table)  # two data files, so a rewrite has something to do
    start = trig_tables.snapshot_id(table)
    store = DictAssetStateStore()
    key = f"tablemgmt.last_snapshot_id.{table}"
    trigger = TableSnapshotTrigger(
        table_id=str(table), catalog=catalog_dict(trig_catalog), poll_interval=0.2, data_changes_only=True
    )
    trigger.asset_state_store = store  # type: ignore[assignment]

    async def scenario() -> tuple[TriggerEvent, int, int]:
        events = trigger.run()
        waiting = asyncio.ensure_future(next_event(events))
        await asyncio.wait_for(until(lambda: store.values.get(key) == start), EVENT_WAIT)
        rewritten = await asyncio.to_thread(rewrite_files, trig_tables, table)
        assert rewritten != start
        # The rewrite is recorded as handled, and no event comes for it.
        await asyncio.wait_for(until(lambda: store.values.get(key) == rewritten), EVENT_WAIT)
        await asyncio.sleep(0.5)
        assert not waiting.done()
        appended = await asyncio.to_thread(trig_tables.insert, table)
        event = await waiting
        await events.aclose()
        return event, rewritten, appended

    event, rewritten, appended = asyncio.run(scenario())
    assert event.payload == {"table": str(table), "snapshot_id": appended, "previous_snapshot_id": rewritten}


def test_watcher_min_interval_holds_a_change_back_and_then_reports_it(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    import airflow_tablemgmt.triggers.snapshot as snapshot_module

    clock = FakeClock(1_800_000_000.0)
    monkeypatch.setattr(snapshot_module, "time", clock)
    table = trig_tables.create("throttle")
    store = DictAssetStateStore()
    kwargs = {"table_id": str(table), "catalog": catalog_dict(trig_catalog), "poll_interval": 0.1}
    first = trig_tables.snapshot_id(table)
    fired_key = f"tablemgmt.last_event_at.{table}"
    store.values[f"tablemgmt.last_snapshot_id.{table}"] = first
    # The previous event was 1 s ago (remembered across a restart) and the throttle is 8 s.
    previous_event = clock.now - 1.0
    store.values[fired_key] = previous_event
    trigger = TableSnapshotTrigger(**kwargs, min_interval=8.0)
    trigger.asset_state_store = store  # type: ignore[assignment]
    reader = observed(trigger, trig_catalog)

    async def scenario() -> tuple[TriggerEvent, int]:
        events = trigger.run()
        waiting = asyncio.ensure_future(next_event(events))
        new = await asyncio.to_thread(trig_tables.insert, table)
        # Inside the window (the clock stands still): polls see the commit and hold it back.
        await asyncio.wait_for(until(lambda: reader.polls_seeing(new) >= 3), EVENT_WAIT)
        assert not waiting.done(), "an event inside min_interval"
        clock.now += 6.5  # 7.5 s after the previous event: still inside
        seen = reader.polls_seeing(new)
        await asyncio.wait_for(until(lambda: reader.polls_seeing(new) >= seen + 2), EVENT_WAIT)
        assert not waiting.done(), "an event inside min_interval"
        clock.now += 0.5  # exactly 8 s: the window ends, the next poll reports the held-back commit
        event = await waiting
        # The triggerer asks for the next event at once; that is when the event's time is stored.
        following = asyncio.ensure_future(next_event(events))
        await asyncio.wait_for(until(lambda: store.values[fired_key] != previous_event), EVENT_WAIT)
        await stop(following)
        return event, new

    event, new = asyncio.run(scenario())
    assert event.payload == {"table": str(table), "snapshot_id": new, "previous_snapshot_id": first}
    assert store.values[fired_key] == previous_event + 8.0  # fired by the poll that saw the window end
    with pytest.raises(ValueError, match="min_interval"):
        TableSnapshotTrigger(**kwargs, min_interval=-1)


def test_watcher_keeps_polling_until_a_missing_table_appears(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec
) -> None:
    table = TableIdentifier(trig_catalog.name, "db", "late_table")
    trigger = TableSnapshotTrigger(table_id=str(table), catalog=catalog_dict(trig_catalog), poll_interval=0.2)
    reader = observed(trigger, trig_catalog)

    async def scenario() -> TriggerEvent:
        events = trigger.run()
        waiting = asyncio.ensure_future(next_event(events))
        await asyncio.wait_for(until(lambda: reader.polls_seeing("missing") >= 2), EVENT_WAIT)
        assert not waiting.done()  # a missing table is retried, not an event and not the end
        sql = f"CREATE TABLE {table.quoted} (id BIGINT, v STRING) USING iceberg"
        await asyncio.to_thread(trig_tables.spark.sql, sql)
        # The first observation of the table (no snapshot yet) is recorded, not reported.
        await asyncio.wait_for(until(lambda: reader.polls_seeing(None) >= 1), EVENT_WAIT)
        assert not waiting.done()
        await asyncio.to_thread(trig_tables.insert, table)
        event = await waiting
        await events.aclose()
        return event

    event = asyncio.run(scenario())
    assert event.payload["snapshot_id"] == trig_tables.snapshot_id(table)
    assert event.payload["previous_snapshot_id"] is None


def test_watcher_serializes_and_is_accepted_by_asset_watcher(trig_catalog: CatalogSpec) -> None:
    trigger = TableSnapshotTrigger(
        table_id="trig.db.events", catalog=catalog_dict(trig_catalog), poll_interval=30, last_snapshot_id=42
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_tablemgmt.triggers.snapshot.TableSnapshotTrigger"
    assert kwargs == {
        "table_id": "trig.db.events",
        "catalog": catalog_dict(trig_catalog),
        "poll_interval": 30.0,
        "last_snapshot_id": 42,
        "min_interval": 0.0,
        "data_changes_only": False,
    }
    rebuilt = roundtrip(trigger)
    assert isinstance(rebuilt, TableSnapshotTrigger) and rebuilt.last_snapshot_id == 42
    asset = Asset(name="trig.db.events", watchers=[AssetWatcher(name="trig.db.events", trigger=trigger)])
    assert asset.watchers[0].trigger is trigger


def test_trigger_arguments_are_validated(trig_catalog: CatalogSpec) -> None:
    with pytest.raises(InvalidDeclaration, match="is in catalog 'other', but catalog.name is 'trig'"):
        TableSnapshotTrigger(table_id="other.db.t", catalog=catalog_dict(trig_catalog))
    with pytest.raises(InvalidDeclaration, match="must be written catalog.namespace.table"):
        TableSnapshotTrigger(table_id="db.t", catalog=catalog_dict(trig_catalog))
    with pytest.raises(ValueError, match="poll_interval"):
        TableSnapshotChangedTrigger(table_id="trig.db.t", catalog=catalog_dict(trig_catalog), poll_interval=0)


# -- TableSnapshotChangedTrigger (deferrable sensor) --------------------------------------------


def test_changed_trigger_fires_once_on_change_timeout_and_missing_table(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec
) -> None:
    table = trig_tables.create("changed")
    before = trig_tables.snapshot_id(table)
    catalog = catalog_dict(trig_catalog)

    async def first(trigger: TableSnapshotChangedTrigger) -> TriggerEvent:
        events = trigger.run()
        event = await next_event(events)
        with pytest.raises(StopAsyncIteration):  # fires once, then ends
            await anext(events)
        return event

    timed_out = asyncio.run(
        first(
            TableSnapshotChangedTrigger(
                table_id=str(table), catalog=catalog, since_snapshot_id=before, poll_interval=0.2, timeout=0.5
            )
        )
    )
    assert timed_out.payload["status"] == "timeout"
    assert timed_out.payload["snapshot_id"] == before and str(table) in timed_out.payload["message"]

    new = trig_tables.insert(table)
    changed = asyncio.run(
        first(TableSnapshotChangedTrigger(table_id=str(table), catalog=catalog, since_snapshot_id=before))
    )
    assert changed.payload == {
        "status": "changed",
        "table": str(table),
        "snapshot_id": new,
        "previous_snapshot_id": before,
    }

    missing = asyncio.run(first(TableSnapshotChangedTrigger(table_id="trig.db.nope", catalog=catalog)))
    assert missing.payload["status"] == "error" and "trig.db.nope" in missing.payload["message"]


def test_changed_trigger_keeps_its_deadline_through_serialization(trig_catalog: CatalogSpec) -> None:
    trigger = TableSnapshotChangedTrigger(
        table_id="trig.db.t", catalog=catalog_dict(trig_catalog), since_snapshot_id=7, timeout=60
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_tablemgmt.triggers.snapshot.TableSnapshotChangedTrigger"
    assert kwargs["deadline"] is not None and kwargs["since_snapshot_id"] == 7
    rebuilt = roundtrip(trigger)
    assert isinstance(rebuilt, TableSnapshotChangedTrigger) and rebuilt.deadline == trigger.deadline


# -- TableSnapshotSensor ------------------------------------------------------------------------


def test_sensor_pokes_false_before_and_true_after_a_commit(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec
) -> None:
    table = trig_tables.create("poke")
    before = trig_tables.snapshot_id(table)
    sensor = TableSnapshotSensor(
        task_id="wait",
        table=str(table),
        catalog=catalog_dict(trig_catalog),
        since_snapshot_id=str(before),  # as a rendered template hands it over
        deferrable=False,
        poll_interval=0.1,
    )
    assert not sensor.poke({})  # type: ignore[arg-type]
    new = trig_tables.insert(table)
    done = sensor.poke({})  # type: ignore[arg-type]
    assert done and done.xcom_value == new
    assert sensor.execute({}) == new  # type: ignore[arg-type]


def test_deferrable_sensor_defers_to_the_changed_trigger(
    trig_tables: IcebergTables, trig_catalog: CatalogSpec
) -> None:
    table = trig_tables.create("defer")
    before = trig_tables.snapshot_id(table)
    sensor = TableSnapshotSensor(
        task_id="wait",
        table=str(table),
        catalog=catalog_dict(trig_catalog),
        since_snapshot_id=before,
        timeout=600,
    )
    assert tuple(sensor.template_fields) == ("table", "since_snapshot_id")
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})  # type: ignore[arg-type]
    trigger = deferred.value.trigger
    assert isinstance(trigger, TableSnapshotChangedTrigger)
    assert deferred.value.method_name == "execute_complete"
    assert (trigger.table_id, trigger.since_snapshot_id, trigger.poll_interval) == (str(table), before, 5.0)
    assert trigger.timeout == 600

    # Already changed: no deferral, the new id is returned at once.
    eager = TableSnapshotSensor(task_id="eager", table=str(table), catalog=catalog_dict(trig_catalog))
    assert eager.execute({}) == before  # type: ignore[arg-type]


def test_sensor_resumes_from_trigger_events(trig_catalog: CatalogSpec) -> None:
    sensor = TableSnapshotSensor(task_id="wait", table="trig.db.t", catalog=catalog_dict(trig_catalog))
    changed = {"status": "changed", "table": "trig.db.t", "snapshot_id": 11, "previous_snapshot_id": 10}
    assert sensor.execute_complete({}, changed) == 11  # type: ignore[arg-type]
    with pytest.raises(AirflowSensorTimeout, match="no snapshot"):
        sensor.execute_complete({}, {"status": "timeout", "message": "no snapshot of trig.db.t"})  # type: ignore[arg-type]
    with pytest.raises(TableNotFound, match="trig.db.t"):
        sensor.execute_complete({}, {"status": "error", "message": "table trig.db.t: gone"})  # type: ignore[arg-type]


def test_templated_snapshot_ids_are_coerced() -> None:
    assert as_snapshot_id(None) is None and as_snapshot_id("None") is None and as_snapshot_id(" ") is None
    assert as_snapshot_id("123") == 123 and as_snapshot_id(5) == 5
    with pytest.raises(InvalidDeclaration, match="since_snapshot_id: expected a snapshot id"):
        as_snapshot_id("abc")
