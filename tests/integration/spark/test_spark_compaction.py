"""rewrite-files (binpack, sort, zorder), rewrite-deletes and rewrite-manifests on real tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.formats.iceberg.job.compaction import (
    rewrite_deletes,
    rewrite_files,
    rewrite_manifests,
)
from airflow_tablemgmt.spark.errors import ColumnNotFound, InvalidJobSpec
from tests.integration.spark.spark_tables import TableFactory, Tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


pytestmark = pytest.mark.integration


def test_binpack_compacts_small_files_to_one_per_partition(make_table: TableFactory, tables: Tables) -> None:
    table = make_table("id bigint, p string, v string", partitioned_by="p")
    tables.small_files(table, files=12)
    before = tables.content(table)

    summary = rewrite_files(tables.spark, table, {"min-input-files": 2})

    assert summary["before"]["data_files"] >= 20
    assert summary["after"]["data_files"] == 2
    assert summary["after"]["files_per_partition_max"] == 1
    assert summary["rewritten_data_files_count"] == summary["before"]["data_files"]
    assert summary["added_data_files_count"] == 2
    assert summary["strategy"] == "binpack"
    assert tables.content(table) == before


def _overlaps(spark: SparkSession, table: TableIdentifier) -> int:
    """How many pairs of data files have intersecting [min, max] ranges of ``k``."""
    rows = spark.sql(
        f"SELECT readable_metrics.k.lower_bound AS lo, readable_metrics.k.upper_bound AS hi "
        f"FROM {table.quoted}.`data_files`"
    ).collect()
    ranges = [(r["lo"], r["hi"]) for r in rows]
    return sum(1 for i, a in enumerate(ranges) for b in ranges[i + 1 :] if a[0] < b[1] and b[0] < a[1])


def test_sort_rewrite_clusters_files_by_the_sort_column(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    table = make_table("id bigint, k int, payload string")
    # ~8 MB of poorly compressible rows in 4 files whose k ranges all overlap.
    spark.range(160_000).selectExpr(
        "id", "cast(rand(7) * 1000000 AS int) AS k", "sha2(cast(id AS string), 256) AS payload"
    ).repartition(4).writeTo(str(table)).append()
    before = tables.content(table)
    assert _overlaps(spark, table) == 6

    summary = rewrite_files(
        spark,
        table,
        {
            "strategy": "sort",
            "sort-columns": ["k"],
            "rewrite-all": True,
            "target-file-size-bytes": 1024 * 1024,
        },
    )

    assert summary["strategy"] == "sort"
    assert summary["sort_order"] == "`k` ASC NULLS LAST"
    assert summary["after"]["data_files"] >= 3
    assert _overlaps(spark, table) == 0
    assert tables.content(table) == before


def test_zorder_rewrite_keeps_content(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    table = make_table("id bigint, k int, j int")
    for batch in range(3):
        spark.sql(
            f"INSERT INTO {table.quoted} SELECT id, cast(id % 97 AS int), cast(id % 13 AS int) "
            f"FROM range({batch * 100}, {(batch + 1) * 100})"
        )
    before = tables.content(table)

    summary = rewrite_files(
        spark, table, {"strategy": "zorder", "sort-columns": ["k", "j"], "rewrite-all": True}
    )

    assert summary["strategy"] == "zorder"
    assert summary["sort_order"] == "zorder(`k`, `j`)"
    assert summary["rewritten_data_files_count"] == summary["before"]["data_files"] >= 3
    assert summary["after"]["data_files"] == 1
    assert tables.content(table) == before


def test_sort_column_must_exist(make_table: TableFactory, tables: Tables) -> None:
    table = make_table("id bigint, k int")
    with pytest.raises(ColumnNotFound) as err:
        rewrite_files(tables.spark, table, {"strategy": "sort", "sort-columns": ["nope"]})
    message = str(err.value)
    assert "'nope'" in message and "sort-columns" in message and "id, k" in message


def test_invalid_options_are_rejected_with_the_field(make_table: TableFactory, tables: Tables) -> None:
    table = make_table("id bigint")
    with pytest.raises(InvalidJobSpec, match=r"rewrite-files\.min-input-files"):
        rewrite_files(tables.spark, table, {"min-input-files": 0})
    with pytest.raises(InvalidJobSpec, match=r"sort-columns"):
        rewrite_files(tables.spark, table, {"strategy": "sort"})


def test_where_is_passed_as_an_escaped_literal(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    table = make_table("id bigint, name string", partitioned_by="name")
    names = ["o'brien", "plain", "back\\slash"] * 2
    rows = spark.createDataFrame([(i, n) for i, n in enumerate(names)], "id bigint, name string")
    rows.repartition(6).writeTo(str(table)).option("distribution-mode", "none").option(
        "fanout-enabled", "true"
    ).append()  # six tasks of one row each: two files per name
    before = tables.content(table)

    # A quote and a backslash inside the user's predicate reach Iceberg unchanged ...
    summary = rewrite_files(spark, table, {"where": "name = 'o\\'brien'", "min-input-files": 2})
    assert summary["rewritten_data_files_count"] == 2
    summary = rewrite_files(spark, table, {"where": "name = 'back\\\\slash'", "min-input-files": 2})
    assert summary["rewritten_data_files_count"] == 2
    assert tables.content(table) == before

    # ... and text that tries to close the literal stays inside it, failing as a bad predicate.
    with pytest.raises(Exception, match="Cannot parse predicates"):
        rewrite_files(spark, table, {"where": "1=1', strategy => 'sort"})


def test_rewrite_deletes_compacts_position_delete_files(make_table: TableFactory, tables: Tables) -> None:
    spark = tables.spark
    table = make_table(
        "id bigint, v string",
        # partition-scoped deletes: each DELETE adds a delete file instead of replacing the last one
        props={
            "format-version": "2",
            "write.delete.mode": "merge-on-read",
            "write.delete.granularity": "partition",
        },
    )
    spark.range(200).selectExpr("id", "cast(id AS string) AS v").coalesce(1).writeTo(str(table)).append()
    for victim in (3, 50, 120, 199):
        spark.sql(f"DELETE FROM {table.quoted} WHERE id = {victim}")
    before = tables.content(table)
    assert before[0] == 196

    summary = rewrite_deletes(spark, table, {"rewrite-all": True})

    assert summary["before"]["position_delete_files"] == 4
    assert summary["rewritten_delete_files_count"] == 4
    assert summary["after"]["position_delete_files"] == summary["added_delete_files_count"] == 1
    assert tables.content(table) == before


def test_rewrite_manifests_merges_manifests(make_table: TableFactory, tables: Tables) -> None:
    table = make_table("id bigint, p string, v string", partitioned_by="p")
    tables.small_files(table, files=2, commits=5)
    before = tables.content(table)

    summary = rewrite_manifests(tables.spark, table, {})

    assert summary["before"]["manifests"] == 5
    assert summary["rewritten_manifests_count"] == 5
    assert summary["after"]["manifests"] == summary["added_manifests_count"] == 1
    assert tables.content(table) == before
