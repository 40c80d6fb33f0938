"""Time as the store sees it: aware UTC, always, and read from the database.

Lease expiry and heartbeat staleness compare timestamps written by different hosts. If each
worker stamped rows with its own clock, a worker whose clock runs 70 s ahead would see every
lease as expired and every heartbeat as stale. So every timestamp the store writes or compares
against comes from one clock, the database's (:func:`db_now`); Python's clock (:func:`utcnow`)
is only the fallback for a dialect without a known "current time" query.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Connection, text

# The database's current time, as UTC. SQLite's 'now' is UTC with millisecond precision;
# PostgreSQL's clock_timestamp() is the wall clock at the call (now() would be frozen at the
# start of the transaction).
_NOW_SQL = {
    "sqlite": "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')",
    "postgresql": "SELECT clock_timestamp()",
    "mysql": "SELECT UTC_TIMESTAMP(6)",
    "mariadb": "SELECT UTC_TIMESTAMP(6)",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


def db_now(conn: Connection) -> datetime:
    """The database server's current time (aware UTC), the one clock every worker shares."""
    sql = _NOW_SQL.get(conn.dialect.name)
    if sql is None:
        return utcnow()
    value = conn.execute(text(sql)).scalar_one()
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:  # SQLite and MySQL answer in naive UTC
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def as_utc(value: datetime, field: str) -> datetime:
    """``value`` in UTC; a naive datetime is refused, naming ``field``."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{field}: naive datetime {value.isoformat()} refused; pass an aware datetime (UTC)")
    return value.astimezone(UTC)
