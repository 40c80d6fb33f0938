"""``ConnectSlotRepository``: a Spark Connect server's slots (``tms_connect_slot``), leased one task at a time.

A server has ``N`` slots (its slot limit, the ``slots`` extra of its ``spark_connect`` connection); a task
runs only while it holds one, so at most ``N`` jobs run on a server at once and a task that finds none
free waits, then fails clearly (``spark/connect/pool.py``). A slot keeps the id of the server-side
session its last holder left configured, and the hash of that session's catalog settings: the next task
with the same hash reuses the session (its catalog already configured and loaded); a task with other
settings gets a new session id in the slot. A slot whose holder's lease *expired* (a dead or stalled
worker, whose job may still be running on that session) is taken with a new session id too, so two tasks
never share a session.

Every change is one guarded statement, as the table leases' (``store/leases.py``): an UPDATE whose WHERE
names a free or expired slot (or the expected holder), with a rowcount check; the rows themselves are
created by an INSERT the primary key serializes. Expiry is judged by the database's clock.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, cast

from sqlalchemy import Engine, Table, and_, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from airflow_tablemgmt.store.clock import db_now
from airflow_tablemgmt.store.models import ConnectSlotRow

if TYPE_CHECKING:
    from airflow_tablemgmt.store.engine import Store

_T = cast(Table, ConnectSlotRow.__table__)
MAX_SLOTS = 1000


@dataclass(frozen=True)
class ConnectSlot:
    """A slot held by ``holder``: the server-side ``session_id`` to attach to, and whether that session
    was left configured with the same catalog settings (``reused``: attach, do not set the catalog up)."""

    server: str
    slot: int
    session_id: str
    settings_hash: str
    holder: str
    reused: bool


class ConnectSlotRepository:
    """Rows of ``tms_connect_slot``. Get it with :meth:`of`, which makes the store's schema ready first."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @classmethod
    def of(cls, store: Store) -> ConnectSlotRepository:
        store._ensure_schema()
        return cls(store.engine)

    def acquire(
        self, server: str, slots: int, settings_hash: str, holder: str, ttl: timedelta
    ) -> ConnectSlot | None:
        """Lease one of ``server``'s ``slots`` slots to ``holder`` for ``ttl``; None when all are held.

        Preference: a free slot whose session has ``settings_hash`` (the most recently used first: its
        session is the warmest), then a free slot that never had a session, then the least recently used
        free slot of other settings, then a slot whose holder's lease expired. Only the first is a reuse;
        every other gets a new session id.
        """
        if not 1 <= slots <= MAX_SLOTS:
            raise ValueError(f"slots: the server's slot limit must be 1..{MAX_SLOTS}, got {slots}")
        if ttl <= timedelta(0):
            raise ValueError(f"ttl: must be positive, got {ttl}")
        self._ensure_rows(server, slots)
        with self._engine.begin() as conn:
            now = db_now(conn)
            rows = conn.execute(select(_T).where(_T.c.server == server, _T.c.slot < slots)).all()
        free = [r for r in rows if r.holder is None]
        expired = [
            r for r in rows if r.holder is not None and r.expires_at is not None and r.expires_at <= now
        ]
        oldest = datetime.min.replace(tzinfo=now.tzinfo)
        same = sorted(
            (r for r in free if r.session_id and r.settings_hash == settings_hash),
            key=lambda r: r.used_at or oldest,
            reverse=True,
        )
        empty = [r for r in free if not r.session_id]
        other = sorted(
            (r for r in free if r.session_id and r.settings_hash != settings_hash),
            key=lambda r: r.used_at or oldest,
        )
        for row, reuse in [(r, True) for r in same] + [(r, False) for r in empty + other + expired]:
            session_id = row.session_id if reuse else str(uuid.uuid4())
            if self._take(row, holder, ttl, session_id, settings_hash, reuse):
                return ConnectSlot(server, row.slot, session_id, settings_hash, holder, reuse)
        return None

    def renew(self, server: str, slot: int, holder: str, ttl: timedelta) -> bool:
        """Extend ``holder``'s lease of the slot to now + ``ttl``; False if it is not (any longer) theirs."""
        with self._engine.begin() as conn:
            expires = db_now(conn) + ttl
            mine = and_(_T.c.server == server, _T.c.slot == slot, _T.c.holder == holder)
            return conn.execute(update(_T).where(mine).values(expires_at=expires)).rowcount == 1

    def release(self, server: str, slot: int, holder: str, *, keep_session: bool) -> bool:
        """Free ``holder``'s slot. ``keep_session``: the session ended a job cleanly and may be reused by the
        next task with the same settings; otherwise it is forgotten (the next holder opens a new one)."""
        values: dict[str, object] = {"holder": None, "expires_at": None}
        if not keep_session:
            values.update(session_id=None, settings_hash=None)
        with self._engine.begin() as conn:
            values["used_at"] = db_now(conn)
            mine = and_(_T.c.server == server, _T.c.slot == slot, _T.c.holder == holder)
            return conn.execute(update(_T).where(mine).values(**values)).rowcount == 1

    def held(self, server: str) -> int:
        """How many of ``server``'s slots are held by a live lease now."""
        with self._engine.connect() as conn:
            now = db_now(conn)
            live = and_(_T.c.server == server, _T.c.holder.is_not(None), _T.c.expires_at > now)
            return len(conn.execute(select(_T.c.slot).where(live)).all())

    def _ensure_rows(self, server: str, slots: int) -> None:
        with self._engine.connect() as conn:
            have = set(conn.execute(select(_T.c.slot).where(_T.c.server == server)).scalars())
        for slot in sorted(set(range(slots)) - have):
            try:
                with self._engine.begin() as conn:
                    conn.execute(insert(_T).values(server=server, slot=slot, used_at=db_now(conn)))
            except IntegrityError:
                pass  # another worker created it at the same moment

    def _take(
        self, row: object, holder: str, ttl: timedelta, session_id: str, settings_hash: str, reuse: bool
    ) -> bool:
        r = cast("_SlotRowView", row)
        with self._engine.begin() as conn:
            now = db_now(conn)
            key = and_(_T.c.server == r.server, _T.c.slot == r.slot)
            if reuse:  # the same session, still free and still of these settings
                guard = and_(key, _T.c.holder.is_(None), _T.c.session_id == r.session_id)
            else:  # free, or its holder's lease expired; and nobody took it since we looked
                lapsed = and_(_T.c.holder.is_not(None), _T.c.expires_at <= now)
                guard = and_(key, or_(_T.c.holder.is_(None), lapsed))
                guard = and_(guard, _T.c.holder == r.holder) if r.holder is not None else guard
            stmt = (
                update(_T)
                .where(guard)
                .values(
                    holder=holder,
                    expires_at=now + ttl,
                    session_id=session_id,
                    settings_hash=settings_hash,
                )
            )
            return conn.execute(stmt).rowcount == 1


class _SlotRowView:
    server: str
    slot: int
    session_id: str | None
    settings_hash: str | None
    holder: str | None
    expires_at: datetime | None
    used_at: datetime | None
