"""A refresh's wall clock on the Spark side: at its limit the job cancels its Spark work and fails
naming the limit (issue 35, *bounded cost*).

A dynamic table's query is user SQL and can be made to run for days
(``SELECT max(sha2(CAST(id AS STRING), 256)) FROM range(1000000000000)``). The DAG gives the task an
``execution_timeout`` and hands the same limit to the job as ``timeout_seconds``
(``core.query_policy.TIMEOUT_OPTION``); this clock enforces it inside the driver, which also holds where
Airflow's kill does not reach (a cluster-mode driver, a worker that lost its task).

The refresh's Spark jobs run in one job group (``SparkContext.setJobGroup(..., interruptOnCancel=True)``,
pinned to the refresh's thread). At the limit a timer thread cancels the group, and keeps cancelling it
every second until the refresh ends: a cancel that lands between two Spark jobs (after the analysis,
before the write) must not let the next one run unbounded. The refresh then fails with
:class:`~airflow_tablemgmt.spark.errors.QueryTimedOut`, whatever error Spark raised for the cancel.
:func:`release` ends the cancelling early for clean-up that must finish (a failed creation dropping the
table it created).

Spark Connect runs no refresh (``spark/connect/policy.py``), so this is the classic driver's clock only.
"""

from __future__ import annotations

import logging
import threading
import uuid
from types import TracebackType
from typing import TYPE_CHECKING

from airflow_tablemgmt.core.query_policy import TIMEOUT_OPTION
from airflow_tablemgmt.spark.errors import QueryTimedOut

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger(__name__)

_ACTIVE: list[WallClock] = []


class WallClock:
    """``with WallClock(sc, seconds, "refresh"):`` the block's Spark jobs stop at ``seconds`` (None: no
    limit, the block runs as it is)."""

    def __init__(self, sc: SparkContext | None, seconds: float | None, what: str, every: float = 1.0) -> None:
        self.sc = sc
        self.seconds = seconds
        self.what = what
        self.every = every
        self.group = f"tablemgmt-{what}-{uuid.uuid4().hex[:12]}"
        self.expired = False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def reason(self) -> str:
        return (
            f"{self.what}: stopped after its limit of {self.seconds:g} s ({TIMEOUT_OPTION}, the task's "
            "execution_timeout); its Spark jobs were cancelled"
        )

    def __enter__(self) -> WallClock:
        if self.seconds is None or self.sc is None:
            return self
        self.sc.setJobGroup(self.group, f"tablemgmt {self.what} (limit {self.seconds:g} s)", True)
        self._thread = threading.Thread(target=self._run, name="tms-wall-clock", daemon=True)
        self._thread.start()
        _ACTIVE.append(self)
        return self

    def _run(self) -> None:
        assert self.seconds is not None and self.sc is not None
        if self._done.wait(self.seconds):
            return
        self.expired = True
        log.error("%s", self.reason)
        while True:
            try:
                self.sc.cancelJobGroup(self.group)
            except Exception:  # noqa: BLE001 - the driver may be stopping; the next round tries again
                log.debug("cancelling job group %s failed", self.group, exc_info=True)
            if self._done.wait(self.every):
                return

    def stop(self) -> None:
        """Stop cancelling, and run later Spark jobs of this thread outside the group."""
        self._done.set()
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if self._thread is not None and self.sc is not None:
            self._thread.join(timeout=5)
            try:
                self.sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
                self.sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
                self.sc.setLocalProperty("spark.job.interruptOnCancel", None)  # type: ignore[arg-type]
            except Exception:  # noqa: BLE001 - the session may be gone already
                log.debug("clearing the job group failed", exc_info=True)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
        # A block that finished at the limit did its work (a commit is not undone): only a failure,
        # which the cancel caused whatever Spark called it, becomes the limit's.
        if self.expired and isinstance(error, Exception):
            raise QueryTimedOut(self.reason) from None


def release() -> None:
    """Stop the running clock's cancelling (clean-up after a failure must run to its end); the block
    still fails with the limit when it had passed."""
    for clock in list(_ACTIVE):
        clock.stop()
