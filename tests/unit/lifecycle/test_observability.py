"""ProcessRunner sends its metrics through Airflow's Stats (real SQLite store, a StatsD UDP socket).

The job engine is the one stand-in (a submitter that returns a result at once, as spark-submit's
parsed result line would); the lifecycle, the store and Stats are real.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airflow_tablemgmt.core.errors import JobFailed, LeaseUnavailable
from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store
from tests.unit.test_observability import StatsdReceiver, statsd  # noqa: F401 - the fixture

TABLE = "lake.sales.orders"
ACTION = "rewrite-files"
SUMMARY = {
    "rewritten_bytes_count": 5000,
    "before": {"data_files": 30, "delete_files": 2, "snapshots": 4},
    "after": {"data_files": 3, "delete_files": 0, "snapshots": 5},
}


class InstantSubmitter:
    def __init__(self, result: JobResult) -> None:
        self.result = result

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        if on_started is not None:
            on_started("local-1")
        return self.result

    def kill(self) -> None:
        pass


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store.for_url(f"sqlite:///{tmp_path / 'tms.db'}")
    s.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), Owner.STORE)
    spec = TableSpec.model_validate(
        {"catalog": "lake", "namespace": "sales", "name": "orders", "actions": {ACTION: {}}}
    )
    s.tables.upsert(spec, Owner.STORE)
    return s


def _run(store: Store, result: JobResult, hour: int) -> None:
    runner = ProcessRunner(store, default_factories(), InstantSubmitter(result))
    runner.run(RunRequest(TABLE, ACTION, datetime(2026, 3, 1, hour, tzinfo=UTC)))


def test_a_run_sends_started_succeeded_duration_and_files(store: Store, statsd: StatsdReceiver) -> None:  # noqa: F811
    _run(store, JobResult(status="SUCCESS", summary=SUMMARY), hour=1)
    got = statsd.expect(
        {
            "airflow.tablemgmt.process.started.rewrite-files": ["1|c"],
            "airflow.tablemgmt.process.succeeded.rewrite-files": ["1|c"],
            "airflow.tablemgmt.process.files_before.lake__sales__orders.rewrite-files": ["30|g"],
            "airflow.tablemgmt.process.files_after.lake__sales__orders.rewrite-files": ["3|g"],
            "airflow.tablemgmt.process.bytes_rewritten.rewrite-files": ["5000|c"],
            "airflow.tablemgmt.table.delete_files.lake__sales__orders": ["0|g"],
        }
    )
    (duration,) = statsd.wait_for("airflow.tablemgmt.process.duration.rewrite-files.success")[
        "airflow.tablemgmt.process.duration.rewrite-files.success"
    ]
    assert duration.endswith("|ms") and float(duration.split("|")[0]) >= 0
    assert "airflow.tablemgmt.process.failed" not in got


def test_a_failed_job_sends_failed(store: Store, statsd: StatsdReceiver) -> None:  # noqa: F811
    with pytest.raises(JobFailed):
        _run(store, JobResult(status="FAILED", error="executor lost", error_class="SparkException"), hour=2)
    statsd.expect(
        {
            "airflow.tablemgmt.process.started.rewrite-files": ["1|c"],
            "airflow.tablemgmt.process.failed.rewrite-files": ["1|c"],
        }
    )


def test_a_held_lease_sends_a_lease_wait(store: Store, statsd: StatsdReceiver) -> None:  # noqa: F811
    assert store.leases.acquire(TABLE, "someone-else", timedelta(minutes=5))
    with pytest.raises(LeaseUnavailable):
        _run(store, JobResult(status="SUCCESS", summary=SUMMARY), hour=3)
    got = statsd.expect(
        {
            "airflow.tablemgmt.lease.waits": ["1|c"],
            "airflow.tablemgmt.lease.waits.rewrite-files": ["1|c"],
        }
    )
    assert "airflow.tablemgmt.process.started" not in got  # nothing ran
