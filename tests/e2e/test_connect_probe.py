"""The health check docs/spark-connect.md's supervised set-up runs (``python -m
airflow_tablemgmt.spark.connect.probe``) answers 0 with the Spark version of a real server: this test process's
warm Spark Connect server (tests/support/table_writer.py), so it starts no server of its own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.table_writer import writer_url

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(420)
def test_the_probe_answers_with_the_servers_spark_version() -> None:
    url = writer_url()
    if url is None:
        pytest.skip("TABLEMGMT_TEST_TABLES_LOCAL=1: no Spark Connect server in this test process")
    res = subprocess.run(
        [sys.executable, "-m", "airflow_tablemgmt.spark.connect.probe", url, "--timeout", "60"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().startswith(f"{url} answers: Spark 3.5."), res.stdout
