"""Refresh modes (issue 41) on real Spark + Iceberg (the shared in-process session; the job runs through
``job_main.run`` as spark-submit's driver runs it): the analysed plan's translation decides as the pure
rules say for the query shapes Spark really produces, ``dt create`` with ``INCREMENTAL`` on a window query
is refused naming the window function and leaves nothing behind, and ``AUTO`` on a GROUP BY query records
the mode and the reason on each refresh and on the table; its refresh after an append is INCREMENTAL, rewrites
the one partition the change lands in and equals its query, also after a refresh stopped between the state
table's commit and the table's and after a copy-on-write DELETE (read from Iceberg's changelog, subtracted;
the random property test over every shape: test_incremental_property.py, on demand); the same query not
partitioned keeps its state as a log of partials (each refresh one append of the changed groups')."""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from airflow_tablemgmt.core.dynamic.incremental import APPEND, JOIN, MERGE_BY_KEY, WHEN_APPENDS
from airflow_tablemgmt.core.errors import JobFailed
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, Owner
from airflow_tablemgmt.services import dynamic
from airflow_tablemgmt.services.errors import InvalidInput
from airflow_tablemgmt.spark.job import incremental_merge
from airflow_tablemgmt.spark.job.refresh_plan import refresh_mode
from airflow_tablemgmt.spark.job.refresh_query import query_frame
from airflow_tablemgmt.store import Store
from tests.integration.spark.test_dynamic_lifecycle import SessionJobs, insert, source

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration
# Unique per run: the session's warehouse is shared by every module of this pytest process, whose own
# counters name tables daily_<n> too.
_names = (uuid.uuid4().hex[:8] for _ in itertools.count())


@pytest.fixture
def store(tmp_path: Path, catalog: CatalogSpec) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'tablemgmt.db'}")
    s.catalogs.upsert(catalog, Owner.STORE)
    return s


@pytest.fixture(scope="module")
def tables(spark: SparkSession) -> tuple[str, str]:
    orders = source(spark, [(1, "2026-02-01"), (2, "2026-02-02")])
    days = source(spark, [(1, "2026-02-01")])
    return orders, days


SHAPES = [
    ("SELECT id, upper(day) AS d FROM {o} WHERE id > 0", APPEND, None),
    (
        "SELECT day, count(*) AS n, sum(id) AS s, avg(id) AS a, max(id) AS m FROM {o} GROUP BY day",
        MERGE_BY_KEY,
        None,
    ),
    ("SELECT DISTINCT day FROM {o}", MERGE_BY_KEY, None),
    ("SELECT o.id, d.day FROM {o} o JOIN {d} d ON o.id = d.id", JOIN, None),
    ("SELECT id FROM {o} UNION ALL SELECT id FROM {d}", APPEND, None),
    (
        "WITH x AS (SELECT * FROM {o} WHERE id > 0) SELECT day, count(*) AS n FROM x GROUP BY day",
        MERGE_BY_KEY,
        None,
    ),
    ("SELECT day, count(DISTINCT id) AS n FROM {o} GROUP BY day", None, "count(DISTINCT …)"),
    ("SELECT day, collect_list(id) AS ids FROM {o} GROUP BY day", None, "the aggregate collect_list"),
    ("SELECT o.id, d.day FROM {o} o LEFT JOIN {d} d ON o.id = d.id", None, "a LEFT OUTER join"),
    (
        "SELECT id, row_number() OVER (PARTITION BY day ORDER BY id) AS r FROM {o}",
        None,
        "a window function (row_number)",
    ),
    ("SELECT id, rand() AS r FROM {o}", None, "the non-deterministic function rand"),
    ("SELECT id FROM {o} WHERE day < current_date()", None, "the function current_date"),
    ("SELECT id FROM {o} LIMIT 5", None, "LIMIT"),
    ("SELECT id FROM {o} UNION SELECT id FROM {d}", None, "UNION (without ALL)"),
    ("SELECT id FROM {o} EXCEPT SELECT id FROM {d}", None, "EXCEPT"),
    ("SELECT id FROM {o} WHERE id IN (SELECT id FROM {d})", None, "a subquery inside an expression"),
    (
        "SELECT day, n FROM (SELECT day, count(*) AS n FROM {o} GROUP BY day) GROUP BY day, n",
        None,
        "an aggregate over another",
    ),
]


@pytest.mark.parametrize(("query", "strategy", "construct"), SHAPES, ids=[s[0][:40] for s in SHAPES])
def test_the_analysed_plan_decides_as_the_rules_say(
    spark: SparkSession, tables: tuple[str, str], query: str, strategy: str | None, construct: str | None
) -> None:
    orders, days = tables
    df = query_frame(spark, query.format(o=orders, d=days), catalogs=frozenset({"lake"}))
    analysis, mode = refresh_mode(df, "AUTO", "lake.db.t")
    assert (analysis.strategy, mode.mode) == (strategy, "FULL" if construct else "INCREMENTAL"), analysis
    if construct is None:
        assert analysis.incremental and mode.reason == f"{strategy}: {WHEN_APPENDS}"
    else:
        assert analysis.construct is not None and analysis.construct.startswith(construct), analysis
        assert mode.reason == f"the query cannot be maintained incrementally: it uses {analysis.construct}"


def equal(spark: SparkSession, table: str, query: str) -> bool:
    """The dynamic table equals a full recomputation of its query (EXCEPT ALL both ways is empty)."""
    extra = spark.sql(f"SELECT * FROM {table} EXCEPT ALL SELECT * FROM ({query})").count()
    return extra + spark.sql(f"SELECT * FROM ({query}) EXCEPT ALL SELECT * FROM {table}").count() == 0


def state_log(spark: SparkSession, table: str) -> tuple[str, int]:
    """The state table's last commit (its operation) and how many rows it holds."""
    state = f"{table}__tms_state"
    last = spark.sql(f"SELECT operation FROM {state}.snapshots ORDER BY committed_at DESC LIMIT 1").first()
    assert last is not None
    return str(last["operation"]), spark.table(state).count()


def test_incremental_on_a_window_query_is_refused_naming_it_and_auto_records_mode_and_reason(
    spark: SparkSession, store: Store, tables: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    orders, _ = tables
    jobs = SessionJobs(spark)
    ranked = f"lake.db.ranked_{next(_names)}"
    window = f"SELECT id, row_number() OVER (PARTITION BY day ORDER BY id) AS r FROM {orders}"
    definition = {"identifier": ranked, "query": window, "freshness": "1 HOUR", "refresh-mode": "INCREMENTAL"}
    with pytest.raises(Exception) as refused:
        dynamic.create(store, definition, jobs)
    assert "refresh-mode: INCREMENTAL is not possible for the query of" in str(refused.value)
    assert "it uses a window function (row_number)" in str(refused.value)
    assert store.dynamic.find(ranked) is None and not spark.catalog.tableExists(ranked)
    [failed] = dynamic.history(store, ranked)
    assert failed.status == ProcessStatus.FAILED and "window function (row_number)" in (
        failed.failure_reason or ""
    )

    daily = f"lake.db.daily_{next(_names)}"
    group_by = f"SELECT day, count(*) AS n, avg(id) AS a FROM {orders} GROUP BY day"
    definition = {"identifier": daily, "query": group_by, "freshness": "1 HOUR", "partitioned-by": ["day"]}
    dt, created = dynamic.create(store, definition, jobs)
    assert jobs.jobs[-1].options["refresh_mode"] == "AUTO"
    first = dynamic.history_row(created)
    assert (first["trigger"], first["refresh_mode"]) == ("CREATION", "FULL")
    assert (
        first["refresh_mode_reason"]
        == "no previous state: the table's first refresh computes the whole query"
    )
    view = dynamic.get(store, daily).refresh_mode
    assert (view["declared"], view["mode"], view["reason"]) == (
        "AUTO",
        "INCREMENTAL",
        f"MERGE_BY_KEY: {WHEN_APPENDS}",
    )
    assert view["incremental"]["strategy"] == MERGE_BY_KEY
    assert view["incremental"]["reason"].startswith("GROUP BY day with count, avg of ")

    # Beside it, the same aggregates not partitioned: its state (behind avg) is a log of partials.
    overall = f"lake.db.overall_{next(_names)}"
    dynamic.create(store, {"identifier": overall, "query": group_by, "freshness": "1 HOUR"}, jobs)

    insert(spark, orders, [(9, "2026-02-03")])
    refreshed = dynamic.refresh_now(store, daily, runner=jobs)
    row = dynamic.history_row(refreshed)
    # The change is read and merged: one append snapshot of orders since the creation read it.
    assert (row["trigger"], row["refresh_action"], row["refresh_mode"]) == (
        "MANUAL",
        "INCREMENTAL",
        "INCREMENTAL",
    )
    assert row["refresh_mode_reason"].startswith(f"MERGE_BY_KEY: {orders}: 1 append snapshot(s) since "), row
    assert row["refresh_mode_reason"].endswith(": 1 new rows"), row  # the append's own added-records
    assert row["rows_written"] == 1  # the one changed group
    assert row["partitions_written"] == [{"day": "2026-02-03"}]  # the state's and the table's partition only
    assert equal(spark, daily, group_by)
    # Not partitioned: the change's partials are appended to the state (one row per changed group), not
    # the state rewritten; the table's rows are the state's summed by key.
    row = dynamic.history_row(dynamic.refresh_now(store, overall, runner=jobs))
    assert (row["refresh_mode"], row["rows_written"]) == ("INCREMENTAL", 1), row
    assert state_log(spark, overall) == ("append", 3)  # the two groups of the creation, then the new one
    assert equal(spark, overall, group_by)

    # A refresh stopped between the state table's commit (avg's sums and counts) and the table's: the next
    # one rolls the state back to the recorded snapshot and reads the same change again.
    insert(spark, orders, [(10, "2026-02-03"), (4, "2026-02-01")])
    real_merge = incremental_merge.write_groups

    def stop_before_the_table(target: Any, rows: Any, **kw: Any) -> None:
        if str(target) == daily:
            raise RuntimeError("killed between the two commits")
        real_merge(target, rows, **kw)

    with monkeypatch.context() as killed:
        killed.setattr(incremental_merge, "write_groups", stop_before_the_table)
        with pytest.raises(JobFailed):
            dynamic.refresh_now(
                store, daily, runner=jobs, is_periodic=True, schedule_time="2026-03-01 01:00:00"
            )
    again = dynamic.refresh_now(
        store, daily, runner=jobs, is_periodic=True, schedule_time="2026-03-01 02:00:00"
    )
    assert (again.summary or {})["refresh_mode"] == "INCREMENTAL", again.summary
    assert equal(spark, daily, group_by)

    # A copy-on-write DELETE of a source: the rows it removed are read from Iceberg's changelog and their
    # partials subtracted; the group whose rows all went disappears, with its (now empty) partition.
    spark.sql(f"DELETE FROM {orders} WHERE day = '2026-02-03' OR id = 4")
    removed = dynamic.refresh_now(
        store, daily, runner=jobs, is_periodic=True, schedule_time="2026-03-01 03:00:00"
    )
    row = dynamic.history_row(removed)
    assert row["refresh_mode"] == "INCREMENTAL", row
    assert "1 delete snapshot(s)" in row["refresh_mode_reason"], row
    assert "read from Iceberg's changelog" in row["refresh_mode_reason"], row
    assert sorted(p["day"] for p in row["partitions_written"]) == ["2026-02-01", "2026-02-03"], row
    assert equal(spark, daily, group_by)
    assert spark.sql(f"SELECT * FROM {daily} WHERE day = '2026-02-03'").count() == 0
    # The log takes removals too: the appended and deleted rows' partials netted per group; 2026-02-01's
    # (id 4 appended, then deleted) add up to nothing and are left out, 2026-02-03's go below zero rows.
    row = dynamic.history_row(
        dynamic.refresh_now(
            store, overall, runner=jobs, is_periodic=True, schedule_time="2026-03-01 03:00:00"
        )
    )
    assert (row["refresh_mode"], row["rows_written"]) == ("INCREMENTAL", 1), row
    assert state_log(spark, overall) == ("append", 4)
    assert equal(spark, overall, group_by)
    with pytest.raises(InvalidInput, match="refresh-mode: 'SOMETIMES' is not a refresh mode"):
        dynamic.alter(store, daily, refresh_mode="SOMETIMES")
    dynamic.alter(store, daily, refresh_mode="INCREMENTAL")  # the recorded analysis allows it
    assert dynamic.get(store, daily).refresh_mode["declared"] == "INCREMENTAL"
