"""Delta OPTIMIZE's summary under a concurrent writer (no JVM: a ``_delta_log`` as Delta writes it): the
figures are those of the OPTIMIZE commit itself and of the version it read, never a removed-file count above
the files it saw (issue 37: 221 files removed beside 133 files before)."""

from __future__ import annotations

import json
from pathlib import Path

from airflow_tablemgmt.formats.delta.job.optimize import as_the_optimize_read_it
from airflow_tablemgmt.formats.delta.metadata import read_delta


def _commit(log: Path, version: int, *actions: dict) -> None:
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def _add(name: str, size: int = 10) -> dict:
    return {"add": {"path": name, "size": size, "dataChange": True}}


def _remove(name: str) -> dict:
    return {"remove": {"path": name, "dataChange": False}}


def test_before_is_the_version_optimize_read_and_the_counts_its_own(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    _commit(
        log,
        0,
        {"commitInfo": {"operation": "WRITE"}},
        {"metaData": {"partitionColumns": []}},
        *(_add(f"a{i}") for i in range(4)),
    )
    _commit(log, 1, {"commitInfo": {"operation": "WRITE"}}, _add("b0"), _add("b1"))  # the writer, meanwhile
    _commit(
        log,
        2,
        {"commitInfo": {"operation": "OPTIMIZE", "readVersion": 1}},
        _add("big", 60),
        *(_remove(f"a{i}") for i in range(4)),
        _remove("b0"),
        _remove("b1"),
    )
    _commit(log, 3, {"commitInfo": {"operation": "WRITE"}}, _add("c0"))  # and after
    before = {"current_snapshot_id": 0, "data_files": 4, "total_bytes": 40}
    after = {"current_snapshot_id": 3, "data_files": 2, "total_bytes": 70}

    out = as_the_optimize_read_it(str(tmp_path), before, after)

    assert out["optimize_version"] == 2 and out["concurrent_commits"] == 2
    assert (out["files_removed"], out["files_added"]) == (6, 1)
    assert out["before"]["current_snapshot_id"] == 1 and out["before"]["data_files"] == 6
    assert out["files_removed"] <= out["before"]["data_files"]
    assert read_delta(str(tmp_path), version=1).data_files == 6 and read_delta(str(tmp_path)).data_files == 2


def test_without_a_concurrent_writer_before_stays_as_read(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    _commit(log, 0, {"commitInfo": {"operation": "WRITE"}}, _add("a0"), _add("a1"))
    _commit(
        log,
        1,
        {"commitInfo": {"operation": "OPTIMIZE", "readVersion": 0}},
        _add("big"),
        _remove("a0"),
        _remove("a1"),
    )
    before = {"current_snapshot_id": 0, "data_files": 2, "total_bytes": 20}
    out = as_the_optimize_read_it(str(tmp_path), before, {"current_snapshot_id": 1, "data_files": 1})
    assert out == {"optimize_version": 1, "files_removed": 2, "files_added": 1, "concurrent_commits": 0}


def test_a_log_not_readable_here_keeps_deltas_counts(tmp_path: Path) -> None:
    assert (
        as_the_optimize_read_it("s3://bucket/t", {"current_snapshot_id": 0}, {"current_snapshot_id": 2}) == {}
    )
