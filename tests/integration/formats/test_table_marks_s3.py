"""Recovery reads an earlier attempt's commit mark from a table on S3 (issue 36, item 4): a Delta commit's
``userMetadata`` and a Hudi 1.x compaction commit's extra metadata, written as the formats lay them out and
copied to SeaweedFS, read through the catalog's ``spark.hadoop.fs.s3a.*`` properties (secrets as ``env:``
references, resolved as the worker resolves them). No JVM: CI runs it (≈ 10 s, most of it SeaweedFS's start).

The job's side (that a real commit carries the mark) is proven with real Spark in
tests/faults/test_format_fencing.py."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
from airflow_tablemgmt.lifecycle.table_marks import committed_in_table
from airflow_tablemgmt.spark.job.commit_mark import ACTION, ATTEMPT, PROCESS
from tests.integration.formats.test_path_formats_s3 import _secrets, catalog, upload  # noqa: F401 - a fixture
from tests.support.servers import SeaweedS3
from tests.unit.lifecycle.test_table_marks import HUDI_MARK, _hudi, _hudi_process, _now_ms, _process

pytestmark = pytest.mark.integration


def _delta_log(root: Path, mark: dict[str, str]) -> None:
    log = root / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text(json.dumps({"commitInfo": {"operation": "WRITE"}}) + "\n")
    info = {"commitInfo": {"timestamp": _now_ms(), "operation": "OPTIMIZE", "userMetadata": json.dumps(mark)}}
    (log / "00000000000000000001.json").write_text(json.dumps(info) + "\n" + json.dumps({"add": {}}) + "\n")
    (log / "00000000000000000001.checkpoint.parquet").write_bytes(b"PAR1")  # not a commit: skipped


def _remote(s3: SeaweedS3, prefix: str) -> CatalogSpec:
    return resolve_catalog_spec(catalog(f"s3a://{s3.bucket}/{prefix}", s3.endpoint))


def test_delta_and_hudi_marks_are_read_from_s3_with_the_catalog_s_credentials(
    s3: SeaweedS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = {PROCESS: "7", ATTEMPT: "1", ACTION: "optimize"}
    _delta_log(tmp_path / "delta" / "db" / "t", mark)
    upload(s3, tmp_path / "delta", "marks-delta")
    delta = TableSpec(catalog="lake", namespace="db", name="t", format="delta", actions={"optimize": {}})
    process = dataclasses.replace(_process(), action="optimize")
    found = committed_in_table(delta, _remote(s3, "marks-delta"), process)
    assert found is not None and found["attempt"] == 1 and found["summary"]["committed_commit"] == 1

    hudi, _ = _hudi(tmp_path / "hudi", HUDI_MARK)
    upload(s3, tmp_path / "hudi" / "wh", "marks-hudi")
    found = committed_in_table(hudi, _remote(s3, "marks-hudi"), _hudi_process())
    assert found is not None and found["attempt"] == 1

    # a wrong secret is no answer (the job runs again), never an error carrying the secret
    monkeypatch.setenv("TMS_MARKS_WRONG_SECRET", "not-the-secret")
    wrong = catalog(f"s3a://{s3.bucket}/marks-delta", s3.endpoint, secret="env:TMS_MARKS_WRONG_SECRET")
    assert committed_in_table(delta, resolve_catalog_spec(wrong), process) is None
