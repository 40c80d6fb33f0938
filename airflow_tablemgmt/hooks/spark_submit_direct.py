"""spark-submit without Airflow: the Spark connection read from ``AIRFLOW_CONN_<ID>`` and the same
command line ``SparkSubmitHook`` builds, run as a child process that dies with its parent.

:class:`~airflow_tablemgmt.hooks.spark_job.SparkJobHook` uses :class:`DirectSparkSubmit` in a process
that has not imported Airflow (the ``tablemgmt`` CLI) and whose Spark connection Airflow would provably
take from that variable (:func:`connection_from_environment`): the same job, seconds less start-up.
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
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_tablemgmt.hooks.airflow_settings import job_env_allow, secrets_backend_may_be_configured
from airflow_tablemgmt.hooks.errors import SubmitFailed
from airflow_tablemgmt.spark.launch.environment import job_environment

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


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


def mask_cmd(cmd: list[str]) -> str:
    """The command line with values of ``*secret*`` / ``*password*`` settings masked (SparkSubmitHook's rule)."""
    return re.sub(
        r"(\S*?(?:secret|password)\S*?(?:=|\s+)(['\"]?))(?:(?!\2\s).)*(\2)",
        r"\1******\3",
        " ".join(cmd),
        flags=re.I,
    )


class DirectSparkSubmit:
    """Runs the command SparkSubmitHook would run for a :class:`SparkConnection` (the same arguments
    in the same order, the same environment, stdout and stderr merged, each line logged), without
    importing Airflow. The interface SparkJobHook uses of ``_CapturingSparkSubmitHook``
    (``spark_job.py``)."""

    _should_track_driver_status = False
    # What runs spark-submit (the user-SQL sandbox: hooks/user_sql_sandbox.py); replaced per job.
    command_prefix: list[str] = []  # noqa: RUF012

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
        return [*self.command_prefix, *args, application, *self.application_args]

    def submit(self, application: str, preexec_fn: Callable[[], None] | None = None) -> None:
        cmd = self.command(application)
        log.info("Spark-Submit cmd: %s", mask_cmd(cmd))
        env = job_environment(self.env_vars, job_env_allow())
        self._proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            bufsize=-1,
            text=True,
            env=env,
            preexec_fn=preexec_fn,  # noqa: PLW1509 - die_with_parent: two system calls, no locks
        )
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            line = raw.rstrip("\n")
            keep_line(line, self.lines, self.on_line, log)
            log.info(line.strip())
        returncode = self._proc.wait()
        if returncode:
            raise SubmitFailed(f"Cannot execute: {mask_cmd(cmd)}. Error code is: {returncode}.")

    def on_kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            log.info("Sending kill signal to %s", self.connection.spark_binary)
            self._proc.kill()


def keep_line(line: str, lines: deque[str], on_line: Callable[[str], None] | None, logger: Any) -> None:
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


# -- a job's processes: spark-submit and what it started (the driver JVM, PySpark's Python driver) ------


def process_tree(pid: int) -> list[int]:
    """``pid`` and its living descendants (Linux: read from /proc; elsewhere ``[pid]``)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return [pid]
    for name in entries:
        if not name.isdigit():
            continue
        stat = _stat(int(name))
        if stat is not None:
            children.setdefault(stat[1], []).append(int(name))
    tree, pending = [], [pid]
    while pending:
        p = pending.pop()
        tree.append(p)
        pending.extend(children.get(p, []))
    return tree


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None when it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a zombie runs no code)."""
    stat = _stat(pid)
    if stat is not None:
        return stat[0] != "Z"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not os.path.isdir("/proc")  # /proc exists but has no entry: gone


def kill_tree(pids: list[int]) -> None:
    """SIGKILL each of ``pids`` (those already gone are skipped)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_submitted(hook: Any) -> list[int]:
    """Kill what ``hook`` (a ``SparkSubmitHook``) submitted: the hook's own kill (spark-submit, and a cluster
    driver by id), then every process spark-submit started, which a kill of spark-submit alone would orphan.
    Returns the pids to wait for (:func:`wait_gone`)."""
    proc = getattr(hook, "_proc", None) or getattr(hook, "_submit_sp", None)
    tree = process_tree(proc.pid) if proc is not None and proc.poll() is None else []
    hook.on_kill()
    kill_tree(tree)
    return tree


def wait_gone(pids: list[int], timeout_s: float) -> bool:
    """True once none of ``pids`` is alive; False if some still are after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        if not any(alive(p) for p in pids):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
