"""What the overview counts of processes, kept as processes change: the newest process of each
(table, action) with its status (``tms_action_latest``), one narrow row per finished process with
the files and bytes it removed and its cost (``tms_process_done``), those summed per UTC hour, action and
status (``tms_process_hour``) and per UTC day, table, action and status (``tms_process_day``,
``store/process_cost.py``).

The overview's status counts, failing list and 24 h / 7 d / 30 d figures then read these small tables
(``store/listing.py``) instead of grouping every process and parsing every summary's JSON (a third of a
second of CPU at 40,000 processes, paid by each api-server's first overview).

:func:`opened` and :func:`record` run inside the transaction of the statement that opens or moves the
process (``store/processes.py``), so the rollup can never disagree with the processes it counts: a
process opened for a newer instant becomes its (table, action)'s newest; a finished process gets its
row; a retry (a new attempt) drops it again. :func:`backfill` builds both from ``tms_process`` (the
migration that created them, and a store filled by a bulk insert).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection, Table, and_, delete, func, insert, select, update

from airflow_tablemgmt.core.cost import COST_COLUMNS
from airflow_tablemgmt.store import process_cost
from airflow_tablemgmt.store.models import ActionLatestRow, ProcessDoneRow, ProcessHourRow, ProcessRow

if TYPE_CHECKING:
    from airflow_tablemgmt.core.process import Process

_L = cast(Table, ActionLatestRow.__table__)
_D = cast(Table, ProcessDoneRow.__table__)
_H = cast(Table, ProcessHourRow.__table__)
_P = cast(Table, ProcessRow.__table__)
TERMINAL = ("SUCCESS", "FAILED", "KILLED", "CANCELED")

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


def _num(summary: Mapping[str, Any], path: tuple[str, ...]) -> float:
    value: Any = summary
    for key in path:
        if not isinstance(value, Mapping):
            return 0.0
        value = value.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value)


def removed(status: str, summary: Mapping[str, Any] | None) -> tuple[int, int]:
    """(files, bytes) a finished process removed; 0, 0 unless it succeeded."""
    if status != "SUCCESS" or not isinstance(summary, Mapping):
        return 0, 0
    files = _num(summary, ("before", "data_files")) - _num(summary, ("after", "data_files"))
    data = _num(summary, ("before", "data_bytes")) - _num(summary, ("after", "data_bytes"))
    total = max(files, 0.0) + sum(_num(summary, p) for p in FILES_REMOVED_PATHS)
    return int(total), int(max(data, 0.0))


def hour_of(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H")


def _upsert(
    conn: Connection, table: Table, keys: list[str], values: dict[str, Any], where: Any = None
) -> None:
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as upsert
    else:
        from sqlalchemy.dialects.sqlite import insert as upsert  # type: ignore[assignment]
    stmt = upsert(table).values(**values)
    changed = {k: stmt.excluded[k] for k in values if k not in keys}
    conn.execute(stmt.on_conflict_do_update(index_elements=keys, set_=changed, where=where))


def opened(conn: Connection, p: Process) -> None:
    """A process was created: it is its (table, action)'s newest unless one of a later instant exists."""
    values = {
        "table_id": p.table_id,
        "action": p.action,
        "process_id": p.id,
        "instant": p.instant,
        "status": str(p.status),
    }
    if conn.dialect.name in ("postgresql", "sqlite"):
        _upsert(conn, _L, ["table_id", "action"], values, where=_L.c.instant <= p.instant)
        return
    key = and_(_L.c.table_id == p.table_id, _L.c.action == p.action)
    if not conn.execute(update(_L).where(key, _L.c.instant <= p.instant).values(**values)).rowcount:
        if conn.execute(select(_L.c.process_id).where(key)).first() is None:
            conn.execute(insert(_L).values(**values))


def record(conn: Connection, p: Process) -> None:
    """The process's status or summary changed: its newest-status row (if it is the newest), its finished
    row and its hour's sums follow (what it added before is taken off first)."""
    status = str(p.status)
    conn.execute(update(_L).where(_L.c.process_id == p.id).values(status=status))
    before = conn.execute(select(_D).where(_D.c.process_id == p.id)).mappings().first()
    if before is not None:
        conn.execute(delete(_D).where(_D.c.process_id == p.id))
        _add(
            conn,
            before["hour"],
            before["action"],
            before["status"],
            -1,
            -before["files_removed"],
            -before["bytes_removed"],
        )
        process_cost.add(conn, before, -1)
    if status in TERMINAL and p.finished_at is not None:
        files, data = removed(status, p.summary)
        done = {
            "process_id": p.id,
            "finished_at": p.finished_at,
            "hour": hour_of(p.finished_at),
            "action": p.action,
            "status": status,
            "files_removed": files,
            "bytes_removed": data,
            **_cost_values(p.table_id, p),
        }
        conn.execute(insert(_D).values(**done))
        _add(conn, done["hour"], p.action, status, 1, files, data)
        process_cost.add(conn, done, 1)


def _cost_values(table_id: str, figures: Any) -> dict[str, Any]:
    """A done row's table and cost (migration 0011) from a process or a ``tms_process`` row."""
    return {"table_id": table_id, **{name: getattr(figures, name, None) for name in COST_COLUMNS}}


def _add(conn: Connection, hour: str, action: str, status: str, n: int, files: int, data: int) -> None:
    key = and_(_H.c.hour == hour, _H.c.action == action, _H.c.status == status)
    bump = {
        "n": _H.c.n + n,
        "files_removed": _H.c.files_removed + files,
        "bytes_removed": _H.c.bytes_removed + data,
    }
    if conn.execute(update(_H).where(key).values(**bump)).rowcount:
        if n < 0:  # the hour's last process of the kind was taken off: no empty row left behind
            conn.execute(delete(_H).where(key, _H.c.n == 0))
        return
    values = {
        "hour": hour,
        "action": action,
        "status": status,
        "n": n,
        "files_removed": files,
        "bytes_removed": data,
    }
    if conn.dialect.name in ("postgresql", "sqlite"):  # a racing first insert of the same hour adds to it
        if conn.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as upsert
        else:
            from sqlalchemy.dialects.sqlite import insert as upsert  # type: ignore[assignment]
        stmt = upsert(_H).values(**values)
        conn.execute(stmt.on_conflict_do_update(index_elements=["hour", "action", "status"], set_=bump))
    else:
        conn.execute(insert(_H).values(**values))


def backfill(conn: Connection, *, chunk: int = 5000, cost: bool = True) -> None:
    """Rebuild both tables from ``tms_process`` (what :func:`opened` and :func:`record` would have kept),
    and the per-day sums (``store/process_cost.py``). ``cost=False``: a schema before migration 0011, whose
    tables have no cost columns yet (migration 0008's own backfill)."""
    conn.execute(delete(_L))
    conn.execute(delete(_D))
    conn.execute(delete(_H))
    top = (
        select(_P.c.table_id, _P.c.action, func.max(_P.c.instant).label("instant"))
        .group_by(_P.c.table_id, _P.c.action)
        .subquery()
    )
    on = and_(top.c.table_id == _P.c.table_id, top.c.action == _P.c.action, top.c.instant == _P.c.instant)
    newest = select(_P.c.table_id, _P.c.action, _P.c.id, _P.c.instant, _P.c.status).join(top, on)
    conn.execute(insert(_L).from_select(["table_id", "action", "process_id", "instant", "status"], newest))
    columns = [_P.c.id, _P.c.finished_at, _P.c.action, _P.c.status, _P.c.summary, _P.c.table_id]
    if cost:
        columns += [_P.c[name] for name in COST_COLUMNS]
    rows = conn.execute(select(*columns).where(_P.c.finished_at.isnot(None), _P.c.status.in_(TERMINAL))).all()
    batch: list[dict[str, Any]] = []
    for row in rows:
        files, data = removed(row.status, row.summary)
        batch.append(
            {
                "process_id": row.id,
                "finished_at": row.finished_at,
                "hour": hour_of(row.finished_at),
                "action": row.action,
                "status": row.status,
                "files_removed": files,
                "bytes_removed": data,
                **(_cost_values(row.table_id, row) if cost else {}),
            }
        )
        if len(batch) >= chunk:
            conn.execute(insert(_D), batch)
            batch = []
    if batch:
        conn.execute(insert(_D), batch)
    conn.execute(
        insert(_H).from_select(
            ["hour", "action", "status", "n", "files_removed", "bytes_removed"], hour_sums()
        )
    )
    if cost:
        process_cost.rebuild(conn)


def hour_sums(*where: Any) -> Any:
    """Per UTC hour, action and status of the finished processes' rows (``tms_process_done``) matching
    ``where``: how many, and the files and bytes they removed (``tms_process_hour``'s columns)."""
    return (
        select(
            _D.c.hour,
            _D.c.action,
            _D.c.status,
            func.count(),
            func.sum(_D.c.files_removed),
            func.sum(_D.c.bytes_removed),
        )
        .where(*where)
        .group_by(_D.c.hour, _D.c.action, _D.c.status)
    )
