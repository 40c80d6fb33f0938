"""SparkJobHook: submits a table-maintenance JobSpec through SparkSubmitHook and parses its result."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from airflow.exceptions import AirflowException, AirflowNotFoundException
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.spark.result import describe_timings
from airflow_tablemgmt.spark.submit import JobResult, SubmitClock, build_submit_spec, parse_result

EMBEDDED_MASTER = "local[*]"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_APP_ID = re.compile(r"spark application (?:id )?((?:local|app|application|spark)[-_][\w-]+)")
# A standalone master's driver id (cluster mode), which ``spark-submit --kill`` accepts.
_DRIVER_ID = re.compile(r"\bdriver-\d{14}-\d{4,}\b")
_ERROR_TAIL = 40
_KILL_TIMEOUT_S = 120


class _CapturingSparkSubmitHook(SparkSubmitHook):
    """SparkSubmitHook that keeps the lines it streams to the task log, so the job's result line and
    the tail of any error can be read back, and that defaults to ``local[*]`` (not yarn) when the
    connection does not exist."""

    def __init__(self, *args: Any, on_line: Callable[[str], None] | None = None, **kwargs: Any) -> None:
        self.lines: deque[str] = deque(maxlen=2000)
        self.on_line = on_line
        super().__init__(*args, **kwargs)

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

    def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
        def tee() -> Iterator[Any]:
            for raw in itr:
                line = raw.rstrip("\n")
                self.lines.append(line)
                if self.on_line is not None:
                    try:
                        self.on_line(line)
                    except Exception:  # noqa: BLE001 - observability never fails a task
                        self.log.warning("progress callback failed", exc_info=True)
                yield raw

        super()._process_spark_submit_log(tee())


class SparkJobHook:
    """Runs one JobSpec with spark-submit on the ``spark_default`` connection."""

    def __init__(self, spark_conn_id: str = "spark_default", workdir: str | None = None) -> None:
        self.spark_conn_id = spark_conn_id
        self.workdir = workdir
        self._hook: _CapturingSparkSubmitHook | None = None

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        """Submit and wait. Returns the parsed result; a job that died without one is FAILED with
        the tail of Spark's output as the reason."""
        started: list[str] = []
        clock = SubmitClock()

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
                if on_started is not None:
                    on_started(found)

        with tempfile.TemporaryDirectory(prefix="tms-job-", dir=self.workdir) as tmp:
            spec_path = Path(tmp) / "job.json"
            # Secret references resolve here, on the worker, into a 0600 file in this 0700 directory;
            # the command line (ps, SparkSubmitHook's log) never carries catalog properties.
            from dataclasses import replace

            from airflow_tablemgmt.hooks.secrets import resolve_catalog
            from airflow_tablemgmt.spark.submit import write_spec

            write_spec(replace(job, catalog=resolve_catalog(job.catalog)), spec_path)
            spec = build_submit_spec(job, spec_path)
            hook = _CapturingSparkSubmitHook(
                conf=spec.conf,
                conn_id=self.spark_conn_id,
                jars=",".join(spec.jars) or None,
                packages=",".join(spec.packages) or None,
                name=spec.name,
                application_args=spec.application_args,
                env_vars=spec.env,
                on_line=on_line,
            )
            self._hook = hook
            exit_error: str | None = None
            preexec = die_with_parent()
            clock.launch()
            try:
                hook.submit(application=spec.application, preexec_fn=preexec)
            except AirflowException as e:
                exit_error = str(e)
            clock.exit()
            parsing = time.perf_counter()
            result = parse_result(hook.lines)
            if result.raw:
                timings = clock.complete(result, time.perf_counter() - parsing)
                hook.log.info("tablemgmt: timings: %s", describe_timings(timings))
            if result.status == "SUCCESS" and exit_error is None:
                return result
            if result.error:
                return result
            return JobResult(
                status="FAILED",
                error=_error_tail(list(hook.lines), exit_error),
                error_class="SparkSubmitFailed",
            )

    def kill(self) -> None:
        if self._hook is not None:
            self._hook.on_kill()

    def kill_application(self, application_id: str) -> bool:
        """Kill an earlier attempt's application by its id, where the master supports that: a
        standalone master in cluster mode (``spark-submit --kill <driver-id>``). True only when the
        master acknowledged the kill; False otherwise (local/client mode, YARN, Kubernetes, an
        unrecognised id), and the takeover then waits for the old attempt's lease to lapse.
        """
        if not _DRIVER_ID.fullmatch(application_id):
            return False
        hook = _CapturingSparkSubmitHook(conn_id=self.spark_conn_id)
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
        hook.log.info("tablemgmt: kill of driver %s %s", application_id,
                      "acknowledged" if acknowledged else f"not acknowledged: {out[-500:]}")  # fmt: skip
        return acknowledged


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child (spark-submit, which execs the driver JVM in client and
    local mode) receive SIGKILL when the worker that started it dies, even by ``kill -9``: a dead
    worker's lease lapses and another worker may start a job on the table, so the old job must not
    outlive it. Linux only (``prctl(PR_SET_PDEATHSIG)``); elsewhere None, and the lease TTL is the
    only guard.

    libc is resolved here, in the parent, so the forked child (which may have been forked while the
    heartbeat thread runs) only makes two system calls and takes no Python-level locks.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the worker died before prctl took effect
            os._exit(1)

    return preexec


def _error_tail(lines: list[str], exit_error: str | None) -> str:
    """The part of Spark's output that explains a failure: exception lines first, else the last lines."""
    interesting = [
        ln
        for ln in lines
        if re.search(r"(Exception|Error|error:|Killed|OutOfMemory|FAILED)", ln)
        and not ln.lstrip().startswith("at ")
    ]
    chosen = (interesting or lines)[-_ERROR_TAIL:]
    reason = "\n".join(chosen).strip()
    if exit_error:
        code = re.search(r"Error code is: (-?\d+)", exit_error)
        suffix = f"spark-submit exited with code {code.group(1)}" if code else exit_error
        reason = f"{reason}\n{suffix}" if reason else suffix
    return reason[-4000:]
