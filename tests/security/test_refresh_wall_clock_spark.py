"""A refresh's wall clock (issue 35, *bounded cost*): through the real refresh job (``job_main.run``, the
in-process Spark session), a query that would run for days stops at the job's ``timeout_seconds``, its
Spark jobs cancelled, and the job fails naming the limit; a creation stopped there leaves no table. On
the code before the clock the job ignored the option and was still running when the test gave up."""

from __future__ import annotations

import itertools
import json
import threading
import time
from typing import Any

import pytest

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.spark.job.main import run
from tests.integration.spark.conftest import CATALOG, NAMESPACE
from tests.integration.spark.spark_tables import Tables, job_spec

pytestmark = pytest.mark.integration

EXPENSIVE = "SELECT max(sha2(CAST(id AS STRING), 256)) AS m FROM range(1000000000000)"
GIVE_UP_S = 120.0
_names = itertools.count()


def _table() -> TableIdentifier:
    return TableIdentifier(CATALOG, NAMESPACE, f"sec_wc_{next(_names)}")


def _run_bounded(tables: Tables, spec: Any) -> tuple[int, dict[str, Any], float]:
    """Run the job in a thread; if it outlives GIVE_UP_S, cancel Spark's jobs so the suite goes on, and fail."""
    out: list[tuple[int, str]] = []
    started = time.monotonic()
    worker = threading.Thread(target=lambda: out.append(run(spec, tables.spark)), daemon=True)
    worker.start()
    worker.join(GIVE_UP_S)
    elapsed = time.monotonic() - started
    if worker.is_alive():
        tables.spark.sparkContext.cancelAllJobs()
        worker.join(60)
        pytest.fail(f"the refresh was still running after {GIVE_UP_S:g} s: its limit was not enforced")
    code, line = out[0]
    return code, json.loads(line), elapsed


def test_an_expensive_query_is_stopped_at_its_limit(tables: Tables, catalog: CatalogSpec) -> None:
    table = _table()
    spec = job_spec(table, catalog, "refresh", {"mode": "create", "query": EXPENSIVE, "timeout_seconds": 8})
    code, result, elapsed = _run_bounded(tables, spec)
    assert code == 1, result
    assert result["error_class"] == "QueryTimedOut", result
    assert result["error"].startswith("create: stopped after its limit of 8 s (timeout_seconds"), result
    assert 8 <= elapsed < 60, elapsed
    assert not tables.spark.catalog.tableExists(str(table)), (
        "the creation stopped at its limit left its table"
    )
    tracker = tables.spark.sparkContext.statusTracker()
    deadline = time.monotonic() + 30
    while tracker.getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not tracker.getActiveJobsIds(), "a Spark job of the stopped refresh is still running"


def test_a_query_within_its_limit_refreshes_and_leaves_no_job_group(
    tables: Tables, catalog: CatalogSpec
) -> None:
    table = _table()
    spec = job_spec(
        table, catalog, "refresh", {"mode": "create", "query": "SELECT 1 AS x", "timeout_seconds": 600}
    )
    code, result, _ = _run_bounded(tables, spec)
    assert code == 0, result
    assert tables.spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None


def test_a_limit_that_is_not_a_positive_number_is_refused(tables: Tables, catalog: CatalogSpec) -> None:
    spec = job_spec(
        _table(), catalog, "refresh", {"mode": "create", "query": "SELECT 1 AS x", "timeout_seconds": 0}
    )
    code, result, _ = _run_bounded(tables, spec)
    assert code == 1 and result["error_class"] == "InvalidJobSpec", result
    assert "refresh.timeout_seconds" in result["error"]
