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
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.spark.connect.client import server_of
from airflow_tablemgmt.spark.connect.errors import ConnectBusy
from airflow_tablemgmt.spark.connect.pool import SlotLease, SlotPool, settings_hash
from airflow_tablemgmt.spark.connect.session import (
    ConnectRun,
    interrupt_session,
    job_tag,
    process_age,
    run_on_connect,
)
from airflow_tablemgmt.spark.protocol import FAILED, JobResult

if TYPE_CHECKING:
    from airflow_tablemgmt.spark.connect.kept import BatchSessions
    from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)

DEFAULT_PORT = 15002
CONN_TYPE = "spark_connect"
#: The longest a worker waits to see its interrupted (or failed) job's operations and Spark tasks end
#: before it lets the table's lease go; past it the lease lapses on its own.
STOP_CONFIRM_S = 30.0


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


def slot_settings(extra: dict[str, Any] | None) -> tuple[int, float]:
    """The server's slot limit and how long a task waits for a free slot, from the connection's extras
    ``slots`` (default 8) and ``slot_wait`` (seconds, default 120)."""
    from airflow_tablemgmt.spark.connect.pool import DEFAULT_SLOTS, DEFAULT_WAIT

    extra = extra or {}
    out: list[float] = []
    for key, default, low in (("slots", DEFAULT_SLOTS, 1), ("slot_wait", DEFAULT_WAIT, 0)):
        raw = extra.get(key, default)
        try:
            value = float(raw)
        except (TypeError, ValueError):
            value = float("nan")
        if not value >= low or (key == "slots" and value != int(value)):
            kind = "a whole number >= 1" if key == "slots" else "seconds >= 0"
            raise ValueError(f"a spark_connect connection's extra {key}: {raw!r} is not {kind}")
        out.append(value)
    return int(out[0]), out[1]


def _from_environment(conn_id: str) -> tuple[str, dict[str, Any]] | None:
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
    return connect_url(str(fields.get("host") or ""), fields.get("port"), extra), extra


def target_of_connection(conn_id: str) -> tuple[str, dict[str, Any]]:
    """The server's URL and the connection's extras, from Airflow connection ``conn_id`` (environment,
    secrets backend or metadata DB)."""
    found = _from_environment(conn_id)
    if found is not None:
        return found
    from airflow.sdk import BaseHook

    conn = BaseHook.get_connection(conn_id)
    extra = conn.extra_dejson
    return connect_url(conn.host or "", conn.port, extra), extra


def url_of_connection(conn_id: str) -> str:
    """The server's URL from Airflow connection ``conn_id``."""
    return target_of_connection(conn_id)[0]


def end_connect_application(application_id: str, bound_s: float, url: str | None = None) -> bool:
    """Interrupt the Connect job ``application_id`` and wait (at most ``bound_s``) until its server
    reports its operations ended (``spark/connect/operations.py``); False when not seen to end."""
    from airflow_tablemgmt.spark.connect.operations import end_application

    return bool(end_application(application_id, bound_s, url))


class SparkConnectJobHook:
    """A :class:`~airflow_tablemgmt.lifecycle.Submitter` that runs the job on a Spark Connect server.

    With a store (:meth:`use_store`), the job holds one of the server's slots while it runs
    (``spark/connect/pool.py``: the server's slot limit, the ``slots`` extra) and attaches to the
    session that slot kept, configured already when its catalog settings are the job's, when the extra
    ``reuse_sessions`` is true (default false: every job a new session; on a local Hadoop catalog reuse
    measured no gain, ``docs/spark-connect.md``). Without one,
    every job opens a session of its own and nothing bounds the server's jobs but its FAIR scheduler.

    In a planned batch (:meth:`use_batch`) the batch's jobs of one catalog attach, one after another, to
    the session the batch keeps open (``spark/connect/kept.py``; the extra ``batch_session``, default
    true), each with its own tag, slot, lease guard and result; a job that did not end cleanly closes it.
    """

    #: Before each operation it sends, the job tells the batch running it (``core/first_operation.py``).
    signals_first_operation = True

    def __init__(
        self,
        conn_id: str = "spark_connect_default",
        url: str | None = None,
        *,
        store: Store | None = None,
        slots: int | None = None,
        slot_wait: float | None = None,
        reuse_sessions: bool | None = None,
    ) -> None:
        self.conn_id = conn_id
        self._url = url
        self._extra: dict[str, Any] = {}
        self._store = store
        self._slots = slots
        self._slot_wait = slot_wait
        self._reuse_sessions = reuse_sessions
        self._run: ConnectRun | None = None
        self._batch: BatchSessions | None = None
        self._stop = threading.Event()
        self._lease_until: float | None = None  # the runner's confirmation before submit, for the next run
        self._unclean: str | None = None  # the last job, when it was interrupted or failed: see job_stopped

    @property
    def url(self) -> str:
        if self._url is None:
            batch = self._batch
            found = batch.targets.get(self.conn_id) if batch is not None else None
            if found is None:  # a batch looks its connection up once, not once per table
                found = target_of_connection(self.conn_id)
                if batch is not None:
                    batch.targets[self.conn_id] = found
            self._url, self._extra = found
        return self._url

    def use_store(self, store: Store) -> None:
        """Lease the server's slots through ``store`` (the task's store)."""
        self._store = store

    def use_batch(self, sessions: BatchSessions) -> None:
        """Run the job on the session ``sessions`` keeps for its catalog (a planned batch's), when the
        connection's extra ``batch_session`` is not false."""
        self._batch = sessions

    def _reuse(self) -> bool:
        if self._reuse_sessions is not None:
            return self._reuse_sessions
        return str(self._extra.get("reuse_sessions", "false")).lower() in ("true", "1", "yes")

    def _batch_sessions(self) -> BatchSessions | None:
        on = str(self._extra.get("batch_session", "true")).lower() not in ("false", "0", "no", "off")
        return self._batch if on else None

    def _pool(self) -> SlotPool | None:
        if self._store is None:
            return None
        from airflow_tablemgmt.store.connect_slots import ConnectSlotRepository

        slots, wait = slot_settings(self._extra)
        return SlotPool(
            ConnectSlotRepository.of(self._store),
            server_of(self.url),
            slots=self._slots or slots,
            wait=wait if self._slot_wait is None else self._slot_wait,
        )

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        from airflow_tablemgmt.hooks.secrets import resolve_catalog
        from airflow_tablemgmt.spark.conf import validated_catalog
        from airflow_tablemgmt.spark.connect.session import connect_conf

        before_submit = process_age()
        url = self.url
        tag = job_tag(job)
        # Secret references resolve here, on the worker; they reach the server only as this job's
        # session configuration (gRPC), never a command line or a log line.
        resolved = replace(job, catalog=resolve_catalog(job.catalog))
        try:
            conf = connect_conf(validated_catalog(resolved.catalog))
        except Exception:  # noqa: BLE001 - an invalid catalog: the job reports it as under spark-submit
            conf = None
        lease: SlotLease | None = None
        batch = self._batch_sessions() if conf is not None else None
        kept = batch.take(url, settings_hash(conf or {})) if batch is not None else None
        pool = self._pool() if conf is not None else None
        waited = 0.0
        if pool is not None:
            started = time.perf_counter()
            try:
                # reuse_sessions false (or a batch's session): a hash no slot has, so the slot keeps none
                key = settings_hash(conf or {}) if self._reuse() and kept is None else uuid.uuid4().hex
                holder = f"{tag}-{uuid.uuid4().hex[:12]}"
                if kept is not None and batch is not None:  # the slot the batch's jobs hold in turn (kept.py)
                    lease = batch.slot(pool.server, lambda: pool.lease(key, holder, self._stop))
                else:
                    lease = pool.lease(key, holder, self._stop)
            except ConnectBusy as e:
                if batch is not None and kept is not None:
                    batch.give_back(kept)
                log.error("tablemgmt: ConnectBusy: %s", e)
                return JobResult(status=FAILED, error=str(e), error_class="ConnectBusy")
            waited = time.perf_counter() - started
        until, self._lease_until = self._lease_until, None  # one job's: the next waits for its own
        if kept is not None and batch is not None:
            self._run = ConnectRun(
                url,
                tag,
                session_id=kept.session_id,
                reused=kept.open,
                lease_until=until,
                kept=kept,
                guard_process=batch.guard,
            )
        elif lease is not None:
            self._run = ConnectRun(
                url, tag, session_id=lease.slot.session_id, reused=lease.slot.reused, lease_until=until
            )
        else:
            self._run = ConnectRun(url, tag, lease_until=until)
        if lease is not None:
            self._run.timings["slot_wait"] = round(waited, 3)
        if before_submit is not None:
            self._run.timings["process_before_submit"] = round(before_submit, 3)
        if self._stop.is_set():  # killed while it waited for a slot
            self._run.interrupt()
        log.info(
            "tablemgmt: running %s on Spark Connect server %s (tag %s%s%s)",
            job.action,
            server_of(url),
            tag,
            "" if lease is None else f", slot {lease.slot.slot}",
            ", session reused" if self._run.reused else "",
        )
        result: JobResult | None = None
        self._unclean = self._run.application_id  # until it returns cleanly
        try:
            result = run_on_connect(resolved, url, run=self._run, on_started=on_started, conf=conf)
            if result.ok and not self._run.interrupted and not self._stop.is_set():
                self._unclean = None
        finally:
            clean = (
                result is not None
                and result.ok
                and not self._run.interrupted
                and not self._run.stopped
                and not self._stop.is_set()
            )
            if lease is not None and kept is not None and batch is not None:
                batch.slot_back(lease.slot.server, lease, clean=clean)
            elif lease is not None:
                lease.release(keep_session=clean and self._reuse() and kept is None)
            if kept is not None and batch is not None:
                # only after a clean end does the batch's next job attach to it (kept.py)
                if clean:
                    batch.give_back(kept)
                else:
                    kept.close()
        if not result.ok:
            log.error("tablemgmt: %s: %s", result.error_class, result.error)
        return result

    def confirm_lease(self, sent_monotonic: float, valid_for: float) -> None:
        """``lifecycle.ConfirmsLease``: the lease is confirmed until ``sent_monotonic + valid_for``. The
        job's guard process interrupts its operations when that runs out, even while this worker is
        frozen, and the job sends no operation after it (``spark/connect/guard.py``)."""
        until = sent_monotonic + valid_for
        run = self._run
        if run is not None and not run.closed:
            run.confirm_lease(until)
        else:
            self._lease_until = until

    def job_stopped(self) -> bool:
        """``lifecycle.ConfirmsStop``: whether the last job is gone, its Spark tasks included. One that
        returned cleanly is. One that was interrupted or failed is once its server reports its operations
        and their Spark tasks ended (a cancelled Spark job's tasks stop on their own time, and one writing a
        file finishes it: ``spark/connect/tasks.py``), at most :data:`STOP_CONFIRM_S`; until then the runner
        keeps the table's lease, to lapse on its own, and the next holder observes the end itself."""
        app, self._unclean = self._unclean, None
        if app is None:
            return True
        return end_connect_application(app, STOP_CONFIRM_S, self.url)

    def kill(self) -> None:
        """Interrupt the running job's operations on the server (from any thread)."""
        self._stop.set()
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
