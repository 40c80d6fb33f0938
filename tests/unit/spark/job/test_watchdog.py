"""The executor watchdog cancels a cluster application's jobs after it has had no executor for too long."""

from __future__ import annotations

import time
from typing import Any

from airflow_tablemgmt.spark.job.watchdog import ExecutorWatchdog


class Context:
    """What the watchdog reads of a SparkContext: master, application id, conf, and cancelAllJobs."""

    def __init__(self, master: str) -> None:
        self.master = master
        self.applicationId = "app-20261123-0001"
        self.cancelled = 0

    def getConf(self) -> Any:
        return {}

    def cancelAllJobs(self) -> None:
        self.cancelled += 1


def test_no_executor_for_too_long_cancels_and_names_the_cluster() -> None:
    sc = Context("spark://10.0.0.5:7077")
    dog = ExecutorWatchdog(sc, after=0.2, every=0.02, executors=lambda: 0)  # type: ignore[arg-type]
    assert dog.applies
    dog.start()
    deadline = time.monotonic() + 5
    while dog.reason is None and time.monotonic() < deadline:
        time.sleep(0.01)
    dog.stop()
    dog.join(5)
    assert sc.cancelled >= 1
    assert (
        dog.reason is not None and "spark://10.0.0.5:7077" in dog.reason and "app-20261123-0001" in dog.reason
    )


def test_jobs_submitted_after_the_cancel_are_cancelled_too() -> None:
    """A cancel that lands before the job submitted any Spark work cancels nothing; the job's later
    Spark work must not wait for executors forever: the watchdog keeps cancelling until stopped."""
    sc = Context("spark://10.0.0.5:7077")
    dog = ExecutorWatchdog(sc, after=0.1, every=0.02, executors=lambda: 0)  # type: ignore[arg-type]
    dog.start()
    deadline = time.monotonic() + 5
    while sc.cancelled < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    dog.stop()
    dog.join(5)
    assert not dog.is_alive()
    assert sc.cancelled >= 3, sc.cancelled
    assert dog.reason is not None


def test_executors_present_or_coming_back_never_cancel() -> None:
    sc = Context("spark://10.0.0.5:7077")
    counts = iter([0, 0, 1, 0, 0, 2] + [1] * 1000)  # gaps shorter than the wait
    dog = ExecutorWatchdog(sc, after=0.2, every=0.03, executors=lambda: next(counts))  # type: ignore[arg-type]
    dog.start()
    time.sleep(0.6)
    dog.stop()
    dog.join(5)
    assert sc.cancelled == 0 and dog.reason is None


def test_local_masters_are_not_watched() -> None:
    assert not ExecutorWatchdog(Context("local[*]"), after=1).applies  # type: ignore[arg-type]
