"""Cost per run, summed: ``tms_process_day`` (finished processes per UTC day, table, action and status:
how many, how many were measured, their core-seconds, CPU seconds, bytes read and written, files and bytes
removed), and the rollups REST, the CLI and the page read from it (:func:`rollup`).

The day rows are kept by ``store/process_rollup.py`` in the transaction that finishes or reopens a
process, beside its ``tms_process_done`` row (:func:`add`: what a reopened process had added is taken off
again), so the sums never disagree with the processes. :func:`rebuild` makes them from
``tms_process_done`` (migration 0011, and ``process_rollup.backfill``).

The policy of a row is its table's ``tms_table.policy`` (the policy that enrolled it, migration 0010),
joined when the rollup is read: the cost of a table counts for the policy that manages it now.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Engine,
    RowMapping,
    Table,
    and_,
    case,
    delete,
    func,
    insert,
    literal,
    select,
    update,
)

from airflow_tablemgmt.core.cost import COST_COLUMNS
from airflow_tablemgmt.store.models import ProcessDayRow, ProcessDoneRow, TableRow

_Y = cast(Table, ProcessDayRow.__table__)
_D = cast(Table, ProcessDoneRow.__table__)
_T = cast(Table, TableRow.__table__)

#: What a day row sums besides ``n`` and ``measured``.
SUMS = (*COST_COLUMNS, "files_removed", "bytes_removed")
#: The ways a rollup can be grouped (any combination, in this order).
DIMENSIONS = ("day", "policy", "table", "action", "status")
_KEYS = ("day", "table_id", "action", "status")


def day_of(hour: str) -> str:
    """The UTC day of a ``tms_process_done`` hour (``'YYYY-MM-DD HH'``)."""
    return hour[:10]


def add(conn: Connection, done: Mapping[str, Any] | RowMapping, sign: int) -> None:
    """Add (``sign`` 1) or take off (-1) one finished process's ``tms_process_done`` values to its day row.
    A row without its table (a process finished before migration 0011) has none to go to."""
    if not done.get("table_id"):
        return
    key_values = {
        "day": day_of(str(done["hour"])),
        "table_id": done["table_id"],
        "action": done["action"],
        "status": done["status"],
    }
    measured = 1 if done.get("core_seconds") is not None else 0
    delta: dict[str, Any] = {"n": sign, "measured": sign * measured}
    delta.update({name: sign * (done.get(name) or 0) for name in SUMS})
    key = and_(*(_Y.c[k] == v for k, v in key_values.items()))
    bump = {name: _Y.c[name] + value for name, value in delta.items()}
    if conn.execute(update(_Y).where(key).values(**bump)).rowcount:
        if sign < 0:  # the day's last process of the kind was taken off: no empty row left behind
            conn.execute(delete(_Y).where(key, _Y.c.n == 0))
        return
    if sign < 0:
        return
    values = {**key_values, **delta}
    if conn.dialect.name in ("postgresql", "sqlite"):  # a racing first insert of the same day adds to it
        if conn.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as upsert
        else:
            from sqlalchemy.dialects.sqlite import insert as upsert  # type: ignore[assignment]
        stmt = upsert(_Y).values(**values)
        conn.execute(stmt.on_conflict_do_update(index_elements=list(_KEYS), set_=bump))
    else:
        conn.execute(insert(_Y).values(**values))


def rebuild(conn: Connection) -> None:
    """``tms_process_day`` from ``tms_process_done`` (rows with a table only)."""
    conn.execute(delete(_Y))
    day = func.substr(_D.c.hour, 1, 10)
    sums = [func.coalesce(func.sum(_D.c[name]), 0) for name in SUMS]
    measured = func.sum(case((_D.c.core_seconds.isnot(None), 1), else_=0))
    query = (
        select(day, _D.c.table_id, _D.c.action, _D.c.status, func.count(), measured, *sums)
        .where(_D.c.table_id.isnot(None))
        .group_by(day, _D.c.table_id, _D.c.action, _D.c.status)
    )
    conn.execute(insert(_Y).from_select([*_KEYS, "n", "measured", *SUMS], query))


@dataclass(frozen=True)
class CostRow:
    """One group of a rollup: its dimensions' values (only those asked for) and the sums."""

    key: dict[str, str | None]
    n: int
    measured: int
    core_seconds: float
    cpu_seconds: float
    bytes_read: int
    bytes_written: int
    files_removed: int
    bytes_removed: int

    def to_dict(self) -> dict[str, Any]:
        return {**self.key, **{k: v for k, v in self.__dict__.items() if k != "key"}}


def _policy_column() -> Any:
    """``tms_table.policy`` when the schema has it (migration 0010), else None: no table has a policy."""
    return _T.c.get("policy")


def rollup(
    engine: Engine,
    by: Sequence[str],
    *,
    since_day: str | None = None,
    until_day: str | None = None,
    table: str | None = None,
    policy: str | None = None,
    actions: Collection[str] = (),
    limit: int = 1000,
) -> list[CostRow]:
    """The day rows from ``since_day`` to ``until_day`` (UTC, both inclusive) grouped by ``by`` (a subset of
    :data:`DIMENSIONS`), optionally for one table, one policy or some actions. Newest day first, then
    the most core-seconds; at most ``limit`` groups."""
    unknown = [d for d in by if d not in DIMENSIONS]
    if unknown:
        raise ValueError(f"by: unknown dimension(s) {', '.join(unknown)}; allowed: {', '.join(DIMENSIONS)}")
    policy_col = _policy_column()
    columns = {
        "day": _Y.c.day,
        "policy": policy_col,
        "table": _Y.c.table_id,
        "action": _Y.c.action,
        "status": _Y.c.status,
    }
    wanted = [d for d in DIMENSIONS if d in by]
    dims = [d for d in wanted if columns[d] is not None]
    grouped = [columns[d].label(d) for d in dims]
    core = func.sum(_Y.c.core_seconds)
    query = select(
        *grouped,
        func.sum(_Y.c.n),
        func.sum(_Y.c.measured),
        *[func.sum(_Y.c[name]) for name in SUMS],
    ).select_from(_Y.outerjoin(_T, _T.c.table_id == _Y.c.table_id))
    where = []
    if since_day is not None:
        where.append(_Y.c.day >= since_day)
    if until_day is not None:
        where.append(_Y.c.day <= until_day)
    if table is not None:
        where.append(_Y.c.table_id == table)
    if policy is not None:
        where.append(policy_col == policy if policy_col is not None else literal(False))
    if actions:
        where.append(_Y.c.action.in_(list(actions)))
    query = query.where(*where)
    if dims:
        query = query.group_by(*[columns[d] for d in dims])
    order = [_Y.c.day.desc()] if "day" in dims else []
    order.append(core.desc())
    order += [columns[d] for d in dims if d != "day"]
    query = query.order_by(*order).limit(limit)
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    out = []
    for row in rows:
        values = list(row)
        found = dict(zip(dims, values[: len(dims)], strict=True))
        key = {d: (str(found[d]) if found.get(d) is not None else None) for d in wanted}
        n, measured, core_s, cpu_s, read, written, files, removed = values[len(dims) :]
        if n is None:  # no row at all: the sums of nothing
            continue
        out.append(
            CostRow(
                key,
                int(n),
                int(measured or 0),
                round(float(core_s or 0), 3),
                round(float(cpu_s or 0), 3),
                int(read or 0),
                int(written or 0),
                int(files or 0),
                int(removed or 0),
            )
        )
    return out


def as_of(t: datetime) -> str:
    """The UTC day of ``t`` as the day rows name it."""
    return t.strftime("%Y-%m-%d")
