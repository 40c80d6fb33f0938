"""Bounds on every wait for the store: connect, statement and dead-peer timeouts.

A store call that *fails* is handled by the lifecycle (retries, give-up rules); a call that *hangs*
is not, unless the connection itself gives up. Without these settings a PostgreSQL connection whose
route stops forwarding waits for the kernel's TCP retransmission timeout (about 15 minutes on
Linux), far beyond a 2-minute lease. The defaults below end a dead connection within about a minute;
the worker's lease watchdog (:mod:`airflow_tablemgmt.lifecycle.watchdog`) covers what no socket option
can see (e.g. a peer that accepts bytes and never answers).

A worker frozen *inside* a store transaction (SIGSTOP, a VM paused between a lease renewal's UPDATE and
its COMMIT) keeps its connection healthy and its row locks held: every other worker's take-over of that
lease would wait on the lock, and fail at its statement timeout, for as long as the freeze lasts. The
server ends such a session after ``idle_in_transaction_session_timeout`` (rolling the renewal back), well
inside a lease's TTL, so the lease lapses at its old expiry and can be taken over. Every store
transaction is a short ``with engine.begin()`` block: none is idle for anywhere near that long.

A setting given in the store URL's query or in ``engine_kwargs["connect_args"]`` wins over these.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import URL

#: libpq connection parameters (psycopg2 and psycopg 3 pass them through).
PG_CONNECT_DEFAULTS: dict[str, Any] = {
    "connect_timeout": 10,  # seconds to establish a connection
    "keepalives": 1,
    "keepalives_idle": 10,  # seconds idle before the first probe
    "keepalives_interval": 5,  # seconds between probes
    "keepalives_count": 3,  # unanswered probes before the connection is dead
    "tcp_user_timeout": 30_000,  # ms that sent data may stay unacknowledged
}
#: Server-side bound on one statement (ms): no store statement should take anywhere near it.
PG_STATEMENT_TIMEOUT_MS = 30_000
#: Server-side bound (ms) on a session idle inside a transaction: a frozen worker's locks are released.
#: Shorter than the 2-minute lease TTL (lifecycle.model.LEASE_TTL), so a frozen renewal never outlasts it.
PG_IDLE_IN_TRANSACTION_TIMEOUT_MS = 30_000
#: SQLite waits this long for another writer's lock, then fails (not forever).
SQLITE_BUSY_TIMEOUT_MS = 30_000

_LIBPQ_DRIVERS = frozenset({"psycopg2", "psycopg", "psycopg2cffi"})


def apply_pg_timeouts(url: URL, kwargs: dict[str, Any]) -> None:
    """Add the connect/keepalive/statement/idle-transaction defaults to ``kwargs["connect_args"]`` for a
    libpq driver (other drivers take other names; they are left alone)."""
    if url.get_backend_name() != "postgresql" or url.get_driver_name() not in _LIBPQ_DRIVERS:
        return
    connect_args = dict(kwargs.get("connect_args") or {})
    for key, value in PG_CONNECT_DEFAULTS.items():
        if key not in url.query:
            connect_args.setdefault(key, value)
    options = str(connect_args.get("options") or url.query.get("options") or "")
    if "statement_timeout" not in options:
        options = f"{options} -c statement_timeout={PG_STATEMENT_TIMEOUT_MS}".strip()
    if "idle_in_transaction_session_timeout" not in options:
        idle = PG_IDLE_IN_TRANSACTION_TIMEOUT_MS
        options = f"{options} -c idle_in_transaction_session_timeout={idle}".strip()
    if options:
        connect_args["options"] = options
    kwargs["connect_args"] = connect_args
