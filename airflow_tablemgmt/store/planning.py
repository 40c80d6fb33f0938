"""The planning step's one read (ADR 0004): a policy's live enrolled tables with their last health, in one
query on ``tms_table``'s ``(policy, table_id)`` index joined to ``tms_table_health`` by its key, not one
query per table. Plain rows out; what they mean is ``metadata/planning.py``'s.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from sqlalchemy import Engine, Table, select

from airflow_tablemgmt.core.tables import Owner
from airflow_tablemgmt.store.models import TableHealthRow, TableRow

if TYPE_CHECKING:
    from airflow_tablemgmt.store.engine import Store

_T = cast(Table, TableRow.__table__)
_H = cast(Table, TableHealthRow.__table__)
#: Rows fetched from the cursor at a time: 100,000 tables never sit in the driver's buffer at once.
_FETCH = 5000


class EnrolledHealth(NamedTuple):
    """One enrolled table and its last health measurement (``figures``/``measured_at`` None: unmeasured):
    the shape ``metadata.planning.plan`` reads."""

    table_id: str
    format: str
    actions: dict[str, Any]
    figures: dict[str, Any] | None
    measured_at: datetime | None


class PlanningRepository:
    """The read of :meth:`rows`. Get it with :meth:`of`, which makes the store's schema ready first."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @classmethod
    def of(cls, store: Store) -> PlanningRepository:
        store._ensure_schema()
        return cls(store.engine)

    def rows(self, policy: str, only: Collection[str] | None = None) -> Iterator[EnrolledHealth]:
        """Every live table ``policy`` enrolled, by table id, with its stored health (None when unmeasured);
        ``only``: just those of these table ids (a run naming its tables, an event-started run)."""
        stmt = (
            select(_T.c.table_id, _T.c.format, _T.c.actions, _H.c.figures, _H.c.measured_at)
            .select_from(_T.outerjoin(_H, _H.c.table_id == _T.c.table_id))
            .where(
                _T.c.policy == policy,
                _T.c.managed_by == str(Owner.POLICY),
                _T.c.deleted_at.is_(None),
            )
            .order_by(_T.c.table_id)
        )
        if only is not None:
            stmt = stmt.where(_T.c.table_id.in_(sorted(set(only))))
        with self._engine.connect() as conn:
            result = conn.execution_options(yield_per=_FETCH).execute(stmt)
            for table_id, format, actions, figures, measured_at in result:
                yield EnrolledHealth(table_id, format, actions or {}, figures, measured_at)
