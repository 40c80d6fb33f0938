"""An interrupted Spark Connect job is seen to end only once its Spark *tasks* ended (issue 36).

The server reports an operation ended when its execution thread ends; an interrupt cancels the operation's
Spark jobs, which ends the thread at once, while a task that does not look at its kill flag runs on. Here a
write's task sleeps 8 s inside its projection (``java_method('java.lang.Thread', 'sleep', ...)``: Spark kills
a cancelled job's tasks without interrupting their threads) and then writes its row into a data file of the
table. Another process ends the job 2 s in (``end_application``, as the guard, the reaper's next holder and a
takeover do): nothing may be written into the table's data directory after it returned. Before the change
it returned when the operation's thread ended, and the task wrote its file some 6 s later (the kind of file
an interrupted compaction left, an orphan, in 2 of 49 fault rounds); now it returns once the server's status
API shows the job's last task ended (``spark/connect/tasks.py``).

On demand with the other Connect fault tests (``TABLEMGMT_CONNECT_FAULTS=1``): a server with its UI, ~1 min.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.spark.connect.client import open_session
from airflow_tablemgmt.spark.connect.operations import end_application, record_operations, recorded_operations
from airflow_tablemgmt.spark.connect.session import ConnectRun, connect_conf
from tests.faults.connect_scenario import ON_DEMAND, connect_fault_server_fixture  # noqa: F401 - the fixture
from tests.integration.connect.server import ConnectServer
from tests.integration.connect.test_connect_engine import small_files_table

pytestmark = [pytest.mark.faults, ON_DEMAND]

SLEEP_MS = 8000


def _latest_write_ns(directory: Path) -> int:
    """The latest change inside ``directory``: a file written, or one created or deleted (the directory's own
    modification time)."""
    latest = directory.stat().st_mtime_ns
    for path in directory.rglob("*"):
        try:
            latest = max(latest, path.stat().st_mtime_ns)
        except FileNotFoundError:
            continue
    return latest


@pytest.mark.timeout(300)
def test_an_interrupted_job_is_not_seen_ended_while_its_task_still_writes(
    connect_fault_server: ConnectServer, tmp_path: Path
) -> None:
    url = connect_fault_server.url
    catalog = CatalogSpec(name="lake", warehouse=str(tmp_path / "warehouse"))
    table = small_files_table(url, catalog, "slow", files=2)
    data_dir = tmp_path / "warehouse" / "db" / "slow" / "data"
    run = ConnectRun(url, "tms-p901-a1")
    spark = open_session(url, run.session_id)
    for key, value in connect_conf(catalog).items():
        spark.conf.set(key, value)
    record_operations(spark, run.tag)
    errors: list[str] = []

    def slow_write() -> None:  # each of the two tasks sleeps, then writes its row into a data file
        spark.addTag(run.tag)
        try:
            rows = spark.range(0, 2, 1, 2).selectExpr(
                "id", f"java_method('java.lang.Thread', 'sleep', {SLEEP_MS}L) AS v"
            )
            rows.writeTo(table).append()
        except Exception as e:  # noqa: BLE001
            errors.append(str(e))

    writer = threading.Thread(target=slow_write, daemon=True)
    writer.start()
    observer = open_session(url, run.session_id)
    deadline = time.monotonic() + 60
    while not recorded_operations(observer, run.tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    observer.stop()
    time.sleep(2.0)  # the tasks are sleeping inside their projection
    assert writer.is_alive()
    started = time.monotonic()
    assert end_application(run.application_id, 60, url) is True
    returned_ns, took = time.time_ns(), time.monotonic() - started
    writer.join(30)
    assert errors and "OPERATION_CANCELED" in errors[0], errors
    time.sleep(SLEEP_MS / 1000 + 4)  # past the tasks' sleep and their file
    late_s = (_latest_write_ns(data_dir) - returned_ns) / 1e9
    assert late_s < 0, (
        f"a task of the job wrote into the table {late_s:.1f}s after the job was reported ended "
        f"(which took {took:.1f}s)"
    )
    spark.stop()
