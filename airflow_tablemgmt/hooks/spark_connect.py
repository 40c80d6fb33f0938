"""SparkConnectJobHook: runs a table-maintenance JobSpec on a Spark Connect server (the second engine).

The server is named by an Airflow connection of type ``spark_connect`` (Airflow's Spark provider's
type): host (``sc://host`` or a bare host), port (default 15002), and the extras ``use_ssl``, ``token``
and ``user_id``. The task is a thin gRPC client: no JVM, no spark-submit; the job code is the same
(``spark/job``), run over a remote session of its own (``spark/connect/session.py``), and the result is
the same ``JobResult`` the spark-submit path parses, so process rows, leases, XCom and metrics do not
change. :meth:`kill` (cancel, lease loss, ``on_kill``) interrupts the job's operations on the server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.spark.connect.session import (
    ConnectRun,
    interrupt_session,
    job_tag,
    run_on_connect,
    server_of,
)
from airflow_tablemgmt.spark.protocol import JobResult

log = logging.getLogger(__name__)

DEFAULT_PORT = 15002
CONN_TYPE = "spark_connect"


def connect_url(host: str, port: int | None, extra: dict[str, Any] | None = None) -> str:
    """``sc://host:port[/;use_ssl=true;token=...;user_id=...]`` from a connection's fields."""
    host = (host or "").strip()
    if "://" in host:
        scheme, host = host.split("://", 1)
        if scheme != "sc":
            raise ValueError(
                f"a spark_connect connection's host takes sc://host or a bare host, not {scheme}://"
            )
    host = host.rstrip("/")
    if not host:
        raise ValueError("a spark_connect connection needs a host")
    if ":" not in host:
        host = f"{host}:{port or DEFAULT_PORT}"
    params = []
    extra = extra or {}
    if str(extra.get("use_ssl", "")).lower() in ("1", "true", "yes"):
        params.append("use_ssl=true")
    for key in ("token", "user_id"):
        if extra.get(key):
            params.append(f"{key}={extra[key]}")
    return f"sc://{host}" + (f"/;{';'.join(params)}" if params else "")


def _from_environment(conn_id: str) -> str | None:
    """The URL from a JSON ``AIRFLOW_CONN_<ID>`` when Airflow would provably take it from there (no
    secrets backend, Airflow not imported: the CLI), so a ``tablemgmt run`` does not import Airflow."""
    import json
    import os
    import sys

    from airflow_tablemgmt.hooks.airflow_settings import secrets_backend_may_be_configured

    value = os.environ.get("AIRFLOW_CONN_" + conn_id.upper(), "").strip()
    if "airflow" in sys.modules or not value.startswith("{") or secrets_backend_may_be_configured():
        return None
    try:
        fields = json.loads(value)
        extra = fields.get("extra") or {}
        extra = json.loads(extra) if isinstance(extra, str) else extra
    except (ValueError, AttributeError):
        return None
    if not isinstance(fields, dict) or fields.get("conn_type") != CONN_TYPE or not isinstance(extra, dict):
        return None
    return connect_url(str(fields.get("host") or ""), fields.get("port"), extra)


def url_of_connection(conn_id: str) -> str:
    """The server's URL from Airflow connection ``conn_id`` (environment, secrets backend or metadata DB)."""
    found = _from_environment(conn_id)
    if found is not None:
        return found
    from airflow.sdk import BaseHook

    conn = BaseHook.get_connection(conn_id)
    return connect_url(conn.host or "", conn.port, conn.extra_dejson)


class SparkConnectJobHook:
    """A :class:`~airflow_tablemgmt.lifecycle.Submitter` that runs the job on a Spark Connect server."""

    def __init__(self, conn_id: str = "spark_connect_default", url: str | None = None) -> None:
        self.conn_id = conn_id
        self._url = url
        self._run: ConnectRun | None = None

    @property
    def url(self) -> str:
        if self._url is None:
            self._url = url_of_connection(self.conn_id)
        return self._url

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        from airflow_tablemgmt.hooks.secrets import resolve_catalog

        url = self.url
        # Secret references resolve here, on the worker; they reach the server only as this job's
        # session configuration (gRPC), never a command line or a log line.
        resolved = replace(job, catalog=resolve_catalog(job.catalog))
        self._run = ConnectRun(url, job_tag(job))
        log.info(
            "tablemgmt: running %s on Spark Connect server %s (tag %s)",
            job.action,
            server_of(url),
            self._run.tag,
        )
        result = run_on_connect(resolved, url, run=self._run, on_started=on_started)
        if not result.ok:
            log.error("tablemgmt: %s: %s", result.error_class, result.error)
        return result

    def kill(self) -> None:
        """Interrupt the running job's operations on the server (from any thread)."""
        run = self._run
        if run is not None:
            run.interrupt()

    def kill_application(self, application_id: str) -> bool:
        """Interrupt an earlier attempt's session by its id; True when the server interrupted something."""
        try:
            ids = interrupt_session(application_id)
        except Exception as e:  # noqa: BLE001 - an unreachable server: the takeover waits for the lease
            log.warning("tablemgmt: could not interrupt %s: %s", application_id.split("#")[0], str(e)[:300])
            return False
        return bool(ids)
