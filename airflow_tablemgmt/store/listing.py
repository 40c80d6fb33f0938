"""Read-only queries behind the page's table list and overview: search, filters, sorting and paging in
SQL, and aggregates over processes, so a page of the list costs a handful of indexed queries whatever
the number of tables. Nothing here writes.

SQLite and PostgreSQL alike: JSON figures are read with SQLAlchemy's JSON paths (``json_extract`` /
``->``), hours are bucketed per backend (:func:`_hour`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    Engine,
    String,
    Table,
    and_,
    case,
    func,
    literal,
    or_,
    select,
    true,
)

from airflow_tablemgmt.store.models import ProcessRow, TableRow

_T = cast(Table, TableRow.__table__)
_P = cast(Table, ProcessRow.__table__)
_CHUNK = 500
ACTIVE = ("PENDING", "SUBMITTED", "RUNNING", "CANCELING")
FAILED = ("FAILED", "KILLED")
SORTS = ("table", "owner", "catalog", "updated")


@dataclass(frozen=True)
class TableFilter:
    """What the list asks for; every field is optional."""

    q: str | None = None  # a substring of the table id or the owner (case-insensitive)
    catalog: str | None = None
    namespace: str | None = None
    action: str | None = None  # tables with this action enabled
    status: str | None = None  # tables whose newest process of some action has this status


@dataclass(frozen=True)
class ListedTable:
    table_id: str
    format: str
    managed_by: str
    owner: str
    queue: str
    actions: dict[str, Any]
    dynamic: dict[str, Any] | None


def _where(f: TableFilter) -> list[ColumnElement[bool]]:
    clauses: list[ColumnElement[bool]] = [_T.c.deleted_at.is_(None)]
    if f.q:
        escaped = f.q.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        like = f"%{escaped}%"
        clauses.append(
            or_(
                func.lower(_T.c.table_id).like(like, escape="\\"),
                func.lower(_T.c.owner_team).like(like, escape="\\"),
            )
        )
    if f.catalog:
        clauses.append(_T.c.catalog == f.catalog)
    if f.namespace:
        clauses.append(_T.c.namespace == f.namespace)
    if f.action:
        enabled = _T.c.actions[(f.action, "enabled")].as_boolean()
        clauses.append(
            and_(_T.c.actions[f.action].as_json().isnot(None), func.coalesce(enabled, true()) == true())
        )
    if f.status:
        clauses.append(_T.c.table_id.in_(_newest_in_status(f.status)))
    return clauses


def _newest(*where: ColumnElement[bool]) -> Any:
    """Processes that are the newest (by instant) of their (table, action), among those ``where`` picks."""
    top = (
        select(_P.c.table_id, _P.c.action, func.max(_P.c.instant).label("instant"))
        .where(*where)
        .group_by(_P.c.table_id, _P.c.action)
        .subquery()
    )
    on = and_(top.c.table_id == _P.c.table_id, top.c.action == _P.c.action, top.c.instant == _P.c.instant)
    return select(_P).join(top, on)


def _newest_in_status(status: str) -> Any:
    """Table ids with a process in ``status`` that is the newest of its (table, action): the status
    index picks the candidates, the (table, action, instant) key rules out those with a newer one."""
    newer = _P.alias("newer")
    later = (
        select(literal(1))
        .where(
            newer.c.table_id == _P.c.table_id, newer.c.action == _P.c.action, newer.c.instant > _P.c.instant
        )
        .exists()
    )
    return select(_P.c.table_id).where(_P.c.status == status, ~later)


def table_ids(engine: Engine, f: TableFilter) -> list[str]:
    """Every matching table id, sorted (for an in-memory sort such as the health score)."""
    stmt = select(_T.c.table_id).where(*_where(f)).order_by(_T.c.table_id)
    with engine.connect() as conn:
        return list(conn.execute(stmt).scalars().all())  # fetchall: 10,000 ids in one call


def page(
    engine: Engine,
    f: TableFilter,
    *,
    sort: str = "table",
    desc: bool = False,
    limit: int = 25,
    offset: int = 0,
) -> tuple[list[ListedTable], int]:
    """One page of matching tables and how many match."""
    column = {
        "table": _T.c.table_id,
        "owner": _T.c.owner_team,
        "catalog": _T.c.catalog,
        "updated": _T.c.updated_at,
    }[sort]
    order = [column.desc() if desc else column.asc(), _T.c.table_id]
    where = _where(f)
    with engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(_T).where(*where)).scalar_one()
        rows = conn.execute(_columns().where(*where).order_by(*order).limit(limit).offset(offset)).all()
    return [_listed(r) for r in rows], int(total)


def tables_by_id(engine: Engine, ids: Sequence[str]) -> list[ListedTable]:
    """Those tables, in the order of ``ids`` (ids no longer live are left out)."""
    found: dict[str, ListedTable] = {}
    with engine.connect() as conn:
        for i in range(0, len(ids), _CHUNK):
            stmt = _columns().where(_T.c.table_id.in_(ids[i : i + _CHUNK]), _T.c.deleted_at.is_(None))
            found.update((r.table_id, _listed(r)) for r in conn.execute(stmt))
    return [found[i] for i in ids if i in found]


def _columns() -> Any:
    return select(
        _T.c.table_id, _T.c.format, _T.c.managed_by, _T.c.owner_team, _T.c.queue, _T.c.actions, _T.c.dynamic
    )


def _listed(r: Any) -> ListedTable:
    return ListedTable(r.table_id, r.format, r.managed_by, r.owner_team, r.queue, r.actions or {}, r.dynamic)


@dataclass(frozen=True)
class ActionState:
    """What a badge shows: the newest process, the last success and the failing streak."""

    last_id: int | None = None
    last_status: str | None = None
    last_instant: datetime | None = None
    last_finished: datetime | None = None
    last_reason: str | None = None
    last_success: datetime | None = None
    failing_streak: int = 0


def action_states(engine: Engine, ids: Collection[str]) -> dict[tuple[str, str], ActionState]:
    """(table, action) -> its badge figures, for the tables ``ids`` (one page): three grouped queries."""
    ids = list(ids)
    if not ids:
        return {}
    newest = _newest(_P.c.table_id.in_(ids)).subquery()
    ok = (
        select(
            _P.c.table_id, _P.c.action, func.max(func.coalesce(_P.c.finished_at, _P.c.instant)).label("at")
        )
        # coalesce(): not the status index (every SUCCESS of the fleet) but the table's key, 25 tables
        .where(_P.c.table_id.in_(ids), func.coalesce(_P.c.status, "") == "SUCCESS")
        .group_by(_P.c.table_id, _P.c.action)
    )
    # The streak: FAILED/KILLED processes newer than the newest one that is neither failed nor active.
    settled = (
        select(_P.c.table_id, _P.c.action, func.max(_P.c.instant).label("at"))
        .where(_P.c.table_id.in_(ids), _P.c.status.notin_(FAILED + ACTIVE))
        .group_by(_P.c.table_id, _P.c.action)
        .subquery()
    )
    streak = (
        select(_P.c.table_id, _P.c.action, func.count().label("n"))
        .select_from(
            _P.outerjoin(settled, and_(settled.c.table_id == _P.c.table_id, settled.c.action == _P.c.action))
        )
        .where(
            _P.c.table_id.in_(ids),
            _P.c.status.in_(FAILED),
            or_(settled.c.at.is_(None), _P.c.instant > settled.c.at),
        )
        .group_by(_P.c.table_id, _P.c.action)
    )
    out: dict[tuple[str, str], dict[str, Any]] = {}
    with engine.connect() as conn:
        for r in conn.execute(select(newest)):
            out[(r.table_id, r.action)] = {
                "last_id": r.id,
                "last_status": r.status,
                "last_instant": r.instant,
                "last_finished": r.finished_at,
                "last_reason": r.failure_reason,
            }
        for r in conn.execute(ok):
            out.setdefault((r.table_id, r.action), {})["last_success"] = _aware(r.at)
        for r in conn.execute(streak):
            out.setdefault((r.table_id, r.action), {})["failing_streak"] = int(r.n)
    return {k: ActionState(**v) for k, v in out.items()}


def _aware(value: Any) -> datetime | None:
    from airflow_tablemgmt.store.sqltypes import UtcDateTime

    return UtcDateTime().process_result_value(value, None)  # type: ignore[arg-type]


# ---- the overview's aggregates -------------------------------------------------------------------


def table_counts(engine: Engine) -> dict[str, Any]:
    """Live tables: in all, per catalog, and how many are dynamic."""
    dynamic = func.sum(case((_T.c.dynamic.isnot(None), 1), else_=0))
    stmt = select(_T.c.catalog, func.count(), dynamic).where(_T.c.deleted_at.is_(None)).group_by(_T.c.catalog)
    with engine.connect() as conn:  # one scan
        per = conn.execute(stmt).all()
    return {"tables": sum(n for _, n, _ in per), "per_catalog": {c: n for c, n, _ in per},
            "dynamic": sum(int(d or 0) for _, _, d in per)}  # fmt: skip


def newest_status_counts(engine: Engine) -> dict[str, int]:
    """How many (table, action) pairs have their newest process in each status."""
    newest = _newest().subquery()
    stmt = select(newest.c.status, func.count()).group_by(newest.c.status)
    with engine.connect() as conn:
        return {s: int(n) for s, n in conn.execute(stmt)}


def failing(engine: Engine, limit: int = 20) -> list[Any]:
    """(table, action) pairs whose newest process FAILED or was KILLED, newest first (the status index
    picks the candidates, as :func:`_newest_in_status`)."""
    newer = _P.alias("newer")
    later = (
        select(literal(1))
        .where(
            newer.c.table_id == _P.c.table_id, newer.c.action == _P.c.action, newer.c.instant > _P.c.instant
        )
        .exists()
    )
    stmt = (
        select(
            _P.c.id,
            _P.c.table_id,
            _P.c.action,
            _P.c.status,
            _P.c.instant,
            _P.c.finished_at,
            _P.c.failure_reason,
        )  # fmt: skip
        .where(_P.c.status.in_(FAILED), ~later)
        .order_by(_P.c.instant.desc())
        .limit(limit)
    )
    with engine.connect() as conn:
        return conn.execute(stmt).all()


def active(engine: Engine, limit: int = 20) -> tuple[list[Any], dict[str, int]]:
    """The oldest unfinished processes (those that waited longest) and how many there are per status."""
    stmt = (
        select(
            _P.c.id,
            _P.c.table_id,
            _P.c.action,
            _P.c.status,
            _P.c.instant,
            _P.c.created_at,
            _P.c.started_at,
            _P.c.lease_acquired_at,
            _P.c.dag_id,
            _P.c.run_id,
        )  # fmt: skip
        .where(_P.c.status.in_(ACTIVE))
        .order_by(_P.c.created_at, _P.c.id)
        .limit(limit)
    )
    counts = select(_P.c.status, func.count()).where(_P.c.status.in_(ACTIVE)).group_by(_P.c.status)
    with engine.connect() as conn:
        return conn.execute(stmt).all(), {s: int(n) for s, n in conn.execute(counts)}


def _num(path: tuple[str, ...]) -> ColumnElement[Any]:
    return func.coalesce(_P.c.summary[path].as_float(), 0)


#: Files a finished process removed, from its summary: data files before minus after (a rewrite, an
#: expiry of data) plus what an expiry (``deleted_files``) or an orphan clean-up (``deleted``) says it
#: deleted. Bytes removed are data bytes before minus after (Iceberg reports no bytes for an expiry).
FILES_REMOVED_PATHS = (
    ("deleted_files", "data"),
    ("deleted_files", "position_deletes"),
    ("deleted_files", "equality_deletes"),
    ("deleted_files", "manifests"),
    ("deleted",),
)


def _hour(engine: Engine, column: Any) -> Any:
    if engine.dialect.name == "postgresql":
        return func.to_char(column, literal("YYYY-MM-DD HH24", String))
    return func.substr(func.cast(column, String), 1, 13)  # SQLite stores ISO text: 'YYYY-MM-DD HH'


def finished_per_hour(engine: Engine, since: datetime) -> list[dict[str, Any]]:
    """Finished processes since ``since``, per UTC hour, action and status: how many, and for the
    successful ones the files and bytes they removed. One scan; JSON is read only for successes."""
    hour = _hour(engine, _P.c.finished_at).label("hour")
    ok = _P.c.status == "SUCCESS"
    files = _num(("before", "data_files")) - _num(("after", "data_files"))
    data = _num(("before", "data_bytes")) - _num(("after", "data_bytes"))
    removed = case((files > 0, files), else_=0)
    for path in FILES_REMOVED_PATHS:
        removed = removed + _num(path)
    stmt = (
        select(
            hour,
            _P.c.action,
            _P.c.status,
            func.count(),
            func.sum(case((ok, removed), else_=0)),
            func.sum(case((and_(ok, data > 0), data), else_=0)),
        )
        .where(_P.c.finished_at >= since)
        .group_by(hour, _P.c.action, _P.c.status)
    )
    with engine.connect() as conn:
        return [
            {
                "hour": h,
                "action": a,
                "status": st,
                "n": int(n),
                "files_removed": int(f or 0),
                "bytes_removed": int(b or 0),
            }  # fmt: skip
            for h, a, st, n, f, b in conn.execute(stmt)
        ]
