"""formats/delta/metadata.py on a ``_delta_log`` laid out as Delta writes it (JSON commits; a checkpoint is read
from the Spark-written tables of tests/integration/formats/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_tablemgmt.formats.delta.metadata import read_delta
from airflow_tablemgmt.metadata.errors import HealthUnavailable


def commit(log: Path, version: int, *actions: dict) -> None:
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def info(operation: str) -> dict:
    return {"commitInfo": {"operation": operation, "timestamp": 1}}


def add(path: str, size: int = 10, data_change: bool = True) -> dict:
    return {"add": {"path": path, "size": size, "dataChange": data_change, "partitionValues": {}}}


def remove(path: str, data_change: bool = True) -> dict:
    return {"remove": {"path": path, "dataChange": data_change}}


def test_live_files_and_changes_since_the_last_optimize(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    meta = {
        "metaData": {
            "configuration": {"delta.deletedFileRetentionDuration": "interval 1 hours"},
            "partitionColumns": ["part"],
        }
    }
    commit(log, 0, info("WRITE"), meta, add("a.parquet"), add("b.parquet"))
    commit(log, 1, info("WRITE"), add("c.parquet", 5))
    commit(
        log,
        2,
        info("OPTIMIZE"),
        remove("a.parquet", False),
        remove("b.parquet", False),
        remove("c.parquet", False),
        add("abc.parquet", 20, False),
    )
    commit(log, 3, info("WRITE"), add("d.parquet", 7))
    commit(log, 4, info("DELETE"), remove("d.parquet"), add("d2.parquet", 6))
    state = read_delta(str(tmp_path))
    assert state.version == 4
    assert state.files == {"abc.parquet": 20, "d2.parquet": 6}
    assert (state.data_files, state.total_bytes) == (2, 26)
    assert state.changes.last_optimize_version == 2
    assert (state.changes.commits, state.changes.files_added, state.changes.files_removed) == (2, 2, 1)
    assert state.properties["delta.deletedFileRetentionDuration"] == "interval 1 hours"
    assert state.partition_columns == ("part",)
    assert state.summary()["current_snapshot_id"] == 4


def test_a_table_never_optimized_counts_every_kept_commit(tmp_path: Path) -> None:
    commit(tmp_path / "_delta_log", 0, info("WRITE"), add("a.parquet"))
    commit(tmp_path / "_delta_log", 1, info("WRITE"), add("b.parquet"))
    state = read_delta(f"file://{tmp_path}")
    assert state.changes.last_optimize_version is None
    assert state.changes.files_added == 2


def test_not_a_delta_table_says_where(tmp_path: Path) -> None:
    with pytest.raises(HealthUnavailable, match="not a Delta table"):
        read_delta(str(tmp_path))
    with pytest.raises(HealthUnavailable, match="spark.hadoop.fs.s3a.. properties, and none were given"):
        read_delta("s3://bucket/t")
    with pytest.raises(HealthUnavailable, match="only local and S3"):
        read_delta("gs://bucket/t", {})
