"""``TableHealthRepository``: each table's last health measurement (``tms_table_health``), written with
the health cache's entry (``services/health.py``) by whichever process measured the table (an api-server's
background read, a worker after a process).

The list sorts on ``score`` and filters on ``needs_attention`` in SQL (``store/listing.py`` joins this
table), and the overview sums its figure columns, so neither reads 10,000 rows into Python. The store
knows nothing of what a score means: it keeps what it is handed (:class:`HealthRecord`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Engine, Table, case, func, select

from airflow_tablemgmt.store.clock import db_now
from airflow_tablemgmt.store.models import TableHealthRow, TableRow

if TYPE_CHECKING:
    from airflow_tablemgmt.store.engine import Store

_H = cast(Table, TableHealthRow.__table__)
_T = cast(Table, TableRow.__table__)
_CHUNK = 500
#: Health rows of deleted tables (a table's row stays when it is removed; the sums leave it out): the
#: few deleted tables looked up by key, never every health row probing its table.
_OF_DELETED = _H.c.table_id.in_(select(_T.c.table_id).where(_T.c.deleted_at.isnot(None)))


@dataclass(frozen=True)
class HealthRecord:
    """One measurement as stored: the score, its findings as (kind, action) pairs, the figures the overview
    sums, and every figure (a JSON document the reader turns back into its own type)."""

    score: int
    findings: tuple[tuple[str, str], ...]
    data_files: int
    data_bytes: int
    excess_data_files: int
    figures: dict[str, Any]
    measured_at: datetime | None = None


def kinds_text(findings: Sequence[tuple[str, str]]) -> str:
    """``,kind=action,kind=action,`` (the ``kinds`` column): one LIKE finds the tables with a kind."""
    return "," + "".join(f"{k}={a}," for k, a in findings)


@dataclass(frozen=True)
class HealthSummary:
    """The overview's health figures over the live tables measured."""

    measured: int
    data_bytes: int
    data_files: int
    excess_data_files: int
    mean_score: float | None
    needs_attention: int
    by_kind: dict[str, dict[str, Any]]  # kind -> {"tables", "action", "examples"}


class TableHealthRepository:
    """Rows of ``tms_table_health``. Get it with :meth:`of`, which makes the store's schema ready first."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @classmethod
    def of(cls, store: Store) -> TableHealthRepository:
        store._ensure_schema()
        return cls(store.engine)

    def put(self, table_id: str, record: HealthRecord) -> None:
        """Store ``record`` as the table's last measurement (database time)."""
        values = {
            "score": record.score,
            "needs_attention": bool(record.findings),
            "kinds": kinds_text(record.findings),
            "data_files": record.data_files,
            "data_bytes": record.data_bytes,
            "excess_data_files": record.excess_data_files,
            "figures": record.figures,
        }
        with self._engine.begin() as conn:
            values["measured_at"] = record.measured_at or db_now(conn)
            if conn.dialect.name == "postgresql":
                from sqlalchemy.dialects.postgresql import insert as upsert
            else:
                from sqlalchemy.dialects.sqlite import insert as upsert  # type: ignore[assignment]
            stmt = upsert(_H).values(table_id=table_id, **values)
            conn.execute(stmt.on_conflict_do_update(index_elements=["table_id"], set_=values))

    def put_many(self, records: dict[str, HealthRecord]) -> None:
        """:meth:`put` for many tables in one transaction (a bulk fill, e.g. the benchmark's)."""
        if not records:
            return
        with self._engine.begin() as conn:
            now = db_now(conn)
            ids = list(records)
            for i in range(0, len(ids), _CHUNK):
                conn.execute(_H.delete().where(_H.c.table_id.in_(ids[i : i + _CHUNK])))
            rows = [
                {
                    "table_id": t,
                    "score": r.score,
                    "needs_attention": bool(r.findings),
                    "kinds": kinds_text(r.findings),
                    "data_files": r.data_files,
                    "data_bytes": r.data_bytes,
                    "excess_data_files": r.excess_data_files,
                    "figures": r.figures,
                    "measured_at": r.measured_at or now,
                }
                for t, r in records.items()
            ]
            for i in range(0, len(rows), 5000):
                conn.execute(_H.insert(), rows[i : i + 5000])

    def get_many(self, table_ids: Collection[str]) -> dict[str, HealthRecord]:
        """Table id -> its last measurement, for those of ``table_ids`` measured."""
        ids = list(table_ids)
        out: dict[str, HealthRecord] = {}
        with self._engine.connect() as conn:
            for i in range(0, len(ids), _CHUNK):
                for r in conn.execute(select(_H).where(_H.c.table_id.in_(ids[i : i + _CHUNK]))):
                    out[r.table_id] = _record(r)
        return out

    def measured_at(self, table_ids: Collection[str]) -> dict[str, datetime]:
        """Table id -> when it was last measured, for those of ``table_ids`` measured."""
        ids = list(table_ids)
        out: dict[str, datetime] = {}
        with self._engine.connect() as conn:
            for i in range(0, len(ids), _CHUNK):
                stmt = select(_H.c.table_id, _H.c.measured_at).where(_H.c.table_id.in_(ids[i : i + _CHUNK]))
                out.update((t, at) for t, at in conn.execute(stmt))
        return out

    def measured_count(self) -> int:
        """How many live tables have a measurement."""
        with self._engine.connect() as conn:
            every = conn.execute(select(func.count()).select_from(_H)).scalar_one()
            gone = conn.execute(select(func.count()).where(_OF_DELETED)).scalar_one()
        return int(every) - int(gone)

    def unmeasured(self, limit: int) -> list[str]:
        """Up to ``limit`` live tables with no measurement, by table id."""
        stmt = (
            select(_T.c.table_id)
            .outerjoin(_H, _H.c.table_id == _T.c.table_id)
            .where(_T.c.deleted_at.is_(None), _H.c.table_id.is_(None))
            .order_by(_T.c.table_id)
            .limit(limit)
        )
        with self._engine.connect() as conn:
            return list(conn.execute(stmt).scalars())

    def summary(self, examples: int = 5) -> HealthSummary:
        """Sums over the live tables measured, and per finding kind how many tables and a few examples.

        Every row's sums less those of deleted tables' rows (a scan of the health rows, and of the tables
        for the few deleted ones), rather than a join of every row with its table."""
        figures = (
            func.count(),
            func.sum(_H.c.data_bytes),
            func.sum(_H.c.data_files),
            func.sum(_H.c.excess_data_files),
            func.sum(_H.c.score),
            func.sum(case((_H.c.needs_attention, 1), else_=0)),
        )
        combos = select(_H.c.kinds, func.count()).where(_H.c.needs_attention).group_by(_H.c.kinds)
        by_kind: dict[str, dict[str, Any]] = {}
        with self._engine.connect() as conn:
            every = conn.execute(select(*figures)).one()
            gone = conn.execute(select(*figures).where(_OF_DELETED)).one()
            n, data_bytes, data_files, excess, score_sum, attention = (
                int(a or 0) - int(b or 0) for a, b in zip(every, gone, strict=True)
            )
            per_combo: dict[str, int] = {k: int(c) for k, c in conn.execute(combos)}
            # not on needs_attention's index: that would test every red row against the deleted set
            gone_combos = select(_H.c.kinds, _H.c.needs_attention, func.count()).where(_OF_DELETED)
            for k, red, c in conn.execute(gone_combos.group_by(_H.c.kinds, _H.c.needs_attention)):
                if red:
                    per_combo[k] -= int(c)
            for kinds, count in per_combo.items():
                if count <= 0:
                    continue
                for pair in filter(None, kinds.split(",")):
                    kind, _, action = pair.partition("=")
                    entry = by_kind.setdefault(kind, {"tables": 0, "action": action, "examples": []})
                    entry["tables"] += count
            live = _H.join(_T, _T.c.table_id == _H.c.table_id)
            alive = _T.c.deleted_at.is_(None)
            if examples > 0 and by_kind:  # the first tables (by id) of each kind: one ordered walk, cut short
                walk = (
                    select(_H.c.kinds, _H.c.table_id)
                    .select_from(live)
                    .where(alive, _H.c.needs_attention)
                    .order_by(_H.c.table_id)
                )
                wanting = set(by_kind)
                for kinds, table_id in conn.execute(walk):
                    for pair in filter(None, kinds.split(",")):
                        kind = pair.partition("=")[0]
                        if kind in wanting:
                            by_kind[kind]["examples"].append(table_id)
                            if len(by_kind[kind]["examples"]) >= examples:
                                wanting.discard(kind)
                    if not wanting:
                        break
        return HealthSummary(
            n, data_bytes, data_files, excess, round(score_sum / n, 1) if n else None, attention, by_kind
        )


def _record(r: Any) -> HealthRecord:
    findings = tuple((k, a) for k, _, a in (p.partition("=") for p in r.kinds.split(",") if p))
    return HealthRecord(
        r.score, findings, r.data_files, r.data_bytes, r.excess_data_files, r.figures or {}, r.measured_at
    )
