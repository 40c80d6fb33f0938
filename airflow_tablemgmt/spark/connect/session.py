"""The client side of the Connect engine: one remote session per job, its catalog as session settings,
operation tags for interrupt, and :func:`run_on_connect`, which runs the same ``spark/job`` code.

Isolation: every job opens a session with a fresh ``session_id`` (a planned batch's jobs, one after
another, the session the batch keeps for their catalog: ``kept.py``); the server gives each session id its
own ``SparkSession`` (its own SQL configuration and catalog manager), so the catalog settings one job
sets, its secrets included, are never seen by a concurrent job of another table. The settings travel in
gRPC ``Config`` requests on that session (``spark.conf.set``), never on a command line; the server logs
their keys at most (``ConfigRequest`` values are not logged at its default level).

Interrupt: every operation of the job carries the tag ``tms-p<process>-a<attempt>``; :meth:`ConnectRun.interrupt`
(another thread: the runner's heartbeat on cancel or lease loss, the operator's ``on_kill``) calls
``interruptTag`` on the same session, and the server cancels the running operation
(``OPERATION_CANCELED``). A later process can interrupt an earlier attempt's session by its id
(:func:`interrupt_session`). pyspark is imported inside functions only.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from airflow_tablemgmt.core import first_operation
from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.spark.conf import catalog_conf
from airflow_tablemgmt.spark.connect.client import (
    APP_ID_PREFIX,
    close_session,
    import_client,
    open_session,
    process_age,  # noqa: F401 - hooks/spark_connect.py imports it from here
    server_of,
)
from airflow_tablemgmt.spark.connect.config import set_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    from airflow_tablemgmt.spark.connect.kept import KeptSession
    from airflow_tablemgmt.spark.job.after_later import LaterRead
    from airflow_tablemgmt.spark.protocol import JobResult

log = logging.getLogger(__name__)

_UNAVAILABLE = (
    "UNAVAILABLE",
    "failed to connect",
    "Connection refused",
    "Socket closed",
    "connection reset",
    "Connection reset",
    "GOAWAY",
    "DEADLINE_EXCEEDED",
    "Broken pipe",
    "INTERNAL: RST_STREAM",
)
INTERRUPT_EVERY = 1.0


def connect_conf(catalog: CatalogSpec) -> dict[str, str]:
    """The catalog's Spark settings as one Connect session can take them.

    ``spark.sql.catalog.<name>*`` are session settings as they are. ``spark.hadoop.<key>`` (Hadoop
    settings of the application under spark-submit) become Iceberg's per-catalog Hadoop overrides,
    ``spark.sql.catalog.<name>.hadoop.<key>``, so they stay inside this catalog of this session. Other
    ``spark.*`` keys are launch settings of the server's application, which one job cannot change: they
    are left out (their keys, never their values, are logged).
    """
    prefix = f"spark.sql.catalog.{catalog.name}"
    out: dict[str, str] = {}
    for key, value in catalog_conf(catalog).items():
        if key == prefix or key.startswith(prefix + "."):
            out[key] = value
        elif key.startswith("spark.hadoop."):
            out[f"{prefix}.hadoop.{key[len('spark.hadoop.') :]}"] = value
        else:
            log.warning("%s is a launch setting of the Spark Connect server's application; not applied", key)
    return out


def job_tag(job: JobSpec) -> str:
    """The operation tag of ``job`` (letters, digits and dashes only, as Spark requires)."""
    return f"tms-p{job.process_id if job.process_id is not None else 'x'}-a{job.attempt}"


def looks_unavailable(text: str) -> bool:
    return any(marker in text for marker in _UNAVAILABLE)


@dataclass
class ConnectRun:
    """One job's session on a Connect server; :meth:`interrupt` is safe from any thread."""

    url: str
    tag: str
    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    #: The session was left configured with the same catalog settings by an earlier job (a slot's reuse).
    reused: bool = False
    session: Any = None
    timings: dict[str, float] = field(default_factory=dict)
    interrupted: list[str] = field(default_factory=list)
    #: Until when (this host's monotonic clock) the worker confirmed the table's lease; None: no lease.
    lease_until: float | None = None
    guard: Any = None
    #: A batch's session (``kept.py``): attached to when open, left open for the batch's next job when this
    #: one was not stopped (the caller decides whether it is kept or closed after the result).
    kept: KeptSession | None = None
    #: The batch's guard process (``guard.GuardProcess``) that watches this job's lease; None: one of its own.
    guard_process: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _closed: threading.Event = field(default_factory=threading.Event)

    @property
    def application_id(self) -> str:
        """``connect:<server>#<session id>/<tag>``: a takeover interrupts this job's tag on that session
        (a pooled session may run a later task's job by then, which must go on)."""
        return f"{APP_ID_PREFIX}{server_of(self.url)}#{self.session_id}/{self.tag}"

    def open(self, catalog: CatalogSpec, conf: dict[str, str] | None = None) -> RemoteSession:
        """Attach to the run's session and give it the catalog's settings (one ``Config`` request, also
        on a reused session: one the server evicted or lost in a restart comes back empty)."""
        self.timings["connect_import"] = round(import_client(), 3)
        started = time.perf_counter()
        if self.lease_until is not None and self.guard is None:
            # The job's deadline, held outside this worker (guard.py): started before any operation.
            from airflow_tablemgmt.spark.connect.guard import ConnectLeaseGuard

            self.guard = ConnectLeaseGuard(self.url, self.application_id, self.guard_process).start(
                self.lease_until
            )
        kept = self.kept
        if kept is not None and kept.open:
            session = kept.session
            session.clearTags()  # the batch's previous job's tag (tags are the client's, per thread)
        else:
            session = open_session(self.url, self.session_id)
            if kept is not None:
                kept.session = session
        # Each operation's id, recorded in the session on the server: whoever ends this job later (the
        # reaper, the table's next holder) can see its operations end (operations.py). The first ids go in
        # the one Config request of the catalog's settings.
        from airflow_tablemgmt.spark.connect.operations import record_operations

        settings = dict(connect_conf(catalog) if conf is None else conf)
        record_operations(session, self.tag, fence=self.fence, conf=settings)
        set_conf(session, settings)
        session.addTag(self.tag)  # pyspark keeps tags per thread: open() runs in the job's thread
        self.timings["session_open"] = round(time.perf_counter() - started, 3)
        with self._lock:
            self.session = session
        return session

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @property
    def stopped(self) -> bool:
        """The job was told to stop (a cancel, a lost lease, a kill): interrupted on the server."""
        return self._stopping.is_set()

    def confirm_lease(self, until_monotonic: float) -> None:
        """The worker renewed the table's lease: confirmed until ``until_monotonic``. Goes to the guard."""
        with self._lock:
            self.lease_until = max(self.lease_until or until_monotonic, until_monotonic)
            guard = self.guard
        if guard is not None:
            guard.confirm(until_monotonic)

    def fence(self) -> None:
        """Before each operation is sent: refuse it once the job was told to stop, or when the lease's
        confirmation has run out (a worker that froze and resumed, a store that hangs): nothing new starts
        on the server after that."""
        if self._stopping.is_set():  # killed (cancel, lost lease, the watchdog): nothing new starts
            from airflow_tablemgmt.spark.job.lease_guard import LeaseNotConfirmed

            raise LeaseNotConfirmed(
                f"job {self.tag} was stopped: it sends no further operation to the server"
            )
        until = self.lease_until
        if until is not None and time.monotonic() >= until:
            from airflow_tablemgmt.spark.job.lease_guard import LeaseNotConfirmed

            raise LeaseNotConfirmed(
                f"the table's lease was not confirmed in time ({time.monotonic() - until:.1f}s overdue): "
                f"job {self.tag} sends no further operation to the Spark Connect server"
            )
        first_operation.sent()  # a batch's previous table holds its bookkeeping back until then

    def interrupt(self) -> list[str]:
        """Interrupt the job's running operations on the server; the ids the server interrupted.

        The job's later operations are interrupted too: until the run closes, the tag is interrupted again
        every :data:`INTERRUPT_EVERY` seconds (a kill that lands between two operations, while the job
        reads metadata on the client, would otherwise interrupt nothing and the job would go on)."""
        with self._lock:
            session = self.session
            first = not self._stopping.is_set()
            self._stopping.set()
        if session is None:
            return []
        if first:
            threading.Thread(target=self._keep_interrupting, name="tablemgmt-interrupt", daemon=True).start()
        return self._interrupt_once(session)

    def _keep_interrupting(self) -> None:
        while not self._closed.wait(INTERRUPT_EVERY):
            with self._lock:
                session = self.session
            if session is None:
                return
            self._interrupt_once(session)

    def _interrupt_once(self, session: Any) -> list[str]:
        try:
            ids = list(session.interruptTag(self.tag))
        except Exception as e:  # noqa: BLE001 - a dead server has nothing left to interrupt
            log.warning("interrupting %s on %s failed: %s", self.tag, server_of(self.url), str(e)[:300])
            return []
        self.interrupted.extend(ids)
        if ids:
            log.info("interrupted %d operation(s) tagged %s on %s", len(ids), self.tag, server_of(self.url))
        return ids

    def close(self) -> None:
        """Close the client's channel; the server-side session stays (a slot's next task attaches to it, or
        the server's session cache expires it)."""
        self._closed.set()
        with self._lock:
            session, self.session = self.session, None
            guard, self.guard = self.guard, None
        if guard is not None:  # the job's operations have ended: its guard has nothing left to watch
            guard.done()
        if session is None:
            return
        kept = self.kept
        if kept is not None and kept.session is session and not self._stopping.is_set():
            try:  # left open for the batch's next job (or closed by the caller after a failed result)
                session.clearTags()
            except Exception:  # noqa: BLE001
                log.debug("clearing the job's tag failed", exc_info=True)
            return
        if kept is not None:
            kept.session = None
        try:
            session.clearTags()
            close_session(session)
        except Exception:  # noqa: BLE001 - the channel of a dead server
            log.debug("closing the Connect session failed", exc_info=True)


def interrupt_session(application_id: str) -> list[str] | None:
    """Interrupt every operation of an earlier run's session, named by its application id; None when
    the id is not a Connect one."""
    if not application_id.startswith(APP_ID_PREFIX) or "#" not in application_id:
        return None
    server, session_id = application_id[len(APP_ID_PREFIX) :].rsplit("#", 1)
    session_id, _, tag = session_id.partition("/")
    session = open_session(server, session_id)
    try:
        return list(session.interruptTag(tag) if tag else session.interruptAll())
    finally:
        close_session(session)


def _refresh_table(run: ConnectRun, session: RemoteSession, job: JobSpec) -> None:
    """On a reused session the catalog may hold this table from an earlier job (Iceberg's catalog caches
    tables): drop it, so the job reads it anew. A missing table is the job's to report."""
    from airflow_tablemgmt.core.identifiers import TableIdentifier

    started = time.perf_counter()
    try:
        t = job.table
        session.catalog.refreshTable(TableIdentifier(t["catalog"], t["namespace"], t["name"]).quoted)
    except Exception as e:
        if looks_unavailable(str(e)):
            raise
        log.debug("refreshing the table on the reused session: %s", str(e)[:300])
    run.timings["table_refresh"] = round(time.perf_counter() - started, 3)


class _Beside:
    """``on_started(application_id)`` in a thread of its own, started now; :meth:`wait` joins it and raises
    what it raised (``reraise``) or logs it (the job failed anyway: its own failure is the one reported)."""

    def __init__(self, on_started: Callable[[str], None], application_id: str) -> None:
        self._error: BaseException | None = None

        def call() -> None:
            try:
                on_started(application_id)
            except BaseException as e:  # noqa: BLE001 - raised again in the job's thread
                self._error = e

        self._thread = threading.Thread(target=call, name="tablemgmt-job-started", daemon=True)
        self._thread.start()

    def wait(self, *, reraise: bool) -> None:
        self._thread.join()
        if self._error is None:
            return
        if reraise:
            raise self._error
        log.warning("recording the job's start failed too: %s", str(self._error)[:300])


def _table_key(job: JobSpec) -> str:
    t = job.table
    return f"{t.get('catalog')}.{t.get('namespace')}.{t.get('name')}"


def run_on_connect(
    job: JobSpec,
    url: str,
    *,
    run: ConnectRun | None = None,
    on_started: Callable[[str], None] | None = None,
    conf: dict[str, str] | None = None,
) -> JobResult:
    """Run ``job`` (its catalog's secrets resolved) on the Connect server at ``url``: the same job code as
    under spark-submit (``spark.job.main.run_job``), the same result."""
    from airflow_tablemgmt.spark.connect.errors import connect_reason, is_grpc_repr
    from airflow_tablemgmt.spark.connect.finish_later import measure, read_after_later
    from airflow_tablemgmt.spark.connect.policy import connect_refusal
    from airflow_tablemgmt.spark.job.after_later import reads_left_to_caller
    from airflow_tablemgmt.spark.job.main import run_job
    from airflow_tablemgmt.spark.job.redact import REDACT, secret_values
    from airflow_tablemgmt.spark.protocol import FAILED, JobResult

    run = run or ConnectRun(url, job_tag(job))
    server = server_of(url)
    refusal = connect_refusal(job)
    if refusal is not None:
        return JobResult(status=FAILED, error=refusal, error_class="NotOnConnect")
    REDACT.secrets = secret_values(job)
    # A batch's kept session: the job's RUNNING row (its application id is known before the session opens)
    # is written beside the session's Config request, not after it; both still precede its first operation.
    beside = (
        _Beside(on_started, run.application_id) if on_started is not None and run.kept is not None else None
    )
    try:
        from airflow_tablemgmt.spark.conf import validated_catalog

        session = run.open(validated_catalog(job.catalog), conf)
        if run.reused and (run.kept is None or _table_key(job) in run.kept.loaded):
            _refresh_table(run, session, job)
    except Exception as e:  # noqa: BLE001 - a refused or unreachable server is the job's failure
        run.close()  # nothing ran: its guard has nothing to watch
        if beside is not None:
            beside.wait(reraise=False)
        return JobResult(
            status=FAILED,
            error_class="ConnectUnavailable",
            error=f"Spark Connect server {server} refused or could not be reached: {connect_reason(e)}",
        )
    try:
        if beside is not None:
            beside.wait(reraise=True)
        elif on_started is not None:
            on_started(run.application_id)
        # The driver program uses only the DataFrame and SQL API both session classes share (pyspark 3.5's
        # Connect session is not a subclass of the classic one).
        later = run.kept is not None and run.kept.defer_cost  # the caller completes the result after the job
        reads: AbstractContextManager[list[LaterRead]] = (
            reads_left_to_caller(session) if later else nullcontext([])
        )
        with reads as after_reads:
            result = run_job(cast("SparkSession", session), job)
        if run.kept is not None:
            run.kept.loaded.add(_table_key(job))
            run.kept.jobs += 1
        measure(run, session, result)
        read_after_later(result, after_reads)
    finally:
        started = time.perf_counter()
        run.close()
        run.timings["session_close"] = round(time.perf_counter() - started, 3)
    if result.summary is not None and isinstance(result.summary.get("timings"), dict):
        result.summary["timings"].update(run.timings)
        result.summary["session_reused"] = run.reused
    if not result.ok and result.error and is_grpc_repr(result.error):
        result.error = connect_reason(result.error)  # the status and the server's message, not the RPC's repr
    if not result.ok and result.error and looks_unavailable(f"{result.error_class} {result.error}"):
        result.error = f"Spark Connect server {server} became unreachable during the job (it died or restarted): {result.error}"
        result.error_class = "ConnectUnavailable"
    return result
