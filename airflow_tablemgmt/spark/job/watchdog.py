"""A driver-side watchdog for jobs sent to a Spark cluster.

A standalone (or YARN, Kubernetes) application whose workers are all gone does not fail: its driver
logs "Initial job has not accepted any resources" and waits for executors forever, so the process
would stay RUNNING and the task would never be retried. The watchdog cancels the application's jobs
once it has had no executor for ``after`` seconds, and the job fails with a reason that names the
cluster; Airflow's retry then runs it again when a worker is back.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger(__name__)

#: Spark conf key (seconds) that overrides the default wait for an executor.
WAIT_CONF = "spark.tablemgmt.executorWaitSeconds"
DEFAULT_WAIT_SECONDS = 60.0


class ExecutorWatchdog(threading.Thread):
    """Cancel the application's jobs when it has had no executor for ``after`` seconds.

    Does nothing for ``local`` masters (the driver is its own executor). ``reason`` is set when it
    cancelled; the job turns that into its failure. Once it has fired it cancels again every ``every``
    seconds until stopped: a cancel that lands before the job submitted any Spark work (still planning,
    loading the table) cancels nothing, and the work submitted after it would otherwise wait for
    executors forever.
    """

    def __init__(
        self,
        sc: SparkContext,
        after: float | None = None,
        every: float = 5.0,
        executors: object | None = None,
    ) -> None:
        super().__init__(name="tms-executor-watchdog", daemon=True)
        self.sc = sc
        self.master = str(sc.master)
        if after is None:
            after = float(sc.getConf().get(WAIT_CONF, str(DEFAULT_WAIT_SECONDS)))
        self.after = after
        self.every = every
        self.reason: str | None = None
        self._executors = executors or self._count_executors
        self._halt = threading.Event()

    @property
    def applies(self) -> bool:
        return not self.master.startswith("local")

    def _count_executors(self) -> int:
        # The status tracker lists the driver too.
        infos = self.sc._jsc.sc().statusTracker().getExecutorInfos()  # type: ignore[union-attr]
        return max(0, len(infos) - 1)

    def run(self) -> None:
        since: float | None = None
        while not self._halt.wait(self.every):
            try:
                count = self._executors()  # type: ignore[operator]
            except Exception:  # noqa: BLE001 - a stopping context: nothing left to watch
                return
            if count > 0:
                since = None
                continue
            since = since if since is not None else time.monotonic()
            if time.monotonic() - since >= self.after:
                self.reason = (
                    f"the Spark cluster {self.master} has given application {self.sc.applicationId} no "
                    f"executor for {self.after:.0f}s (no live worker with free cores and memory); "
                    "its jobs were cancelled"
                )
                log.error("tablemgmt: %s", self.reason)
                self._cancel_until_stopped()
                return

    def _cancel_until_stopped(self) -> None:
        while True:
            try:
                self.sc.cancelAllJobs()
            except Exception:  # noqa: BLE001 - a stopping context: nothing left to cancel
                return
            if self._halt.wait(self.every):
                return

    def stop(self) -> None:
        self._halt.set()
