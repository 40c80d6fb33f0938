"""Issue 36, item 4: recovery reads which attempt committed from the table's own metadata (no Spark):
an Iceberg snapshot summary's ``tablemgmt.*`` entries, a Delta commit's ``userMetadata``. The files are
written as the formats' specs lay them out (the job's side is proven with real Spark in
tests/faults/test_split_home.py)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.lifecycle.table_marks import committed_in_table
from airflow_tablemgmt.spark.job.commit_mark import ACTION, ATTEMPT, PROCESS


def _now_ms() -> int:
    """Now, when the test runs (not when the module was collected, which may be many minutes earlier)."""
    return int(time.time() * 1000)


def _process(attempt: int = 2, pid: int = 7, created_ago: timedelta = timedelta(minutes=5)) -> Process:
    return Process(id=pid, table_id="lake.db.t", action="rewrite-files", instant=datetime(2026, 1, 1, tzinfo=UTC),
                   status=ProcessStatus.PENDING, attempt=attempt, created_at=datetime.now(UTC) - created_ago)  # fmt: skip


def _iceberg(
    tmp_path: Path, summary: dict[str, str], ts_ms: int | None = None
) -> tuple[TableSpec, CatalogSpec]:
    ts_ms = _now_ms() if ts_ms is None else ts_ms
    meta = tmp_path / "wh" / "db" / "t" / "metadata"
    meta.mkdir(parents=True)
    doc = {
        "format-version": 2, "table-uuid": "0e0c0a0b-0000-4000-8000-000000000000",
        "location": str(meta.parent), "current-snapshot-id": 42,
        "snapshots": [
            {"snapshot-id": 41, "timestamp-ms": ts_ms - 1000, "summary": {"operation": "append"}},
            {"snapshot-id": 42, "parent-snapshot-id": 41, "timestamp-ms": ts_ms,
             "summary": {"operation": "replace", **summary}},
        ],
    }  # fmt: skip
    (meta / "v3.metadata.json").write_text(json.dumps(doc))
    (meta / "version-hint.text").write_text("3")
    table = TableSpec(catalog="lake", namespace="db", name="t", actions={"rewrite-files": {}})
    return table, CatalogSpec(name="lake", warehouse=str(tmp_path / "wh"))


MARK = {PROCESS: "7", ATTEMPT: "1", ACTION: "rewrite-files"}


def test_an_earlier_attempt_s_iceberg_commit_is_found(tmp_path: Path) -> None:
    table, catalog = _iceberg(tmp_path, MARK)
    found = committed_in_table(table, catalog, _process())
    assert found is not None and found["attempt"] == 1 and found["snapshot_id"] == 42
    assert found["summary"]["recorded_from_table"] is True


def test_only_this_process_s_earlier_attempts_count(tmp_path: Path) -> None:
    table, catalog = _iceberg(tmp_path, MARK)
    assert committed_in_table(table, catalog, _process(attempt=1)) is None  # its own attempt: not "earlier"
    assert committed_in_table(table, catalog, _process(pid=8)) is None  # another process
    # Committed before this row existed: the same id in another store
    assert committed_in_table(table, catalog, _process(created_ago=timedelta(seconds=-60))) is None


def test_an_unmarked_or_unreadable_table_is_no_answer(tmp_path: Path) -> None:
    table, catalog = _iceberg(tmp_path, {})
    assert committed_in_table(table, catalog, _process()) is None
    missing = CatalogSpec(name="lake", warehouse=str(tmp_path / "nowhere"))
    assert committed_in_table(table, missing, _process()) is None


def test_a_delta_commit_s_user_metadata_is_found(tmp_path: Path) -> None:
    log = tmp_path / "wh" / "db" / "t" / "_delta_log"
    log.mkdir(parents=True)
    lines = [{"commitInfo": {"timestamp": _now_ms(), "operation": "OPTIMIZE", "userMetadata": json.dumps(MARK)}},
             {"add": {"path": "part-0.parquet"}}]  # fmt: skip
    (log / "00000000000000000003.json").write_text("\n".join(json.dumps(x) for x in lines))
    table = TableSpec(catalog="lake", namespace="db", name="t", format="delta", actions={"optimize": {}})
    catalog = CatalogSpec(name="lake", warehouse=str(tmp_path / "wh"))
    found = committed_in_table(table, catalog, _process())
    assert found is not None and found["attempt"] == 1 and found["summary"]["committed_commit"] == 3


def test_a_pyiceberg_summary_gives_its_properties_not_pydantics_field_pairs() -> None:
    """The object-store path reads snapshots through pyiceberg, whose ``Summary`` iterates as pydantic's
    ``(field, value)`` pairs: the mark must come from its properties."""
    from pyiceberg.table.snapshots import Operation, Summary

    from airflow_tablemgmt.lifecycle.table_marks import summary_properties

    summary = Summary(Operation.REPLACE, **MARK, **{"added-data-files": "1"})
    assert summary_properties(summary) == {"operation": "replace", **MARK, "added-data-files": "1"}
    assert summary_properties(None) == {}
