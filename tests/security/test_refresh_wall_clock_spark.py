"""A refresh's wall clock (issue 35, *bounded cost*): through the real refresh job (a spark-submit of
``spark/job/main.py`` for the expensive query; ``job_main.run`` on the in-process session for the rest), a query that would run for days stops at the job's ``timeout_seconds``, its
Spark jobs cancelled, and the job fails naming the limit; a creation stopped there leaves no table (a query within its limit: ``test_query_policy_spark.py``'s
plain creation runs with one). On the code before the clock the job ignored the option and was still running when the test gave up."""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
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


def test_an_expensive_query_is_stopped_at_its_limit(
    tables: Tables, catalog: CatalogSpec, tmp_path: Path
) -> None:
    """A real spark-submit of the refresh job (``spark/job/main.py``): a cancelled task Spark failed to
    kill dies with the job's JVM, never in a shared session."""
    from airflow_tablemgmt.spark.launch.submit import run_local

    table = _table()
    spec = job_spec(table, catalog, "refresh", {"mode": "create", "query": EXPENSIVE, "timeout_seconds": 8})
    started = time.monotonic()
    result = run_local(spec, tmp_path, timeout=GIVE_UP_S + 120, master="local[2]")
    elapsed = time.monotonic() - started
    assert result.error_class != "Timeout", "the refresh was still running: its limit was not enforced"
    assert result.error_class == "QueryTimedOut", (result.error, result.raw)
    assert str(result.error).startswith("create: stopped after its limit of 8 s (timeout_seconds"), (
        result.error
    )
    maintainer_s = result.raw.get("duration_seconds")
    assert isinstance(maintainer_s, (int, float)) and 8 <= maintainer_s < 60, result.raw
    assert elapsed < GIVE_UP_S + 120, elapsed
    assert not tables.spark.catalog.tableExists(str(table)), (
        "the creation stopped at its limit left its table"
    )


def test_a_limit_that_is_not_a_positive_number_is_refused(tables: Tables, catalog: CatalogSpec) -> None:
    spec = job_spec(
        _table(), catalog, "refresh", {"mode": "create", "query": "SELECT 1 AS x", "timeout_seconds": 0}
    )
    code, result, _ = _run_bounded(tables, spec)
    assert code == 1 and result["error_class"] == "InvalidJobSpec", result
    assert "refresh.timeout_seconds" in result["error"]
