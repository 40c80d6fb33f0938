"""A run's time limit on the task side: the job learns it, and Airflow's timeout names it.

The DAG factory gives each task an ``execution_timeout`` (core/time_limits.py). Airflow enforces it by
raising ``AirflowTaskTimeout`` wherever ``execute`` happens to be, which is nearly always inside the
submitter, waiting for the Spark job; the attempt then records the exception as the failure reason,
and only afterwards does Airflow call ``on_kill``. :class:`TimeLimitedSubmitter` wraps the submitter so
that, instead, the job is killed at once and the exception (and with it the process's reason) names the
limit and its source. A refresh job also gets the limit as ``timeout_seconds`` in its options (the one
name, ``core.query_policy.TIMEOUT_OPTION``, that the driver's ``parse_options`` reads): its
driver cancels its Spark jobs at the same wall clock (spark/job/refresh.py), which also holds where
Airflow's kill does not reach (a cluster-mode driver).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowTaskTimeout

from airflow_tablemgmt.core.actions import REFRESH
from airflow_tablemgmt.core.errors import JobFailed
from airflow_tablemgmt.core.query_policy import TIMEOUT_OPTION
from airflow_tablemgmt.core.time_limits import TimeLimit

if TYPE_CHECKING:
    from airflow_tablemgmt.core.factory import JobSpec
    from airflow_tablemgmt.lifecycle import Submitter
    from airflow_tablemgmt.spark.protocol import JobResult

log = logging.getLogger(__name__)


class TimeLimitExceeded(AirflowTaskTimeout, JobFailed):
    """The run passed its time limit. Still Airflow's timeout (the task fails, ``on_kill`` runs) and a
    failed job (a dynamic table counts it towards suspend-after-failures)."""


class TimeLimitedSubmitter:
    """``inner`` with a time limit (see the module). Everything else is ``inner``'s: attribute reads
    go to it, so the protocols the lifecycle checks (kill by id, application state) are its own."""

    def __init__(self, inner: Submitter, limit: TimeLimit, started: float | None = None) -> None:
        self._inner = inner
        self._limit = limit
        self._started = time.monotonic() if started is None else started

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def remaining_seconds(self) -> int:
        """What is left of the limit now (the task's set-up and lease wait count against it too)."""
        return max(1, int(self._limit.limit.total_seconds() - (time.monotonic() - self._started)))

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        if job.action == REFRESH.name:
            job = replace(job, options={**job.options, TIMEOUT_OPTION: self.remaining_seconds()})
        try:
            return self._inner.submit(job, on_started=on_started)
        except TimeLimitExceeded:
            raise
        except AirflowTaskTimeout as e:
            reason = self._limit.reason(job.action)
            log.error("tablemgmt: %s", reason)
            try:
                self._inner.kill()  # before the attempt records the reason and lets the lease go
            except Exception:  # noqa: BLE001 - on_kill kills again; the lease TTL is the backstop
                log.exception("tablemgmt: killing the job at its time limit failed")
            raise TimeLimitExceeded(reason) from e

    def kill(self) -> None:
        self._inner.kill()
