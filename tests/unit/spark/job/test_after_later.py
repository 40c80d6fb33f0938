"""Issue 40: the figures after a row-preserving action left to the job's caller (spark/job/after_later.py).

The read itself runs against a real Connect server in
``tests/integration/connect/test_connect_engine.py`` (a planned batch's figures after each compaction); here,
what needs no server: who may leave them, and what a read that cannot be made leaves in the summary."""

from __future__ import annotations

import json
from pathlib import Path

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType
from airflow_tablemgmt.spark.job.after_later import LATER_KEY, fill, leave_to_caller, reads_left_to_caller
from airflow_tablemgmt.spark.job.early_read import read_early
from airflow_tablemgmt.spark.job.metrics import METRIC_KEYS


class _Session:
    """What the module touches of a session: attributes set on it."""


def _early(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A real early read of a hadoop table with no snapshot (its metadata file written by pyiceberg's model)."""
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.types import LongType, NestedField

    meta = tmp_path / "wh" / "db" / "t" / "metadata"
    meta.mkdir(parents=True)
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    doc = new_table_metadata(schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, str(meta.parent), {})
    (meta / "v1.metadata.json").write_text(doc.model_dump_json())
    (meta / "version-hint.text").write_text("1")
    catalog = CatalogSpec(name="lake", type=CatalogType.HADOOP, warehouse=str(tmp_path / "wh"))
    early = read_early(catalog, TableIdentifier("lake", "db", "t"))
    assert early is not None
    return early, meta


def test_only_a_session_whose_caller_reads_them_gets_a_placeholder(tmp_path: Path) -> None:
    early, _ = _early(tmp_path)
    spark = _Session()
    assert leave_to_caller(spark, early.table, {"live_records": 0}, early) is None  # read by the job now
    with reads_left_to_caller(spark) as pending:
        placeholder = leave_to_caller(spark, early.table, {"live_records": 0}, early)
    assert placeholder is not None and set(placeholder) == {LATER_KEY} and len(pending) == 1
    assert leave_to_caller(spark, early.table, {"live_records": 0}, early) is None  # the caller's turn ended
    summary = json.loads(json.dumps({"before": {"data_files": 0}, "after": placeholder}))  # the result line
    assert fill(summary, pending, METRIC_KEYS) >= 0
    assert summary["after"]["data_files"] == 0 and summary["after"]["current_snapshot_id"] is None
    assert set(summary["after"]) == set(METRIC_KEYS) and "after_unmeasured" not in summary


def test_a_read_that_cannot_be_made_leaves_the_figures_none_and_says_why(tmp_path: Path) -> None:
    early, meta = _early(tmp_path)
    spark = _Session()
    with reads_left_to_caller(spark) as pending:
        placeholder = leave_to_caller(spark, early.table, {"live_records": 0}, early)
    for f in meta.iterdir():  # the table dropped before the read
        f.unlink()
    summary = {"after": placeholder, "rows": 3}
    fill(summary, pending, METRIC_KEYS)
    assert (
        summary["after"] == dict.fromkeys(METRIC_KEYS) and "could not be read" in summary["after_unmeasured"]
    )
    assert summary["rows"] == 3
    orphan = {"after": {LATER_KEY: 10**9}}  # a placeholder whose read was never left: not guessed either
    fill(orphan, pending, METRIC_KEYS)
    assert orphan["after"] == dict.fromkeys(METRIC_KEYS) and "no read was left" in orphan["after_unmeasured"]
