"""A snapshot watcher's calls to Airflow's asset state store: what it remembers across triggerer restarts.

Each call is a request the triggerer's supervisor serves one at a time, on the channel that also carries
events, so every read and write goes through the running loop's gate (``throttle.py``: a few calls in
flight, urgent ones first), writes run in one background task per watcher that writes only the latest
state and only keys whose value differs from what the store holds, and a store that cannot be used (a
trigger shared by several assets) is given up for memory. :class:`StateStoreCalls` is mixed into
:class:`~airflow_tablemgmt.triggers.snapshot.TableSnapshotTrigger`, which says what to store
(``_keys``, ``_saved_form``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from airflow_tablemgmt.triggers.throttle import Ticket, state_store_gate
from airflow_tablemgmt.triggers.watch_state import UNSET, Unset, Watch


class StateStoreCalls:
    """The state-store side of a watcher; the trigger sets the attributes below when it starts."""

    table_id: str
    log: Any
    _store_usable: bool
    _stored: dict[str, Any]
    _dirty: bool
    _write_ticket: Ticket
    #: The background task writing what changed to the asset state store (``run`` starts it).
    _writer: asyncio.Task[None] | None = None

    # The two hooks the trigger that mixes this in defines (triggers/snapshot.py): what its watches are keyed by,
    # and the form they are saved in. Not stubs: a class without them is not a watcher.
    def _keys(self) -> tuple[str, ...]:
        raise NotImplementedError

    def _saved_form(self, watches: list[Watch]) -> dict[str, Any]:
        raise NotImplementedError

    def _store(self) -> Any:
        return getattr(self, "asset_state_store", None) if self._store_usable else None

    async def _read_saved(self, ticket: Ticket) -> dict[str, object]:
        """The store's answer for every key of this watcher (one call per key, through the gate)."""
        return {key: await self._recall_value(key, ticket) for key in self._keys()}

    def _schedule_write(self, watches: list[Watch], urgent: bool) -> None:
        """Write what changed, without holding up polling: one writer task per watcher, which writes
        the latest state when its turn comes (so changes queued behind the gate coalesce) and only
        keys whose value differs from what the store holds. ``urgent``: after an event (ahead of
        every start-up call); otherwise a first observation or a rewrite recorded without an event."""
        if self._store() is None:
            return
        self._dirty = True
        if self._writer is None or self._writer.done():
            # Ahead of the start-up reads: a first observation not yet stored is lost by a restart.
            self._write_ticket = Ticket(urgent, ahead=True)
            self._writer = asyncio.create_task(self._write_loop(watches))
        elif urgent:
            state_store_gate().promote(self._write_ticket)

    async def _write_loop(self, watches: list[Watch]) -> None:
        while self._dirty:
            self._dirty = False
            for key in self._keys():
                await self._store_latest(key, watches)

    async def _store_latest(self, key: str, watches: list[Watch]) -> None:
        store = self._store()
        if store is None or self._saved_form(watches).get(key, UNSET) == self._stored.get(key, UNSET):
            return
        gate = state_store_gate()
        await gate.acquire(self._write_ticket)
        try:
            value = self._saved_form(watches).get(key, UNSET)  # the latest, computed in our turn
            if isinstance(value, Unset) or value == self._stored.get(key, UNSET):
                return
            await store.aset(key, value)
            self._stored[key] = value
        except Exception as e:  # noqa: BLE001 - the store is an optimisation, never a reason to stop
            self.log.warning("asset_state_store write failed for %s: %s", self.table_id, e)
        finally:
            gate.release()

    async def _recall_value(self, key: str, ticket: Ticket) -> object:
        store = self._store()
        if store is None:
            return None
        gate = state_store_gate()
        await gate.acquire(ticket)
        try:
            return await store.aget(key)
        except ValueError as e:  # several watched assets: the single-asset accessors refuse
            self._store_usable = False
            self.log.warning(
                "asset_state_store not usable for %s (%s); remembering in memory", self.table_id, e
            )
        except Exception as e:  # noqa: BLE001 - the store is an optimisation, never a reason to stop
            self.log.warning("asset_state_store read failed for %s: %s", self.table_id, e)
        finally:
            gate.release()
        return None
