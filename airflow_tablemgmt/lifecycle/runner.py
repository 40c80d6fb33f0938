"""The state machine: which state a process is in decides what a run does (reuse, wait, take over,
retry, claim); an :class:`~airflow_tablemgmt.lifecycle.attempt.Attempt` runs a PENDING row's attempt
and returns its outcome, which the runner records."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import DBAPIError

from airflow_tablemgmt.core.actions import ACTIONS
from airflow_tablemgmt.core.errors import IllegalTransition, JobFailed
from airflow_tablemgmt.core.factory import ProcessFactory, StoreAwareFactory, TableOutcome
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.core.timing import check_timing
from airflow_tablemgmt.lifecycle.attempt import Attempt
from airflow_tablemgmt.lifecycle.errors import StoreUnreachable, WorkerSuperseded, canceled
from airflow_tablemgmt.lifecycle.model import (
    HEARTBEAT_EVERY,
    LEASE_TTL,
    STALE_AFTER,
    RunOutcome,
    RunRequest,
    Submitter,
)
from airflow_tablemgmt.lifecycle.predecessor import interrupt_reaped
from airflow_tablemgmt.lifecycle.results import ResultJournal
from airflow_tablemgmt.lifecycle.takeover import attempt_prefix, close_orphan, is_orphaned, wait_for_peer
from airflow_tablemgmt.store.effective import effective_table

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec
    from airflow_tablemgmt.factories.discovery import FactoryRegistry
    from airflow_tablemgmt.store import Store

log = logging.getLogger("airflow_tablemgmt.lifecycle")
S = ProcessStatus


class ProcessRunner:
    """Drives one process through PENDING -> SUBMITTED -> RUNNING -> SUCCESS | FAILED | KILLED.

    Every write names the attempt this runner owns, so a superseded runner cannot touch a later
    attempt's row. While the job runs a heartbeat thread stamps the row and renews the table's
    lease; if either fails (the attempt was superseded, the lease was taken, or the store has been
    unreachable for nearly a lease TTL) it kills the job and the run raises
    :class:`WorkerSuperseded` without writing. A cancel request (CANCELING) seen by the heartbeat
    kills the job and ends the process CANCELED.

    ``resolve_catalog`` resolves a catalog's secret references for the factories (the caller hands in
    ``hooks.secrets.resolve_catalog_spec`` where Airflow is at hand); None: catalogs as stored.
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
        wait_for_peer: timedelta | None = None,
        result_dir: Path | None = None,
        resolve_catalog: Callable[[CatalogSpec], CatalogSpec] | None = None,
    ) -> None:
        # The rules hold here too, not only where an operator or the CLI made the settings: a runner
        # built by other code (a service, a plugin, a test harness) gets no weaker guarantees.
        check_timing(
            lease_ttl=lease_ttl,
            heartbeat_every=heartbeat_every,
            stale_after=stale_after,
            where="ProcessRunner",
        )
        self.store = store
        self.factories = factories
        self.submitter = submitter
        self.lease_ttl = lease_ttl
        self.heartbeat_every = heartbeat_every
        self.stale_after = stale_after
        # How long a run waits for a live peer that runs (or is about to claim) the same process before
        # it lets go (LeaseUnavailable: the operator defers and looks again): one lease TTL, the time in
        # which a live peer renews its lease, never the peer's whole job.
        self.wait_for_peer = lease_ttl if wait_for_peer is None else min(wait_for_peer, lease_ttl)
        self.resolve_catalog = resolve_catalog
        self._killed = threading.Event()  # set by kill(): the run's attempts see it after their job
        # Lease holders are unique per runner: two workers given the same ``holder`` name (two CLI
        # runs) must never both believe they hold the table, nor release each other's lease.
        self._token = uuid.uuid4().hex[:8]
        #: What a store-aware factory's ``on_finished`` reported for the last run (a dynamic
        #: table's state); also on the :class:`RunOutcome` of a run that returned.
        self.table_outcome: TableOutcome | None = None
        self._factory: ProcessFactory | None = None  # the factory of the current run, once chosen
        self._attempts: list[Attempt] = []  # the current run's attempts (a takeover makes another)
        self._journal = ResultJournal(result_dir)

    # -- public ---------------------------------------------------------------------------------
    def run(self, req: RunRequest) -> RunOutcome:
        """Run (or resume, or reuse) the process for ``req``. A database error becomes
        :class:`StoreUnreachable` naming the store (host:port, never the password)."""
        self._attempts = []
        self._factory = None
        self.table_outcome = None
        try:
            outcome = self._run(req)
        except JobFailed as e:
            failed_here = any(a.failed_here for a in self._attempts)
            if failed_here and req.last_try and not isinstance(e, WorkerSuperseded | StoreUnreachable):
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
            outcome.table_state = self.table_outcome
        return outcome

    def kill(self) -> None:
        """Kill the running job and record the process as KILLED (from ``on_kill``)."""
        self._killed.set()
        self.submitter.kill()
        if self._attempts:
            self._attempts[-1].record_killed()

    def fail_running(self, reason: str) -> bool:
        """Kill the running job and end its row FAILED with ``reason`` (the task's time limit, before
        ``on_kill``'s :meth:`kill`, which then finds the row closed). False: no job was running."""
        attempt = self._attempts[-1] if self._attempts else None
        if attempt is None or attempt.current is None:
            return False
        current = attempt.current
        self.submitter.kill()
        attempt.fail(current, reason)
        return True

    def reap(self, pending_after: timedelta | None = None) -> list[Any]:
        """Close processes whose worker is gone (see :meth:`ProcessRepository.reap`); logs each."""
        reaped = self.store.processes.reap(self.stale_after, pending_after=pending_after)
        for r in reaped:
            log.warning(
                "tablemgmt: process %s %s -> %s: %s",
                r.process.id,
                r.was,
                r.process.status,
                r.process.failure_reason,
            )
        interrupt_reaped([r.process for r in reaped])  # what a gone worker left running on a Connect server
        return reaped

    # -- the state machine ----------------------------------------------------------------------
    def _finished(self, req: RunRequest, outcome: RunOutcome | None, error: str | None) -> None:
        """Tell a store-aware factory how the process ended (a dynamic table counts failures, fills
        its schema). Never fails the run: the process row already holds the outcome."""
        try:
            factory = self._factory  # the one that made the job; a failure before that looks it up
            if factory is None:
                table = effective_table(self.store, req.table_id)
                factory = self.factories.for_action(table.format, req.action)
            if not isinstance(factory, StoreAwareFactory):
                return
            process = outcome.process if outcome is not None else self._process_of(req)
            if process is None:
                return
            self.table_outcome = factory.on_finished(
                self.store, process, outcome.summary if outcome else None, error
            )
        except Exception:  # noqa: BLE001
            log.warning(
                "tablemgmt: recording the outcome of %s on %s failed", req.action, req.table_id, exc_info=True
            )

    def _process_of(self, req: RunRequest) -> Process | None:
        return self.store.processes.find(req.table_id, req.action, req.instant)

    def _run(self, req: RunRequest) -> RunOutcome:
        store_started = time.perf_counter()
        table = effective_table(self.store, req.table_id)  # its declaration with the policies merged in
        catalog = self.store.catalogs.get(table.catalog)
        action = ACTIONS.get(req.action)
        factory = self._factory = self.factories.for_action(table.format, action.name)
        params = dict(req.parameters or {})
        if req.try_number is not None:
            params["airflow_try"] = req.try_number
        process, created = self.store.processes.open(
            req.table_id,
            req.action,
            req.instant,
            parameters=params,
            dag_id=req.dag_id,
            run_id=req.run_id,
            task_id=req.task_id,
        )
        log.info(
            "tablemgmt: process %s for %s %s at %s (attempt %s, %s)",
            process.id,
            req.table_id,
            req.action,
            req.instant.isoformat(),
            process.attempt,
            "new" if created else f"existing, {process.status}",
        )

        if process.status == S.SUCCESS:
            log.info("tablemgmt: process %s already succeeded; returning its summary", process.id)
            return RunOutcome(process, process.summary or {}, reused=True)
        if process.status == S.CANCELED:
            raise canceled(process)
        if process.status == S.CANCELING:
            if not is_orphaned(self, process, req):
                return wait_for_peer(self, process, req, self._run)  # its heartbeat sees the request
            try:
                process = self.store.processes.transition(
                    process.id,
                    S.CANCELED,
                    expected=S.CANCELING,
                    attempt=process.attempt,
                    failure_reason=f"{process.failure_reason or 'cancel requested'}; the worker was gone",
                )
            except IllegalTransition:
                process = self.store.processes.get(process.id)
            raise canceled(process)
        if process.status in (S.SUBMITTED, S.RUNNING):
            if not is_orphaned(self, process, req):
                return wait_for_peer(self, process, req, self._run)
            process = close_orphan(self, process)
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

        attempt = Attempt(
            self,
            req,
            process,
            holder=f"{attempt_prefix(process)}{req.holder}:{self._token}",
            needs_lease=action.mutates,
            journal=self._journal,
            killed=self._killed,
            store_started=store_started,
            judge_again=self._run,
        )
        self._attempts.append(attempt)
        return attempt.run(table, catalog, factory, recovering)


def _where(store: Store) -> str:
    """Where the store is, for messages: host:port, or the SQLite file (never credentials)."""
    url = store.engine.url
    if url.host:
        return f"{url.host}:{url.port}" if url.port else url.host
    return url.database or url.get_backend_name()
