"""One spark-submit driver for a planned batch's tables (ADR 0004 decision 3): the worker side of
``spark/job/batch.py``.

:class:`BatchDriver` starts ``spark-submit main.py --batch DIR`` once, with the launch conf, jars and
environment of the first table's job, and hands it the batch's tables one at a time; the JVM start and the
session are paid once per batch instead of once per table. Each table still runs through the lifecycle with
its own process row, lease, time limit and result: :class:`BatchTableSubmitter` is that table's submitter
(the ``Submitter`` protocol the lifecycle drives), and only the driver behind it is shared.

* **Handing a table over.** The table's slot directory gets the lease confirmation the runner gave before
  submit (``lease.json``), then its spec (``job.json``, secrets resolved here, 0600, renamed into place
  whole). The driver runs it under its own lease guard and prints its one result line; the n-th result line
  on the driver's output is the n-th table's.
* **The lease.** Each renewal of the running table's lease rewrites its slot's confirmation
  (``confirm_lease``); when it runs out the driver's guard SIGKILLs the JVM (nothing of that table commits
  past its lease). That table fails (``LeaseNotConfirmed``), and the batch's next table starts a new driver.
* **A failure** of one table's job is that table's result line: the driver goes on with the next table.
* **A kill** (the table's time limit, the batch task killed, a cancel) kills the driver with the table it is
  running; the next table starts a new driver.
* **Tables that cannot share a driver** (another catalog, other jars) end the running driver and start one of
  their own; a job that runs user SQL (a dynamic table's refresh, whose spark-submit starts in a sandbox) and a
  cluster-mode connection (whose driver cannot see this host's files) run as jobs of their own
  (:class:`~airflow_tablemgmt.hooks.spark_job.SparkJobHook`).
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.hooks.airflow_settings import artifact_settings
from airflow_tablemgmt.hooks.spark_failure import failure_reason, guard_stop_reason
from airflow_tablemgmt.hooks.spark_job import _APP_ID, KILL_WAIT_S, SparkJobHook, _airflow_hook_class
from airflow_tablemgmt.hooks.spark_submit_direct import (
    DirectSparkSubmit,
    SparkConnection,
    SubmitFailed,
    connection_from_environment,
    die_with_parent,
    kill_submitted,
    wait_gone,
)
from airflow_tablemgmt.spark.launch.submit import (
    JobResult,
    build_batch_submit_spec,
    build_submit_spec,
    driver_key,
    parse_result,
    write_spec,
)
from airflow_tablemgmt.spark.protocol import RESULT_MARKER

log = logging.getLogger(__name__)

#: Mirrors ``spark/job/batch.py`` (which the worker does not import: it is the driver's side).
JOB_FILE = "job.json"
END_FILE = "end"
LEASE_FILE = "lease.json"
#: How long a driver told that the batch ended may take to stop its session and exit before it is killed.
CLOSE_WAIT_S = 60.0


class NotBatchable(Exception):
    """This job cannot run in a shared driver (see the module docstring); it runs as a job of its own."""


class _Driver:
    """One started driver's own state, so a killed driver's thread, still ending, touches nothing of the
    next one: its result lines, its output's tail, its application id and whether it has exited."""

    def __init__(self) -> None:
        self.results: queue.Queue[str] = queue.Queue()
        self.exited = threading.Event()
        self.exit_error: str | None = None
        self.lines: deque[str] = deque(maxlen=2000)
        self.app_id: str | None = None
        self.waiting: list[Callable[[str], None]] = []  # on_started callbacks before the id was seen
        self.abandoned = False  # killed: never handed another table

    def on_line(self, line: str) -> None:
        self.lines.append(line)
        if self.app_id is None:
            m = _APP_ID.search(line)
            if m:
                self.app_id = m.group(1)
                waiting, self.waiting = self.waiting, []
                for callback in waiting:
                    callback(self.app_id)
        if RESULT_MARKER in line and line.strip().startswith("{"):
            self.results.put(line)

    @property
    def running(self) -> bool:
        return not self.exited.is_set() and not self.abandoned


class BatchDriver:
    """The one driver of a batch (see the module docstring). Not thread-safe: one table at a time."""

    def __init__(self, spark_conn_id: str = "spark_default", workdir: str | None = None) -> None:
        self.spark_conn_id = spark_conn_id
        self.workdir = workdir
        self.extra_conf: dict[str, str] = {}
        self.drivers_started = 0
        self.tables_run = 0
        self._d: _Driver | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._key: str | None = None
        self._index = 0
        self._hook: Any = None
        self._thread: threading.Thread | None = None
        self._slot: Path | None = None
        self._kill_requested = False
        self._killed_pids: list[int] = []

    @property
    def app_id(self) -> str | None:
        """The running (or last) driver's Spark application id."""
        return self._d.app_id if self._d is not None else None

    # -- one table -------------------------------------------------------------------------------------
    def run(
        self,
        job: JobSpec,
        *,
        lease: tuple[float, float] | None,
        on_started: Callable[[str], None] | None = None,
    ) -> JobResult:
        """Run ``job`` in the driver (starting one when none runs or ``job`` cannot share the running one);
        its result. ``lease``: the runner's confirmation before submit (sent monotonic, valid for)."""
        if getattr(job, "action", None) == "refresh":
            raise NotBatchable("a refresh runs user SQL in a sandbox of its own")
        own = build_submit_spec(job, Path(tempfile.gettempdir()) / JOB_FILE, artifacts=artifact_settings())
        key = driver_key(job, own)
        if self._running() and key != self._key:
            log.info("tablemgmt: %s needs another driver (other catalog or jars): ending this one", job.table)
            self.close()
        if self._d is not None and not self._d.running:  # killed or ended: its directory goes
            self._forget()
        self._kill_requested, self._killed_pids = False, []
        if not self._running():
            self._start(job, key)
        d = self._d
        assert d is not None and self._tmp is not None
        slot = Path(self._tmp.name) / f"{self._index:05d}"
        self._index += 1
        slot.mkdir(mode=0o700)
        self._slot = slot
        if lease is not None:
            from airflow_tablemgmt.spark.job import lease_guard

            lease_guard.confirm(slot / LEASE_FILE, sent_monotonic=lease[0], valid_for=lease[1])
        from airflow_tablemgmt.hooks.secrets import resolve_catalog

        staged = write_spec(replace(job, catalog=resolve_catalog(job.catalog)), slot / f".{JOB_FILE}")
        if on_started is not None:
            if d.app_id is not None:
                on_started(d.app_id)
            else:
                d.waiting.append(on_started)
        os.replace(staged, slot / JOB_FILE)  # the driver takes the table now
        self.tables_run += 1
        return self._result(d, slot)

    def _result(self, d: _Driver, slot: Path) -> JobResult:
        while True:
            try:
                line = d.results.get(timeout=0.2)
            except queue.Empty:
                if d.exited.is_set() and d.results.empty():
                    break
                continue
            self._slot = None  # its lease no longer bounds anything the driver runs
            return parse_result([line])
        # The driver ended without this table's result line.
        self._slot = None
        stopped = guard_stop_reason(slot / JOB_FILE)
        if stopped is not None:  # its lease guard killed the driver
            return JobResult(status="FAILED", error=stopped, error_class="LeaseNotConfirmed")
        return JobResult(
            status="FAILED",
            error=failure_reason(list(d.lines), d.exit_error),
            error_class="SparkSubmitFailed",
        )

    def confirm_lease(self, sent_monotonic: float, valid_for: float) -> None:
        """Rewrite the running table's confirmation (``lifecycle.ConfirmsLease``)."""
        from airflow_tablemgmt.spark.job import lease_guard

        slot = self._slot
        if slot is not None and slot.is_dir():
            try:
                lease_guard.confirm(slot / LEASE_FILE, sent_monotonic=sent_monotonic, valid_for=valid_for)
            except FileNotFoundError:
                pass  # the batch's directory is gone: the driver ended

    # -- the driver --------------------------------------------------------------------------------------
    def _running(self) -> bool:
        return self._d is not None and self._d.running

    def _start(self, job: JobSpec, key: str) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="tms-batch-", dir=self.workdir)
        root = Path(self._tmp.name)
        os.chmod(root, 0o700)
        spec = build_batch_submit_spec(job, root, artifacts=artifact_settings())
        d = _Driver()
        kwargs: dict[str, Any] = {
            "conf": {**self.extra_conf, **spec.conf},
            "jars": ",".join(spec.jars) or None,
            "packages": ",".join(spec.packages) or None,
            "name": spec.name,
            "application_args": spec.application_args,
            "env_vars": spec.env,
            "on_line": d.on_line,
        }
        direct = self._direct_connection()
        if direct is not None:
            hook: Any = DirectSparkSubmit(direct, **kwargs)
            failed: type[Exception] = SubmitFailed
            cluster = direct.deploy_mode == "cluster"
        else:
            hook = _airflow_hook_class()(conn_id=self.spark_conn_id, **kwargs)
            from airflow.exceptions import AirflowException

            failed = AirflowException
            cluster = (
                bool(hook._should_track_driver_status) or hook._connection.get("deploy_mode") == "cluster"
            )
        if cluster:
            self._tmp.cleanup()
            self._tmp = None
            raise NotBatchable("a cluster-mode driver cannot see this worker's files")
        self._hook, self._key, self._index, self._d = hook, key, 0, d
        preexec = die_with_parent()

        def drive() -> None:
            try:
                hook.submit(application=spec.application, preexec_fn=preexec)
            except failed as e:
                d.exit_error = str(e)
            except BaseException as e:  # noqa: BLE001 - the table waiting for its result fails with it
                d.exit_error = f"{type(e).__name__}: {e}"
            finally:
                d.exited.set()

        self._thread = threading.Thread(target=drive, name="tablemgmt-batch-driver", daemon=True)
        self._thread.start()
        self.drivers_started += 1
        log.info("tablemgmt: batch driver %d started (%s)", self.drivers_started, spec.name)

    def _direct_connection(self) -> SparkConnection | None:
        """The connection without Airflow, when decidable (as ``SparkJobHook._direct_connection``)."""
        if "airflow" in sys.modules:
            return None
        return connection_from_environment(self.spark_conn_id)

    def kill(self) -> None:
        """Kill the driver and the table it runs (:meth:`job_stopped` says when its processes are gone). The
        driver is done with: the next table starts a new one, even while this one's exit is still being
        noticed (a time limit interrupts the wait for the result before the driver's thread sees it end)."""
        hook, d = self._hook, self._d
        if hook is None or d is None or not d.running:
            return
        self._kill_requested = True
        d.abandoned = True
        self._killed_pids = kill_submitted(hook)

    def job_stopped(self) -> bool:
        """After :meth:`kill`: True once the driver's processes are gone (bounded by ``KILL_WAIT_S``)."""
        if not self._kill_requested:
            return True
        return wait_gone(self._killed_pids, KILL_WAIT_S)

    def close(self) -> None:
        """No more tables: the driver stops its session and exits (killed after :data:`CLOSE_WAIT_S`)."""
        d = self._d
        if self._tmp is None or d is None:
            self._forget()
            return
        if d.abandoned:
            self.job_stopped()
        elif d.running:
            (Path(self._tmp.name) / END_FILE).touch()
            if not d.exited.wait(CLOSE_WAIT_S):
                log.warning("tablemgmt: the batch driver did not end in %.0fs: killing it", CLOSE_WAIT_S)
                self.kill()
                self.job_stopped()
        if self._thread is not None:
            self._thread.join(timeout=CLOSE_WAIT_S)
        self._forget()

    def _forget(self) -> None:
        """The driver is gone: its directory too (the next table starts a new one)."""
        if self._tmp is not None:
            try:
                self._tmp.cleanup()
            except OSError:
                log.debug("batch directory cleanup", exc_info=True)
        self._tmp, self._key, self._slot, self._d = None, None, None, None


class BatchTableSubmitter:
    """One table's submitter on the batch's shared :class:`BatchDriver` (the lifecycle's ``Submitter``,
    ``ConfirmsLease`` and ``ConfirmsStop``). A job the driver cannot take runs as a job of its own through
    ``fallback`` (a :class:`SparkJobHook`), which also answers the takeover's questions by application id."""

    def __init__(self, driver: BatchDriver, fallback: SparkJobHook) -> None:
        self.driver = driver
        self.fallback = fallback
        self.extra_conf = driver.extra_conf  # lineage keys (lifecycle.TakesJobConf)
        self._lease: tuple[float, float] | None = None
        self._own = False  # this table ran through the fallback

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        lease, self._lease = self._lease, None
        try:
            return self.driver.run(job, lease=lease, on_started=on_started)
        except NotBatchable as e:
            log.info("tablemgmt: %s runs as a job of its own: %s", job.table, e)
            self._own = True
            self.fallback.extra_conf.update(self.extra_conf)
            if lease is not None:
                self.fallback.confirm_lease(*lease)
            return self.fallback.submit(job, on_started=on_started)

    def confirm_lease(self, sent_monotonic: float, valid_for: float) -> None:
        self._lease = (sent_monotonic, valid_for)
        (self.fallback if self._own else self.driver).confirm_lease(sent_monotonic, valid_for)

    def kill(self) -> None:
        (self.fallback if self._own else self.driver).kill()

    def job_stopped(self) -> bool:
        return (self.fallback if self._own else self.driver).job_stopped()

    def kill_application(self, application_id: str) -> bool:
        return self.fallback.kill_application(application_id)

    def application_finished(self, application_id: str) -> bool:
        return self.fallback.application_finished(application_id)


__all__ = ["BatchDriver", "BatchTableSubmitter", "NotBatchable"]
