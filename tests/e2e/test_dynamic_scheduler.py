"""A dynamic table refreshed by a real Airflow deployment on its freshness cron (LocalExecutor: tasks
run through the Task SDK, where Airflow's metadata DB is out of reach).

tables.yaml declares one dynamic table with ``freshness: 1 MINUTE``. The scheduler's first run creates
it (the table is CREATING until then: trigger CREATION, a Spark job); the next scheduled run finds no
new snapshot in the source and records a NO_DATA refresh without starting Spark. Both are processes
in our store keyed by the run's logical date, with Snowflake's history columns, and the task's XCom.
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import BIN, ROOT, make_table
from tests.e2e.test_real_scheduler import AirflowDeployment, _utc, _wait_for, local_deployment

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

TABLE = "livedt.db.per_day"
DAG_ID = f"tms__{TABLE}__refresh"
TABLES_YAML = """
version: 1
catalogs:
  - {{name: livedt, type: hadoop, warehouse: {warehouse}}}
dynamic-tables:
  - identifier: {table}
    query: SELECT day, count(*) AS n FROM livedt.db.events GROUP BY day
    freshness: 1 MINUTE
"""


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[AirflowDeployment]:
    dep = local_deployment(
        tmp_path / "airflow",
        AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="1",
        AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC="1",
    )
    try:
        yield dep
    finally:
        dep.stop()


@pytest.mark.on_demand(
    reason="tests/e2e/test_real_scheduler.py runs the Task SDK path under a real scheduler and "
    "tests/e2e/test_cli_dt.py a dynamic table's creation and refreshes, test_dynamic_lifecycle.py NO_DATA"
)
def test_dynamic_table_is_created_then_refreshed_on_its_cron(
    deployment: AirflowDeployment, tmp_path: Path
) -> None:
    dep = deployment
    try:
        _scenario(dep, tmp_path)
    except BaseException:
        dep.print_log_tails()
        raise


def _scenario(dep: AirflowDeployment, tmp_path: Path) -> None:
    from airflow_tablemgmt.core.process import ProcessStatus
    from airflow_tablemgmt.store import Store

    t0 = time.monotonic()
    migrate = subprocess.Popen(
        [str(BIN / "airflow"), "db", "migrate"],
        env=dep.env,
        stdout=dep.log("db-migrate").open("wb"),
        stderr=subprocess.STDOUT,
    )
    source = make_table(tmp_path / "wh", "livedt.db.events", files=4, rows=400)
    (dep.home / "dags" / "tables.yaml").write_text(
        TABLES_YAML.format(warehouse=source.warehouse, table=TABLE)
    )
    (dep.home / "dags" / "tablemgmt_dags.py").write_bytes((ROOT / "dags" / "tablemgmt_dags.py").read_bytes())
    assert migrate.wait(timeout=300) == 0, dep.log("db-migrate").read_text()[-3000:]
    for name, args in (
        ("api-server", ("api-server", "--port", str(dep.api_port), "--host", "127.0.0.1")),
        ("scheduler", ("scheduler",)),
        ("dag-processor", ("dag-processor",)),
    ):
        dep.start(name, *args)

    def api_up() -> bool:
        dep.check_alive()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{dep.api_port}/api/v2/monitor/health", timeout=2):
                return True
        except OSError:
            return False

    _wait_for("the api-server", api_up, timeout=180)
    print(f"\nservices up: {time.monotonic() - t0:.1f} s")

    def finished_runs() -> list[tuple[Any, ...]] | None:
        dep.check_alive()
        rows = dep.query(
            "SELECT run_id, run_type, state, logical_date FROM dag_run WHERE dag_id = :d ORDER BY id",
            d=DAG_ID,
        )
        done = [r for r in rows if r[2] in ("success", "failed")]
        return done if len(done) >= 2 else None

    runs = _wait_for("two finished scheduled runs", finished_runs, timeout=600, every=2)
    print(f"two runs finished: {time.monotonic() - t0:.1f} s")
    assert [(r[1], r[2]) for r in runs[:2]] == [("scheduled", "success"), ("scheduled", "success")], runs

    store = Store.for_url(dep.env["TABLEMGMT_STORE_URL"])
    by_run = {p.run_id: p for p in store.processes.list(table_id=TABLE, action="refresh")}
    created, quiet = by_run[runs[0][0]], by_run[runs[1][0]]
    for process, run in ((created, runs[0]), (quiet, runs[1])):
        assert process.status == ProcessStatus.SUCCESS
        assert process.instant == _utc(run[3])  # the process instant is the run's logical date
    assert created.summary["trigger"] == "CREATION" and created.summary["application_id"]
    assert (quiet.summary["trigger"], quiet.summary["refresh_action"]) == ("SCHEDULED", "NO_DATA")
    assert quiet.summary["application_id"] is None  # no Spark job
    assert quiet.summary["source_snapshots"] == created.summary["source_snapshots"]
    assert store.dynamic.get(TABLE).state == "ACTIVE"

    [(xcom,)] = dep.query(
        "SELECT value FROM xcom WHERE dag_id = :d AND run_id = :r AND key = 'return_value'",
        d=DAG_ID,
        r=runs[1][0],
    )
    assert "NO_DATA" in str(xcom)
