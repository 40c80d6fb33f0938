"""Hudi maintained on S3 (SeaweedFS started by the test): a merge-on-read table written by Spark at
``s3a://``; the factory decides from the timeline read on S3 without a JVM (below ``min-delta-commits``:
skipped; at it: a compaction; right after it: skipped again), the compaction runs through the job's entry,
and its effect is read back: the timeline on S3 through pyarrow (one completed compaction, no pending one),
the rows and a checksum by a snapshot query (unchanged).

On demand (``TABLEMGMT_FORMATS_FULL=1``): one Hudi JVM with ``hadoop-aws``, ≈ 2-4 min on 2 cores."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.integration.formats.delta_s3_scenario import ACCESS_ENV, SECRET_ENV
from tests.integration.formats.format_jobs import run_scenario
from tests.support.servers import ACCESS_KEY, SECRET_KEY, SeaweedS3

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.environ.get("TABLEMGMT_FORMATS_FULL") != "1",
        reason="the Hudi-on-S3 scenario runs with TABLEMGMT_FORMATS_FULL=1",
    ),
]


def test_hudi_on_s3_compaction_decided_and_read_back_without_a_jvm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_tablemgmt.formats.hudi.metadata import read_timeline
    from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
    from tests.integration.formats.delta_s3_scenario import s3_catalog

    monkeypatch.setenv(SECRET_ENV, SECRET_KEY)
    monkeypatch.setenv(ACCESS_ENV, ACCESS_KEY)
    with SeaweedS3(tmp_path / "s3") as s3:
        warehouse = f"s3a://{s3.bucket}/lake"
        steps = run_scenario("tests.integration.formats.hudi_s3_scenario", tmp_path, warehouse, s3.endpoint)
        props = resolve_catalog_spec(s3_catalog(warehouse, s3.endpoint)).properties
        timeline = read_timeline(f"{warehouse}/app/events", props)
    assert steps["below_threshold"]["job"] is None  # 2 delta commits < min-delta-commits 3: no JVM started
    compaction = steps["compaction"]
    assert compaction["result"]["exit_code"] == 0, compaction["result"]
    assert compaction["job"]["options"]["table-location"] == f"{warehouse}/app/events"
    before, after = compaction["before"], compaction["after"]
    assert before["delta_commits_since_compaction"] == 3 and before["log_files"] > 0
    assert after["delta_commits_since_compaction"] == 0 and after["pending_compactions"] == 0
    assert (after["rows"], after["checksum"]) == (before["rows"], before["checksum"]) and after["rows"] == 40
    assert steps["compaction_again"]["job"] is None  # read on S3 after the compaction: nothing to do
    # read back here, through pyarrow's S3 client: exactly one compaction completed, none pending
    assert len(timeline.completed_compactions()) == 1 and timeline.pending_compactions() == []
    assert SECRET_KEY not in repr(steps)
