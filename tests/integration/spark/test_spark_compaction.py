"""rewrite-files (binpack, sort, zorder), rewrite-deletes and rewrite-manifests on real tables; on a format v3
table, deletion vectors: health counts them apart, rewrite-deletes converts or says why not, rewrite-files
applies them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.formats.iceberg.job.compaction import (
    rewrite_deletes,
    rewrite_files,
    rewrite_manifests,
)
from airflow_tablemgmt.formats.iceberg.views import read_files, read_snapshots
from airflow_tablemgmt.metadata.files import FileStats, read_file_stats
from airflow_tablemgmt.metadata.health import decide, score
from airflow_tablemgmt.spark.errors import ColumnNotFound, InvalidJobSpec
from airflow_tablemgmt.spark.job.metrics import _metrics_from_metadata_tables
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


# ---- Iceberg format v3: deletion vectors (issue 39, item 5) --------------------------------------------

V3_MOR = {"format-version": "3", "write.delete.mode": "merge-on-read"}


def _two_partitions(tables: Tables, table: TableIdentifier) -> None:
    """100 rows in partition 'a' (ids 0-99) and 100 in 'b' (100-199): one data file each."""
    tables.spark.range(200).selectExpr(
        "id", "CASE WHEN id < 100 THEN 'a' ELSE 'b' END AS p", "cast(id AS string) AS v"
    ).writeTo(str(table)).append()


def _health(catalog: CatalogSpec, table: TableIdentifier) -> FileStats:
    return read_file_stats(
        catalog, TableSpec(catalog=table.catalog, namespace=table.namespace, name=table.name)
    )


def test_v3_deletes_are_deletion_vectors_counted_apart_and_applied_by_rewrite_files(
    make_table: TableFactory, tables: Tables, catalog: CatalogSpec
) -> None:
    spark = tables.spark
    table = make_table("id bigint, p string, v string", partitioned_by="p", props=V3_MOR)
    _two_partitions(tables, table)
    spark.sql(f"DELETE FROM {table.quoted} WHERE id < 40")
    spark.sql(f"DELETE FROM {table.quoted} WHERE id IN (150, 151)")
    spark.sql(f"DELETE FROM {table.quoted} WHERE id = 45")  # merged into partition a's vector
    live = tables.content(table)
    assert live[0] == 157

    # Health, read without a JVM: one vector per data file with deletes, no v2 delete file.
    stats = _health(catalog, table)
    assert stats.format_version == 3
    assert (stats.deletion_vectors, stats.position_delete_files, stats.delete_files) == (2, 0, 2)
    assert stats.dv_deleted_rows == stats.deleted_rows == 43
    assert stats.dv_files >= 1 and 0 < stats.dv_bytes <= stats.delete_bytes
    assert stats.deletes_in_words == "2 deletion vectors"
    # 43 of 200 rows deleted, all by vectors: the finding names rewrite-files, and the gate would not start
    # rewrite-deletes (nothing to convert) but would start rewrite-files.
    (finding,) = [f for f in score(stats).findings if f.kind == "delete_files"]
    assert finding.action == "rewrite-files"
    assert finding.reason == "2 deletion vectors mark 43 of 200 rows deleted (22%)"
    assert not decide(stats, "rewrite-deletes").pays and decide(stats, "rewrite-files").pays
    # The Files and Snapshots views (the page's tabs, REST) show them apart too.
    spec = TableSpec(catalog=table.catalog, namespace=table.namespace, name=table.name)
    view = read_files(catalog, spec)
    assert (view["totals"]["deletion_vectors"], view["totals"]["position_delete_files"]) == (2, 0)
    assert view["totals"]["dv_deleted_rows"] == view["totals"]["deleted_rows"] == 43
    assert {p["partition"]: p["deletion_vectors"] for p in view["partitions"]} == {"p=a": 1, "p=b": 1}
    timeline = read_snapshots(catalog, spec)["snapshots"]
    assert [(s["added_dvs"], s["removed_dvs"]) for s in timeline] == [(0, 0), (1, 0), (1, 0), (1, 1)]
    # The job's fallback figures (Spark's metadata tables) count them the same way.
    fallback = _metrics_from_metadata_tables(spark, table)
    assert (fallback["deletion_vectors"], fallback["position_delete_files"]) == (2, 0)

    # rewrite-deletes has nothing to convert: it says so, and commits nothing.
    deletes = rewrite_deletes(spark, table, {"rewrite-all": True})
    assert deletes["format_version"] == 3
    assert deletes["outcome"].startswith("nothing to do: the table's deletes are 2 deletion vectors")
    assert deletes["converted_position_delete_files"] == 0
    assert deletes["after"]["current_snapshot_id"] == deletes["before"]["current_snapshot_id"]

    # rewrite-files applies the vector of the file past delete-ratio-threshold (41 % of partition a's rows,
    # 2 % of b's), though min-input-files alone would rewrite nothing; the vector goes with its file.
    files = rewrite_files(
        spark,
        table,
        {"delete-ratio-threshold": 0.3, "remove-dangling-deletes": True, "min-input-files": 100},
    )
    assert files["rewritten_data_files_count"] == 1 and files["added_data_files_count"] == 1
    assert files["removed_delete_files_count"] == 1
    assert (files["before"]["deletion_vectors"], files["after"]["deletion_vectors"]) == (2, 1)
    assert (files["before"]["physical_rows"], files["after"]["physical_rows"]) == (200, 159)
    assert tables.content(table) == live
    after = _health(catalog, table)
    assert (after.deletion_vectors, after.dv_deleted_rows, after.records) == (1, 2, 159)


def test_rewrite_deletes_converts_an_upgraded_tables_position_deletes_into_deletion_vectors(
    make_table: TableFactory, tables: Tables, catalog: CatalogSpec
) -> None:
    spark = tables.spark
    table = make_table(
        "id bigint, p string, v string",
        partitioned_by="p",
        # partition-scoped deletes (Iceberg 1.10's default): each DELETE adds a file per partition it touches
        props={
            "format-version": "2",
            "write.delete.mode": "merge-on-read",
            "write.delete.granularity": "partition",
        },
    )
    _two_partitions(tables, table)
    for victims in ("id < 10", "id BETWEEN 10 AND 29", "id BETWEEN 30 AND 39", "id = 150", "id = 151"):
        spark.sql(f"DELETE FROM {table.quoted} WHERE {victims}")
    spark.sql(f"ALTER TABLE {table.quoted} SET TBLPROPERTIES ('format-version' = '3')")
    live = tables.content(table)

    stats = _health(catalog, table)
    assert stats.format_version == 3
    assert (stats.position_delete_files, stats.deletion_vectors, stats.deleted_rows) == (5, 0, 42)
    assert stats.deletes_in_words == "5 position delete files"

    # rewrite-files rewrites partition a's data file; its three delete files then apply to no live data
    # file, and remove-dangling-deletes removes them in the same run.
    files = rewrite_files(
        spark, table, {"where": "p = 'a'", "rewrite-all": True, "remove-dangling-deletes": True}
    )
    assert files["rewritten_data_files_count"] == 1
    assert files["removed_delete_files_count"] == 3
    assert (files["before"]["position_delete_files"], files["after"]["position_delete_files"]) == (5, 2)
    assert tables.content(table) == live

    # With the default min-input-files (5) partition b's two files are left, and the summary says why ...
    kept = rewrite_deletes(spark, table, {})
    assert kept["outcome"].startswith(
        "converted nothing; 2 v2 position delete files left (their partition's group had fewer than "
        "min-input-files, 5"
    )
    # ... rewrite-all converts them into one deletion vector of partition b's data file.
    deletes = rewrite_deletes(spark, table, {"rewrite-all": True})
    assert deletes["outcome"] == (
        "converted 2 v2 position delete files into deletion vectors (0 -> 1 deletion vectors)"
    )
    assert (deletes["after"]["position_delete_files"], deletes["after"]["deletion_vectors"]) == (0, 1)
    assert tables.content(table) == live
    after = _health(catalog, table)
    assert (after.position_delete_files, after.deletion_vectors, after.dv_deleted_rows) == (0, 1, 2)
