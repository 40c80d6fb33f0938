"""SparkJobHook: submits a table-maintenance JobSpec through SparkSubmitHook and parses its result.

Airflow is imported only when it is needed: in a process that has not imported it (the ``tablemgmt``
CLI) and whose Spark connection Airflow would provably take from an ``AIRFLOW_CONN_<ID>`` JSON value
(see :func:`connection_from_environment`), the job is submitted with the same ``spark-submit``
command line that ``SparkSubmitHook`` builds, without Airflow's import (seconds of start-up).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.hooks.airflow_settings import (
    artifact_settings,
    job_env_allow,
    jvm_class_cache_settings,
    secrets_backend_may_be_configured,
)
from airflow_tablemgmt.spark.class_cache import DriverClassCache
from airflow_tablemgmt.spark.launch.environment import job_environment
from airflow_tablemgmt.spark.result import describe_timings
from airflow_tablemgmt.spark.submit import JobResult, SubmitClock, build_submit_spec, parse_result

log = logging.getLogger(__name__)

EMBEDDED_MASTER = "local[*]"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_APP_ID = re.compile(r"spark application (?:id )?((?:local|app|application|spark)[-_][\w-]+)")
# A standalone master's driver id (cluster mode), which ``spark-submit --kill`` accepts.
_DRIVER_ID = re.compile(r"\bdriver-\d{14}-\d{4,}\b")
_ERROR_TAIL = 40
_KILL_TIMEOUT_S = 120


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

        def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
            def tee() -> Iterator[Any]:
                for raw in itr:
                    _keep_line(raw.rstrip("\n"), self.lines, self.on_line, self.log)
                    yield raw

            super()._process_spark_submit_log(tee())

    globals()["_HOOK_CLASS"] = _CapturingSparkSubmitHook
    return _CapturingSparkSubmitHook


def __getattr__(name: str) -> Any:
    if name == "_CapturingSparkSubmitHook":
        return _airflow_hook_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# What SparkSubmitHook accepts (airflow.providers.apache.spark.hooks.spark_submit).
_DEFAULT_SPARK_BINARY = "spark-submit"
_ALLOWED_SPARK_BINARIES = (_DEFAULT_SPARK_BINARY, "spark2-submit", "spark3-submit")
# The keyword arguments of Airflow's Connection, which ``Connection.from_json`` passes the JSON keys to.
_CONNECTION_FIELDS = frozenset(
    {"conn_id", "conn_type", "description", "host", "schema", "login", "password", "port", "extra"}
)


@dataclass(frozen=True)
class SparkConnection:
    """What SparkSubmitHook's ``_resolve_connection`` makes of a connection, for the plain cases."""

    master: str
    spark_binary: str = _DEFAULT_SPARK_BINARY
    queue: str | None = None
    deploy_mode: str | None = None


def connection_from_environment(conn_id: str) -> SparkConnection | None:
    """The Spark connection ``conn_id`` as Airflow would resolve it, when that is decidable without
    importing Airflow; else None (and Airflow is asked).

    Decidable when ``AIRFLOW_CONN_<CONN_ID>`` holds a JSON connection and no secrets backend is
    configured: Airflow then finds the connection in that variable before its metadata database (a
    server process) or the execution API (a worker), and a CLI process looks nowhere else. Only what
    SparkSubmitHook runs unchanged is taken: a local or standalone master in client mode; YARN,
    Kubernetes, cluster deploy mode, Kerberos settings, a URI-form value or anything unusual are left
    to Airflow.
    """
    value = os.environ.get("AIRFLOW_CONN_" + conn_id.upper(), "").strip()
    if not value.startswith("{") or "___" in conn_id or secrets_backend_may_be_configured():
        return None
    try:
        fields = json.loads(value)
    except ValueError:
        return None
    if not isinstance(fields, dict) or not set(fields) <= _CONNECTION_FIELDS:
        return None
    extra = fields.get("extra")
    if isinstance(extra, str) and extra:
        try:
            extra = json.loads(extra)
        except ValueError:
            return None
    extra = extra or {}
    conn_type, host, port = fields.get("conn_type"), fields.get("host"), fields.get("port")
    if not isinstance(extra, dict) or not isinstance(conn_type, str) or not conn_type:
        return None
    if host is not None and not isinstance(host, str):
        return None
    if port:
        try:
            port = int(port)
        except (TypeError, ValueError):
            return None
    conn_type = "postgres" if conn_type == "postgresql" else conn_type.replace("-", "_")
    # SparkSubmitHook._resolve_connection, as of apache-airflow-providers-apache-spark 5.x.
    if conn_type == "spark" and host and ("://" in host or not port):
        master = host
    else:
        master = f"{conn_type}://{host or ''}"
    if port:
        master = f"{master}:{port}"
    deploy_mode = extra.get("deploy-mode")
    binary = extra.get("spark-binary", _DEFAULT_SPARK_BINARY)
    queue = extra.get("queue")
    if (
        "yarn" in master
        or "k8s" in master
        or deploy_mode not in (None, "client")
        or binary not in _ALLOWED_SPARK_BINARIES
        or not isinstance(queue, (str, type(None)))
        or any(k in extra for k in ("spark-home", "principal", "keytab"))
    ):
        return None
    return SparkConnection(master=master, spark_binary=binary, queue=queue or None, deploy_mode=deploy_mode)


def _mask_cmd(cmd: list[str]) -> str:
    """The command line with values of ``*secret*`` / ``*password*`` settings masked (SparkSubmitHook's rule)."""
    return re.sub(
        r"(\S*?(?:secret|password)\S*?(?:=|\s+)(['\"]?))(?:(?!\2\s).)*(\2)",
        r"\1******\3",
        " ".join(cmd),
        flags=re.I,
    )


class _SubmitFailed(Exception):
    """spark-submit exited non-zero (SparkSubmitHook raises AirflowException with this message)."""


class _DirectSparkSubmit:
    """Runs the command SparkSubmitHook would run for a :class:`SparkConnection` (the same arguments
    in the same order, the same environment, stdout and stderr merged, each line logged), without
    importing Airflow. The interface SparkJobHook uses of ``_CapturingSparkSubmitHook``."""

    _should_track_driver_status = False

    def __init__(
        self,
        connection: SparkConnection,
        *,
        conf: dict[str, str],
        jars: str | None,
        packages: str | None,
        name: str,
        application_args: list[str],
        env_vars: dict[str, str],
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self.connection = connection
        self.conf, self.jars, self.packages, self.name = conf, jars, packages, name
        self.application_args, self.env_vars, self.on_line = application_args, env_vars, on_line
        self.lines: deque[str] = deque(maxlen=2000)
        self.log = log
        self._proc: subprocess.Popen[str] | None = None

    def command(self, application: str) -> list[str]:
        c = self.connection
        args = [c.spark_binary, "--master", c.master]
        for key, value in self.conf.items():
            args += ["--conf", f"{key}={value}"]
        if self.jars:
            args += ["--jars", self.jars]
        if self.packages:
            args += ["--packages", self.packages]
        if self.name:
            args += ["--name", self.name]
        if c.queue:
            args += ["--queue", c.queue]
        if c.deploy_mode:
            args += ["--deploy-mode", c.deploy_mode]
        return [*args, application, *self.application_args]

    def submit(self, application: str, preexec_fn: Callable[[], None] | None = None) -> None:
        cmd = self.command(application)
        log.info("Spark-Submit cmd: %s", _mask_cmd(cmd))
        env = job_environment(self.env_vars, job_env_allow())
        self._proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=-1, text=True, env=env,
            preexec_fn=preexec_fn,  # noqa: PLW1509 - die_with_parent: two system calls, no locks
        )  # fmt: skip
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            line = raw.rstrip("\n")
            _keep_line(line, self.lines, self.on_line, log)
            log.info(line.strip())
        returncode = self._proc.wait()
        if returncode:
            raise _SubmitFailed(f"Cannot execute: {_mask_cmd(cmd)}. Error code is: {returncode}.")

    def on_kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            log.info("Sending kill signal to %s", self.connection.spark_binary)
            self._proc.kill()


class SparkJobHook:
    """Runs one JobSpec with spark-submit on the ``spark_default`` connection."""

    def __init__(self, spark_conn_id: str = "spark_default", workdir: str | None = None) -> None:
        self.spark_conn_id = spark_conn_id
        self.workdir = workdir
        self._hook: Any = None

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
            spec = build_submit_spec(job, spec_path, artifacts=artifact_settings())
            kwargs: dict[str, Any] = {
                "conf": spec.conf,
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
                hook = _DirectSparkSubmit(direct, **kwargs)
                failed: type[Exception] = _SubmitFailed
            else:
                hook = _airflow_hook_class()(conn_id=self.spark_conn_id, **kwargs)
                from airflow.exceptions import AirflowException

                failed = AirflowException
            self._hook = hook
            cache = self._class_cache(hook, spec.conf, spec.jars, kwargs["packages"], spec.env)
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
                return result
            if result.error:
                return result
            return JobResult(
                status="FAILED",
                error=_error_tail(list(hook.lines), exit_error),
                error_class="SparkSubmitFailed",
            )

    @staticmethod
    def _class_cache(
        hook: Any, conf: dict[str, str], jars: list[str], packages: str | None, env: dict[str, str]
    ) -> DriverClassCache | None:
        """Decide on the driver's class-data archive (see ``spark/class_cache.py``) and put its JVM
        options into the hook's conf; None when it does not apply. Cluster deploy mode is read from the
        connection the hook resolved."""
        from airflow_tablemgmt.spark import class_cache

        if isinstance(hook, _DirectSparkSubmit):
            deploy_mode = hook.connection.deploy_mode
        else:
            deploy_mode = hook._connection.get("deploy_mode")
        try:
            enabled, directory = jvm_class_cache_settings()
        except Exception as e:  # noqa: BLE001 - an optimisation never fails a job
            hook.log.info("tablemgmt: JVM class cache: off (its settings could not be read: %s)", e)
            return None
        settings = class_cache.ClassCacheSettings(enabled=enabled)
        if directory:
            settings = class_cache.ClassCacheSettings(enabled=enabled, directory=Path(directory).expanduser())
        cache, submitted = class_cache.plan(
            settings=settings,
            conf=conf,
            jars=jars,
            packages=packages,
            env=env,
            cluster=deploy_mode == "cluster",
            # ~50 ms (a CRC of the ~130 MB archive) buys a fallback to no sharing, instead of a crash or
            # wrong class metadata, when the file was damaged after it was written.
            verify=True,
        )
        hook.log.info("tablemgmt: %s", cache.describe())
        if submitted is not conf:
            if isinstance(hook, _DirectSparkSubmit):
                hook.conf = submitted
            else:
                hook._conf = submitted
        return cache if cache.mode != "off" else None

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
        hook.log.info("tablemgmt: kill of driver %s %s", application_id,
                      "acknowledged" if acknowledged else f"not acknowledged: {out[-500:]}")  # fmt: skip
        return acknowledged


def _keep_line(line: str, lines: deque[str], on_line: Callable[[str], None] | None, logger: Any) -> None:
    """Keep a line of spark-submit's output (for the result and an error's tail) and pass it to the
    progress callback, whose failure is only logged."""
    lines.append(line)
    if on_line is not None:
        try:
            on_line(line)
        except Exception:  # noqa: BLE001 - observability never fails a task
            logger.warning("progress callback failed", exc_info=True)


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
