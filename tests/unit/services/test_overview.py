"""The list and overview queries (store/listing.py through services/overview.py) on a real SQLite
store: search, filters, sort and paging in SQL, badges (last status, last success, failing streak),
health from the cache, and the overview's aggregates equal to what the processes hold."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airflow_tablemgmt.core.process import ProcessStatus as S
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.metadata.files import FileStats
from airflow_tablemgmt.services import health, overview
from airflow_tablemgmt.store import Store
from airflow_tablemgmt.store.listing import TableFilter

T0 = datetime(2026, 11, 20, tzinfo=UTC)


def _finish(
    store: Store, table: str, action: str, instant: datetime, end: S, summary: dict | None = None
) -> int:
    p, _ = store.processes.open(table, action, instant)
    store.processes.transition(p.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    store.processes.transition(p.id, S.RUNNING, expected=S.SUBMITTED, attempt=1)
    store.processes.transition(p.id, end, expected=S.RUNNING, attempt=1, summary=summary)
    return p.id


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    for cat in ("lake", "sea"):
        s.catalogs.upsert(
            CatalogSpec(name=cat, type="hadoop", warehouse=f"file://{tmp_path}/{cat}"), Owner.STORE
        )
    specs = [
        TableSpec(
            catalog="lake",
            namespace="sales",
            name="orders",
            owner="team_a",
            actions={"rewrite-files": {}, "expire-snapshots": {}},
        ),
        TableSpec(
            catalog="lake",
            namespace="sales",
            name="refunds",
            owner="team_b",
            actions={"rewrite-files": {}, "expire-snapshots": {"enabled": False}},
        ),
        TableSpec(
            catalog="sea", namespace="ops", name="logs_100", owner="team_a", actions={"expire-snapshots": {}}
        ),
    ]
    for spec in specs:
        s.tables.upsert(spec, Owner.STORE)
    summary = {
        "before": {"data_files": 528, "data_bytes": 9000},
        "after": {"data_files": 4, "data_bytes": 7000},
        "duration_seconds": 12.5,
    }
    _finish(s, "lake.sales.orders", "rewrite-files", T0, S.SUCCESS, summary)
    _finish(s, "lake.sales.orders", "rewrite-files", T0 + timedelta(hours=1), S.FAILED)
    _finish(s, "lake.sales.orders", "rewrite-files", T0 + timedelta(hours=2), S.KILLED)
    _finish(s, "lake.sales.orders", "expire-snapshots", T0, S.SUCCESS, {"deleted_files": {"data": 7}})
    s.processes.open("lake.sales.refunds", "rewrite-files", T0)  # PENDING
    yield s
    s.dispose()


def _ids(page: overview.TablePage) -> list[str]:
    return [r.table for r in page.items]


def test_search_filters_sort_and_paging_run_in_sql(store: Store) -> None:
    everything = overview.list_page(store, TableFilter(), warm_missing=False)
    assert _ids(everything) == ["lake.sales.orders", "lake.sales.refunds", "sea.ops.logs_100"]
    assert everything.total == 3
    assert _ids(overview.list_page(store, TableFilter(q="TEAM_B"), warm_missing=False)) == [
        "lake.sales.refunds"
    ]
    assert _ids(overview.list_page(store, TableFilter(q="100%"), warm_missing=False)) == []  # % is literal
    assert _ids(overview.list_page(store, TableFilter(q="_1"), warm_missing=False)) == ["sea.ops.logs_100"]
    assert overview.list_page(store, TableFilter(catalog="sea"), warm_missing=False).total == 1
    # expire-snapshots is disabled on refunds: not listed under that action
    assert _ids(overview.list_page(store, TableFilter(action="expire-snapshots"), warm_missing=False)) == [
        "lake.sales.orders",
        "sea.ops.logs_100",
    ]
    assert _ids(overview.list_page(store, TableFilter(status="PENDING"), warm_missing=False)) == [
        "lake.sales.refunds"
    ]
    assert _ids(overview.list_page(store, TableFilter(status="KILLED"), warm_missing=False)) == [
        "lake.sales.orders"
    ]
    page2 = overview.list_page(
        store, TableFilter(), sort="owner", desc=True, limit=2, offset=0, warm_missing=False
    )
    assert _ids(page2) == ["lake.sales.refunds", "lake.sales.orders"] and page2.total == 3
    last = overview.list_page(store, TableFilter(), limit=2, offset=2, warm_missing=False)
    assert _ids(last) == ["sea.ops.logs_100"] and last.total == 3


def test_badges_show_last_status_last_success_and_streak(store: Store) -> None:
    (row,) = overview.list_page(store, TableFilter(q="orders"), warm_missing=False).items
    assert row.actions == ["expire-snapshots", "rewrite-files"]
    rewrite = row.badges["rewrite-files"]
    assert rewrite.last_status == "KILLED" and rewrite.failing_streak == 2
    assert rewrite.last_success is not None
    assert row.badges["expire-snapshots"].last_status == "SUCCESS"
    assert row.badges["expire-snapshots"].failing_streak == 0
    (refunds,) = overview.list_page(store, TableFilter(q="refunds"), warm_missing=False).items
    assert refunds.actions == ["rewrite-files"] and refunds.badges["rewrite-files"].last_status == "PENDING"


def _stats(data_files: int, small: int, compacted: int) -> FileStats:
    return FileStats(
        None,
        1,
        data_files,
        small,
        100,
        0,
        1000,
        0,
        10,
        target_file_size_bytes=1000,
        compacted_data_files=compacted,
        min_input_files=5,
    )


def test_health_sort_and_needs_attention_use_the_cache(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = health._Cache(lambda: 0.0)
    monkeypatch.setattr(health, "_CACHE", cache)
    health.remember(store, "lake.sales.orders", _stats(528, 528, 1), cache=cache)  # compaction would help
    health.remember(store, "sea.ops.logs_100", _stats(4, 4, 4), cache=cache)  # compacted: healthy
    by_health = overview.list_page(store, TableFilter(), sort="health", warm_missing=False)
    assert _ids(by_health) == ["lake.sales.orders", "sea.ops.logs_100", "lake.sales.refunds"]
    assert by_health.items[0].health is not None and by_health.items[0].health.score.score < 70
    assert by_health.items[1].health is not None and by_health.items[1].health.score.score == 100
    assert by_health.items[2].health is None  # not measured yet: last
    red = overview.list_page(store, TableFilter(), needs_attention=True, warm_missing=False)
    assert _ids(red) == ["lake.sales.orders"] and red.total == 1
    o = overview.overview(store, now=T0 + timedelta(hours=3), ttl=0, warm_missing=False)
    assert o["needs_attention"] == 1 and o["attention_by_kind"]["small_files"]["tables"] == 1
    assert o["measured_tables"] == 2 and o["data_files"] == 532


def test_overview_counts_equal_the_processes(store: Store) -> None:
    o = overview.overview(store, now=T0 + timedelta(hours=3), ttl=0, warm_missing=False)
    assert o["tables"] == 3 and o["per_catalog"] == {"lake": 2, "sea": 1}
    assert [(f["table"], f["action"], f["status"]) for f in o["failing"]] == [
        ("lake.sales.orders", "rewrite-files", "KILLED")
    ]
    assert o["active_per_status"] == {"PENDING": 1} and o["active"][0]["table"] == "lake.sales.refunds"
    # finished_at is the database's clock (now), so "the last 24 h" is taken from now here
    done = overview.overview(store, ttl=0, warm_missing=False)["done_24h"]
    assert done["succeeded"] == 2 and done["failed"] == 2
    assert done["files_removed"] == (528 - 4) + 7 and done["bytes_removed"] == 2000
    assert done["per_action"]["rewrite-files"]["files_removed"] == 524


def test_timings_follow_one_definition() -> None:
    from airflow_tablemgmt.core.process import Process
    from airflow_tablemgmt.services.processes import timings

    p = Process(
        id=1,
        table_id="a.b.c",
        action="rewrite-files",
        instant=T0,
        status=S.SUCCESS,
        attempt=1,
        engine="spark",
        external_id=None,
        snapshot_id=None,
        parameters={},
        summary={"duration_seconds": 30.0},
        failure_reason=None,
        dag_id=None,
        run_id=None,
        task_id=None,
        created_at=T0,
        started_at=T0 + timedelta(seconds=140),
        finished_at=T0 + timedelta(seconds=200),
        heartbeat_at=None,
        lease_acquired_at=T0 + timedelta(seconds=125),
    )
    assert overview.timings is timings  # the page's times are the CLI's
    assert timings(p) == {
        "lease_wait_s": 125.0,
        "queue_wait_s": 15.0,
        "wait_s": 140.0,
        "run_s": 60.0,
        "job_s": 30.0,
        "total_s": 200.0,
    }
    no_lease = Process(**{**p.__dict__, "lease_acquired_at": None})  # compute-stats takes none
    assert timings(no_lease)["lease_wait_s"] is None and timings(no_lease)["queue_wait_s"] == 140.0


def test_the_lease_stamp_is_the_databases_and_a_retry_clears_it(store: Store) -> None:
    p, _ = store.processes.open("lake.sales.orders", "rewrite-files", T0 + timedelta(days=1))
    assert p.lease_acquired_at is None
    store.processes.lease_taken(p.id, attempt=2)  # a superseded attempt's stamp writes nothing
    assert store.processes.get(p.id).lease_acquired_at is None
    store.processes.lease_taken(p.id, attempt=1)
    taken = store.processes.get(p.id).lease_acquired_at
    assert taken is not None and p.created_at is not None and taken >= p.created_at
    store.processes.transition(p.id, S.FAILED, expected=S.PENDING, attempt=1)
    assert store.processes.new_attempt(p.id, expected=S.FAILED).lease_acquired_at is None


def test_the_30_days_roll_up_per_day_and_the_last_24_hours(store: Store) -> None:
    o = overview.overview(store, ttl=0, warm_missing=False)
    today = o["now"].strftime("%Y-%m-%d")
    (day,) = o["daily_30d"]
    assert day == {"day": today, "succeeded": 2, "failed": 2, "files_removed": 531, "bytes_removed": 2000}
    assert o["done_7d"] == o["done_24h"] and o["figures_age_s"] == 0.0
    again = overview.overview(store, warm_missing=False)  # within FIGURES_SECONDS: the same figures, aged
    assert again["daily_30d"] == o["daily_30d"] and again["figures_age_s"] >= 0.0


def test_stale_figures_are_served_while_a_thread_recomputes_them(store: Store) -> None:
    import threading
    import time

    first = overview.overview(store, warm_missing=False)
    key = store.display_url
    at, figures = overview._FIGURES[key]
    overview._FIGURES[key] = (at - overview.FIGURES_SECONDS - 1, figures)  # stale, not too old
    _finish(store, "lake.sales.refunds", "expire-snapshots", T0, S.SUCCESS)
    stale = overview.overview(store, warm_missing=False)
    assert stale["figures_age_s"] > overview.FIGURES_SECONDS and stale["done_24h"] == first["done_24h"]
    for t in threading.enumerate():
        if t.name == "tablemgmt-overview-figures":
            t.join(timeout=60)
    deadline = time.monotonic() + 60
    while overview._FIGURES[key][0] <= at and time.monotonic() < deadline:
        time.sleep(0.05)
    fresh = overview.overview(store, warm_missing=False)
    assert fresh["done_24h"]["succeeded"] == first["done_24h"]["succeeded"] + 1
