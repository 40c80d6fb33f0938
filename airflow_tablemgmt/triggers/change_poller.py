"""One polling loop per catalog and poll interval in a triggerer, instead of one per table.

A triggerer carrying 10,000 watchers that each slept, woke, hopped to a worker thread and read their
table every second would spend more than its cores on the hops alone (≈ 220 µs per poll measured, most of
it the thread hand-off). Here each watcher of a table registers with the :class:`ChangePoller` of its
catalog and interval and awaits a *generation* change; the poller runs one worker-thread call per tick
that checks every registered table with the catalog's cheapest question (``change_check.py``: one
``stat`` per hadoop table on local disk, one listing query for a JDBC catalog) and wakes only the
watchers whose table's token moved. An idle table then costs its share of one batched check per tick and
nothing in the event loop.

Catalogs without a batched check (REST, Hive, Glue, hadoop on object storage, path formats) are checked
one call per table, at most :data:`PER_TABLE_CALLS_PER_SECOND` per poller, round-robin, in up to
:data:`PER_TABLE_THREADS` worker threads; a table is then checked every ``max(interval, tables / rate)``.

Generations make the hand-off race-free: a watcher takes the generation *before* its full read and waits
for a later one, so a commit that lands between the read and the wait wakes it at once. A table's first
check also moves its generation (the watcher's first read may predate the poller's first look).
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import json
import logging
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Final

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.triggers.change_check import TokenSource, token_source

log = logging.getLogger(__name__)

#: Per-table catalog calls per second one poller makes at most (REST loads, object-store hint reads):
#: ``[tablemgmt] watcher_catalog_calls_per_second``, read when a poller starts.
PER_TABLE_CALLS_PER_SECOND: Final = 200.0
#: Worker threads one per-table poller spreads a tick's calls over (the event loop's default executor).
PER_TABLE_THREADS: Final = 4


class Subscription:
    """One watcher's registration for one table: its place to wait for the table's next change."""

    __slots__ = ("poller", "table", "key", "closed")

    def __init__(self, poller: ChangePoller, table: TableIdentifier) -> None:
        self.poller = poller
        self.table = table
        self.key = str(table)
        self.closed = False

    @property
    def generation(self) -> int:
        """The table's generation now; take it before a full read and pass it to :meth:`wait`."""
        return self.poller.generation(self.key)

    async def wait(self, seen: int, timeout: float) -> bool:
        """Until the table's generation is past ``seen`` (True) or ``timeout`` seconds (False)."""
        return await self.poller.wait(self.key, seen, timeout)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.poller.unsubscribe(self.key)


class ChangePoller:
    """Checks the registered tables of one catalog every ``interval`` seconds, in one worker-thread call
    per tick (per-table catalogs: a bounded slice per tick, over a few threads), and moves a table's
    generation when its token changes. Runs while it has subscribers.

    Tables are keyed by their id (a string: its hash is cached, a ``TableIdentifier``'s is not), and the
    tokens are compared in the worker thread, so the event loop's share of a tick is the list of tables
    that changed. :meth:`checks_of` counts a table's checks (tests and the benchmark read it)."""

    def __init__(
        self, key: Hashable, interval: float, source: Callable[[], TokenSource], name: str = "catalog"
    ) -> None:
        self.key = key
        self.name = name
        self.interval = interval
        self._make_source = source
        self._source: TokenSource | None = None
        self._subscribers: dict[str, int] = {}
        self._tables: dict[str, TableIdentifier] = {}
        self._probes: dict[str, Any] = {}
        self._tokens: dict[str, Hashable] = {}
        self._generations: dict[str, int] = {}
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._first_tick: dict[str, int] = {}  # batched: a table's checks are the ticks since its first
        self._checks: dict[str, int] = {}  # per-table sources: counted per table
        self._cursor = 0
        self._task: asyncio.Task[None] | None = None
        self._problem: str | None = None
        self.ticks = 0
        self.calls_per_second = PER_TABLE_CALLS_PER_SECOND

    def subscribe(self, table: TableIdentifier) -> Subscription:
        subscription = Subscription(self, table)
        key = subscription.key
        self._subscribers[key] = self._subscribers.get(key, 0) + 1
        self._tables.setdefault(key, table)
        self._generations.setdefault(key, 0)
        if self._task is None or self._task.done():
            # A context of its own, not the first subscriber's (Airflow binds a trigger's id to its task's
            # context and routes the log lines made there to that trigger's log).
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"tablemgmt-poll-{self.name}", context=contextvars.Context()
            )
        return subscription

    def unsubscribe(self, key: str) -> None:
        left = self._subscribers.get(key, 0) - 1
        if left > 0:
            self._subscribers[key] = left
            return
        for mapping in (
            self._subscribers,
            self._tables,
            self._probes,
            self._tokens,
            self._generations,
            self._first_tick,
            self._checks,
        ):
            mapping.pop(key, None)  # type: ignore[attr-defined]
        for future in self._waiters.pop(key, []):
            if not future.done():
                future.cancel()
        if not self._subscribers:
            _forget(self)
            if self._task is not None:
                self._task.cancel()

    def generation(self, key: str) -> int:
        return self._generations.get(key, 0)

    def checks_of(self, table: TableIdentifier | str) -> int:
        """How many times ``table`` has been checked since it was first."""
        key = str(table)
        if key in self._checks:
            return self._checks[key]
        first = self._first_tick.get(key)
        return 0 if first is None else self.ticks - first + 1

    @property
    def tables(self) -> int:
        return len(self._subscribers)

    async def wait(self, key: str, seen: int, timeout: float) -> bool:
        if self.generation(key) > seen:
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, []).append(future)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
            return True
        except TimeoutError:
            return self.generation(key) > seen
        finally:
            waiters = self._waiters.get(key)
            if waiters is not None and future in waiters:
                waiters.remove(future)

    def _bump(self, key: str) -> None:
        self._generations[key] = self._generations.get(key, 0) + 1
        for future in self._waiters.pop(key, []):
            if not future.done():
                future.set_result(None)

    def _due(self) -> list[str]:
        """This tick's tables: all of them for a batched check, else the next slice, round-robin."""
        keys = list(self._subscribers)
        if self._source is None or self._source.batched:
            return keys
        per_tick = max(1, int(self.calls_per_second * self.interval))
        if len(keys) <= per_tick:
            return keys
        start = self._cursor % len(keys)
        self._cursor = start + per_tick
        return list(itertools.islice(itertools.cycle(keys), start, start + per_tick))

    def _check(self, keys: list[str], tables: list[TableIdentifier]) -> list[str]:
        """In a worker thread: the keys whose token changed (a table's first token counts as a change)."""
        source = self._source
        assert source is not None
        probes, tokens_now = self._probes, self._tokens
        for key, table in zip(keys, tables, strict=True):
            if key not in probes:
                probes[key] = source.probe(table)
        tokens = source.tokens([probes[k] for k in keys])
        changed = []
        subscribed = self._subscribers
        for key, token in zip(keys, tokens, strict=True):
            if key in subscribed and tokens_now.get(key, _NEVER) != token:
                tokens_now[key] = token
                changed.append(key)
        return changed

    async def _changed(self, keys: list[str]) -> list[str]:
        tables = [self._tables[k] for k in keys]
        assert self._source is not None
        if self._source.batched or len(keys) < 2 * PER_TABLE_THREADS:
            return await asyncio.to_thread(self._check, keys, tables)
        step = -(-len(keys) // PER_TABLE_THREADS)
        parts = await asyncio.gather(
            *(
                asyncio.to_thread(self._check, keys[i : i + step], tables[i : i + step])
                for i in range(0, len(keys), step)
            )
        )
        return [k for part in parts for k in part]

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._subscribers:
            started = loop.time()
            keys: list[str] = []
            try:
                if self._source is None:  # in a worker thread: it may resolve the catalog's secrets
                    self._source = await asyncio.to_thread(self._make_source)
                    if not self._source.batched:
                        self.calls_per_second = calls_per_second()
                keys = self._due()
                changed = await self._changed(keys)
            except Exception as e:  # noqa: BLE001 - the watchers read for themselves and report it
                if str(e) != self._problem:
                    self._problem = str(e)
                    log.warning(
                        "change check of catalog %s failed; its watchers read their tables: %s", self.name, e
                    )
                keys = list(self._subscribers)
                for key in keys:
                    self._tokens[key] = ("error", str(e))
                changed = keys
            else:
                self._problem = None
            self.ticks += 1
            if self._source is not None and not self._source.batched:
                for key in keys:
                    if key in self._subscribers:
                        self._checks[key] = self._checks.get(key, 0) + 1
            elif len(self._first_tick) != len(self._subscribers):
                for key in keys:
                    if key in self._subscribers:
                        self._first_tick.setdefault(key, self.ticks)
            for key in changed:
                if key in self._subscribers:  # not left while the check ran
                    self._bump(key)
            await asyncio.sleep(max(0.0, self.interval - (loop.time() - started)))


_NEVER = object()


_pollers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, ChangePoller]] = (
    weakref.WeakKeyDictionary()
)


def calls_per_second() -> float:
    """``[tablemgmt] watcher_catalog_calls_per_second``; a value that is not a positive number is logged,
    naming it, and the default applies (a bad setting must not stop the watchers)."""
    try:
        from airflow.configuration import conf

        value = conf.getfloat(
            "tablemgmt", "watcher_catalog_calls_per_second", fallback=PER_TABLE_CALLS_PER_SECOND
        )
    except Exception as e:  # noqa: BLE001 - reported below with the default that applies
        log.error(
            "[tablemgmt] watcher_catalog_calls_per_second: %s; the default %g applies",
            e,
            PER_TABLE_CALLS_PER_SECOND,
        )
        return PER_TABLE_CALLS_PER_SECOND
    if not value > 0:
        log.error(
            "[tablemgmt] watcher_catalog_calls_per_second: %r is not allowed (a number > 0); the default %g applies",
            value,
            PER_TABLE_CALLS_PER_SECOND,
        )
        return PER_TABLE_CALLS_PER_SECOND
    return value


def _forget(poller: ChangePoller) -> None:
    try:
        pollers = _pollers.get(asyncio.get_running_loop(), {})
    except RuntimeError:
        return
    if pollers.get(poller.key) is poller:
        del pollers[poller.key]


def poller_for(catalog: dict[str, Any], interval: float, reader: Callable[[], Any]) -> ChangePoller:
    """The running loop's poller of ``catalog`` (as declared) at ``interval`` seconds; ``reader`` builds
    the catalog's shared reader when the poller first checks (in its worker thread)."""
    loop = asyncio.get_running_loop()
    pollers = _pollers.setdefault(loop, {})
    key = (json.dumps(catalog, sort_keys=True), float(interval))
    poller = pollers.get(key)
    if poller is None:
        poller = pollers[key] = ChangePoller(
            key, float(interval), lambda: token_source(reader()), name=str(catalog.get("name"))
        )
    return poller


async def next_poll(
    subscription: Subscription,
    seen: int,
    sleep: float | None,
    full_read_every: float,
    until: asyncio.Future[Any] | None = None,
) -> None:
    """A watcher's wait before its next full read: ``sleep`` seconds when it has its own reason to look
    again soon (a change held back by its throttle, a table it could not read), else until the poller
    sees its table change, or ``full_read_every`` seconds at the latest (what a missed token would cost),
    or ``until`` is done (the watcher's remembered state arriving from the state store)."""
    if sleep is not None:
        await asyncio.sleep(sleep)
    elif until is None:
        await subscription.wait(seen, full_read_every)
    else:
        waiter = asyncio.ensure_future(subscription.wait(seen, full_read_every))
        try:
            await asyncio.wait({waiter, until}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()


def running_pollers() -> list[ChangePoller]:
    """The running loop's pollers (the benchmark reports their ticks and checks)."""
    return list(_pollers.get(asyncio.get_running_loop(), {}).values())


__all__ = [
    "PER_TABLE_CALLS_PER_SECOND",
    "PER_TABLE_THREADS",
    "ChangePoller",
    "Subscription",
    "next_poll",
    "poller_for",
    "running_pollers",
]
