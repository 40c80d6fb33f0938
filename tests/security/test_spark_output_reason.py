"""A job that fails without a result line (issue 22, item 1): the reason stored on the process row,
which every viewer reads, is sanitized; Spark's output -- driver and executor exception text that can
carry a secret read from the environment or a file -- goes to the task log only.

spark-submit is a stand-in script here (the point is what becomes of its output): it prints a driver
exception whose message carries a canary secret, as ``raise_error(java_method('java.lang.System',
'getenv', ...))`` did, and exits 1.
"""

from __future__ import annotations

import logging
import stat
import sys
from pathlib import Path

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.hooks.spark_job import SparkJobHook
from airflow_tablemgmt.hooks.spark_submit_direct import SparkConnection
from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest
from airflow_tablemgmt.store import Store

CANARY = "tms-canary-5f0c2d7e91a4"
TABLE = "lake.sales.orders"


def fake_spark_submit(tmp_path: Path, lines: list[str], code: int = 1) -> Path:
    script = tmp_path / "spark-submit"
    body = "".join(f"print({line!r}, flush=True)\n" for line in lines)
    script.write_text(f"#!{sys.executable}\nimport sys\n{body}sys.exit({code})\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, binary: Path) -> SparkJobHook:
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE", "false")
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", CANARY)
    h = SparkJobHook("spark_default", workdir=str(tmp_path))
    connection = SparkConnection(master="local[1]", spark_binary=str(binary))
    monkeypatch.setattr(h, "_direct_connection", lambda: connection)
    return h


SPARK_OUTPUT = [
    "25/11/25 10:00:00 INFO SparkContext: Running Spark version 4.0.1",
    f'Exception in thread "main" org.apache.spark.SparkRuntimeException: [USER_RAISED_EXCEPTION] {CANARY}',
    f"Caused by: java.lang.RuntimeException: AIRFLOW__API_AUTH__JWT_SECRET={CANARY}",
    "\tat org.apache.spark.sql.catalyst.expressions.RaiseError.eval(misc.scala:98)",
    f"{CANARY}Exception: a line shaped like an exception class",
    "java.lang.OutOfMemoryError: Java heap space",
]


def job(tmp_path: Path) -> JobSpec:
    spec = TableSpec.model_validate({"catalog": "lake", "namespace": "sales", "name": "orders"})
    return JobSpec.build(spec, CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), "rewrite-files", {})


def test_the_failure_reason_carries_no_spark_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    result = hook(tmp_path, monkeypatch, fake_spark_submit(tmp_path, SPARK_OUTPUT)).submit(job(tmp_path))
    assert result.status == "FAILED" and result.error
    assert CANARY not in result.error, result.error
    assert "JWT_SECRET" not in result.error and "USER_RAISED" not in result.error
    assert "spark-submit exited with code 1" in result.error
    assert "ran out of memory" in result.error  # the kind of failure, in fixed words
    assert "task" in result.error and "log" in result.error  # where the full text is
    assert CANARY in caplog.text  # the full output: in the task log only


def test_a_process_failed_without_a_result_stores_a_sanitized_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store.for_url(f"sqlite:///{tmp_path / 'tms.db'}")
    store.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), Owner.STORE)
    spec = {"catalog": "lake", "namespace": "sales", "name": "orders", "actions": {"rewrite-files": {}}}
    store.tables.upsert(TableSpec.model_validate(spec), Owner.STORE)
    submitter = hook(tmp_path, monkeypatch, fake_spark_submit(tmp_path, SPARK_OUTPUT))
    runner = ProcessRunner(store, default_factories(), submitter, result_dir=tmp_path / "results")
    from datetime import UTC, datetime

    from airflow_tablemgmt.core.errors import JobFailed

    with pytest.raises(JobFailed) as failed:
        runner.run(RunRequest(TABLE, "rewrite-files", datetime(2026, 3, 1, tzinfo=UTC)))
    assert CANARY not in str(failed.value)
    [row] = store.processes.list(table_id=TABLE)
    assert row.status == ProcessStatus.FAILED and row.failure_reason
    assert CANARY not in row.failure_reason, row.failure_reason
