"""Issue 36, item 3: another process ends a Connect job and *observes* its end on a real server.

A job's session runs a long operation (the client thread stands for a worker that no longer reads it);
from a separate session object on the same server session, :func:`end_application` interrupts the job's
tag and returns only once the server reports the operation ended. The second interrupt of the same tag
returns nothing although it is the same job: Spark 3.5's interruptTag answers what it newly interrupted,
which is why the end is observed by reattaching, not inferred from the interrupt.
"""

from __future__ import annotations

import threading
import time

from airflow_tablemgmt.spark.connect.client import close_session, open_session
from airflow_tablemgmt.spark.connect.operations import end_application, record_operations, recorded_operations
from airflow_tablemgmt.spark.connect.session import ConnectRun
from tests.integration.connect.server import ConnectServer


def test_a_long_operation_is_interrupted_and_seen_to_end(connect_server: ConnectServer) -> None:
    run = ConnectRun(connect_server.url, "tms-p900-a1")
    spark = open_session(connect_server.url, run.session_id)
    record_operations(spark, run.tag)
    ended_at: list[float] = []
    errors: list[str] = []

    def long_operation() -> None:  # a query that runs for minutes unless interrupted
        spark.addTag(run.tag)  # pyspark keeps tags per thread, as the job's thread does (ConnectRun.open)
        try:
            spark.range(0, 10**12, numPartitions=2).selectExpr("sum(id * 7 % 13) AS s").collect()
        except Exception as e:  # noqa: BLE001
            errors.append(str(e))
        ended_at.append(time.monotonic())

    worker = threading.Thread(target=long_operation, daemon=True)
    worker.start()
    deadline = time.monotonic() + 60
    observer = open_session(connect_server.url, run.session_id)
    while not recorded_operations(observer, run.tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    close_session(observer)
    assert recorded_operations(open_session(connect_server.url, run.session_id), run.tag)
    time.sleep(1.0)  # well into the operation
    assert worker.is_alive()

    observed = end_application(run.application_id, 60)
    observed_at = time.monotonic()
    assert observed is True
    worker.join(30)
    assert errors and "OPERATION_CANCELED" in errors[0], errors
    # Seen to end: the job's own thread got its error no later than a moment after the observer returned.
    assert ended_at and ended_at[0] - observed_at < 5
    again = open_session(connect_server.url, run.session_id)
    try:
        assert list(again.interruptTag(run.tag)) == []  # the interrupt says nothing more about it
    finally:
        again.stop()
        spark.stop()


def test_a_job_the_server_does_not_know_counts_as_ended(connect_server: ConnectServer) -> None:
    app = f"connect:{connect_server.url}#00000000-0000-4000-8000-00000000abcd/tms-p901-a1"
    assert end_application(app, 10) is True
    assert end_application("local-1764000000000", 10) is None
