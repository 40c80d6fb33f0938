"""``LeaseRepository``: at most one holder per table, with an expiry so a dead worker's lease lapses.

Every change is a single guarded statement (an INSERT that the primary key serializes, or an
UPDATE/DELETE whose WHERE names the expected holder or an expired lease), so two contenders
can never both believe they hold a table. Expiry is judged by the database's clock
(:func:`store.clock.db_now`), never a worker's, so clock skew between workers changes nothing.
``now=`` overrides that clock for tests and tools that replay a timeline.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from sqlalchemy import Connection, Engine, Table, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from airflow_tablemgmt.store.clock import as_utc, db_now, utcnow
from airflow_tablemgmt.store.models import LeaseRow

_T = cast(Table, LeaseRow.__table__)


@dataclass(frozen=True)
class Lease:
    """Who holds a table, since when and until when."""

    table_id: str
    holder: str
    acquired_at: datetime
    expires_at: datetime

    def expired(self, now: datetime | None = None) -> bool:
        """Whether the lease has lapsed at ``now``. Pass :meth:`LeaseRepository.now` (the database's
        clock, which is what acquire() judges by); without it this host's clock is used."""
        return (now or utcnow()) >= self.expires_at


class LeaseRepository:
    """Table leases (``tms_lease``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def acquire(self, table_id: str, holder: str, ttl: timedelta, *, now: datetime | None = None) -> bool:
        """Take the table's lease for ``ttl``; True if ``holder`` now holds it.

        Succeeds when nobody holds it, when ``holder`` already does (the expiry is extended and
        ``acquired_at`` kept), or when the current lease has expired (taken over). False while
        another holder's lease is live.
        """
        _check_ttl(ttl)
        if self._extend_or_take_over(table_id, holder, ttl, now):
            return True
        try:
            with self._engine.begin() as conn:
                start = _start(conn, now)
                conn.execute(
                    insert(_T).values(
                        table_id=table_id, holder=holder, acquired_at=start, expires_at=start + ttl
                    )
                )
            return True
        except IntegrityError:
            # Someone inserted between our UPDATE and INSERT; it may have been this holder.
            return self._extend_or_take_over(table_id, holder, ttl, now)

    def renew(self, table_id: str, holder: str, ttl: timedelta, *, now: datetime | None = None) -> bool:
        """Extend ``holder``'s lease to ``now + ttl``; False if it is not (any longer) theirs.

        A lease that expired but was not taken over is still the holder's to renew: nobody
        else can have started working on the table in between.
        """
        _check_ttl(ttl)
        with self._engine.begin() as conn:
            expires = _start(conn, now) + ttl
            stmt = (
                update(_T).where(_T.c.table_id == table_id, _T.c.holder == holder).values(expires_at=expires)
            )
            return conn.execute(stmt).rowcount == 1

    def release(self, table_id: str, holder: str) -> bool:
        """Give up ``holder``'s lease; False if ``holder`` did not hold it."""
        with self._engine.begin() as conn:
            stmt = delete(_T).where(_T.c.table_id == table_id, _T.c.holder == holder)
            return conn.execute(stmt).rowcount == 1

    def get(self, table_id: str) -> Lease | None:
        """The table's lease row, expired or not; None if nobody holds or held it."""
        with self._engine.connect() as conn:
            row = conn.execute(select(_T).where(_T.c.table_id == table_id)).first()
        if row is None:
            return None
        return Lease(row.table_id, row.holder, row.acquired_at, row.expires_at)

    def now(self) -> datetime:
        """The database's current time: the clock lease expiry is judged by."""
        with self._engine.connect() as conn:
            return db_now(conn)

    def _extend_or_take_over(self, table_id: str, holder: str, ttl: timedelta, at: datetime | None) -> bool:
        with self._engine.begin() as conn:
            now = _start(conn, at)
            expires = now + ttl
            mine = (
                update(_T).where(_T.c.table_id == table_id, _T.c.holder == holder).values(expires_at=expires)
            )
            if conn.execute(mine).rowcount == 1:
                return True
            lapsed = (
                update(_T)
                .where(_T.c.table_id == table_id, _T.c.expires_at <= now)
                .values(holder=holder, acquired_at=now, expires_at=expires)
            )
            return conn.execute(lapsed).rowcount == 1


def _check_ttl(ttl: timedelta) -> None:
    if ttl <= timedelta(0):
        raise ValueError(f"ttl: must be positive, got {ttl}")


def _start(conn: Connection, now: datetime | None) -> datetime:
    return as_utc(now, "now") if now is not None else db_now(conn)
