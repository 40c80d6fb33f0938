"""Cost per run in the store (``store/process_cost.py``), on SQLite and PostgreSQL: a job's cost lands
in the process's columns (a success's from its summary, a failure's beside its reason), a retry clears
it, the per-day sums follow every change and equal a rebuild, and the rollups group them per table,
policy (the table's) and day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, update

from airflow_tablemgmt.core.process import ProcessStatus as S
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.services.cost import cost_rollup
from airflow_tablemgmt.store import Store, process_rollup
from airflow_tablemgmt.store.models import ProcessDayRow, TableRow

T0 = datetime(2026, 11, 20, tzinfo=UTC)
A, B, C = "lake.sales.orders", "lake.sales.refunds", "lake.web.clicks"


def _cost(core: float, cpu: float, read: int, written: int) -> dict[str, Any]:
    return {
        "core_seconds": core,
        "cpu_seconds": cpu,
        "bytes_read": read,
        "bytes_written": written,
        "tasks": 3,
    }


def _rewrite(cost: dict[str, Any] | None) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "before": {"data_files": 10, "data_bytes": 900},
        "after": {"data_files": 2, "data_bytes": 800},
    }
    return {**summary, "cost": cost} if cost is not None else summary


def _start(store: Store, table: str, action: str, instant: datetime) -> Any:
    p, _ = store.processes.open(table, action, instant)
    store.processes.transition(p.id, S.SUBMITTED, expected=S.PENDING, attempt=p.attempt)
    return store.processes.transition(p.id, S.RUNNING, expected=S.SUBMITTED, attempt=p.attempt)


def _days(store: Store) -> list[tuple[Any, ...]]:
    with store.engine.connect() as conn:
        return sorted(tuple(r) for r in conn.execute(select(ProcessDayRow.__table__)))  # type: ignore[attr-defined]


def _sums(rows: list[Any], key: str) -> dict[Any, tuple[Any, ...]]:
    return {
        r.key[key]: (
            r.n,
            r.measured,
            r.core_seconds,
            r.cpu_seconds,
            r.bytes_read,
            r.bytes_written,
            r.files_removed,
        )
        for r in rows
    }


def test_cost_is_recorded_per_process_and_rolled_up_per_table_policy_and_day(backend) -> None:
    store = backend.store()
    store.catalogs.upsert(CatalogSpec(name="lake", type="hadoop", warehouse="/tmp/w"), Owner.STORE)
    for table in (A, B, C):
        catalog, namespace, name = table.split(".")
        store.tables.upsert(TableSpec(catalog=catalog, namespace=namespace, name=name), Owner.STORE)
    policy = TableRow.__table__.c.get("policy")  # type: ignore[attr-defined]
    if policy is not None:  # the enrolment's column (migration 0010): A and B are managed by "nightly"
        with store.engine.begin() as conn:
            conn.execute(
                update(TableRow.__table__)
                .where(policy.is_(None), TableRow.__table__.c.table_id.in_([A, B]))
                .values(policy="nightly")
            )  # type: ignore[attr-defined]

    # A success carries its cost in its summary; the store writes it to the process's columns.
    a = _start(store, A, "rewrite-files", T0)
    done = store.processes.transition(
        a.id, S.SUCCESS, expected=S.RUNNING, attempt=1, summary=_rewrite(_cost(10.5, 6.25, 1000, 500))
    )
    assert (done.core_seconds, done.cpu_seconds, done.bytes_read, done.bytes_written) == (
        10.5,
        6.25,
        1000,
        500,
    )
    assert store.processes.get(a.id).core_seconds == 10.5
    # A run nothing measured (no Spark job) has no cost: None, not 0.
    e = _start(store, A, "expire-snapshots", T0)
    expired = store.processes.transition(
        e.id, S.SUCCESS, expected=S.RUNNING, attempt=1, summary={"deleted_files": {"data": 3}}
    )
    assert expired.core_seconds is None and expired.bytes_read is None
    # A failure's cost comes beside its reason (the worker passes the result's cost columns).
    b = _start(store, B, "rewrite-files", T0)
    store.processes.transition(
        b.id,
        S.FAILED,
        expected=S.RUNNING,
        attempt=1,
        failure_reason="boom",
        core_seconds=4.0,
        cpu_seconds=1.0,
        bytes_read=300,
        bytes_written=0,
    )
    c = _start(store, C, "rewrite-files", T0)
    store.processes.transition(
        c.id, S.SUCCESS, expected=S.RUNNING, attempt=1, summary=_rewrite(_cost(2.0, 1.0, 50, 60))
    )

    by_table = _sums(cost_rollup(store, "table", days=1), "table")
    assert by_table == {
        A: (2, 1, 10.5, 6.25, 1000, 500, 8 + 3),
        B: (1, 1, 4.0, 1.0, 300, 0, 0),
        C: (1, 1, 2.0, 1.0, 50, 60, 8),
    }
    # Ordered by the most core-seconds.
    assert [r.key["table"] for r in cost_rollup(store, "table", days=1)] == [A, B, C]

    # A retry takes the failed attempt's cost off its row and the sums; the new attempt's success adds its own.
    retry = store.processes.new_attempt(b.id, expected=S.FAILED)
    assert retry.core_seconds is None and retry.bytes_read is None
    assert B not in _sums(cost_rollup(store, "table", days=1), "table")
    store.processes.transition(b.id, S.SUBMITTED, expected=S.PENDING, attempt=2)
    store.processes.transition(b.id, S.RUNNING, expected=S.SUBMITTED, attempt=2)
    store.processes.transition(
        b.id, S.SUCCESS, expected=S.RUNNING, attempt=2, summary=_rewrite(_cost(3.0, 2.0, 400, 100))
    )

    by_policy = _sums(cost_rollup(store, "policy"), "policy")
    if policy is not None:
        assert by_policy == {
            "nightly": (3, 2, 13.5, 8.25, 1400, 600, 8 + 3 + 8),
            None: (1, 1, 2.0, 1.0, 50, 60, 8),
        }
    else:
        assert by_policy == {None: (4, 3, 15.5, 9.25, 1450, 660, 27)}
    today = store.processes.now().strftime("%Y-%m-%d")
    assert _sums(cost_rollup(store, "day"), "day") == {today: (4, 3, 15.5, 9.25, 1450, 660, 27)}
    # Two dimensions at once, and the filters.
    both = cost_rollup(store, "day,action", table=A)
    assert [(r.key["day"], r.key["action"], r.n) for r in both] == [
        (today, "rewrite-files", 1),
        (today, "expire-snapshots", 1),
    ]
    assert cost_rollup(store, "table", action="expire-snapshots")[0].measured == 0
    # A window that ended before the processes finished holds none of them.
    assert cost_rollup(store, "table", days=1, now=store.processes.now() - timedelta(days=2)) == []

    # What the store kept equals a rebuild from the processes (migration 0011's backfill).
    kept = _days(store)
    with store.engine.begin() as conn:
        process_rollup.backfill(conn)
    assert _days(store) == kept
