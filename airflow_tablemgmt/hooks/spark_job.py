"""SparkJobHook: submits a table-maintenance JobSpec through SparkSubmitHook and parses its result.

Airflow is imported only when it is needed: in a process that has not imported it (the ``tablemgmt``
CLI) and whose Spark connection Airflow would provably take from an ``AIRFLOW_CONN_<ID>`` JSON value
(see :func:`connection_from_environment`), the job is submitted with the same ``spark-submit``
command line that ``SparkSubmitHook`` builds, without Airflow's import (seconds of start-up): that
runner is ``hooks/spark_submit_direct.py``.
"""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.hooks.airflow_settings import (
    artifact_settings,
    job_env_allow,
)
from airflow_tablemgmt.hooks.spark_class_cache import plan_class_cache, request_archive
from airflow_tablemgmt.hooks.spark_failure import failure_reason, guard_stop_reason
from airflow_tablemgmt.hooks.spark_submit_direct import (
    DirectSparkSubmit,
    SparkConnection,
    SubmitFailed,
    connection_from_environment,
    die_with_parent,
    keep_line,
    kill_submitted,
    wait_gone,
)
from airflow_tablemgmt.hooks.user_sql_sandbox import sandbox_prefix
from airflow_tablemgmt.spark.launch.environment import job_environment
from airflow_tablemgmt.spark.launch.submit import JobResult, SubmitClock, build_submit_spec, parse_result
from airflow_tablemgmt.spark.protocol import describe_timings

log = logging.getLogger(__name__)

EMBEDDED_MASTER = "local[*]"
_APP_ID = re.compile(r"spark application (?:id )?((?:local|app|application|spark)[-_][\w-]+)")
# A standalone master's driver id (cluster mode), which ``spark-submit --kill`` accepts.
_DRIVER_ID = re.compile(r"\bdriver-\d{14}-\d{4,}\b")
_KILL_TIMEOUT_S = 120
#: How long a killed job's processes (spark-submit, the driver JVM, PySpark's driver) may take to be
#: gone before the runner is told they were not seen to end (and keeps the table's lease).
KILL_WAIT_S = 30.0
#: A standalone master's driver states in which the driver process is gone.
ENDED_DRIVER_STATES = frozenset({"FINISHED", "KILLED", "FAILED", "ERROR"})
_DRIVER_STATE = re.compile(r'"driverState"\s*:\s*"(\w+)"')


def _airflow_hook_class() -> type:
    """``_CapturingSparkSubmitHook``, defined on first use (it imports Airflow)."""
    cached = globals().get("_HOOK_CLASS")
    if cached is not None:
        return cached
    from airflow.exceptions import AirflowException, AirflowNotFoundException
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    class _CapturingSparkSubmitHook(SparkSubmitHook):
        """SparkSubmitHook that keeps the lines it streams to the task log, so the job's result line and
        the tail of any error can be read back, and that defaults to ``local[*]`` (not yarn) when the
        connection does not exist."""

        def __init__(
            self,
            *args: Any,
            on_line: Callable[[str], None] | None = None,
            env_vars: dict[str, str] | None = None,
            **kwargs: Any,
        ) -> None:
            self.lines: deque[str] = deque(maxlen=2000)
            self.on_line = on_line
            # SparkSubmitHook starts spark-submit with its whole environment plus env_vars; ours is the
            # allow-list (spark/launch/environment.py), handed to Popen directly.
            self.job_env = job_environment(env_vars or {}, job_env_allow())
            super().__init__(*args, **kwargs)

        def submit(self, application: str = "", **kwargs: Any) -> None:
            kwargs["env"] = self.job_env
            super().submit(application, **kwargs)

        def _resolve_connection(self) -> dict[str, Any]:
            try:
                self.get_connection(self._conn_id)
                found = True
            except (AirflowNotFoundException, AirflowException):
                found = False
            data = super()._resolve_connection()
            if not found:
                self.log.info("connection %s not found; running Spark on %s", self._conn_id, EMBEDDED_MASTER)
                data["master"] = EMBEDDED_MASTER
            return data

        command_prefix: list[str] = []  # noqa: RUF012 - replaced per job, never mutated

        def _build_spark_submit_command(self, application: str) -> list[str]:
            return [*self.command_prefix, *super()._build_spark_submit_command(application)]

        def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
            def tee() -> Iterator[Any]:
                for raw in itr:
                    keep_line(raw.rstrip("\n"), self.lines, self.on_line, self.log)
                    yield raw

            super()._process_spark_submit_log(tee())

    globals()["_HOOK_CLASS"] = _CapturingSparkSubmitHook
    return _CapturingSparkSubmitHook


def __getattr__(name: str) -> Any:
    if name == "_CapturingSparkSubmitHook":
        return _airflow_hook_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class SparkJobHook:
    """Runs one JobSpec with spark-submit on the ``spark_default`` connection."""

    def __init__(self, spark_conn_id: str = "spark_default", workdir: str | None = None) -> None:
        self.spark_conn_id = spark_conn_id
        self.workdir = workdir
        self._hook: Any = None
        self._kill_requested = False
        self._killed_pids: list[int] = []
        self._driver_id: str | None = None  # a standalone cluster driver this hook started
        # Spark properties added for one task (the OpenLineage parent run); the connection's own win.
        self.extra_conf: dict[str, str] = {}
        # The lease confirmation for the driver's guard (spark/job/lease_guard.py): the latest
        # (sent_monotonic, valid_for) and the file beside the running job's spec.
        self._lease_confirmed: tuple[float, float] | None = None
        self._lease_file: Path | None = None

    def _direct_connection(self) -> SparkConnection | None:
        """The connection, when this process has not imported Airflow and need not (see
        :func:`connection_from_environment`); None means: through Airflow's SparkSubmitHook."""
        if "airflow" in sys.modules:
            return None
        return connection_from_environment(self.spark_conn_id)

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        """Submit and wait. Returns the parsed result; a job that died without one is FAILED with
        the tail of Spark's output as the reason."""
        started: list[str] = []
        clock = SubmitClock()
        self._kill_requested, self._killed_pids, self._driver_id = False, [], None

        def on_line(line: str) -> None:
            clock.line(line)
            if started:
                return
            # In standalone cluster mode the driver runs on the cluster and its log (with the
            # application id) never reaches spark-submit: the driver id is what can be killed.
            cluster = self._hook is not None and self._hook._should_track_driver_status
            m = _DRIVER_ID.search(line) if cluster else _APP_ID.search(line)
            if m:
                found = m.group(0) if cluster else m.group(1)
                started.append(found)
                if cluster:
                    self._driver_id = found
                if on_started is not None:
                    on_started(found)

        with tempfile.TemporaryDirectory(prefix="tms-job-", dir=self.workdir) as tmp:
            spec_path = Path(tmp) / "job.json"
            # Secret references resolve here, on the worker, into a 0600 file in this 0700 directory;
            # the command line (ps, SparkSubmitHook's log) never carries catalog properties.
            from dataclasses import replace

            from airflow_tablemgmt.hooks.secrets import resolve_catalog
            from airflow_tablemgmt.spark.launch.submit import write_spec

            write_spec(replace(job, catalog=resolve_catalog(job.catalog)), spec_path)
            self._start_lease_file(spec_path)
            spec = build_submit_spec(job, spec_path, artifacts=artifact_settings())
            # A dynamic table's job runs user SQL: its spark-submit starts in the sandbox.
            sandboxed = sandbox_prefix(job, spec_path, spec)
            kwargs: dict[str, Any] = {
                "conf": {**self.extra_conf, **spec.conf},
                "jars": ",".join(spec.jars) or None,
                "packages": ",".join(spec.packages) or None,
                "name": spec.name,
                "application_args": spec.application_args,
                "env_vars": spec.env,
                "on_line": on_line,
            }
            direct = self._direct_connection()
            hook: Any
            if direct is not None:
                hook = DirectSparkSubmit(direct, **kwargs)
                failed: type[Exception] = SubmitFailed
            else:
                hook = _airflow_hook_class()(conn_id=self.spark_conn_id, **kwargs)
                from airflow.exceptions import AirflowException

                failed = AirflowException
            self._hook = hook
            hook.command_prefix = sandboxed
            # The conf as submitted (extra_conf merged in): the class cache's options are added to it.
            cache = plan_class_cache(hook, kwargs["conf"], spec.jars, kwargs["packages"], spec.env)
            build_archive = cache is not None and cache.mode == "create"
            if build_archive:
                cache = None  # written after this job by a run of its own (see hooks/spark_class_cache.py)
            exit_error: str | None = None
            preexec = die_with_parent()
            clock.launch()
            try:
                hook.submit(application=spec.application, preexec_fn=preexec)
            except failed as e:
                exit_error = str(e)
            except BaseException:
                if cache is not None:
                    cache.release()
                raise
            clock.exit()
            parsing = time.perf_counter()
            result = parse_result(hook.lines)
            dump_failed = False
            if cache is not None:
                note, dump_failed = cache.finish(
                    list(hook.lines), succeeded=result.ok and exit_error is None, result_seen=bool(result.raw)
                )
                if note:
                    (hook.log.warning if dump_failed or "removed" in note else hook.log.info)(
                        "tablemgmt: %s", note
                    )
            if dump_failed and result.ok:  # the job's work is done; only the archive was not written
                exit_error = None
            if result.raw:
                timings = clock.complete(result, time.perf_counter() - parsing)
                hook.log.info("tablemgmt: timings: %s", describe_timings(timings))
            if result.status == "SUCCESS" and exit_error is None:
                if build_archive:
                    request_archive(hook, kwargs["conf"], spec.jars, kwargs["packages"], spec.env)
                return result
            if result.error:
                return result
            stopped = guard_stop_reason(spec_path)
            if stopped is not None:  # the driver's lease guard killed it: say so, not just "exit -9"
                return JobResult(status="FAILED", error=stopped, error_class="LeaseNotConfirmed")
            return JobResult(
                status="FAILED",
                error=failure_reason(list(hook.lines), exit_error),
                error_class="SparkSubmitFailed",
            )

    def confirm_lease(self, sent_monotonic: float, valid_for: float) -> None:
        """``lifecycle.ConfirmsLease``: rewrite the running job's lease confirmation (the driver stops
        itself when it runs out, even while this worker is frozen: ``spark/job/lease_guard.py``)."""
        from airflow_tablemgmt.spark.job import lease_guard

        self._lease_confirmed = (sent_monotonic, valid_for)
        path = self._lease_file
        if path is not None and path.parent.is_dir():  # the job's directory goes when it ended
            try:
                lease_guard.confirm(path, sent_monotonic=sent_monotonic, valid_for=valid_for)
            except FileNotFoundError:
                pass  # removed meanwhile: the job has ended

    def _start_lease_file(self, spec_path: Path) -> None:
        """Put the confirmation the runner gave before submit beside the spec (no lease: no file, no
        guard). It is used once: the next job starts without one until the runner confirms again."""
        from airflow_tablemgmt.spark.job import lease_guard

        confirmed, self._lease_confirmed = self._lease_confirmed, None
        self._lease_file = None
        if confirmed is not None:
            path = spec_path.with_name(lease_guard.LEASE_FILE)
            lease_guard.confirm(path, sent_monotonic=confirmed[0], valid_for=confirmed[1])
            self._lease_file = path

    def kill(self) -> None:
        """Kill the running job: SparkSubmitHook's kill (spark-submit, and a cluster driver by id),
        then every process spark-submit started (the driver JVM and PySpark's Python driver, which a
        kill of spark-submit alone would orphan). :meth:`job_stopped` says whether they are gone."""
        hook = self._hook
        if hook is None:
            return
        self._kill_requested = True
        self._killed_pids = kill_submitted(hook)

    def job_stopped(self) -> bool:
        """After :meth:`kill`: True once the job's processes are gone (bounded by :data:`KILL_WAIT_S`)
        and, for a standalone cluster driver, once the master reports it ended. True when no kill was
        asked. The runner releases the table's lease only then (``lifecycle.model.ConfirmsStop``)."""
        if not self._kill_requested:
            return True
        gone = wait_gone(self._killed_pids, KILL_WAIT_S)
        if gone and self._driver_id is not None:
            deadline = time.monotonic() + KILL_WAIT_S
            while not (gone := self.application_finished(self._driver_id)) and time.monotonic() < deadline:
                time.sleep(1.0)
        return gone

    def application_finished(self, application_id: str) -> bool:
        """Whether the standalone master reports the driver ``application_id`` ended (FINISHED,
        KILLED, FAILED, ERROR): the master says so only once the worker saw the driver's process
        exit. False when it cannot tell (another engine, an unreachable master, an unknown id)."""
        if not _DRIVER_ID.fullmatch(application_id) or self._direct_connection() is not None:
            return False
        hook = _airflow_hook_class()(conn_id=self.spark_conn_id)
        if not hook._should_track_driver_status:
            return False
        hook._driver_id = application_id
        try:
            res = subprocess.run(
                hook._build_track_driver_status_command(),
                capture_output=True,
                text=True,
                timeout=_KILL_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            hook.log.warning("tablemgmt: could not ask for the state of driver %s: %s", application_id, e)
            return False
        states = _DRIVER_STATE.findall(res.stdout + res.stderr)
        return bool(states) and states[-1] in ENDED_DRIVER_STATES

    def kill_application(self, application_id: str) -> bool:
        """Kill an earlier attempt's application by its id, where the master supports that: a
        standalone master in cluster mode (``spark-submit --kill <driver-id>``). True only when the
        master acknowledged the kill; False otherwise (local/client mode, YARN, Kubernetes, an
        unrecognised id), and the takeover then waits for the old attempt's lease to lapse.
        """
        if not _DRIVER_ID.fullmatch(application_id):
            return False
        if self._direct_connection() is not None:  # local or client mode: no driver to kill
            return False
        hook = _airflow_hook_class()(conn_id=self.spark_conn_id)
        if not hook._should_track_driver_status:
            return False
        hook._driver_id = application_id
        cmd = hook._build_spark_driver_kill_command()
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=_KILL_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            hook.log.warning("tablemgmt: could not kill driver %s: %s", application_id, e)
            return False
        out = res.stdout + res.stderr
        acknowledged = res.returncode == 0 and re.search(r'"success"\s*:\s*true', out) is not None
        hook.log.info(
            "tablemgmt: kill of driver %s %s",
            application_id,
            "acknowledged" if acknowledged else f"not acknowledged: {out[-500:]}",
        )
        return acknowledged
