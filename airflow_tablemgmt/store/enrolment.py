"""``EnrolmentRepository``: the tables a policy's discovery enrolled (``tms_table`` rows whose ``managed_by`` is
``policy``, named in their ``policy`` column) and the record of every change it made (``tms_enrolment``).

Each change and its record are written in one transaction, as a guarded ``UPDATE`` (the row unchanged since
it was read) or an ``INSERT``, so two discovery passes at once cannot both enrol a table or both retire it.
A row declared in a file or registered through REST or the CLI is never written here: a table's own
declaration wins over every policy. Retiring is a soft delete: the row and every process row stay.
"""

from __future__ import annotations

import builtins
from collections.abc import Collection
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, cast

from sqlalchemy import Engine, Row, Table, insert, select, update
from sqlalchemy.exc import IntegrityError

from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.core.tables import Owner, TableSpec
from airflow_tablemgmt.store.clock import utcnow
from airflow_tablemgmt.store.models import EnrolmentRow, TableRow
from airflow_tablemgmt.store.tables import _columns_of, _unchanged_since, _validated

if TYPE_CHECKING:
    from airflow_tablemgmt.store.engine import Store

_T = cast(Table, TableRow.__table__)
_E = cast(Table, EnrolmentRow.__table__)
_RETRIES = 5
_CHUNK = 500

Change = Literal["enrolled", "re-enrolled", "updated", "retired"]
ENROLLED: Change = "enrolled"
REENROLLED: Change = "re-enrolled"
UPDATED: Change = "updated"
RETIRED: Change = "retired"
CHANGES: tuple[Change, ...] = (ENROLLED, REENROLLED, UPDATED, RETIRED)


@dataclass(frozen=True)
class EnrolmentRecord:
    """One change discovery made: when, which policy, which table, what, and why."""

    id: int
    at: datetime
    policy: str
    table_id: str
    change: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["at"] = self.at.isoformat()
        return out


@dataclass(frozen=True)
class TableState:
    """What discovery needs to know of a stored table row: who manages it, which policy, whether it is live."""

    table_id: str
    managed_by: str
    policy: str | None
    live: bool
    spec: dict[str, Any]


class EnrolmentRepository:
    """Enrol, update, retire and re-enrol policy-managed tables; read the records."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @classmethod
    def of(cls, store: Store) -> EnrolmentRepository:
        """The repository of ``store``, its schema made ready first."""
        store._ensure_schema()
        return cls(store.engine)

    def states(self, table_ids: Collection[str]) -> dict[str, TableState]:
        """The stored rows of ``table_ids`` (live or retired), by id."""
        ids = sorted(set(table_ids))
        out: dict[str, TableState] = {}
        with self._engine.connect() as conn:
            for i in range(0, len(ids), _CHUNK):
                stmt = select(_T).where(_T.c.table_id.in_(ids[i : i + _CHUNK]))
                out.update((r.table_id, _state(r)) for r in conn.execute(stmt))
        return out

    def managed(self, policy: str | None = None, catalogs: Collection[str] | None = None) -> list[TableState]:
        """The live tables a policy manages (``policy``'s alone when given; in ``catalogs`` when given)."""
        stmt = select(_T).where(_T.c.managed_by == str(Owner.POLICY), _T.c.deleted_at.is_(None))
        if policy is not None:
            stmt = stmt.where(_T.c.policy == policy)
        if catalogs is not None:
            stmt = stmt.where(_T.c.catalog.in_(sorted(catalogs)))
        with self._engine.connect() as conn:
            return [_state(r) for r in conn.execute(stmt.order_by(_T.c.table_id))]

    def counts(self) -> dict[str, int]:
        """Live tables per managing policy."""
        from sqlalchemy import func

        stmt = (
            select(_T.c.policy, func.count())
            .where(_T.c.managed_by == str(Owner.POLICY), _T.c.deleted_at.is_(None))
            .group_by(_T.c.policy)
        )
        with self._engine.connect() as conn:
            return {str(p): int(n) for p, n in conn.execute(stmt)}

    def enrol(self, spec: TableSpec, policy: str, reason: str) -> Change | None:
        """Make ``spec`` a live table managed by ``policy``, recording why; None when nothing changed or the
        table is declared (a live row of a file or of REST/CLI is never taken over).

        No row: ``enrolled``. A retired row: ``re-enrolled`` when a policy had enrolled it, else ``enrolled``
        (its declaration was removed). A live row of a policy: ``updated`` when its spec or its policy
        differ (the policy changed, or a more specific one now matches)."""
        spec = _validated(spec)
        columns = _columns_of(spec)
        table_id = spec.id
        for _ in range(_RETRIES):
            with self._engine.connect() as conn:
                row = conn.execute(select(_T).where(_T.c.table_id == table_id)).first()
            now = utcnow()
            values = dict(columns, managed_by=str(Owner.POLICY), policy=policy, updated_at=now)
            if row is None:
                try:
                    with self._engine.begin() as conn:
                        conn.execute(insert(_T).values(table_id=table_id, created_at=now, **values))
                        _record(conn, now, policy, table_id, ENROLLED, reason)
                    return ENROLLED
                except IntegrityError:
                    continue  # enrolled or registered concurrently: look again
            change = _change_of(row, policy, columns["spec"])
            if change is None:
                return None
            if row.deleted_at is not None:
                values.update(deleted_at=None, created_at=now)
            with self._engine.begin() as conn:
                if conn.execute(update(_T).where(*_unchanged_since(row)).values(**values)).rowcount == 1:
                    _record(conn, now, policy, table_id, change, reason)
                    return change
        raise TableMgmtError(f"table {table_id}: gave up enrolling after {_RETRIES} concurrent modifications")

    def would_enrol(self, spec: TableSpec, policy: str) -> Change | None:
        """What :meth:`enrol` would do now, writing nothing (a dry run)."""
        spec = _validated(spec)
        with self._engine.connect() as conn:
            row = conn.execute(select(_T).where(_T.c.table_id == spec.id)).first()
        return ENROLLED if row is None else _change_of(row, policy, _columns_of(spec)["spec"])

    def retire(self, table_id: str, policy: str, reason: str) -> bool:
        """Soft-delete a live table ``policy`` manages, recording why; False when it is not (any more) one."""
        now = utcnow()
        with self._engine.begin() as conn:
            changed = conn.execute(
                update(_T)
                .where(
                    _T.c.table_id == table_id,
                    _T.c.managed_by == str(Owner.POLICY),
                    _T.c.policy == policy,
                    _T.c.deleted_at.is_(None),
                )
                .values(deleted_at=now, updated_at=now)
            ).rowcount
            if changed == 1:
                _record(conn, now, policy, table_id, RETIRED, reason)
        return changed == 1

    def records(
        self,
        *,
        policy: str | None = None,
        table_id: str | None = None,
        change: str | None = None,
        limit: int = 100,
    ) -> builtins.list[EnrolmentRecord]:
        """The newest records first, filtered by policy, table and kind of change."""
        stmt = select(_E)
        if policy is not None:
            stmt = stmt.where(_E.c.policy == policy)
        if table_id is not None:
            stmt = stmt.where(_E.c.table_id == table_id)
        if change is not None:
            stmt = stmt.where(_E.c.change == change)
        stmt = stmt.order_by(_E.c.at.desc(), _E.c.id.desc()).limit(limit)
        with self._engine.connect() as conn:
            return [
                EnrolmentRecord(int(r.id), r.at, r.policy, r.table_id, r.change, r.reason)
                for r in conn.execute(stmt)
            ]


def _change_of(row: Row[Any], policy: str, doc: dict[str, Any]) -> Change | None:
    """What enrolling ``doc`` for ``policy`` changes of the stored ``row`` (see :meth:`EnrolmentRepository.enrol`)."""
    if row.deleted_at is not None:
        return REENROLLED if row.managed_by == Owner.POLICY else ENROLLED
    if row.managed_by != Owner.POLICY:
        return None  # declared: its declaration wins
    if row.policy == policy and row.spec == doc:
        return None
    return UPDATED


def _state(row: Row[Any]) -> TableState:
    return TableState(row.table_id, str(row.managed_by), row.policy, row.deleted_at is None, row.spec or {})


def _record(conn: Any, at: datetime, policy: str, table_id: str, change: Change, reason: str) -> None:
    conn.execute(insert(_E).values(at=at, policy=policy, table_id=table_id, change=change, reason=reason))


__all__ = [
    "CHANGES",
    "ENROLLED",
    "REENROLLED",
    "RETIRED",
    "UPDATED",
    "EnrolmentRecord",
    "EnrolmentRepository",
    "TableState",
]
