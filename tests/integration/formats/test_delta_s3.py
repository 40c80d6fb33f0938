"""Delta maintained on S3 (SeaweedFS started by the test): optimize and vacuum's first-run dry run on a
table at ``s3a://`` written by Spark, each effect read back without Spark through pyarrow's S3 client:
the live files from the ``_delta_log``, the rows and a checksum from those Parquet files. The factory's
own read of that log on S3 (no JVM) agrees with the job's figures, and skips a second optimize.

On demand (``TABLEMGMT_FORMATS_FULL=1``): one Delta JVM with ``hadoop-aws`` (≈ 280 MB of jars fetched
once), ≈ 2-4 min on 2 cores."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.integration.formats.delta_s3_scenario import ACCESS_ENV, SECRET_ENV
from tests.integration.formats.format_jobs import run_scenario
from tests.support.servers import ACCESS_KEY, SECRET_KEY, SeaweedS3

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.environ.get("TABLEMGMT_FORMATS_FULL") != "1",
        reason="the Delta-on-S3 scenario runs with TABLEMGMT_FORMATS_FULL=1",
    ),
]
PREFIX = "lake/sales/orders"


def log_versions(fs: Any, bucket: str) -> dict[int, list[dict[str, Any]]]:
    import pyarrow.fs as pafs

    commits = {}
    for info in fs.get_file_info(pafs.FileSelector(f"{bucket}/{PREFIX}/_delta_log")):
        name = info.path.rsplit("/", 1)[1]
        if name.endswith(".json") and name[:20].isdigit():
            with fs.open_input_stream(info.path) as f:
                commits[int(name[:20])] = [
                    json.loads(line) for line in f.read().decode().splitlines() if line
                ]
    return commits


def live_files(commits: dict[int, list[dict[str, Any]]], upto: int) -> set[str]:
    files: set[str] = set()
    for v in sorted(commits):
        if v > upto:
            break
        for action in commits[v]:
            if "add" in action:
                files.add(action["add"]["path"])
            elif "remove" in action:
                files.discard(action["remove"]["path"])
    return files


def rows_of(fs: Any, bucket: str, files: set[str]) -> tuple[int, str]:
    import pyarrow.parquet as pq

    values: list[tuple[int, int]] = []
    for path in files:
        table = pq.read_table(f"{bucket}/{PREFIX}/{path}", filesystem=fs, columns=["id", "v"])
        values += list(zip(table.column("id").to_pylist(), table.column("v").to_pylist(), strict=True))
    return len(values), hashlib.sha256(repr(sorted(values)).encode()).hexdigest()


def test_delta_on_s3_optimize_and_vacuum_read_back_through_s3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET_KEY)
    monkeypatch.setenv(ACCESS_ENV, ACCESS_KEY)
    with SeaweedS3(tmp_path / "s3") as s3:
        warehouse = f"s3a://{s3.bucket}/lake"
        steps = run_scenario("tests.integration.formats.delta_s3_scenario", tmp_path, warehouse, s3.endpoint)
        fs = s3.filesystem()
        commits = log_versions(fs, s3.bucket)
        optimize = steps["optimize"]
        assert optimize["result"]["exit_code"] == 0, optimize["result"]
        summary = optimize["result"]["summary"]
        before_version = summary["before"]["current_snapshot_id"]
        before, after = live_files(commits, before_version), live_files(commits, before_version + 1)
        read_before, read_after = rows_of(fs, s3.bucket, before), rows_of(fs, s3.bucket, after)
    assert optimize["job"]["options"]["table-location"] == f"{warehouse}/sales/orders"
    # read back through S3: fewer live files after OPTIMIZE, the same rows and checksum
    assert len(after) < len(before) and len(before) == summary["before"]["data_files"]
    assert len(after) == summary["after"]["data_files"]
    assert read_after == read_before and read_after[0] == 150
    ops = [
        next(a["commitInfo"]["operation"] for a in commits[v] if "commitInfo" in a) for v in sorted(commits)
    ]
    assert ops.count("OPTIMIZE") == 1
    vacuum = steps["vacuum"]["result"]
    # the factory's read of the Spark-written log on S3, without a JVM, agrees with the job's own figures
    assert steps["read_without_jvm"]["figures"]["current_snapshot_id"] == before_version
    assert steps["read_without_jvm"]["figures"]["data_files"] == summary["before"]["data_files"]
    assert steps["optimize_again"]["job"] is None  # nothing added since the OPTIMIZE: skipped, no JVM
    assert vacuum["exit_code"] == 0, vacuum
    # the first run is a dry run; within the 7-day retention nothing is due
    assert vacuum["summary"]["dry_run"] is True and vacuum["summary"]["would_delete_files"] == 0
