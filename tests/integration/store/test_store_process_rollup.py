"""The overview's rollup (``store/process_rollup.py``) and the tables' stored health
(``store/table_health.py``) on SQLite and PostgreSQL: what the store keeps as processes open, finish,
are retried and reaped equals what a scan of every process says, and equals a rebuild from scratch;
the health sort, the needs-attention filter and the sums leave deleted tables out."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from airflow_tablemgmt.core.process import ProcessStatus as S
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.store import Store, listing, process_rollup
from airflow_tablemgmt.store.listing import TableFilter
from airflow_tablemgmt.store.models import ActionLatestRow, ProcessDoneRow, ProcessHourRow
from airflow_tablemgmt.store.table_health import HealthRecord, TableHealthRepository

T0 = datetime(2026, 11, 20, tzinfo=UTC)
REWRITE = {"before": {"data_files": 528, "data_bytes": 9000}, "after": {"data_files": 4, "data_bytes": 7000}}


def _run(store: Store, table: str, action: str, instant: datetime, end: S, summary: Any = None) -> int:
    p, _ = store.processes.open(table, action, instant)
    store.processes.transition(p.id, S.SUBMITTED, expected=S.PENDING, attempt=p.attempt)
    store.processes.transition(p.id, S.RUNNING, expected=S.SUBMITTED, attempt=p.attempt)
    store.processes.transition(p.id, end, expected=S.RUNNING, attempt=p.attempt, summary=summary)
    return p.id


def _scan(store: Store, since: datetime) -> dict[str, Any]:
    """The overview's process figures by their definitions, from every process."""
    every = store.processes.list(limit=10_000)
    newest: dict[tuple[str, str], Any] = {}
    for p in every:
        key = (p.table_id, p.action)
        if key not in newest or p.instant > newest[key].instant:
            newest[key] = p
    hours: Counter[tuple[str, str, str]] = Counter()
    files: Counter[tuple[str, str, str]] = Counter()
    data: Counter[tuple[str, str, str]] = Counter()
    for p in every:
        if p.finished_at is None or p.finished_at < since:
            continue
        key = (p.finished_at.strftime("%Y-%m-%d %H"), p.action, str(p.status))
        hours[key] += 1
        f, b = process_rollup.removed(str(p.status), p.summary)
        files[key] += f
        data[key] += b
    return {
        "newest": dict(Counter(str(p.status) for p in newest.values())),
        "failing": sorted(
            (p.table_id, p.action) for p in newest.values() if str(p.status) in ("FAILED", "KILLED")
        ),
        "per_hour": sorted((*k, n, files[k], data[k]) for k, n in hours.items()),
    }


def _rollup(store: Store, since: datetime) -> dict[str, Any]:
    rows = listing.finished_per_hour(store.engine, since)
    return {
        "newest": listing.newest_status_counts(store.engine),
        "failing": sorted((r.table_id, r.action) for r in listing.failing(store.engine)),
        "per_hour": sorted(
            (r["hour"], r["action"], r["status"], r["n"], r["files_removed"], r["bytes_removed"])
            for r in rows
        ),
    }


def _rows(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    with store.engine.connect() as conn:
        return {
            t.name: sorted(tuple(r) for r in conn.execute(select(t)))
            for t in (ActionLatestRow.__table__, ProcessDoneRow.__table__, ProcessHourRow.__table__)  # type: ignore[attr-defined]
        }


def test_the_rollup_follows_every_change_of_a_process(backend) -> None:
    store = backend.store()
    a, b = "lake.sales.orders", "lake.sales.refunds"
    _run(store, a, "rewrite-files", T0, S.SUCCESS, REWRITE)
    _run(store, a, "expire-snapshots", T0, S.SUCCESS, {"deleted_files": {"data": 7, "manifests": 2}})
    failed = _run(store, a, "rewrite-files", T0 + timedelta(hours=1), S.FAILED)
    _run(store, b, "rewrite-files", T0 + timedelta(hours=2), S.KILLED)
    _run(store, b, "rewrite-files", T0 - timedelta(days=1), S.SUCCESS, REWRITE)  # a backfill: not the newest
    since = store.processes.now() - timedelta(hours=1)
    assert _rollup(store, since) == _scan(store, since)
    assert listing.newest_status_counts(store.engine) == {"SUCCESS": 1, "FAILED": 1, "KILLED": 1}

    # A retry takes the failure out of the counts; its success puts the removed files in.
    retry = store.processes.new_attempt(failed, expected=S.FAILED)
    assert _rollup(store, since) == _scan(store, since)
    assert listing.newest_status_counts(store.engine)["PENDING"] == 1
    store.processes.transition(retry.id, S.SUBMITTED, expected=S.PENDING, attempt=2)
    store.processes.transition(retry.id, S.RUNNING, expected=S.SUBMITTED, attempt=2)
    store.processes.transition(retry.id, S.SUCCESS, expected=S.RUNNING, attempt=2, summary=REWRITE)
    # A worker lost: the reaper's FAILED counts like any other.
    lost, _ = store.processes.open(b, "expire-snapshots", T0 + timedelta(hours=3))
    store.processes.transition(lost.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    time.sleep(0.05)
    assert [r.process.id for r in store.processes.reap(timedelta(milliseconds=10))] == [lost.id]
    scanned = _scan(store, since)
    assert _rollup(store, since) == scanned
    assert scanned["failing"] == [(b, "expire-snapshots"), (b, "rewrite-files")]
    assert sum(r[4] for r in scanned["per_hour"]) == 3 * 524 + 9  # three rewrites and one expiry

    # What the store kept equals a rebuild from the processes (the migration's backfill).
    kept = _rows(store)
    with store.engine.begin() as conn:
        process_rollup.backfill(conn)
    rebuilt = _rows(store)
    assert {k: [r for r in v] for k, v in rebuilt.items()} == kept
    # A window that starts inside an hour counts that hour's processes from its start only.
    assert _rollup(store, store.processes.now() + timedelta(seconds=1))["per_hour"] == []


def _record(score: int, findings: tuple[tuple[str, str], ...] = (), files: int = 4) -> HealthRecord:
    return HealthRecord(score, findings, files, files * 100, max(0, files - 4), {"data_files": files})


def test_health_sort_filter_and_sums_in_sql_without_deleted_tables(backend, tmp_path) -> None:
    store = backend.store()
    store.catalogs.upsert(
        CatalogSpec(name="lake", type="hadoop", warehouse=f"file://{tmp_path}"), Owner.STORE
    )
    names = ["a", "b", "c", "d", "e", "gone"]
    for n in names:
        store.tables.upsert(TableSpec(catalog="lake", namespace="db", name=n, actions={}), Owner.STORE)
    small = (("small_files", "rewrite-files"),)
    both = (("small_files", "rewrite-files"), ("manifests", "rewrite-manifests"))
    repo = TableHealthRepository.of(store)
    repo.put("lake.db.a", _record(60, small, 40))
    repo.put("lake.db.b", _record(100))
    repo.put("lake.db.c", _record(45, both, 400))
    repo.put_many({"lake.db.d": _record(60, small, 40), "lake.db.gone": _record(10, both, 900)})
    store.tables.remove("lake.db.gone", Owner.STORE)

    def ids(**kw: Any) -> tuple[list[str], int]:
        rows, total = listing.page(store.engine, TableFilter(**kw.pop("f", {})), **kw)
        return [r.table_id.rpartition(".")[2] for r in rows], total

    assert ids(sort="health") == (["c", "a", "d", "b", "e"], 5)  # worst first, ties by id, unmeasured last
    assert ids(sort="health", desc=True) == (["e", "b", "a", "d", "c"], 5)
    assert ids(sort="health", limit=2, offset=3) == (["b", "e"], 5)  # a page across both parts
    assert ids(sort="health", desc=True, limit=2, offset=1) == (["b", "a"], 5)
    assert ids(f={"needs_attention": True}) == (["a", "c", "d"], 3)
    assert ids(f={"needs_attention": True, "q": "db.c"}, sort="health") == (["c"], 1)
    s = repo.summary()
    assert (s.measured, s.needs_attention, s.data_files, s.excess_data_files) == (4, 3, 484, 36 + 396 + 36)
    assert s.mean_score == round((60 + 100 + 45 + 60) / 4, 1)
    assert s.by_kind == {
        "small_files": {
            "tables": 3,
            "action": "rewrite-files",
            "examples": ["lake.db.a", "lake.db.c", "lake.db.d"],
        },
        "manifests": {"tables": 1, "action": "rewrite-manifests", "examples": ["lake.db.c"]},
    }
    assert repo.measured_count() == 4 and repo.unmeasured(10) == ["lake.db.e"]
    assert repo.get_many(["lake.db.c"])["lake.db.c"].findings == both
