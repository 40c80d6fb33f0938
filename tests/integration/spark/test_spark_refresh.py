"""The dynamic-table job (``spark/job/refresh.py``) against real Iceberg tables in the shared session.

Each test writes its own source table and creates its own dynamic table from a query over it, then
checks what Spark committed: per-partition row checksums and data files for a partition refresh
(the other partitions must keep both), the whole table for a full one, and the failures the job
reports (bad query, missing partition column, a failed creation, schema drift, bad values).
"""

from __future__ import annotations

import itertools
import json
from datetime import date
from typing import Any

import pytest

from airflow_tablemgmt.core.errors import TableNotFound
from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.spark.errors import (
    InvalidJobSpec,
    InvalidQuery,
    QueryFailed,
    QueryNotAllowed,
    SchemaDrift,
    TableExists,
)
from airflow_tablemgmt.spark.job.main import run
from airflow_tablemgmt.spark.job.refresh import CREATION_PROPERTY, refresh
from tests.integration.spark.conftest import CATALOG, NAMESPACE
from tests.integration.spark.spark_tables import TableFactory, Tables

pytestmark = pytest.mark.integration

_names = itertools.count()

DAILY = "SELECT day, count(*) AS n, sum(id) AS total FROM {src} GROUP BY day"


def dynamic_table(prefix: str = "refresh_dt") -> TableIdentifier:
    return TableIdentifier(CATALOG, NAMESPACE, f"{prefix}_{next(_names)}")


def events(make_table: TableFactory, tables: Tables, rows: str) -> TableIdentifier:
    """A source ``(id bigint, day date, v string)`` holding ``rows`` (a VALUES list)."""
    src = make_table("id bigint, day date, v string", prefix="refresh_src")
    tables.spark.sql(f"INSERT INTO {src.quoted} VALUES {rows}")
    return src


def partition_state(tables: Tables, table: TableIdentifier) -> dict[str, tuple[int, int, tuple[str, ...]]]:
    """Per ``day`` partition: (rows, checksum of the rows, its data files)."""
    spark = tables.spark
    sums = spark.sql(
        f"SELECT cast(day AS string) AS day, count(*) AS n, sum(cast(hash(*) AS bigint)) AS h "
        f"FROM {table.quoted} GROUP BY day"
    ).collect()
    files = spark.sql(
        f"SELECT cast(`partition`.day AS string) AS day, file_path FROM {table.quoted}.`data_files`"
    )
    by_day: dict[str, list[str]] = {}
    for r in files.collect():
        by_day.setdefault(r["day"], []).append(r["file_path"])
    return {r["day"]: (int(r["n"]), int(r["h"]), tuple(sorted(by_day.get(r["day"], [])))) for r in sums}


def rows(tables: Tables, table: TableIdentifier, order: str = "1") -> list[tuple[Any, ...]]:
    return [tuple(r) for r in tables.spark.sql(f"SELECT * FROM {table.quoted} ORDER BY {order}").collect()]


def create(tables: Tables, table: TableIdentifier, query: str, **options: Any) -> dict[str, Any]:
    return refresh(tables.spark, table, {"mode": "create", "query": query, **options})


def test_partition_refresh_rewrites_only_its_partition(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    src = events(
        make_table,
        tables,
        "(1, DATE'2026-03-01', 'a'), (2, DATE'2026-03-02', 'b'), (3, DATE'2026-03-03', 'c')",
    )
    dt = dynamic_table()
    created = create(tables, dt, DAILY.format(src=src), partitioned_by=["day"])
    assert created["created"] is True
    assert created["refresh_action"] == "FULL"
    assert created["rows_written"] == 3
    assert created["source_tables"] == [str(src)]
    assert [f["name"] for f in created["schema"]] == ["day", "n", "total"]
    assert created["partitions_written"] == [{"day": f"2026-03-0{d}"} for d in (1, 2, 3)]
    before = partition_state(tables, dt)
    assert set(before) == {"2026-03-01", "2026-03-02", "2026-03-03"}

    # New rows for two days, and day 3 loses its rows; only day 2 is refreshed.
    spark.sql(f"INSERT INTO {src.quoted} VALUES (10, DATE'2026-03-01', 'x'), (20, DATE'2026-03-02', 'y')")
    spark.sql(f"DELETE FROM {src.quoted} WHERE day = DATE'2026-03-03'")
    src_snapshot = tables.spark.sql(f"SELECT snapshot_id FROM {src.quoted}.refs WHERE name = 'main'").first()[
        0
    ]

    summary = refresh(
        spark,
        dt,
        {
            "mode": "refresh",
            "query": DAILY.format(src=src),
            "partitioned_by": ["day"],
            "partition_values": {"day": "2026-03-02"},
            "expected_schema": created["schema"],
        },
    )

    assert summary["refresh_action"] == "PARTITION"
    assert summary["partitions_written"] == [{"day": "2026-03-02"}]
    assert summary["rows_written"] == 1
    assert summary["source_snapshots"] == {str(src): src_snapshot}
    after = partition_state(tables, dt)
    assert after["2026-03-01"] == before["2026-03-01"]  # same rows, same checksum, same files
    assert after["2026-03-03"] == before["2026-03-03"]
    assert after["2026-03-02"][0] == 1 and after["2026-03-02"][2] != before["2026-03-02"][2]
    # Day 1 also has a new source row, but was not refreshed: it keeps its old figures.
    assert rows(tables, dt) == [(date(2026, 3, 1), 1, 1), (date(2026, 3, 2), 2, 22), (date(2026, 3, 3), 1, 3)]

    # A partition the query no longer yields rows for is emptied, not kept stale.
    emptied = refresh(
        spark,
        dt,
        {
            "query": DAILY.format(src=src),
            "partitioned_by": ["day"],
            "partition_values": {"day": "2026-03-03"},
        },
    )
    assert emptied["rows_written"] == 0
    remaining = partition_state(tables, dt)
    assert set(remaining) == {"2026-03-01", "2026-03-02"}
    assert remaining["2026-03-01"] == before["2026-03-01"]


def test_full_refresh_overwrites_the_whole_table_in_one_commit(
    make_table: TableFactory, tables: Tables
) -> None:
    spark = tables.spark
    src = events(make_table, tables, "(1, DATE'2026-03-01', 'a'), (2, DATE'2026-03-02', 'b')")
    query = f"SELECT id, upper(v) AS v FROM {src.quoted} WHERE id < 100"
    dt = dynamic_table()
    create(tables, dt, query)
    snapshots_before = spark.sql(f"SELECT count(*) FROM {dt.quoted}.snapshots").first()[0]
    spark.sql(f"DELETE FROM {src.quoted} WHERE id = 1")
    spark.sql(f"INSERT INTO {src.quoted} VALUES (3, DATE'2026-03-03', 'c'), (300, DATE'2026-03-03', 'z')")

    summary = refresh(spark, dt, {"query": query})

    assert summary["refresh_action"] == "FULL"
    assert summary["partitions_written"] == []
    assert summary["rows_written"] == 2
    assert rows(tables, dt) == [(2, "B"), (3, "C")]
    snaps = spark.sql(
        f"SELECT snapshot_id, operation FROM {dt.quoted}.snapshots ORDER BY committed_at"
    ).collect()
    assert len(snaps) == snapshots_before + 1
    assert (snaps[-1]["snapshot_id"], snaps[-1]["operation"]) == (summary["snapshot_id"], "overwrite")


def test_analyse_reports_schema_and_sources_and_creates_nothing(
    make_table: TableFactory, tables: Tables
) -> None:
    a = events(make_table, tables, "(1, DATE'2026-03-01', 'a')")
    b = events(make_table, tables, "(2, DATE'2026-03-02', 'b')")
    dt = dynamic_table()
    query = f"WITH x AS (SELECT id, day FROM {a}) SELECT day, id, (SELECT max(id) FROM {b}) AS top FROM x"
    out = refresh(tables.spark, dt, {"mode": "analyse", "query": query, "partitioned_by": ["day"]})

    assert out["source_tables"] == sorted([str(a), str(b)])
    assert out["schema"] == [
        {"name": "day", "type": "date", "nullable": True},
        {"name": "id", "type": "bigint", "nullable": True},
        {"name": "top", "type": "bigint", "nullable": True},
    ]
    assert not tables.spark.catalog.tableExists(str(dt))
    # A query without a source table has none to record (its NO_DATA check always refreshes).
    constant = refresh(tables.spark, dt, {"mode": "analyse", "query": "SELECT 1 AS x, current_date() AS d"})
    assert constant["source_tables"] == []


def test_analyse_errors_name_the_problem(make_table: TableFactory, tables: Tables) -> None:
    src = events(make_table, tables, "(1, DATE'2026-03-01', 'a')")
    dt = dynamic_table()

    def analyse(query: str, **options: Any) -> None:
        refresh(tables.spark, dt, {"mode": "analyse", "query": query, **options})

    with pytest.raises(InvalidQuery, match=r"query: .*TABLE_OR_VIEW_NOT_FOUND.*`no_such_table`"):
        analyse(f"SELECT * FROM {CATALOG}.{NAMESPACE}.no_such_table")
    with pytest.raises(InvalidQuery, match=r"query: .*UNRESOLVED_COLUMN.*`nope`"):
        analyse(f"SELECT nope FROM {src}")
    with pytest.raises(
        InvalidQuery, match=r"query: not one Spark SQL SELECT statement: .*PARSE_SYNTAX_ERROR"
    ):
        analyse("SELEC id FROM x")
    # A second statement or a command is an error, never run.
    with pytest.raises(InvalidQuery, match="PARSE_SYNTAX_ERROR.*near 'DROP'"):
        analyse(f"SELECT 1; DROP TABLE {src}")
    with pytest.raises(QueryNotAllowed, match="Spark reads it as DropTable, a command, not a query"):
        analyse(f"DROP TABLE {src}")
    assert tables.spark.catalog.tableExists(str(src))
    with pytest.raises(
        InvalidQuery,
        match=r"partitioned-by: column 'region' is not produced by the query; its columns: id, day, v",
    ):
        analyse(f"SELECT * FROM {src}", partitioned_by=["region"])
    with pytest.raises(
        InvalidJobSpec, match=r"refresh.mode: 'merge' is not a mode; allowed: analyse, create, refresh"
    ):
        analyse(f"SELECT * FROM {src}", mode="merge")


def test_failed_creation_leaves_nothing_behind(make_table: TableFactory, tables: Tables) -> None:
    src = events(make_table, tables, "(1, DATE'2026-03-01', 'a')")
    dt = dynamic_table()
    # Analyses fine; fails only when the first refresh runs it.
    query = f"SELECT id, day, if(id > 0, raise_error('boom at refresh'), v) AS v FROM {src}"

    # Spark's text (what the query computed) stays in the log; the error names only its class.
    with pytest.raises(QueryFailed, match=r"Spark failed while running it \(SparkException\)") as failed:
        create(tables, dt, query, partitioned_by=["day"])
    assert "boom" not in str(failed.value)

    assert not tables.spark.catalog.tableExists(str(dt))
    assert not tables.dir(dt).exists() or not any(tables.dir(dt).rglob("*.parquet"))

    # A table that is already there is never replaced by a create.
    create(tables, dt, f"SELECT id, v FROM {src}")
    with pytest.raises(TableExists, match=f"table {dt} already exists"):
        create(tables, dt, f"SELECT id FROM {src}")
    assert rows(tables, dt) == [(1, "a")]


def test_schema_drift_is_rejected_unless_recreate(make_table: TableFactory, tables: Tables) -> None:
    src = events(make_table, tables, "(1, DATE'2026-03-01', 'a'), (2, DATE'2026-03-02', 'b')")
    dt = dynamic_table()
    created = create(tables, dt, f"SELECT day, count(*) AS n FROM {src} GROUP BY day", partitioned_by=["day"])
    altered = f"SELECT day, cast(count(*) AS int) AS n, max(v) AS last_v FROM {src} GROUP BY day"
    options = {"query": altered, "partitioned_by": ["day"], "expected_schema": created["schema"]}

    with pytest.raises(
        SchemaDrift, match=r"column 'last_v' added \(string\); column 'n': bigint -> int.*recreate"
    ):
        refresh(tables.spark, dt, options)
    assert [c for c in tables.spark.table(dt.quoted).columns] == ["day", "n"]

    # As alter --recreate sends it: the stored schema is already the new query's; the table's is not.
    new_schema = refresh(tables.spark, dt, {**options, "mode": "analyse"})["schema"]
    summary = refresh(tables.spark, dt, {**options, "recreate": True, "expected_schema": new_schema})
    assert summary["recreated"] is True
    assert tables.spark.table(dt.quoted).columns == ["day", "n", "last_v"]
    assert rows(tables, dt) == [(date(2026, 3, 1), 1, "a"), (date(2026, 3, 2), 1, "b")]
    # Same schema again: a plain refresh, nothing recreated.
    again = refresh(tables.spark, dt, {**options, "expected_schema": summary["schema"]})
    assert again["recreated"] is False
    # Columns in another order are no drift: the overwrite matches them by name.
    reordered = f"SELECT max(v) AS last_v, cast(count(*) AS int) AS n, day FROM {src} GROUP BY day"
    moved = refresh(tables.spark, dt, {**options, "query": reordered, "expected_schema": summary["schema"]})
    assert moved["recreated"] is False
    assert rows(tables, dt) == [(date(2026, 3, 1), 1, "a"), (date(2026, 3, 2), 1, "b")]


def test_quoted_identifiers_and_values_bound_as_literals(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    tricky = "it's a \\' back\\slash"
    src = make_table("`order` string, `select` int, id bigint", prefix="refresh_src")
    spark.createDataFrame(
        [(tricky, 7, 1), ("plain", 7, 2), (tricky, 8, 3)], "`order` string, `select` int, id bigint"
    ).writeTo(str(src)).append()
    dt = TableIdentifier(CATALOG, NAMESPACE, f"select_dt_{next(_names)}")
    query = f"SELECT `order`, `select`, count(*) AS n FROM {src.quoted} GROUP BY `order`, `select`"
    create(tables, dt, query, partitioned_by=["order", "select"])
    spark.sql(f"INSERT INTO {src.quoted} VALUES ('plain', 7, 4), (?, 7, 5)", args=[tricky])

    summary = refresh(
        spark,
        dt,
        {
            "query": query,
            "partitioned_by": ["order", "select"],
            "partition_values": {"order": tricky, "SELECT": "7"},
        },
    )

    assert summary["partitions_written"] == [{"order": tricky, "select": "7"}]
    assert rows(tables, dt, "`order`, `select`") == [
        ("it's a \\' back\\slash", 7, 2),
        (tricky, 8, 1),
        ("plain", 7, 1),
    ]

    base = {"query": query, "partitioned_by": ["order", "select"]}
    with pytest.raises(InvalidJobSpec, match=r"'abc' is not a valid int for column 'select'"):
        refresh(spark, dt, {**base, "partition_values": {"select": "abc"}})
    with pytest.raises(
        InvalidJobSpec, match=r"unknown partition key\(s\) 'region'; partition keys: order, select"
    ):
        refresh(spark, dt, {**base, "partition_values": {"region": "eu"}})
    with pytest.raises(TableNotFound, match="does not exist"):
        refresh(spark, dynamic_table("refresh_missing"), base)


def test_job_main_runs_create_before_the_table_exists(
    make_table: TableFactory, tables: Tables, catalog: CatalogSpec
) -> None:
    src = events(make_table, tables, "(1, DATE'2026-03-01', 'a')")
    dt = dynamic_table()
    job = JobSpec(
        table={"catalog": dt.catalog, "namespace": dt.namespace, "name": dt.name},
        catalog=catalog.model_dump(mode="json"),
        action="refresh",
        options={"mode": "create", "query": f"SELECT id, v FROM {src}", "partitioned_by": []},
    )
    code, line = run(job, spark=tables.spark)
    result = json.loads(line)
    assert (code, result["status"]) == (0, "SUCCESS"), result
    assert result["summary"]["rows_written"] == 1
    assert result["summary"]["source_snapshots"] == {
        str(src): tables.spark.sql(f"SELECT snapshot_id FROM {src.quoted}.refs WHERE name = 'main'").first()[
            0
        ]
    }


def test_drop_mode_purges_the_table(make_table: TableFactory, tables: Tables) -> None:
    src = events(make_table, tables, "(1, DATE'2026-03-01', 'a')")
    dt = dynamic_table()
    create(tables, dt, f"SELECT id, day FROM {src}", partitioned_by=["day"])
    assert any(tables.dir(dt).rglob("*.parquet"))

    assert refresh(tables.spark, dt, {"mode": "drop"}) == {"dropped": True, "purged": True}
    assert not tables.spark.catalog.tableExists(str(dt))
    assert not tables.dir(dt).exists() or not any(tables.dir(dt).rglob("*.parquet"))
    # Dropping what is not there is not an error (a retried purge).
    assert refresh(tables.spark, dt, {"mode": "drop"}) == {"dropped": False, "purged": True}


def test_dynamic_options_apply_to_this_refresh_only(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    src = events(make_table, tables, "(1, DATE'2026-03-01', 'a'), (2, DATE'2026-03-02', 'b')")
    dt = dynamic_table()
    query = f"SELECT id, day FROM {src}"
    create(tables, dt, query, partitioned_by=["day"])
    ansi = spark.conf.get("spark.sql.ansi.enabled")
    flipped = "false" if ansi == "true" else "true"

    summary = refresh(
        spark,
        dt,
        {
            "query": query,
            "partitioned_by": ["day"],
            "partition_values": {"day": "2026-03-02"},
            "dynamic_options": {"write-format": "avro", "spark.sql.ansi.enabled": flipped},
        },
    )

    assert summary["dynamic_options"] == {"write-format": "avro", "spark.sql.ansi.enabled": flipped}
    formats = spark.sql(
        f"SELECT cast(`partition`.day AS string) AS day, file_format FROM {dt.quoted}.`data_files` ORDER BY 1"
    ).collect()
    assert [(r["day"], r["file_format"]) for r in formats] == [
        ("2026-03-01", "PARQUET"),
        ("2026-03-02", "AVRO"),
    ]
    assert spark.conf.get("spark.sql.ansi.enabled") == ansi  # restored after the refresh
    with pytest.raises(
        InvalidJobSpec,
        match=r"refresh.dynamic_options.write-format: must be a string, number or boolean, got \['avro'\]",
    ):
        refresh(
            spark,
            dt,
            {"query": query, "partitioned_by": ["day"], "dynamic_options": {"write-format": ["avro"]}},
        )


def test_a_retried_creation_replaces_only_its_own_leftover(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    src = events(make_table, tables, "(1, DATE'2026-03-01', 'a')")
    query = f"SELECT id, v FROM {src}"
    # A creation killed between its CREATE and its first refresh leaves an empty table marked 'creating'.
    dt = dynamic_table()
    spark.sql(
        f"CREATE TABLE {dt.quoted} (id bigint) USING iceberg TBLPROPERTIES ('{CREATION_PROPERTY}'='creating')"
    )

    summary = create(tables, dt, query)

    assert summary["created"] is True and rows(tables, dt) == [(1, "a")]
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {dt.quoted}").collect()}
    assert props[CREATION_PROPERTY] == "created"
    # A table whose creation finished (or anybody else's table) is never replaced.
    with pytest.raises(TableExists, match=f"table {dt} already exists"):
        create(tables, dt, query)
    assert rows(tables, dt) == [(1, "a")]
