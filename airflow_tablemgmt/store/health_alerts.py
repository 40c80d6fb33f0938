"""``HealthAlertRepository``: whether a table's health score is below a notification threshold
(``tms_health_alert``, one row per (table, threshold)).

The ``unhealthy`` notification goes out once per crossing, so the decision "this measurement crossed"
must be taken once even when two workers measure the same table at the same moment. :meth:`record` is a
guarded statement, like the leases' (``store/leases.py``): an UPDATE whose WHERE names the *other* state,
or an INSERT that the primary key serializes; only the caller whose statement changed the row is told it
crossed. Times are the database's clock (:func:`store.clock.db_now`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, cast

from sqlalchemy import Engine, Table, insert, select, update
from sqlalchemy.exc import IntegrityError

from airflow_tablemgmt.store.clock import db_now
from airflow_tablemgmt.store.models import HealthAlertRow

if TYPE_CHECKING:
    from airflow_tablemgmt.store.engine import Store

_T = cast(Table, HealthAlertRow.__table__)


@dataclass(frozen=True)
class HealthAlertState:
    """The last measurement of ``table_id`` against ``threshold``."""

    table_id: str
    threshold: int
    below: bool
    score: int
    changed_at: datetime
    measured_at: datetime


class HealthAlertRepository:
    """Rows of ``tms_health_alert``. Get it with :meth:`of`, which makes the store's schema ready first."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @classmethod
    def of(cls, store: Store) -> HealthAlertRepository:
        store._ensure_schema()
        return cls(store.engine)

    def get(self, table_id: str, threshold: int) -> HealthAlertState | None:
        with self._engine.connect() as conn:
            row = conn.execute(
                select(_T).where(_T.c.table_id == table_id, _T.c.threshold == threshold)
            ).first()
        return None if row is None else HealthAlertState(**row._mapping)

    def record(self, table_id: str, threshold: int, score: int) -> bool:
        """Record ``score`` for ``table_id`` against ``threshold``; True when this call changed the state
        (below ⇄ not below), i.e. when the caller is the one to act on the crossing.

        A table's first measurement counts as a change only when it is below: a table nobody measured
        before is taken to have been healthy (so alerts switched on for a table already below say so once).
        """
        below = score < threshold
        key = (_T.c.table_id == table_id, _T.c.threshold == threshold)
        with self._engine.begin() as conn:
            now = db_now(conn)
            flip = update(_T).where(*key, _T.c.below != below)
            if conn.execute(flip.values(below=below, score=score, changed_at=now, measured_at=now)).rowcount:
                return True
            same = update(_T).where(*key).values(score=score, measured_at=now)
            if conn.execute(same).rowcount:
                return False
        try:
            with self._engine.begin() as conn:
                now = db_now(conn)
                row = dict(table_id=table_id, threshold=threshold, below=below, score=score)
                conn.execute(insert(_T).values(**row, changed_at=now, measured_at=now))
            return below
        except IntegrityError:
            # Another worker inserted the first row between our UPDATEs and INSERT: its state is what
            # ours is measured against now.
            with self._engine.begin() as conn:
                now = db_now(conn)
                flip = update(_T).where(*key, _T.c.below != below)
                changed = conn.execute(flip.values(below=below, score=score, changed_at=now, measured_at=now))
                return bool(changed.rowcount)
