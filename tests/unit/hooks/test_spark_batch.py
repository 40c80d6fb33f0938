"""One driver for a batch's tables (``hooks/spark_batch.py`` with the real driver loop, ``spark/job/batch.py``;
ADR 0004 decision 3), spark-submit being a stand-in that runs that loop without a JVM
(``tests/support/batch_driver.py``): the tables run in turn in one driver, each with its own result line; a
failed table does not end the driver; a killed table (its time limit) or one whose lease confirmation ran out
(its guard) ends the driver with that table only, and the next table starts a new one; tables of another
catalog get a driver of their own; a refresh runs as a job of its own."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.hooks.spark_batch import BatchDriver, BatchTableSubmitter
from airflow_tablemgmt.hooks.spark_job import SparkJobHook
from airflow_tablemgmt.hooks.spark_submit_direct import SparkConnection
from tests.support.batch_driver import install


def _driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> BatchDriver:
    monkeypatch.setenv("AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE", "false")
    driver = BatchDriver("spark_default", workdir=str(tmp_path))
    connection = SparkConnection(master="local[1]", spark_binary=str(install(tmp_path)))
    monkeypatch.setattr(driver, "_direct_connection", lambda: connection)
    return driver


def _job(
    tmp_path: Path, name: str, process_id: int, catalog: str = "lake", action: str = "rewrite-files"
) -> JobSpec:
    spec = TableSpec.model_validate({"catalog": catalog, "namespace": "db", "name": name})
    job = JobSpec.build(spec, CatalogSpec(name=catalog, warehouse=str(tmp_path / catalog)), action, {})
    from dataclasses import replace

    return replace(job, process_id=process_id, attempt=1)


def _drivers(tmp_path: Path) -> list[int]:
    log = tmp_path / "drivers.log"
    return [int(x) for x in log.read_text().split()] if log.exists() else []


def _gone(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")


def test_a_batch_runs_its_tables_in_one_driver_each_with_its_own_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = _driver(tmp_path, monkeypatch)
    started: list[str] = []
    results = [
        driver.run(_job(tmp_path, name, i), lease=None, on_started=started.append)
        for i, name in enumerate(["a", "b_fails", "c"], 1)
    ]
    assert [r.status for r in results] == ["SUCCESS", "FAILED", "SUCCESS"]
    assert (
        results[1].error == "the stand-in job failed b_fails" and results[1].error_class == "StandInFailure"
    )
    assert [r.summary["process_id"] for r in (results[0], results[2])] == [1, 3]  # each its own job
    [pid] = _drivers(tmp_path)  # one driver for the three, the failure did not end it
    assert results[0].summary["driver_pid"] == results[2].summary["driver_pid"]
    assert started == [f"local-{pid}"] * 3  # each table's process records the driver's application
    assert driver.drivers_started == 1 and driver.tables_run == 3
    driver.close()  # no more tables: the driver ends
    assert _gone(pid)


def test_a_killed_table_ends_its_driver_only_and_the_next_table_starts_a_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = _driver(tmp_path, monkeypatch)
    assert driver.run(_job(tmp_path, "a", 1), lease=None).status == "SUCCESS"
    timer = threading.Timer(1.0, driver.kill)  # the table's time limit
    timer.start()
    t0 = time.monotonic()
    killed = driver.run(_job(tmp_path, "b_slow", 2), lease=None)
    assert killed.status == "FAILED" and time.monotonic() - t0 < 20
    assert driver.job_stopped()
    first = _drivers(tmp_path)[0]
    assert _gone(first)
    after = driver.run(_job(tmp_path, "c", 3), lease=None)
    assert after.status == "SUCCESS" and after.summary["driver_pid"] != first
    assert len(_drivers(tmp_path)) == 2
    driver.close()


def test_a_table_whose_lease_runs_out_is_stopped_by_its_guard_and_only_it_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = _driver(tmp_path, monkeypatch)
    # a renewed lease, confirmed for the whole job: the guard lets the table run and commit
    ok = driver.run(_job(tmp_path, "a", 1), lease=(time.monotonic(), 60.0))
    assert ok.status == "SUCCESS"
    # the worker stops confirming (frozen): 1.5 s after the last confirmation the guard stops the driver
    lapsed = driver.run(_job(tmp_path, "b_slow", 2), lease=(time.monotonic(), 1.5))
    assert lapsed.status == "FAILED" and lapsed.error_class == "LeaseNotConfirmed", lapsed
    assert "lease guard stopped the Spark driver" in (lapsed.error or "")
    # the first table's finished lease bounds nothing: the next table runs (in a new driver) under its own
    after = driver.run(_job(tmp_path, "c", 3), lease=(time.monotonic(), 60.0))
    assert after.status == "SUCCESS" and len(_drivers(tmp_path)) == 2
    driver.close()


def test_a_renewed_confirmation_keeps_a_long_table_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The heartbeat's renewals reach the running table's slot: a table confirmed for 1.5 s at a time, renewed
    every 0.5 s, is not stopped (its job then fails on its own name: the stand-in's slow job would run 30 s,
    so the kill ends it once renewals are seen to hold for 4 s)."""
    driver = _driver(tmp_path, monkeypatch)
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(0.5):
            driver.confirm_lease(time.monotonic(), 1.5)

    beat = threading.Thread(target=renew, daemon=True)
    beat.start()
    threading.Timer(4.0, driver.kill).start()
    result = driver.run(_job(tmp_path, "a_slow", 1), lease=(time.monotonic(), 1.5))
    stop.set()
    assert result.status == "FAILED" and result.error_class != "LeaseNotConfirmed", (
        result
    )  # killed, not lapsed
    driver.close()


def test_tables_of_another_catalog_get_a_driver_of_their_own_and_a_refresh_runs_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = _driver(tmp_path, monkeypatch)
    first = driver.run(_job(tmp_path, "a", 1), lease=None)
    other = driver.run(_job(tmp_path, "b", 2, catalog="other"), lease=None)
    assert first.summary["driver_pid"] != other.summary["driver_pid"] and driver.drivers_started == 2

    class Alone(SparkJobHook):
        def submit(self, job: JobSpec, on_started: Any = None) -> Any:
            from airflow_tablemgmt.spark.protocol import JobResult

            return JobResult(status="SUCCESS", summary={"alone": job.table["name"]})

    submitter = BatchTableSubmitter(driver, Alone())
    refresh = submitter.submit(_job(tmp_path, "dyn", 3, action="refresh"))
    assert refresh.summary == {"alone": "dyn"} and driver.drivers_started == 2
    driver.close()


def test_a_table_past_its_time_limit_is_killed_and_the_next_table_runs_at_once_in_a_new_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow's timer (the batch's per-table limit) interrupts the wait for the table's result: the driver
    is killed with that table and never handed another, even before its thread has seen it end."""
    from datetime import timedelta

    from airflow.sdk.execution_time.timeout import timeout

    from airflow_tablemgmt.core.time_limits import maintenance_time_limit
    from airflow_tablemgmt.operators.time_limit import TimeLimitedSubmitter, TimeLimitExceeded

    driver = _driver(tmp_path, monkeypatch)
    # 5 s: time for the stand-in driver to start and take the table on a loaded machine (at 1 s, under a
    # load of 8 on 2 cores, the limit fired before any driver had started).
    limited = TimeLimitedSubmitter(
        BatchTableSubmitter(driver, SparkJobHook()), maintenance_time_limit(timedelta(seconds=5))
    )
    with pytest.raises(TimeLimitExceeded, match="ran past its time limit of 5s"):
        with timeout(5, "limit"):
            limited.submit(_job(tmp_path, "a_slow", 1))
    assert limited.job_stopped()
    after = driver.run(_job(tmp_path, "b", 2), lease=None)  # at once: no wait for the old driver's thread
    assert after.status == "SUCCESS" and len(_drivers(tmp_path)) == 2
    assert _gone(_drivers(tmp_path)[0])
    driver.close()


def test_a_finished_tables_guard_is_stopped_so_its_lease_running_out_later_stops_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver = _driver(tmp_path, monkeypatch)
    start = time.monotonic()
    first = driver.run(_job(tmp_path, "a", 1), lease=(start, 5.0))  # done well within its 5 s, even loaded
    time.sleep(max(0.0, start + 5.5 - time.monotonic()))  # a's confirmation has run out now
    second = driver.run(_job(tmp_path, "b", 2), lease=(time.monotonic(), 60.0))
    assert (first.status, second.status) == ("SUCCESS", "SUCCESS")
    assert first.summary["driver_pid"] == second.summary["driver_pid"]  # the same driver lived on
    driver.close()
