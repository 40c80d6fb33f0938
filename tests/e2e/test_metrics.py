"""Metrics of a real run arrive at a StatsD receiver through Airflow's Stats.

`tablemgmt run` (the real console script, real Spark, real Iceberg) runs with Airflow's
``[metrics] statsd_on`` pointed at a UDP socket of this test; the health read that follows (pyiceberg,
in this process) sends the table's gauges the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from airflow_tablemgmt import observability
from tests.e2e.conftest import BIN, IcebergTable, make_table, run
from tests.unit.test_observability import StatsdReceiver

pytestmark = pytest.mark.e2e

STORE_URL = os.environ["TABLEMGMT_STORE_URL"]


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> StatsdReceiver:
    try:
        import statsd as _client  # noqa: F401 - Airflow's StatsD backend needs it
    except ImportError:
        pytest.fail("the StatsD client is missing: install the dev extra (statsd, as apache-airflow[statsd])")
    r = StatsdReceiver()
    for key, value in {
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(r.port),
        "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
    }.items():
        monkeypatch.setenv(key, value)
    observability.reset()
    yield r  # type: ignore[misc]
    r.sock.close()
    monkeypatch.delenv("AIRFLOW__METRICS__STATSD_ON")
    observability.reset()


def _register(table: IcebergTable) -> None:
    res = run(
        [
            str(BIN / "tablemgmt"),
            "--store-url",
            STORE_URL,
            "register",
            table.table_id,
            "--catalog-type",
            "hadoop",
            "--warehouse",
            str(table.warehouse),
            "--action",
            "rewrite-files",
            "--set",
            "rewrite-files.min-input-files=2",
        ],
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-3000:]


def test_cli_run_and_health_send_metrics(tmp_path: Path, receiver: StatsdReceiver) -> None:
    table = make_table(tmp_path / "wh", "metrics.db.events", files=12, rows=1200)
    _register(table)
    res: subprocess.CompletedProcess[str] = run(
        [
            str(BIN / "tablemgmt"),
            "run",
            table.table_id,
            "rewrite-files",
            "--json",
            "--instant",
            "2026-03-01T00:00:00+00:00",
        ],
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout)["summary"]
    before, after = summary["before"]["data_files"], summary["after"]["data_files"]
    assert before >= 12 and after < before

    got = receiver.wait_for(
        "airflow.tablemgmt.process.started.rewrite-files",
        "airflow.tablemgmt.process.succeeded.rewrite-files",
        "airflow.tablemgmt.process.duration.rewrite-files.success",
        "airflow.tablemgmt.process.files_before.metrics__db__events.rewrite-files",
        "airflow.tablemgmt.process.files_after.metrics__db__events.rewrite-files",
        "airflow.tablemgmt.process.bytes_rewritten.rewrite-files",
        "airflow.tablemgmt.table.data_files.metrics__db__events",
        timeout=10,
    )
    assert got.get("airflow.tablemgmt.process.started.rewrite-files") == ["1|c"], receiver.lines
    assert got["airflow.tablemgmt.process.succeeded.rewrite-files"] == ["1|c"]
    assert "airflow.tablemgmt.process.failed" not in got
    (duration,) = got["airflow.tablemgmt.process.duration.rewrite-files.success"]
    assert duration.endswith("|ms") and float(duration.split("|")[0]) > 0
    assert got["airflow.tablemgmt.process.files_before.metrics__db__events.rewrite-files"] == [f"{before}|g"]
    assert got["airflow.tablemgmt.process.files_after.metrics__db__events.rewrite-files"] == [f"{after}|g"]
    assert got["airflow.tablemgmt.process.bytes_rewritten.rewrite-files"] == [
        f"{summary['rewritten_bytes_count']}|c"
    ]
    assert summary["rewritten_bytes_count"] > 0
    assert got["airflow.tablemgmt.table.data_files.metrics__db__events"] == [f"{after}|g"]

    # The health read (what the REST API and the page show) sends the table's gauges.
    from airflow_tablemgmt.services.health import table_health
    from airflow_tablemgmt.store import Store

    health = table_health(Store.for_url(STORE_URL), table.table_id, ttl=0)
    assert health.files is not None and health.files.data_files == after
    got = receiver.wait_for("airflow.tablemgmt.table.small_file_ratio.metrics__db__events", timeout=10)
    assert got["airflow.tablemgmt.table.data_files.metrics__db__events"][-1] == f"{after}|g"
    (ratio,) = got["airflow.tablemgmt.table.small_file_ratio.metrics__db__events"]
    assert ratio.endswith("|g") and float(ratio.split("|")[0]) == health.files.small_file_ratio
