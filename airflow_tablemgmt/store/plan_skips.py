"""A planning task's recorded skips (ADR 0004 decision 2): one skipped process for an enrolled table the plan did
not select, written only when the reason differs from the one its (table, action)'s newest process already
gives, so a table's history and the page say why it was not maintained without 100,000 rows a run.

"The reason it was last skipped for" is the newest process of the (table, action) (``tms_action_latest``, kept
with every process, migration 0008) when that process is a plan's skip: no table of its own, no migration. A
table whose newest process is anything else (its job ran, a gate inside a batch skipped it, it was never
planned) gets one skip row the next time the plan leaves it out, and then none while the reason stays.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Engine, Table, insert, select

from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import Owner
from airflow_tablemgmt.store import process_rollup
from airflow_tablemgmt.store.clock import as_utc, db_now
from airflow_tablemgmt.store.models import ActionLatestRow, ProcessRow, TableRow
from airflow_tablemgmt.store.processes import _to_process

if TYPE_CHECKING:
    from airflow_tablemgmt.store.engine import Store

_L = cast(Table, ActionLatestRow.__table__)
_P = cast(Table, ProcessRow.__table__)
_T = cast(Table, TableRow.__table__)
#: The gate a plan's skip names in its summary (a batch's are ``health``, ``lease``).
PLAN_GATE = "plan"
#: Rows written per transaction, and table ids per ``IN`` list.
_CHUNK = 500
_FETCH = 5000


class PlanSkipRepository:
    """Reads the reasons of the newest skips and writes new ones. Get it with :meth:`of`."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @classmethod
    def of(cls, store: Store) -> PlanSkipRepository:
        store._ensure_schema()
        return cls(store.engine)

    def last_reasons(self, policy: str, action: str, task_id: str) -> dict[str, str]:
        """Table id -> the reason of its newest ``action`` process, for each live table ``policy`` enrolled
        whose newest process is a plan's skip written by the task ``task_id``; one query."""
        stmt = (
            select(_L.c.table_id, _P.c.summary)
            .select_from(_L.join(_P, _P.c.id == _L.c.process_id).join(_T, _T.c.table_id == _L.c.table_id))
            .where(
                _L.c.action == action,
                _L.c.status == str(ProcessStatus.SUCCESS),
                _P.c.task_id == task_id,
                _T.c.policy == policy,
                _T.c.managed_by == str(Owner.POLICY),
                _T.c.deleted_at.is_(None),
            )
        )
        out: dict[str, str] = {}
        with self._engine.connect() as conn:
            for table_id, summary in conn.execution_options(yield_per=_FETCH).execute(stmt):
                if isinstance(summary, Mapping) and summary.get("gate") == PLAN_GATE:
                    out[table_id] = str(summary.get("reason") or "")
        return out

    def last_instants(self, action: str, table_ids: Sequence[str]) -> dict[str, datetime]:
        """Table id -> the instant of its newest ``action`` process (any status), for those of ``table_ids``
        that have one: what orders equally scored tables when a run cannot take them all."""
        out: dict[str, datetime] = {}
        with self._engine.connect() as conn:
            for start in range(0, len(table_ids), _CHUNK):
                chunk = list(table_ids[start : start + _CHUNK])
                stmt = select(_L.c.table_id, _L.c.instant).where(
                    _L.c.action == action, _L.c.table_id.in_(chunk)
                )
                out.update({t: as_utc(i, "instant") for t, i in conn.execute(stmt)})
        return out

    def record(
        self,
        skips: Sequence[tuple[str, str]],
        *,
        action: str,
        instant: datetime,
        parameters: Mapping[str, Any] | None = None,
        dag_id: str | None = None,
        run_id: str | None = None,
        task_id: str | None = None,
    ) -> list[int]:
        """Write one finished skipped process per (table id, reason) at ``instant`` (SUCCESS, ``{"skipped":
        true, "gate": "plan", "reason": ...}``), in transactions of a few hundred, each kept in the rollups as
        any process is; a table that has a process at ``instant`` already keeps it. Returns the new ids."""
        instant = as_utc(instant, "instant")
        ids: list[int] = []
        for start in range(0, len(skips), _CHUNK):
            chunk = skips[start : start + _CHUNK]
            with self._engine.begin() as conn:
                taken = set(
                    conn.execute(
                        select(_P.c.table_id).where(
                            _P.c.action == action,
                            _P.c.instant == instant,
                            _P.c.table_id.in_([t for t, _ in chunk]),
                        )
                    ).scalars()
                )
                now = db_now(conn)
                for table_id, reason in _unique(chunk):
                    if table_id in taken:
                        continue
                    values = {
                        "table_id": table_id,
                        "action": action,
                        "instant": instant,
                        "status": str(ProcessStatus.SUCCESS),
                        "attempt": 1,
                        "engine": "plan",
                        "parameters": dict(parameters or {}),
                        "summary": {"skipped": True, "gate": PLAN_GATE, "reason": reason},
                        "dag_id": dag_id,
                        "run_id": run_id,
                        "task_id": task_id,
                        "created_at": now,
                        "started_at": now,
                        "finished_at": now,
                    }
                    key = conn.execute(insert(_P).values(**values)).inserted_primary_key
                    assert key is not None
                    row = conn.execute(select(_P).where(_P.c.id == key[0])).first()
                    assert row is not None
                    process = _to_process(row)
                    process_rollup.opened(conn, process)
                    process_rollup.record(conn, process)
                    ids.append(process.id)
        return ids


def _unique(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for table_id, reason in pairs:
        seen.setdefault(table_id, reason)
    return list(seen.items())


__all__ = ["PLAN_GATE", "PlanSkipRepository"]
