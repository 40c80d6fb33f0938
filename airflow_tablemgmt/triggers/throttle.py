"""The triggerer's shared bounds: asset-state-store calls in flight per event loop (urgent ones
first), and the one summary line of how many watchers poll."""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from typing import Any, Final

# State-store calls in flight at once, per event loop (the triggerer runs one). Each call is a request
# the triggerer's supervisor serves one at a time, in order, on the same channel that carries trigger
# events to it (measured: ≈ 5 requests/s with 10,000 triggers, the supervisor's loop serving one per
# turn): thousands of watchers starting together would otherwise queue thousands of requests ahead of
# every event. With a bound, an event waits behind at most this many requests. Start-up reads and
# first-observation writes are *background* calls and keep one slot free for the *urgent* ones (the
# state of a watcher that has just seen a change, the write after an event), which go first. Among the
# background calls the writes (``Ticket(ahead=True)``: state the store lacks, such as a first observation)
# go before the start-up reads: queued behind every other watcher's read, no first observation of 10,000
# watchers was stored in a triggerer's first minutes, and a restart in that time forgot them (a commit made
# while it was down became the next triggerer's first observation, never reported).
STATE_STORE_CONCURRENCY: Final = 4


class Ticket:
    """One caller's place in the gate's queue; ``urgent`` may be raised while it waits. ``ahead``: a
    background call served before the other background calls (a write of state the store lacks)."""

    __slots__ = ("ahead", "future", "urgent")

    def __init__(self, urgent: bool = False, ahead: bool = False) -> None:
        self.urgent = urgent
        self.ahead = ahead
        self.future: asyncio.Future[None] | None = None


class StateStoreGate:
    """At most ``limit`` calls in flight, background calls at most ``limit - 1``; urgent ones first, then
    the background calls ``ahead``, then the others, each in the order they came."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0
        self._urgent: deque[Ticket] = deque()
        self._ahead: deque[Ticket] = deque()
        self._background: deque[Ticket] = deque()

    def _room(self, urgent: bool) -> bool:
        return self.in_flight < (self.limit if urgent else self.limit - 1)

    def _queue(self, ticket: Ticket) -> deque[Ticket]:
        return self._urgent if ticket.urgent else self._ahead if ticket.ahead else self._background

    def _waiting_before(self, ticket: Ticket) -> bool:
        """Whether a waiting call goes before ``ticket``."""
        if ticket.urgent:
            return bool(self._urgent)
        return bool(self._urgent or self._ahead or (not ticket.ahead and self._background))

    async def acquire(self, ticket: Ticket) -> None:
        if self._room(ticket.urgent) and not self._waiting_before(ticket):
            self.in_flight += 1
            return
        ticket.future = asyncio.get_running_loop().create_future()
        self._queue(ticket).append(ticket)
        try:
            await ticket.future
        except asyncio.CancelledError:
            if ticket.future.done() and not ticket.future.cancelled():
                self.release()  # granted as it was cancelled: hand the slot on
            else:
                ticket.future.cancel()
            raise
        finally:
            ticket.future = None

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def promote(self, ticket: Ticket) -> None:
        """Move a waiting background call ahead of every other background call."""
        if not ticket.urgent:
            ticket.urgent = True
            if ticket.future is not None and not ticket.future.done():
                self._urgent.append(ticket)
                self._wake()

    def _wake(self) -> None:
        for queue, urgent in ((self._urgent, True), (self._ahead, False), (self._background, False)):
            while queue and self._room(urgent) and (urgent or not self._urgent):
                ticket = queue.popleft()
                if ticket.future is None or ticket.future.done() or (ticket.urgent and not urgent):
                    continue  # gone, or promoted: served from the urgent queue
                self.in_flight += 1
                ticket.future.set_result(None)


_state_store_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, StateStoreGate] = (
    weakref.WeakKeyDictionary()
)


def state_store_gate() -> StateStoreGate:
    """The running loop's bound on concurrent asset-state-store calls (see STATE_STORE_CONCURRENCY)."""
    loop = asyncio.get_running_loop()
    gate = _state_store_gates.get(loop)
    if gate is None:
        gate = _state_store_gates[loop] = StateStoreGate(STATE_STORE_CONCURRENCY)
    return gate


POLLING_SUMMARY_SECONDS: Final = 5.0


class PollingCounter:
    """Watchers of this event loop that have polled their table at least once."""

    def __init__(self) -> None:
        self.count = 0
        self.reported = 0
        self.pending: asyncio.TimerHandle | None = None

    def report(self, log: Any) -> None:
        self.pending = None
        if self.count != self.reported:
            self.reported = self.count
            log.info("%d snapshot watchers have started polling in this triggerer", self.count)


_polling_counters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, PollingCounter] = (
    weakref.WeakKeyDictionary()
)


def polling_counter() -> PollingCounter:
    loop = asyncio.get_running_loop()
    counter = _polling_counters.get(loop)
    if counter is None:
        counter = _polling_counters[loop] = PollingCounter()
    return counter
