"""Read-only queries behind the page's table list and overview: search, filters, sorting and paging in
SQL, and aggregates over processes, so a page of the list costs a handful of indexed queries whatever
the number of tables. Nothing here writes.

(Just over 400 lines: the list's filters and the overview's aggregates share their SQL fragments;
the next split is the overview's aggregates into a module of their own, as store/fleet.py already is.)

The health sort and the needs-attention filter join each table's last measurement
(``tms_table_health``); the newest status of each (table, action) and the finished processes' figures
come from the rollup that ``store/process_rollup.py`` keeps as processes change, so the overview never
groups every process nor parses every summary.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    Engine,
    Table,
    and_,
    case,
    func,
    or_,
    select,
    true,
)

from airflow_tablemgmt.store.models import (
    ActionLatestRow,
    ProcessDoneRow,
    ProcessHourRow,
    ProcessRow,
    TableHealthRow,
    TableRow,
)
from airflow_tablemgmt.store.process_rollup import hour_of, hour_sums

_T = cast(Table, TableRow.__table__)
_P = cast(Table, ProcessRow.__table__)
_H = cast(Table, TableHealthRow.__table__)
_L = cast(Table, ActionLatestRow.__table__)
_D = cast(Table, ProcessDoneRow.__table__)
_S = cast(Table, ProcessHourRow.__table__)
_CHUNK = 500
ACTIVE = ("PENDING", "SUBMITTED", "RUNNING", "CANCELING")
FAILED = ("FAILED", "KILLED")
SORTS = ("table", "owner", "catalog", "updated", "health")


@dataclass(frozen=True)
class TableFilter:
    """What the list asks for; every field is optional."""

    q: str | None = None  # a substring of the table id or the owner (case-insensitive)
    catalog: str | None = None
    namespace: str | None = None
    action: str | None = None  # tables with this action enabled
    status: str | None = None  # tables whose newest process of some action has this status
    needs_attention: bool = False  # tables whose last health measurement has a finding


@dataclass(frozen=True)
class ListedTable:
    table_id: str
    format: str
    managed_by: str
    owner: str
    queue: str
    actions: dict[str, Any]
    dynamic: dict[str, Any] | None
    policy: str | None = None  # the policy that enrolled it (managed_by policy)


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
    if f.needs_attention:  # a set from the (needs_attention, table_id) index, so the page walks tms_table
        clauses.append(_T.c.table_id.in_(select(_H.c.table_id).where(_H.c.needs_attention == true())))
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
    """Table ids with a (table, action) whose newest process is in ``status`` (``tms_action_latest``)."""
    return select(_L.c.table_id).where(_L.c.status == status)


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
    """One page of matching tables and how many match. ``health`` sorts by the last measured score
    (``tms_table_health``, :func:`_health_page`)."""
    if sort == "health":
        return _health_page(engine, f, desc=desc, limit=limit, offset=offset)
    where = _where(f)
    column = {
        "table": _T.c.table_id,
        "owner": _T.c.owner_team,
        "catalog": _T.c.catalog,
        "updated": _T.c.updated_at,
    }[sort]
    order = [column.desc() if desc else column.asc(), _T.c.table_id]
    with engine.connect() as conn:
        if f.needs_attention and _plain(f):  # the red tables: the index's count less the deleted ones'
            total = health_counts(conn)[1]
        else:
            total = conn.execute(select(func.count()).select_from(_T).where(*where)).scalar_one()
        stmt = _columns().where(*where).order_by(*order).limit(limit).offset(offset)
        rows = conn.execute(stmt).all()
    return [_listed(r) for r in rows], int(total)


def _health_page(
    engine: Engine, f: TableFilter, *, desc: bool, limit: int, offset: int
) -> tuple[list[ListedTable], int]:
    """The measured tables in score order (the (score, table id) index), then the unmeasured ones by table
    id; reversed, the unmeasured first (table id descending), then best score first, ties by table id.
    Each part is one query that stops at its page's last row."""
    where = _where(f)
    measured_from = _T.join(_H, _H.c.table_id == _T.c.table_id)
    measured = _columns().select_from(measured_from).where(*where)
    measured = measured.order_by(_H.c.score.desc() if desc else _H.c.score.asc(), _H.c.table_id)
    unmeasured = (
        _columns()
        .select_from(_T.outerjoin(_H, _H.c.table_id == _T.c.table_id))
        .where(*where, _H.c.table_id.is_(None))
        .order_by(_T.c.table_id.desc() if desc else _T.c.table_id)
    )
    with engine.connect() as conn:
        if _plain(f):  # every live table: the index's counts less the deleted tables' rows
            measured_live, red_live = health_counts(conn)
            n_measured = red_live if f.needs_attention else measured_live
        else:
            count = select(func.count()).select_from(measured_from).where(*where)
            n_measured = int(conn.execute(count).scalar_one())
        n_all = n_measured
        if not f.needs_attention:  # no health clause: the live tables alone
            n_all = int(conn.execute(select(func.count()).select_from(_T).where(*where)).scalar_one())
        first, first_n, second = (
            (unmeasured, n_all - n_measured, measured) if desc else (measured, n_measured, unmeasured)
        )
        rows: list[Any] = []
        if offset < first_n:
            rows = list(conn.execute(first.limit(limit).offset(offset)))
        if len(rows) < limit:
            rows += list(conn.execute(second.limit(limit - len(rows)).offset(max(0, offset - first_n))))
    return [_listed(r) for r in rows], n_all


def _plain(f: TableFilter) -> bool:
    """No clause but live tables (and perhaps needs attention)."""
    return not (f.q or f.catalog or f.namespace or f.action or f.status)


def health_counts(conn: Any) -> tuple[int, int]:
    """(live tables measured, of which need attention): the health rows' counts on their covering index,
    less those of deleted tables (looked up by key), instead of a join of every row with its table."""
    figures = (func.count(), func.coalesce(func.sum(case((_H.c.needs_attention, 1), else_=0)), 0))
    gone_ids = select(_T.c.table_id).where(_T.c.deleted_at.isnot(None))
    every = conn.execute(select(*figures)).one()
    gone = conn.execute(select(*figures).where(_H.c.table_id.in_(gone_ids))).one()
    return int(every[0]) - int(gone[0]), int(every[1]) - int(gone[1])


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
        _T.c.table_id,
        _T.c.format,
        _T.c.managed_by,
        _T.c.owner_team,
        _T.c.queue,
        _T.c.actions,
        _T.c.dynamic,
        _T.c.policy,
    )


def _listed(r: Any) -> ListedTable:
    return ListedTable(
        r.table_id, r.format, r.managed_by, r.owner_team, r.queue, r.actions or {}, r.dynamic, r.policy
    )


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
    return {
        "tables": sum(n for _, n, _ in per),
        "per_catalog": {c: n for c, n, _ in per},
        "dynamic": sum(int(d or 0) for _, _, d in per),
    }


def newest_status_counts(engine: Engine) -> dict[str, int]:
    """How many (table, action) pairs have their newest process in each status (``tms_action_latest``)."""
    stmt = select(_L.c.status, func.count()).group_by(_L.c.status)
    with engine.connect() as conn:
        return {s: int(n) for s, n in conn.execute(stmt)}


def failing(engine: Engine, limit: int = 20) -> list[Any]:
    """(table, action) pairs whose newest process FAILED or was KILLED, newest first: per status, the
    newest ``limit`` on the (status, instant) index, merged."""
    cols = (
        _P.c.id,
        _P.c.table_id,
        _P.c.action,
        _P.c.status,
        _P.c.instant,
        _P.c.finished_at,
        _P.c.failure_reason,
    )
    rows: list[Any] = []
    with engine.connect() as conn:
        for status in FAILED:
            stmt = (
                select(*cols, _L.c.instant.label("newest_at"))
                .select_from(_L.join(_P, _P.c.id == _L.c.process_id))
                .where(_L.c.status == status)
                .order_by(_L.c.instant.desc())
                .limit(limit)
            )
            rows.extend(conn.execute(stmt).all())
    rows.sort(key=lambda r: r.newest_at, reverse=True)
    return rows[:limit]


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
        )
        .where(_P.c.status.in_(ACTIVE))
        .order_by(_P.c.created_at, _P.c.id)
        .limit(limit)
    )
    counts = select(_P.c.status, func.count()).where(_P.c.status.in_(ACTIVE)).group_by(_P.c.status)
    with engine.connect() as conn:
        return list(conn.execute(stmt).all()), {s: int(n) for s, n in conn.execute(counts)}


def _next_hour(t: datetime) -> datetime:
    return t.astimezone(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)


def finished_per_hour(engine: Engine, since: datetime) -> list[dict[str, Any]]:
    """Finished processes since ``since``, per UTC hour, action and status: how many, and for the
    successful ones the files and bytes they removed (what :func:`store.process_rollup.removed` found in
    each summary). The hours after ``since``'s are whole in ``tms_process_hour``; ``since``'s own hour is
    summed from its rows in ``tms_process_done`` finished at or after ``since``."""
    first = hour_of(since.astimezone(UTC))
    whole = select(_S.c.hour, _S.c.action, _S.c.status, _S.c.n, _S.c.files_removed, _S.c.bytes_removed).where(
        _S.c.hour > first, _S.c.n != 0
    )
    part = hour_sums(_D.c.finished_at >= since, _D.c.finished_at < _next_hour(since))
    with engine.connect() as conn:
        rows = [*conn.execute(whole), *conn.execute(part)]
    return [
        {
            "hour": h,
            "action": a,
            "status": st,
            "n": int(n),
            "files_removed": int(f or 0),
            "bytes_removed": int(b or 0),
        }
        for h, a, st, n, f, b in rows
    ]
