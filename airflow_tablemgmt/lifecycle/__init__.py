"""The process lifecycle: one process per (table, action, instant), attempts, leases, recovery.

Engine-agnostic: a ``Submitter`` runs the job (SparkSubmitHook under Airflow, a plain subprocess for
the CLI). The operator and the CLI both drive :class:`ProcessRunner`, so a run is recorded the same
way whichever started it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy.exc import DBAPIError

from airflow_tablemgmt import observability
from airflow_tablemgmt.core.actions import ACTIONS
from airflow_tablemgmt.core.errors import (
    IllegalTransition,
    JobFailed,
    LeaseUnavailable,
    RecoverProcessFailed,
    TableMgmtError,
)
from airflow_tablemgmt.core.factory import JobSpec, TriggerContext
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.core.timing import stale_bound
from airflow_tablemgmt.factories.discovery import FactoryRegistry
from airflow_tablemgmt.lifecycle.beat import heartbeat, start_watchdog
from airflow_tablemgmt.lifecycle.results import (
    ResultJournal,
    close_own_row,
    record_predecessor_success,
    record_success,
)
from airflow_tablemgmt.store import Store

if TYPE_CHECKING:
    from airflow_tablemgmt.spark.submit import JobResult

log = logging.getLogger(__name__)
S = ProcessStatus


class Submitter(Protocol):
    """Runs a job. It may also offer ``kill_application(application_id) -> bool``: kill an earlier
    attempt's application by id, True only when the engine acknowledged it (see SparkJobHook)."""

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult: ...

    def kill(self) -> None: ...


class ProcessCanceled(TableMgmtError):
    """The process was canceled (a cancel is final: no later try re-opens it)."""


class StoreUnreachable(JobFailed):
    """The metadata store failed mid-run; the message names it (host:port)."""


class WorkerSuperseded(JobFailed):
    """This worker no longer owns its process attempt or the table's lease: it killed its job and
    wrote nothing to a row that belongs to someone else now."""


@dataclass(frozen=True)
class RunRequest:
    table_id: str
    action: str
    instant: datetime
    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    try_number: int | None = None
    holder: str = "cli"
    # Recorded on a new process row (a refresh's trigger, schedule time, partitions, options); a row
    # that already exists keeps its own.
    parameters: dict[str, Any] | None = None
    # Whether a failure of this run is final (no Airflow retry follows): only then does it count
    # towards a dynamic table's suspend-after-failures.
    last_try: bool = True


@dataclass
class RunOutcome:
    process: Process
    summary: dict[str, Any]
    reused: bool = False  # True when an earlier success for the same instant was returned


def utcnow() -> datetime:
    return datetime.now(UTC)


#: Defaults, and how they relate: a live worker beats every ``HEARTBEAT_EVERY`` and renews its
#: lease with it; a row whose heartbeat is older than ``STALE_AFTER`` belongs to a lost worker;
#: the lease lapses ``LEASE_TTL`` after the last renewal, later than the row goes stale, so a
#: takeover that waits for the lease never starts while the lost worker could still be running.
HEARTBEAT_EVERY = timedelta(seconds=20)
STALE_AFTER = timedelta(seconds=90)
LEASE_TTL = timedelta(minutes=2)


@dataclass
class _Stop:
    """Why the heartbeat thread stopped the job (set once, read after submit returns)."""

    kind: str  # "canceled" | "superseded"
    reason: str


class ProcessRunner:
    """Drives one process through PENDING -> SUBMITTED -> RUNNING -> SUCCESS | FAILED | KILLED.

    Every write names the attempt this runner owns, so a superseded runner cannot touch a later
    attempt's row. While the job runs a heartbeat thread stamps the row and renews the table's
    lease; if either fails (the attempt was superseded, the lease was taken, or the store has been
    unreachable for nearly a lease TTL) it kills the job and the run raises
    :class:`WorkerSuperseded` without writing. A cancel request (CANCELING) seen by the heartbeat
    kills the job and ends the process CANCELED.
    """

    def __init__(
        self,
        store: Store,
        factories: FactoryRegistry,
        submitter: Submitter,
        *,
        lease_ttl: timedelta = LEASE_TTL,
        heartbeat_every: timedelta = HEARTBEAT_EVERY,
        stale_after: timedelta = STALE_AFTER,
        wait_for_peer: timedelta = timedelta(hours=6),
        result_dir: Path | None = None,
    ) -> None:
        self.store = store
        self.factories = factories
        self.submitter = submitter
        self.lease_ttl = lease_ttl
        self.heartbeat_every = heartbeat_every
        self.stale_after = stale_after
        self.wait_for_peer = wait_for_peer
        self._current: Process | None = None
        self._store_started = time.perf_counter()
        self._killed = threading.Event()
        self._stop: _Stop | None = None
        self._claimed_at = time.monotonic()  # when the current attempt claimed its run (duration metric)
        # Lease holders are unique per runner: two workers given the same ``holder`` name (two CLI
        # runs) must never both believe they hold the table, nor release each other's lease.
        self._token = uuid.uuid4().hex[:8]
        #: What the factory's ``on_finished`` returned for the last run (a dynamic table's state).
        self.finished_state: Any = None
        self._failed_here = False
        self._factory: Any = None  # the factory of the current run, once chosen
        self._lease_taken_at = time.monotonic()
        self._journal = ResultJournal(result_dir)

    # -- public ---------------------------------------------------------------------------------
    def run(self, req: RunRequest) -> RunOutcome:
        """Run (or resume, or reuse) the process for ``req``. A database error becomes
        :class:`StoreUnreachable` naming the store (host:port, never the password)."""
        self._failed_here = False
        self._factory = None
        try:
            outcome = self._run(req)
        except JobFailed as e:
            if self._failed_here and req.last_try and not isinstance(e, WorkerSuperseded | StoreUnreachable):
                self._finished(req, None, str(e))
            raise
        except DBAPIError as e:
            raise StoreUnreachable(
                f"the store at {_where(self.store)} failed or was unreachable while running {req.action} on "
                f"{req.table_id}: {type(e.orig).__name__ if e.orig else type(e).__name__}: "
                f"{str(e.orig or e).strip().splitlines()[0] if str(e.orig or e).strip() else ''}; "
                "nothing more was recorded, and the next try recovers the process"
            ) from e
        if not outcome.reused:
            self._finished(req, outcome, None)
        return outcome

    def _finished(self, req: RunRequest, outcome: RunOutcome | None, error: str | None) -> None:
        """Tell the factory how the process ended (a dynamic table counts failures, fills its schema).
        Never fails the run: the process row already holds the outcome."""
        try:
            factory = self._factory  # the one that made the job; a failure before that looks it up
            if factory is None:
                table = self.store.tables.get(req.table_id)
                factory = self.factories.for_action(table.format, req.action)
            hook = getattr(factory, "on_finished", None)
            if hook is None:
                return
            process = outcome.process if outcome is not None else self._process_of(req)
            if process is None:
                return
            self.finished_state = hook(self.store, process, outcome.summary if outcome else None, error)
        except Exception:  # noqa: BLE001
            log.warning("tablemgmt: recording the outcome of %s on %s failed", req.action, req.table_id,
                        exc_info=True)  # fmt: skip

    def _process_of(self, req: RunRequest) -> Process | None:
        return self.store.processes.find(req.table_id, req.action, req.instant)

    def _run(self, req: RunRequest) -> RunOutcome:
        self._store_started = time.perf_counter()
        table = self.store.tables.get(req.table_id)
        catalog = self.store.catalogs.get(table.catalog)
        action = ACTIONS.get(req.action)
        factory = self._factory = self.factories.for_action(table.format, action.name)
        params = dict(req.parameters or {})
        if req.try_number is not None:
            params["airflow_try"] = req.try_number
        process, created = self.store.processes.open(
            req.table_id, req.action, req.instant,
            parameters=params, dag_id=req.dag_id, run_id=req.run_id, task_id=req.task_id,
        )  # fmt: skip
        log.info(
            "tablemgmt: process %s for %s %s at %s (attempt %s, %s)",
            process.id, req.table_id, req.action, req.instant.isoformat(), process.attempt,
            "new" if created else f"existing, {process.status}",
        )  # fmt: skip

        if process.status == S.SUCCESS:
            log.info("tablemgmt: process %s already succeeded; returning its summary", process.id)
            return RunOutcome(process, process.summary or {}, reused=True)
        if process.status == S.CANCELED:
            raise _canceled(process)
        if process.status == S.CANCELING:
            if not self._is_orphaned(process, req):
                return self._wait_for_peer(process, req)  # its heartbeat sees the request
            try:
                process = self.store.processes.transition(
                    process.id, S.CANCELED, expected=S.CANCELING, attempt=process.attempt,
                    failure_reason=f"{process.failure_reason or 'cancel requested'}; the worker was gone",
                )  # fmt: skip
            except IllegalTransition:
                process = self.store.processes.get(process.id)
            raise _canceled(process)
        if process.status in (S.SUBMITTED, S.RUNNING):
            if not self._is_orphaned(process, req):
                return self._wait_for_peer(process, req)
            process = self._close_orphan(process)
        if process.status in (S.FAILED, S.KILLED):
            try:
                process = self.store.processes.new_attempt(process.id, expected=process.status)
                log.info("tablemgmt: process %s retrying as attempt %s", process.id, process.attempt)
            except IllegalTransition:  # a racing retry re-opened it first
                process = self.store.processes.get(process.id)
        if process.status != S.PENDING:  # lost a race to another worker's write: judge the row again
            return self._run(req)
        # A later attempt recovers what an earlier one left (the factory may resume or abandon).
        recovering = process.attempt > 1

        holder = f"{_attempt_prefix(process)}{req.holder}:{self._token}"
        needs_lease = action.mutates
        self._lease_taken_at = time.monotonic()  # before the call: the watchdog errs early
        if needs_lease and not self.store.leases.acquire(req.table_id, holder, self.lease_ttl):
            lease = self.store.leases.get(req.table_id)
            if lease is not None and lease.holder.startswith(_attempt_prefix(process)):
                # Another worker took the lease for this very attempt and is about to claim it.
                return self._wait_for_peer(process, req)
            try:  # a task waiting for a lease is alive: keep the reaper off its PENDING row
                self.store.processes.heartbeat(process.id, process.attempt)
            except IllegalTransition:
                pass  # canceled or taken meanwhile; the next try sees it
            observability.lease_wait(req.table_id, req.action)
            raise LeaseUnavailable(
                f"table {req.table_id} is leased by {lease.holder if lease else '?'} until "
                f"{lease.expires_at.isoformat() if lease else '?'}; process {process.id} stays PENDING"
            )
        try:
            return self._claim_and_run(process, req, table, catalog, factory, recovering, holder, needs_lease)
        finally:
            if needs_lease:
                self.store.leases.release(req.table_id, holder)

    def kill(self) -> None:
        """Kill the running job and record the process as KILLED (from ``on_kill``)."""
        self._killed.set()
        self.submitter.kill()
        p = self._current
        if p is not None:
            try:
                killed = self.store.processes.transition(
                    p.id, S.KILLED, expected=(S.SUBMITTED, S.RUNNING, S.CANCELING), attempt=p.attempt,
                    failure_reason="killed: the task was stopped (on_kill) and its Spark application killed",
                )  # fmt: skip
                observability.process_finished(killed, self._elapsed())
            except IllegalTransition:
                log.info("tablemgmt: process %s already left the running states", p.id)

    def reap(self, pending_after: timedelta | None = None) -> list[Any]:
        """Close processes whose worker is gone (see :meth:`ProcessRepository.reap`); logs each."""
        reaped = self.store.processes.reap(self.stale_after, pending_after=pending_after)
        for r in reaped:
            log.warning("tablemgmt: process %s %s -> %s: %s", r.process.id, r.was, r.process.status,
                        r.process.failure_reason)  # fmt: skip
        return reaped

    # -- internals ------------------------------------------------------------------------------
    def _claim_and_run(
        self,
        process: Process,
        req: RunRequest,
        table: Any,
        catalog: Any,
        factory: Any,
        recovering: bool,
        holder: str,
        needs_lease: bool,
    ) -> RunOutcome:
        attempt = process.attempt  # every write below is guarded by it
        last = self.store.processes.last_successful(req.table_id, req.action)
        ctx = TriggerContext(
            instant=req.instant,
            catalog=catalog,
            last_snapshot_id=last.snapshot_id if last else None,
            last_success=last,
        )
        if recovering:  # did a predecessor commit its job without recording it?
            found = self._journal.committed_before(self.store, process)
            if found is not None:
                self._claimed_at = time.monotonic()
                done = record_predecessor_success(self.store, self._journal, process, found)
                observability.process_finished(done, 0.0)
                return RunOutcome(done, done.summary or {})
        trigger_process = getattr(factory, "trigger_process", None)
        try:
            if trigger_process is not None:  # a factory that reads the store (dynamic tables)
                job = trigger_process(self.store, table, process, ctx)
            elif recovering:
                job = factory.recover(table, process, ctx)
            else:
                job = factory.trigger(table, req.action, ctx)
        except RecoverProcessFailed as e:
            abandoned = self.store.processes.transition(
                process.id, S.FAILED, expected=S.PENDING, attempt=attempt, failure_reason=f"abandoned: {e}"
            )
            observability.process_finished(abandoned, 0.0)
            raise
        if job is None or isinstance(job, dict):
            summary = {"skipped": True, "reason": "nothing to do"} if job is None else dict(job)
            summary = _complete_summary(factory, process, summary, None, 0.0)
            self._claimed_at = time.monotonic()
            observability.process_started(process)
            for to, expected in ((S.SUBMITTED, S.PENDING), (S.RUNNING, S.SUBMITTED), (S.SUCCESS, S.RUNNING)):
                process = self.store.processes.transition(
                    process.id, to, expected=expected, attempt=attempt,
                    **({"summary": summary} if to == S.SUCCESS else {}),
                )  # fmt: skip
            observability.process_finished(process, self._elapsed())
            return RunOutcome(process, summary)
        job = JobSpec(**{**job.to_json_dict(), "process_id": process.id, "attempt": attempt})

        try:  # the claim: of two concurrent triggers, only one moves PENDING -> SUBMITTED
            process = self.store.processes.transition(
                process.id, S.SUBMITTED, expected=S.PENDING, attempt=attempt,
                parameters={**process.parameters, "options": job.options},
                dag_id=req.dag_id, run_id=req.run_id, task_id=req.task_id,
                heartbeat_every_s=self.heartbeat_every.total_seconds(),
            )  # fmt: skip
        except IllegalTransition:
            log.info("tablemgmt: process %s was claimed by another worker; waiting for it", process.id)
            return self._wait_for_peer(self.store.processes.get(process.id), req)
        self._claimed_at = time.monotonic()
        observability.process_started(process)
        self._current = process
        self._stop = None
        log.info("tablemgmt: submitting %s on %s (process %s attempt %s)", req.action, req.table_id,
                 process.id, attempt)  # fmt: skip

        def on_started(app_id: str) -> None:
            try:
                self._current = self.store.processes.transition(
                    process.id, S.RUNNING, expected=S.SUBMITTED, attempt=attempt, external_id=app_id
                )
                log.info("tablemgmt: process %s running as Spark application %s", process.id, app_id)
            except IllegalTransition as e:
                # The row moved on while the job was starting (a stall): stop at once, do not wait
                # for the next heartbeat, which may be far off if this worker is starved.
                current = self.store.processes.get(process.id)
                if current.attempt == attempt and current.status == S.CANCELING:
                    self._halt(
                        process, "canceled", f"canceled: {current.failure_reason or 'cancel requested'}"
                    )
                else:
                    self._halt(process, "superseded", f"superseded while its job started ({e})")

        stop = threading.Event()
        watchdog = start_watchdog(self, process, req.table_id, self._lease_taken_at) if needs_lease else None
        beat = threading.Thread(
            target=heartbeat,
            args=(self, process, req.table_id, holder, needs_lease, stop, watchdog),
            daemon=True,
        )
        beat.start()
        # Store round-trips and set-up before the job (process row, lease, transitions): a share of
        # the run's overhead the job's own timings cannot see.
        store_before = time.perf_counter() - self._store_started
        try:
            result = self.submitter.submit(job, on_started=on_started)
        except BaseException as e:
            stop.set()
            if watchdog is not None:
                watchdog.stop()
            beat.join(self.heartbeat_every.total_seconds() + 5)
            if self._stop is None and not self._killed.is_set():
                self._fail(process, f"{type(e).__name__}: {e}")
            self._raise_if_stopped(process)
            raise
        finally:
            stop.set()
            if watchdog is not None:
                watchdog.stop()
        if result.status == "SUCCESS":
            summary = _complete_summary(
                factory, process, result.summary or {}, result.application_id, result.duration_seconds
            )
            if isinstance(summary.get("timings"), dict):
                summary["timings"]["store_before_job"] = round(store_before, 3)
            snapshot_id = _snapshot_after(summary)
            # The job committed: its result goes where a next attempt finds it at once, before
            # waiting for the heartbeat thread (which may be blocked in the store) or any store write.
            self._journal.write(self.store, process, attempt, {
                "summary": summary, "snapshot_id": snapshot_id, "application_id": result.application_id,
            })  # fmt: skip
        beat.join(self.heartbeat_every.total_seconds() + 5)
        job_returned = time.perf_counter()
        self._current = None
        if self._killed.is_set():
            raise JobFailed(f"process {process.id} was killed")
        if result.status != "SUCCESS":
            self._raise_if_stopped(process)
            reason = result.error or "the Spark job failed without a result"
            self._fail(process, reason)
            raise JobFailed(f"{req.action} on {req.table_id} failed (process {process.id}): {reason}")
        # A job that committed before a kill landed is recorded too, guarded by this attempt: if the
        # row is another attempt's now, that one finds the result file and records it.
        try:  # a cancel that arrived after the job committed still ends SUCCESS: the table changed
            process = record_success(self.store, self._journal, process, attempt, summary,
                                     snapshot_id=snapshot_id, application_id=result.application_id)  # fmt: skip
        except IllegalTransition as e:
            raise WorkerSuperseded(
                f"process {process.id} attempt {attempt}: its job succeeded but the row moved on ({e}); "
                "its result file is left for the attempt that recovers the process"
            ) from e
        observability.process_finished(process, self._elapsed())
        log.info(
            "tablemgmt: store before the job %.3fs, after it %.3fs",
            store_before,
            time.perf_counter() - job_returned,
        )
        log.info("tablemgmt: process %s SUCCESS: %s", process.id, _one_line(summary))
        return RunOutcome(process, summary)

    def _raise_if_stopped(self, process: Process) -> None:
        """After the heartbeat killed the job: end CANCELED, or stop without writing."""
        stop = self._stop
        if stop is None:
            return
        if stop.kind == "superseded":
            closed = close_own_row(self.store, process, stop.reason)
            raise WorkerSuperseded(
                f"process {process.id} attempt {process.attempt}: {stop.reason}; its Spark application was "
                "killed and "
                + (
                    f"its row closed {closed.status}"
                    if closed
                    else "nothing was written to another attempt's row"
                )
            )
        try:
            closed = self.store.processes.transition(
                process.id, S.CANCELED, expected=S.CANCELING, attempt=process.attempt,
                failure_reason=f"{stop.reason}; its Spark application was killed",
            )  # fmt: skip
            observability.process_finished(closed, self._elapsed())
        except IllegalTransition:
            closed = self.store.processes.get(process.id)
        raise _canceled(closed)

    def _elapsed(self) -> float:
        """Seconds since the current attempt claimed its run."""
        return time.monotonic() - self._claimed_at

    def _fail(self, process: Process, reason: str) -> None:
        self._failed_here = True
        try:
            failed = self.store.processes.transition(
                process.id, S.FAILED, expected=(S.PENDING, S.SUBMITTED, S.RUNNING, S.CANCELING),
                attempt=process.attempt, failure_reason=reason[-4000:],
            )  # fmt: skip
            observability.process_finished(failed, self._elapsed())
        except IllegalTransition:
            log.info("tablemgmt: process %s already closed", process.id)

    def _halt(self, process: Process, kind: str, reason: str) -> None:
        if self._stop is None:  # the first reason to stop is the one recorded
            self._stop = _Stop(kind, reason)
        log.warning("tablemgmt: process %s attempt %s: %s; killing its Spark application", process.id,
                    process.attempt, reason)  # fmt: skip
        try:
            self.submitter.kill()
        except Exception:  # noqa: BLE001 - keep trying to stop; the lease TTL is the backstop
            log.exception("tablemgmt: killing the Spark application of process %s failed", process.id)

    def _is_orphaned(self, process: Process, req: RunRequest) -> bool:
        """A SUBMITTED/RUNNING/CANCELING process whose worker is gone: an earlier try of this same
        Airflow task (Airflow never runs two tries at once), or no heartbeat for ``stale_after`` by
        the database's clock."""
        prev_try = process.parameters.get("airflow_try")
        same_task = (process.dag_id, process.run_id, process.task_id) == (req.dag_id, req.run_id, req.task_id)
        if (
            same_task
            and req.try_number is not None
            and prev_try is not None
            and int(prev_try) < req.try_number
        ):
            return True
        return self._stale(process)

    def _attempt_holds_lease(self, p: Process) -> bool:
        lease = self.store.leases.get(p.table_id)
        return (
            lease is not None
            and lease.holder.startswith(_attempt_prefix(p))
            and not lease.expired(self.store.leases.now())
        )

    def _stale(self, p: Process) -> bool:
        beat = p.heartbeat_at or p.started_at or p.created_at
        bound = stale_bound(self.stale_after, p.heartbeat_every_s)
        return beat is None or self.store.processes.now() - beat > bound

    def _close_orphan(self, process: Process) -> Process:
        """Close a lost attempt as FAILED. Its lease is left alone: the lost worker's job may still be
        running, and the lease lapses on its own ``lease_ttl`` after the last renewal. Until then the
        next attempt stays PENDING (the operator defers, as for any held lease) -- unless the
        submitter can kill the old application by id and the master acknowledges it."""
        beat = process.heartbeat_at.isoformat() if process.heartbeat_at else "never"
        reason = (
            f"worker lost: attempt {process.attempt} was left {process.status} with its last heartbeat "
            f"at {beat} "
            f"(Spark application {process.external_id or 'unknown'}); the next attempt recovers it"
        )
        log.warning("tablemgmt: process %s: %s", process.id, reason)
        try:
            closed = self.store.processes.transition(
                process.id, S.FAILED, expected=process.status, attempt=process.attempt, failure_reason=reason
            )
        except IllegalTransition:
            return self.store.processes.get(process.id)
        self._kill_lost_application(process)
        return closed

    def _kill_lost_application(self, process: Process) -> None:
        """Where the master can kill by id (and acknowledges it), kill the lost attempt's application
        and only then release its lease, so the next attempt need not wait out the lease TTL."""
        kill_by_id = getattr(self.submitter, "kill_application", None)
        if kill_by_id is None or not process.external_id:
            return
        try:
            if not kill_by_id(process.external_id):
                return
        except Exception:  # noqa: BLE001 - fall back to waiting for the lease
            log.warning("tablemgmt: killing %s failed", process.external_id, exc_info=True)
            return
        lease = self.store.leases.get(process.table_id)
        if lease is not None and lease.holder.startswith(_attempt_prefix(process)):
            self.store.leases.release(process.table_id, lease.holder)
            log.info(
                "tablemgmt: killed %s and released the lost attempt's lease %s",
                process.external_id,
                lease.holder,
            )

    def _wait_for_peer(self, process: Process, req: RunRequest) -> RunOutcome:
        """Another live worker runs this process: wait for its outcome instead of running twice. If
        that worker stops heartbeating meanwhile, take the process over (as a new attempt, which
        still waits for the lost attempt's lease)."""
        deadline = time.monotonic() + self.wait_for_peer.total_seconds()
        poll = threading.Event()
        while time.monotonic() < deadline:
            p = self.store.processes.get(process.id)
            if p.status == S.SUCCESS:
                return RunOutcome(p, p.summary or {}, reused=True)
            if p.status == S.CANCELED:
                raise _canceled(p)
            if p.status.is_terminal:
                raise JobFailed(f"process {p.id} ({p.status}) run by another worker: {p.failure_reason}")
            if p.status == S.PENDING and not self._attempt_holds_lease(p):
                return self._run(req)  # the peer let go before claiming it: try again
            if p.status in (S.SUBMITTED, S.RUNNING, S.CANCELING) and self._stale(p):
                log.warning("tablemgmt: process %s: the worker running it stopped heartbeating", p.id)
                return self._run(req)
            poll.wait(min(2.0, max(0.05, self.heartbeat_every.total_seconds())))
        raise JobFailed(f"process {process.id}: gave up waiting for the worker running it")


def _complete_summary(
    factory: Any,
    process: Process,
    summary: dict[str, Any],
    application_id: str | None,
    duration: float | None,
) -> dict[str, Any]:
    complete = getattr(factory, "complete_summary", None)
    if complete is None:
        return summary
    return dict(complete(process, summary, application_id=application_id, duration_seconds=duration))


def _attempt_prefix(p: Process) -> str:
    """The start of every lease holder of this process attempt (``process:<id>:attempt:<n>:``)."""
    return f"process:{p.id}:attempt:{p.attempt}:"


def _where(store: Store) -> str:
    """Where the store is, for messages: host:port, or the SQLite file (never credentials)."""
    url = store.engine.url
    if url.host:
        return f"{url.host}:{url.port}" if url.port else url.host
    return url.database or url.get_backend_name()


def _canceled(p: Process) -> ProcessCanceled:
    return ProcessCanceled(
        f"process {p.id} was canceled ({p.failure_reason or 'no reason given'}); a canceled process is "
        "never re-run: trigger a new run (another instant) to run the action again"
    )


def _snapshot_after(summary: dict[str, Any]) -> int | None:
    after = summary.get("after") if isinstance(summary.get("after"), dict) else None
    for source in (after or {}, summary):
        for key in ("current_snapshot_id", "snapshot_id_after", "snapshot_id"):
            v = source.get(key)
            if isinstance(v, int):
                return v
    return None


def _one_line(summary: dict[str, Any]) -> str:
    before, after = summary.get("before") or {}, summary.get("after") or {}
    if isinstance(before, dict) and isinstance(after, dict) and "data_files" in before:
        line = (
            f"data files {before.get('data_files')} -> {after.get('data_files')}, "
            f"live records {before.get('live_records')} -> {after.get('live_records')}, "
            f"physical rows {before.get('physical_rows')} -> {after.get('physical_rows')}"
        )
        if summary.get("dry_run") and "would_delete_rows" in summary:
            line = f"DRY RUN ({summary.get('dry_run_reason')}): would delete {summary['would_delete_rows']} rows; {line}"
        return line
    return ", ".join(f"{k}={v}" for k, v in summary.items() if not isinstance(v, dict | list))[:500]
