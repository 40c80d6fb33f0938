"""The asset watcher's trigger: wait for a new Iceberg snapshot, checked with pyiceberg in the triggerer.
(Its class path and kwargs are stored in Airflow's trigger table, so they stay put; its calls to the asset
state store are in ``watch_store.py``, its table checks in ``change_poller.py``.)

:class:`TableSnapshotTrigger` is a :class:`~airflow.triggers.base.BaseEventTrigger` for ``AssetWatcher``:
it runs for as long as the asset is watched and emits one event per new snapshot, so a DAG scheduled on
the asset runs when the table changes (event-driven gate). The sensor's one-shot trigger is in
``snapshot_changed.py`` (re-exported here: its class path is stored in Airflow's trigger table). Both
read through a :class:`~airflow_tablemgmt.metadata.iceberg.SnapshotReader` in a worker thread, and carry
the catalog as declared, secrets only as references (``readers.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_tablemgmt.core.errors import CatalogUnavailable, TableNotFound
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.hooks.secrets import SecretResolutionError
from airflow_tablemgmt.metadata.iceberg import SnapshotReader, SnapshotState
from airflow_tablemgmt.triggers.change_poller import Subscription, next_poll, poller_for
from airflow_tablemgmt.triggers.readers import catalog_json, check_table_in_catalog, shared_reader
from airflow_tablemgmt.triggers.snapshot_changed import TableSnapshotChangedTrigger  # noqa: F401 - persisted path
from airflow_tablemgmt.triggers.throttle import (
    POLLING_SUMMARY_SECONDS,
    STATE_STORE_CONCURRENCY,  # noqa: F401 - re-exported
    Ticket,
    polling_counter,
    state_store_gate,
)
from airflow_tablemgmt.triggers.watch_state import UNSET, Unset, Watch
from airflow_tablemgmt.triggers.watch_store import StateStoreCalls

#: The longest a steady watcher goes without a full read of its table (the shared poller's cheap check
#: wakes it on every change; this bounds what a change the check cannot see would cost).
FULL_READ_EVERY = 300.0


class TableSnapshotTrigger(StateStoreCalls, BaseEventTrigger):
    """Emit an event when ``table_id`` gets a new current snapshot (for ``AssetWatcher``).

    The last handled snapshot id is remembered in the watched asset's ``asset_state_store`` (injected
    by the Airflow 3.3 triggerer) under :meth:`state_key`, so a restarted triggerer fires for a commit
    that happened while it was down and does not fire again for one it already reported. Without a
    store (a trigger run outside the triggerer, or one shared by several assets) the constructor's
    ``last_snapshot_id`` seeds an in-memory value. With nothing remembered at all, the first
    observation is recorded and the trigger waits for the next change. The remembered state is read
    in the background while the trigger already polls (see :meth:`run`): each state-store call is a
    request the triggerer's supervisor serves one at a time, so reading it first would keep the last
    of 10,000 watchers from looking at its table for tens of minutes after every triggerer start.

    ``data_changes_only``: snapshots that only rewrite files (Iceberg's ``replace`` operation: our own
    compaction, delete-file and manifest rewrites) are recorded without an event, so maintenance does
    not wake itself up. ``min_interval`` (seconds): at most one event per ``min_interval``; a change
    seen sooner is held back and reported as soon as the interval has passed (the time of the last
    event is kept in the state store too, so a restart does not reset the throttle).

    ``actions`` (``{action: min_interval seconds}``): one watcher for all the snapshot-driven actions
    of the table. Airflow's triggerer runs at most ``[triggerer] capacity`` triggers, so one poll per
    table (not per table and action) is what lets one triggerer carry thousands of tables. Each action
    keeps its own remembered snapshot and throttle (all in one state key, :attr:`watch_key`); one event names
    the actions it is for, with the snapshot each last saw: ``"actions": {action: previous id}``.
    Airflow hands an event to every asset of the trigger, so the DAGs read that list to know whether
    the event is for them (:func:`airflow_tablemgmt.dag_factory.event_names_action`).

    ``poll_interval``: how often the table is checked for a change, by its catalog's shared poller in
    this triggerer (``change_poller.py``: one check of all the catalog's watched tables per tick, e.g. one
    ``stat`` per hadoop table); the full read runs only when that check moves, while a change is
    held back, while the table cannot be read, and every :data:`FULL_READ_EVERY` seconds.

    Event payload: ``{"table": "<catalog.namespace.table>", "snapshot_id": <int>,
    "previous_snapshot_id": <int | None>}`` (+ ``"actions"`` with ``actions``). Delivery is at least
    once: the new id is stored after the event is handed to the triggerer.
    """

    #: This watcher's place in its catalog's shared poller while ``run`` runs.
    _subscription: Subscription | None = None

    def __init__(
        self,
        *,
        table_id: str,
        catalog: dict[str, Any] | CatalogSpec,
        poll_interval: float = 2.0,
        last_snapshot_id: int | None = None,
        min_interval: float = 0.0,
        data_changes_only: bool = False,
        actions: dict[str, float] | None = None,
    ) -> None:
        super().__init__()
        self.catalog = catalog_json(catalog)
        self.table_id = str(check_table_in_catalog(table_id, self.catalog))
        if poll_interval <= 0:
            raise ValueError(f"poll_interval: must be > 0 seconds, got {poll_interval!r}")
        if min_interval < 0:
            raise ValueError(f"min_interval: must be >= 0 seconds, got {min_interval!r}")
        if actions is not None:
            if not actions:
                raise ValueError("actions: give at least one action, or leave actions out (one watcher)")
            if min_interval:
                raise ValueError(
                    f"min_interval: not with actions (each action has its own), got {min_interval!r}"
                )
            for name, interval in actions.items():
                if not isinstance(interval, int | float) or interval < 0:
                    raise ValueError(
                        f"actions[{name!r}]: min interval must be >= 0 seconds, got {interval!r}"
                    )
            actions = {name: float(actions[name]) for name in sorted(actions)}
        self.poll_interval = float(poll_interval)
        self.last_snapshot_id = last_snapshot_id
        self.min_interval = float(min_interval)
        self.data_changes_only = bool(data_changes_only)
        self.actions = actions
        self._reader: SnapshotReader | None = None
        self._store_usable = True

    def serialize(self) -> tuple[str, dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "table_id": self.table_id,
            "catalog": self.catalog,
            "poll_interval": self.poll_interval,
            "last_snapshot_id": self.last_snapshot_id,
            "min_interval": self.min_interval,
            "data_changes_only": self.data_changes_only,
        }
        if self.actions is not None:  # left out otherwise: a one-watcher trigger keeps its stored form
            kwargs["actions"] = dict(self.actions)
        return f"{type(self).__module__}.{type(self).__qualname__}", kwargs

    @property
    def state_key(self) -> str:
        """Key in the asset's state store; per table, so one asset may be fed by several tables."""
        return f"tablemgmt.last_snapshot_id.{self.table_id}"

    @property
    def fired_at_key(self) -> str:
        """Key of the last event's time (epoch seconds), for the throttle."""
        return f"tablemgmt.last_event_at.{self.table_id}"

    @property
    def reader(self) -> SnapshotReader:
        if self._reader is None:
            self._reader = shared_reader(self.catalog)
        return self._reader

    def _current_state(self, table: TableIdentifier) -> SnapshotState:
        # In the worker thread: building the reader may look up a connection or variable.
        return self.reader.current_state(table)

    def _watches(self) -> list[Watch]:
        if self.actions is None:
            return [Watch(None, self.min_interval)]
        return [Watch(name, interval) for name, interval in self.actions.items()]

    @property
    def watch_key(self) -> str:
        """With ``actions``: the one state-store key holding every action's remembered snapshot and
        last event time, ``{action: {"snapshot_id": id, "event_at": epoch s}}`` (one read when the
        trigger starts, one write per change: each state-store call is a round trip to the API server,
        and a triggerer carrying 10,000 tables starts 10,000 of these at once)."""
        return f"tablemgmt.watch.{self.table_id}"

    def _keys(self) -> tuple[str, ...]:
        return (self.state_key, self.fired_at_key) if self.actions is None else (self.watch_key,)

    def _saved_form(self, watches: list[Watch]) -> dict[str, Any]:
        """What the state store should hold now, by key (keys with nothing to hold left out)."""
        if self.actions is None:
            [watch] = watches
            form: dict[str, Any] = {}
            if isinstance(watch.remembered, int):  # the store cannot hold None: memory only
                form[self.state_key] = watch.remembered
            if watch.fired_at is not None:
                form[self.fired_at_key] = watch.fired_at
            return form
        state = {
            watch.action: {"snapshot_id": watch.remembered, "event_at": watch.fired_at}
            for watch in watches
            if not isinstance(watch.remembered, Unset)
        }
        return {self.watch_key: state} if state else {}

    def _apply_saved(self, watches: list[Watch], saved: dict[str, object], baseline: int | None) -> None:
        """Set each watch from what the store remembered. A watch with nothing remembered starts from
        the constructor's ``last_snapshot_id``, else from ``baseline`` (the watcher's first poll)."""
        if self.actions is None:
            [watch] = watches
            value, fired_at = saved.get(self.state_key), saved.get(self.fired_at_key)
            if value is not None:
                watch.remembered = int(value)  # type: ignore[call-overload]
            watch.fired_at = float(fired_at) if fired_at is not None else None  # type: ignore[arg-type]
        else:
            entries = saved.get(self.watch_key)
            entries = entries if isinstance(entries, dict) else {}
            for watch in watches:
                entry = entries.get(watch.action)
                if isinstance(entry, dict):
                    if "snapshot_id" in entry:
                        sid = entry["snapshot_id"]
                        watch.remembered = None if sid is None else int(sid)
                    if entry.get("event_at") is not None:
                        watch.fired_at = float(entry["event_at"])
        self._stored = {key: value for key, value in saved.items() if value is not None}
        for watch in watches:
            if isinstance(watch.remembered, Unset):
                watch.remembered = baseline if self.last_snapshot_id is None else self.last_snapshot_id

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll from the start. With a state store, what it remembers is read in the background (at
        most STATE_STORE_CONCURRENCY calls in flight per triggerer, start-up reads queued behind
        urgent calls) while the watcher polls against its first observation, the *baseline*:

        * the answer arrives first: each action's remembered snapshot is compared with the current
          one as before (a commit made while no triggerer watched is reported; one already reported
          is not); nothing remembered means the baseline is the first observation (written back in
          the background, only if it differs from what the store holds);
        * the table changes first: the read of this watcher goes ahead of every start-up read, and
          its answer decides what is reported, with the remembered previous snapshot and throttle.
        """
        table = TableIdentifier.parse(self.table_id)
        watches = self._watches()
        self._store_usable, self._stored, self._dirty = True, {}, False
        self._writer = None
        self._write_ticket = Ticket()
        recall_ticket = Ticket()
        recall: asyncio.Task[dict[str, object]] | None = None
        if getattr(self, "asset_state_store", None) is not None:
            recall = asyncio.create_task(self._read_saved(recall_ticket))
        elif self.last_snapshot_id is not None:
            for watch in watches:
                watch.remembered = self.last_snapshot_id
        baseline: int | None | Unset = UNSET
        problem: str | None = None
        poller = poller_for(self.catalog, self.poll_interval, lambda: self.reader)
        self._subscription = subscription = poller.subscribe(table)
        try:
            while True:
                seen = subscription.generation  # before the read: a commit during it wakes us at once
                try:
                    state = await asyncio.to_thread(self._current_state, table)
                except (TableNotFound, CatalogUnavailable, OSError, SecretResolutionError) as e:
                    # A watcher outlives outages (a catalog's 5xx, its database down) and a table that is
                    # not created yet: say so once, keep polling.
                    if str(e) != problem:
                        problem = str(e)
                        self.log.warning("snapshot check of %s failed, will retry: %s", self.table_id, e)
                    await asyncio.sleep(self.poll_interval)
                    continue
                problem = None
                if recall is not None:
                    if isinstance(baseline, Unset):
                        baseline = state.snapshot_id
                        self._polling(baseline)
                    if not recall.done():
                        if state.snapshot_id == baseline:  # nothing new since this watcher started
                            # Until the table changes or the store answers (then: compare with it).
                            await next_poll(subscription, seen, None, FULL_READ_EVERY, until=recall)
                            continue
                        state_store_gate().promote(recall_ticket)  # changed: its remembered state now
                    saved = await recall
                    recall = None
                    self._apply_saved(watches, saved, baseline)
                    self._schedule_write(watches, urgent=False)  # a first observation the store lacks
                sleep: float | None = None  # nothing held back: until the poller sees a change
                due: list[tuple[Watch, int | None]] = []
                changed = False
                for watch in watches:
                    step = self._step(watch, state)
                    if step is None:
                        continue
                    if step is True:
                        changed = True
                    elif step > 0:
                        sleep = min(self.poll_interval if sleep is None else sleep, step)
                    else:
                        assert not isinstance(watch.remembered, Unset)
                        due.append((watch, watch.remembered))
                if due:
                    current = state.snapshot_id
                    now = time.time()
                    payload: dict[str, Any] = {
                        "table": self.table_id,
                        "snapshot_id": current,
                        "previous_snapshot_id": due[0][1],
                    }
                    if self.actions is not None:
                        payload["actions"] = {watch.action: previous for watch, previous in due}
                    for watch, _ in due:
                        watch.remembered, watch.held_back, watch.fired_at = current, None, now
                    self.log.info(
                        "%s: new snapshot %s (was %s)%s",
                        self.table_id,
                        current,
                        due[0][1],
                        "" if self.actions is None else f" for {', '.join(payload['actions'])}",
                    )
                    yield TriggerEvent(payload)
                if due or changed:
                    # After the event was handed over: delivery is at least once.
                    self._schedule_write(watches, urgent=bool(due))
                await next_poll(subscription, seen, sleep, FULL_READ_EVERY)
        finally:
            subscription.close()
            if recall is not None:
                recall.cancel()
            if self._writer is not None and not self._write_ticket.urgent:
                self._writer.cancel()  # a first observation only; an event's write is let finish

    def _step(self, watch: Watch, state: SnapshotState) -> float | bool | None:
        """One poll's outcome for one watch: None (nothing new), True (a snapshot recorded without an
        event), 0 (report now) or the seconds until its throttle lets it report a change it holds back."""
        current = state.snapshot_id
        if isinstance(watch.remembered, Unset):
            if self._logs(watch):
                self._polling(current)
            watch.remembered = current
            return True
        if current == watch.remembered:
            return None
        if current is None or (self.data_changes_only and not state.data_changed_since(watch.remembered)):
            # Emptied, or only files rewritten since: record it, no event.
            why = "has no snapshot" if current is None else f"snapshot {current} only rewrites files"
            if self._logs(watch):
                self.log.info("%s: %s; no event", self.table_id, why)
            watch.remembered = current
            return True
        wait = watch.throttle_wait(time.time())
        if wait > 0 and watch.held_back != current:
            watch.held_back = current
            self.log.info(
                "%s: new snapshot %s held back %.0f s by %smin_interval %.0f s",
                self.table_id,
                current,
                wait,
                "" if watch.action is None else f"{watch.action}'s ",
                watch.min_interval,
            )
        return wait

    def _polling(self, snapshot_id: int | None) -> None:
        """This watcher's first poll: one debug line per table, and a count of this triggerer's
        polling watchers at info, at most once per POLLING_SUMMARY_SECONDS. Every log line of a
        trigger is relayed by the triggerer's supervisor in the same loop that serves state-store
        calls and events; one info line per table held 10,000 watchers back for minutes."""
        self.log.debug("watching %s from snapshot %s", self.table_id, snapshot_id)
        counter = polling_counter()
        counter.count += 1
        if counter.pending is None:
            counter.pending = asyncio.get_running_loop().call_later(
                POLLING_SUMMARY_SECONDS, counter.report, self.log
            )

    def _logs(self, watch: Watch) -> bool:
        # One log line per table and observation, not one per action: at 10,000 tables the
        # triggerer log is read by people.
        return self.actions is None or watch.action == next(iter(self.actions))
