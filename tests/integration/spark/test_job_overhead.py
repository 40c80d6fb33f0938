"""The job loads its table once for the existence check and the metrics before the action."""

from __future__ import annotations

import pytest

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.spark.job.metrics import (
    _metrics_from_metadata_tables,
    load_table,
    metrics_after,
    metrics_before,
)
from tests.integration.spark.spark_tables import TableFactory, Tables

pytestmark = pytest.mark.integration


def test_table_load_says_whether_the_table_exists(make_table: TableFactory, tables: Tables) -> None:
    table = make_table("id bigint, p string, v string", partitioned_by="p")
    missing = TableIdentifier(table.catalog, table.namespace, "no_such_table")
    assert load_table(tables.spark, missing) is None
    loaded = load_table(tables.spark, table)
    assert loaded is not None and loaded.table == table and loaded.location is not None


def test_metrics_before_are_the_table_as_the_job_loaded_it(make_table: TableFactory, tables: Tables) -> None:
    """The table load's metadata file serves the metrics before it is handed to (no second load): a
    commit that lands after the load is not in the before figures, and the figures after, or before
    without it, load the table again."""
    table = make_table("id bigint, p string, v string", partitioned_by="p")
    tables.small_files(table, files=3)
    first = load_table(tables.spark, table)
    assert first is not None
    loaded = _metrics_from_metadata_tables(tables.spark, table)
    tables.small_files(table, files=2)
    now = _metrics_from_metadata_tables(tables.spark, table)
    assert now["current_snapshot_id"] != loaded["current_snapshot_id"]

    before = metrics_before(tables.spark, table, early=first)
    assert before == loaded
    after = metrics_after(tables.spark, table, before)
    assert after == now
    assert metrics_before(tables.spark, table) == now  # not handed the load: loads the table again


def test_a_job_that_does_not_load_its_table_gets_fresh_metrics(
    make_table: TableFactory, tables: Tables
) -> None:
    table = make_table("id bigint, p string, v string", partitioned_by="p")
    tables.small_files(table, files=2)
    assert load_table(tables.spark, table) is not None
    tables.small_files(table, files=1)
    assert metrics_before(tables.spark, table) == _metrics_from_metadata_tables(tables.spark, table)
