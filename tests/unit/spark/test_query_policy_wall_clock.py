"""The refresh's wall clock (``spark/job/wall_clock.py``) against a stand-in SparkContext: the job group
is set for the block, cancelled at the limit and again until the block ends, a failure after the limit
becomes the limit's, and work that finished is not undone. The real cancel is
``tests/security/test_refresh_wall_clock_spark.py``."""

from __future__ import annotations

import threading
import time

import pytest

from airflow_tablemgmt.spark.errors import QueryTimedOut
from airflow_tablemgmt.spark.job import wall_clock
from airflow_tablemgmt.spark.job.wall_clock import WallClock


class _Context:
    def __init__(self) -> None:
        self.group: str | None = None
        self.interrupt: bool | None = None
        self.cancels: list[str] = []
        self.cancelled = threading.Event()

    def setJobGroup(self, group: str, description: str, interrupt: bool) -> None:  # noqa: N802
        self.group, self.interrupt = group, interrupt

    def cancelJobGroup(self, group: str) -> None:  # noqa: N802
        self.cancels.append(group)
        self.cancelled.set()

    def setLocalProperty(self, key: str, value: str | None) -> None:  # noqa: N802
        if key == "spark.jobGroup.id" and value is None:
            self.group = None


def test_a_failure_after_the_limit_is_the_limits_and_names_it() -> None:
    sc = _Context()
    with pytest.raises(QueryTimedOut, match=r"^refresh: stopped after its limit of 0\.2 s \(timeout_seconds"):
        with WallClock(sc, 0.2, "refresh", every=0.05) as clock:  # type: ignore[arg-type]
            assert sc.group == clock.group and sc.interrupt is True
            assert sc.cancelled.wait(5)
            deadline = time.monotonic() + 5
            while len(sc.cancels) < 2 and time.monotonic() < deadline:  # the block goes on: cancelled again
                time.sleep(0.01)
            raise RuntimeError("Job 3 cancelled part of cancelled job group")  # what Spark raises
    assert len(sc.cancels) >= 2 and set(sc.cancels) == {clock.group}
    assert sc.group is None  # later Spark jobs of the thread run outside the group


def test_work_that_ends_within_the_limit_is_untouched() -> None:
    sc = _Context()
    with WallClock(sc, 60, "refresh") as clock:  # type: ignore[arg-type]
        pass
    assert not clock.expired and sc.cancels == [] and sc.group is None


def test_work_that_finished_at_the_limit_is_not_undone() -> None:
    sc = _Context()
    with WallClock(sc, 0.05, "create", every=0.05):  # type: ignore[arg-type]
        assert sc.cancelled.wait(5)
    # no exception: the block's work (a commit) happened


def test_release_stops_the_cancelling_for_clean_up() -> None:
    sc = _Context()
    with pytest.raises(QueryTimedOut):
        with WallClock(sc, 0.05, "create", every=0.02):  # type: ignore[arg-type]
            assert sc.cancelled.wait(5)
            wall_clock.release()
            after = len(sc.cancels)
            time.sleep(0.2)
            assert len(sc.cancels) == after  # the drop of the created table is not cancelled
            raise RuntimeError("cancelled")


def test_no_limit_sets_no_group() -> None:
    sc = _Context()
    with WallClock(sc, None, "refresh"):  # type: ignore[arg-type]
        pass
    assert sc.group is None and sc.cancels == []
