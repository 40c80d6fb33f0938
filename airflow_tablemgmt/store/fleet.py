"""What the overview's fleet section reads besides the policies and the cost rollup: the enrolment changes of
a window (``tms_enrolment``, by its ``at`` index) and the runs the health gate skipped (``metadata/health.py``:
a finished process, SUCCESS with no job, whose summary says ``gate: health``).

A skip has no status of its own, so it is found from the narrow row every finished process has
(``tms_process_done``, by its ``finished_at`` index): a SUCCESS in the window with no cost measured (no Spark
job ran), and only those rows' summaries are looked into, by the database's own JSON operator. Only the
newest few skips' summaries come back to Python (their reasons and figures). Each table's policy and whether
it is still live (a retired table has no page) are joined from ``tms_table``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Engine, Table, func, select

from airflow_tablemgmt.store.models import EnrolmentRow, ProcessDoneRow, ProcessRow, TableRow

_E = cast(Table, EnrolmentRow.__table__)
_D = cast(Table, ProcessDoneRow.__table__)
_P = cast(Table, ProcessRow.__table__)
_T = cast(Table, TableRow.__table__)

#: The summary's ``gate`` of a run the health gate skipped (``metadata.health.Decision.summary``; the
#: nothing-to-do checks of ``metadata/nothing_to_do.py`` use the same shape).
HEALTH_GATE = "health"


def enrolment_counts(engine: Engine, since: datetime) -> dict[str, dict[str, int]]:
    """Per policy, how many records of each kind of change (enrolled, re-enrolled, updated, retired) since
    ``since``."""
    stmt = (
        select(_E.c.policy, _E.c.change, func.count())
        .where(_E.c.at >= since)
        .group_by(_E.c.policy, _E.c.change)
    )
    out: dict[str, dict[str, int]] = {}
    with engine.connect() as conn:
        for policy, change, n in conn.execute(stmt):
            out.setdefault(str(policy), {})[str(change)] = int(n)
    return out


def recent_enrolments(engine: Engine, since: datetime, limit: int) -> list[dict[str, Any]]:
    """The newest enrolment changes since ``since`` (at most ``limit``), each with whether its table is live."""
    stmt = (
        select(_E, _T.c.deleted_at, _T.c.table_id.label("row"))
        .select_from(_E.outerjoin(_T, _T.c.table_id == _E.c.table_id))
        .where(_E.c.at >= since)
        .order_by(_E.c.at.desc(), _E.c.id.desc())
        .limit(limit)
    )
    with engine.connect() as conn:
        return [
            {
                "at": r.at,
                "policy": r.policy,
                "table": r.table_id,
                "change": r.change,
                "reason": r.reason,
                "live": r.row is not None and r.deleted_at is None,
            }
            for r in conn.execute(stmt)
        ]


def _skips(since: datetime) -> Any:
    """The FROM and WHERE of the health gate's skips that finished since ``since``."""
    gate = _P.c.summary["gate"].as_string()
    return (
        _D.join(_P, _P.c.id == _D.c.process_id).outerjoin(_T, _T.c.table_id == _P.c.table_id),
        (
            _D.c.finished_at >= since,
            _D.c.status == "SUCCESS",
            _D.c.core_seconds.is_(None),
            gate == HEALTH_GATE,
        ),
    )


def health_skip_counts(engine: Engine, since: datetime) -> dict[str | None, int]:
    """Runs the health gate skipped since ``since``, per the policy managing the table (None: declared)."""
    source, where = _skips(since)
    stmt = select(_T.c.policy, func.count()).select_from(source).where(*where).group_by(_T.c.policy)
    with engine.connect() as conn:
        return {(str(p) if p is not None else None): int(n) for p, n in conn.execute(stmt)}


def recent_health_skips(engine: Engine, since: datetime, limit: int) -> list[dict[str, Any]]:
    """The newest runs the health gate skipped since ``since`` (at most ``limit``): the process, its table's
    policy and liveness, and its summary's reason and figures."""
    source, where = _skips(since)
    stmt = (
        select(
            _P.c.id,
            _P.c.table_id,
            _P.c.action,
            _D.c.finished_at,
            _P.c.summary,
            _T.c.policy,
            _T.c.deleted_at,
            _T.c.table_id.label("row"),
        )
        .select_from(source)
        .where(*where)
        .order_by(_D.c.finished_at.desc(), _D.c.process_id.desc())
        .limit(limit)
    )
    out = []
    with engine.connect() as conn:
        for r in conn.execute(stmt):
            summary = r.summary if isinstance(r.summary, dict) else {}
            raw_health = summary.get("health")
            health: dict[str, Any] = raw_health if isinstance(raw_health, dict) else {}
            out.append(
                {
                    "process_id": int(r.id),
                    "table": r.table_id,
                    "action": r.action,
                    "finished_at": r.finished_at,
                    "policy": r.policy,
                    "live": r.row is not None and r.deleted_at is None,
                    "reason": str(summary.get("reason") or ""),
                    "score": health.get("score") if isinstance(health.get("score"), int) else None,
                    "figures": health.get("figures") if isinstance(health.get("figures"), dict) else {},
                }
            )
    return out
