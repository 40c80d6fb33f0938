"""One attempt of a PENDING process, step by step: take the table's lease, ask the factory for the job
(set up), confirm the lease, claim the row (PENDING -> SUBMITTED), submit with the heartbeat and the
lease watchdog beside it (watch), record the result.

An :class:`Attempt` owns its state (its clock, the running row, why it was stopped:
:class:`~airflow_tablemgmt.lifecycle.attempt_state.AttemptState`). The
:class:`~airflow_tablemgmt.lifecycle.runner.ProcessRunner` makes one per PENDING row it runs and
records the outcome :meth:`Attempt.run` returns.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt import observability
from airflow_tablemgmt.core.errors import IllegalTransition, JobFailed, LeaseUnavailable, RecoverProcessFailed
from airflow_tablemgmt.core.factory import JobSpec, ProcessFactory, StoreAwareFactory, TriggerContext
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.lifecycle.attempt_state import AttemptState
from airflow_tablemgmt.lifecycle.beat import confirm_before_submit, confirm_to_job, heartbeat, start_watchdog
from airflow_tablemgmt.lifecycle.errors import WorkerSuperseded
from airflow_tablemgmt.lifecycle.model import NamesConnectServer, RunOutcome
from airflow_tablemgmt.lifecycle.predecessor import ensure_ended, with_application
from airflow_tablemgmt.lifecycle.results import record_predecessor_success, record_success
from airflow_tablemgmt.lifecycle.retention import EXPIRE_SNAPSHOTS, snapshots_to_keep
from airflow_tablemgmt.lifecycle.summary import complete_summary, one_line, snapshot_after
from airflow_tablemgmt.lifecycle.table_marks import committed_in_table, with_connect_base
from airflow_tablemgmt.lifecycle.takeover import attempt_prefix, wait_for_peer
from airflow_tablemgmt.lifecycle.watchdog import LeaseWatchdog
from airflow_tablemgmt.spark.protocol import name_the_catalog

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
    from airflow_tablemgmt.spark.protocol import JobResult

log = logging.getLogger("airflow_tablemgmt.lifecycle")
S = ProcessStatus


@dataclass
class Guards:
    """The running job's guards: the heartbeat thread, the lease watchdog beside it, and what stops both."""

    stop: threading.Event
    watchdog: LeaseWatchdog | None
    beat: threading.Thread

    def stop_all(self) -> None:
        self.stop.set()
        if self.watchdog is not None:
            self.watchdog.stop()


@dataclass
class Committed:
    """A job that committed: what is recorded on its row (written to the result file first)."""

    summary: dict[str, Any]
    snapshot_id: int | None
    store_before: float  # seconds of store round-trips and set-up before the job


class Attempt(AttemptState):
    """One attempt of a PENDING process, step by step (see the module): :meth:`run` returns the
    outcome the runner records."""

    # -- the steps ----------------------------------------------------------------------------------
    def run(
        self, table: TableSpec, catalog: CatalogSpec, factory: ProcessFactory, recovering: bool
    ) -> RunOutcome:
        """Take the lease, run the attempt, and let the lease go once the job is gone."""
        waited = self.take_lease()
        if waited is not None:
            return waited
        try:
            return self.claim_and_run(table, catalog, factory, recovering)
        finally:
            if self.needs_lease and self.job_gone():
                self.store.leases.release(self.req.table_id, self.holder)

    def take_lease(self) -> RunOutcome | None:
        """Take the table's lease (an action that changes the table): None once held, or the outcome
        of the peer that holds it for this very attempt. Raises :class:`LeaseUnavailable` (the row
        stays PENDING) while another holder's lease is live."""
        store, req, process = self.store, self.req, self.process
        # A lapsed lease's Spark Connect job must be seen ended before it is taken over; one still live under
        # such a holder is not tried now (it could lapse before the acquire, unobserved).
        live_connect = self.needs_lease and ensure_ended(self.settings, req.table_id, self.holder)
        self.lease_taken_at = time.monotonic()  # before the call: the watchdog errs early
        if self.needs_lease and (
            live_connect or not store.leases.acquire(req.table_id, self.holder, self.settings.lease_ttl)
        ):
            lease = store.leases.get(req.table_id)
            if lease is not None and lease.holder.startswith(attempt_prefix(process)):
                # Another worker took the lease for this very attempt and is about to claim it.
                return wait_for_peer(self.settings, process, req, self.judge_again)
            try:  # a task waiting for a lease is alive: keep the reaper off its PENDING row
                store.processes.heartbeat(process.id, process.attempt)
            except IllegalTransition:
                pass  # canceled or taken meanwhile; the next try sees it
            observability.lease_wait(req.table_id, req.action)
            raise LeaseUnavailable(
                f"table {req.table_id} is leased by {lease.holder if lease else '?'} until "
                f"{lease.expires_at.isoformat() if lease else '?'}; process {process.id} stays PENDING"
            )
        # The lease wait (created_at -> lease_acquired_at), on the History tab and in the CLI.
        if self.needs_lease:
            store.processes.lease_taken(process.id, process.attempt)
        return None

    def claim_and_run(
        self, table: TableSpec, catalog: CatalogSpec, factory: ProcessFactory, recovering: bool
    ) -> RunOutcome:
        """With the lease held: record a predecessor's committed result, or set up, claim, submit,
        watch and record the job."""
        ctx = self.context(catalog)
        # Did a predecessor commit its job without recording it? Its result file, else the table.
        if recovering:
            found = self.committed_before(table, catalog)
            if found is not None:
                return self.record_predecessor(found)
        job = self.set_up(table, factory, recovering, ctx)
        if job is None or isinstance(job, dict):
            return self.finish_without_job(factory, job)
        job = JobSpec(
            **{**job.to_json_dict(), "process_id": self.process.id, "attempt": self.process.attempt}
        )
        if self.needs_lease:  # the set-up above may have outlived the lease: confirm it before anything runs
            self.lease_taken_at = confirm_before_submit(
                self.settings, self.process, self.req.table_id, self.holder, self.lease_taken_at
            )
            confirm_to_job(self.settings, self.lease_taken_at)  # the job's own deadline starts from there too
        if isinstance(self.settings.submitter, NamesConnectServer):
            # A Connect job's commits carry no mark: record the commit it starts from, so a recovery
            # without its result file can credit its commit by the table's lineage (table_marks.py).
            resolve = self.settings.resolve_catalog
            based = with_connect_base(
                table,
                resolve(catalog) if resolve is not None else catalog,
                self.process,
                self.store.processes.now(),
            )
            if based is not None:
                self.process = replace(self.process, parameters=based)
        claimed = self.claim(job)
        if claimed is None:
            log.info("tablemgmt: process %s was claimed by another worker; waiting for it", self.process.id)
            current = self.store.processes.get(self.process.id)
            return wait_for_peer(self.settings, current, self.req, self.judge_again)
        result, committed = self.submit_and_watch(factory, job, claimed)
        return self.record(job, claimed, result, committed)

    def committed_before(self, table: TableSpec, catalog: CatalogSpec) -> dict[str, Any] | None:
        """A predecessor's committed but unrecorded result: its result file, else the table's marks."""
        found = self.journal.committed_before(self.store, self.process)
        if found is None:
            resolve = self.settings.resolve_catalog
            others = self.store.processes.list(table_id=self.req.table_id, limit=500)
            found = committed_in_table(
                table, resolve(catalog) if resolve is not None else catalog, self.process, others
            )
        return found

    def record_predecessor(self, found: dict[str, Any]) -> RunOutcome:
        self.claimed_at = time.monotonic()
        done = record_predecessor_success(self.store, self.journal, self.process, found)
        observability.process_finished(done, 0.0)
        return RunOutcome(done, done.summary or {})

    def context(self, catalog: CatalogSpec) -> TriggerContext:
        """What the factory is told of the run: its instant, catalog and the action's last success."""
        req = self.req
        last = self.store.processes.last_successful(req.table_id, req.action)
        keep = snapshots_to_keep(self.store, req.table_id) if req.action == EXPIRE_SNAPSHOTS else {}
        return TriggerContext(
            instant=req.instant,
            catalog=catalog,
            last_snapshot_id=last.snapshot_id if last else None,
            last_success=last,
            resolve_catalog=self.settings.resolve_catalog,
            retain_snapshots=keep,
        )

    def set_up(
        self, table: TableSpec, factory: ProcessFactory, recovering: bool, ctx: TriggerContext
    ) -> JobSpec | dict[str, Any] | None:
        """The factory's job for this attempt (a dict: the summary of a run that needs none; None:
        nothing to do). A recovery the factory abandons ends the row FAILED."""
        store, req, process = self.store, self.req, self.process
        try:
            if isinstance(factory, StoreAwareFactory):  # a factory that reads the store (dynamic tables)
                return factory.trigger_process(store, table, process, ctx)
            if recovering:
                return factory.recover(table, process, ctx)
            return factory.trigger(table, req.action, ctx)
        except RecoverProcessFailed as e:
            abandoned = store.processes.transition(
                process.id,
                S.FAILED,
                expected=S.PENDING,
                attempt=process.attempt,
                failure_reason=f"abandoned: {e}",
            )
            observability.process_finished(abandoned, 0.0)
            raise

    def finish_without_job(self, factory: ProcessFactory, job: dict[str, Any] | None) -> RunOutcome:
        """A run with nothing to do (or declined) is a SUCCESS row with its summary, no job."""
        process = self.process
        summary = {"skipped": True, "reason": "nothing to do"} if job is None else dict(job)
        summary = complete_summary(factory, process, summary, None, 0.0)
        self.claimed_at = time.monotonic()
        observability.process_started(process)
        for to, expected in ((S.SUBMITTED, S.PENDING), (S.RUNNING, S.SUBMITTED), (S.SUCCESS, S.RUNNING)):
            process = self.store.processes.transition(
                process.id,
                to,
                expected=expected,
                attempt=process.attempt,
                **({"summary": summary} if to == S.SUCCESS else {}),
            )
        observability.process_finished(process, self.elapsed())
        return RunOutcome(process, summary)

    def claim(self, job: JobSpec) -> Process | None:
        """Of two concurrent triggers, only one moves PENDING -> SUBMITTED: the claimed row, or None
        when another worker claimed it first."""
        req, process = self.req, self.process
        try:
            claimed = self.store.processes.transition(
                process.id,
                S.SUBMITTED,
                expected=S.PENDING,
                attempt=process.attempt,
                parameters={**process.parameters, "options": job.options},
                dag_id=req.dag_id,
                run_id=req.run_id,
                task_id=req.task_id,
                heartbeat_every_s=self.settings.heartbeat_every.total_seconds(),
            )
        except IllegalTransition:
            return None
        self.claimed_at = time.monotonic()
        observability.process_started(claimed)
        self.current = claimed
        self.stopped = None
        log.info(
            "tablemgmt: submitting %s on %s (process %s attempt %s)",
            req.action,
            req.table_id,
            claimed.id,
            claimed.attempt,
        )
        return claimed

    def submit_and_watch(
        self, factory: ProcessFactory, job: JobSpec, process: Process
    ) -> tuple[JobResult, Committed | None]:
        """Submit the job with its guards beside it. A committed job's result goes to the result file
        at once, before waiting for the heartbeat thread (which may be blocked in the store)."""
        guards = self.start_guards(process)
        # Store round-trips and set-up before the job (process row, lease, transitions): a share of
        # the run's overhead the job's own timings cannot see.
        store_before = time.perf_counter() - self.store_started
        try:
            result = self.settings.submitter.submit(
                job, on_started=lambda app_id: self.on_started(process, app_id)
            )
        except BaseException as e:
            guards.stop_all()
            guards.beat.join(self.settings.heartbeat_every.total_seconds() + 5)
            if self.stopped is None and not self.killed.is_set():
                self.fail(process, f"{type(e).__name__}: {e}")
            self.raise_if_stopped(process)
            raise
        finally:
            guards.stop_all()
        committed = None
        if result.status == "SUCCESS":
            summary = complete_summary(
                factory, process, result.summary or {}, result.application_id, result.duration_seconds
            )
            if isinstance(summary.get("timings"), dict):
                summary["timings"]["store_before_job"] = round(store_before, 3)
            committed = Committed(summary, snapshot_after(summary), store_before)
            self.journal.write(
                self.store,
                process,
                process.attempt,
                {
                    "summary": summary,
                    "snapshot_id": committed.snapshot_id,
                    "application_id": result.application_id,
                },
            )
        guards.beat.join(self.settings.heartbeat_every.total_seconds() + 5)
        return result, committed

    def start_guards(self, process: Process) -> Guards:
        stop = threading.Event()
        table_id = self.req.table_id
        dog = (
            start_watchdog(self.settings, self, process, table_id, self.lease_taken_at)
            if self.needs_lease
            else None
        )
        beat = threading.Thread(
            target=heartbeat,
            args=(self.settings, self, process, table_id, self.holder, self.needs_lease, stop, dog),
            daemon=True,
        )
        beat.start()
        return Guards(stop, dog, beat)

    def on_started(self, process: Process, app_id: str) -> None:
        """The engine reported the job's application: SUBMITTED -> RUNNING; a row that moved on
        meanwhile (a stall) stops the job at once rather than at the next heartbeat."""
        attempt = process.attempt
        try:
            # A Spark Connect job's id also goes into the parameters, which outlive this attempt: whoever
            # takes the table next ends that job and waits to see it ended (predecessor.py).
            recorded = with_application(process.parameters or {}, attempt, app_id)
            self.current = self.store.processes.transition(
                process.id,
                S.RUNNING,
                expected=S.SUBMITTED,
                attempt=attempt,
                external_id=app_id,
                **({"parameters": recorded} if recorded is not None else {}),
            )
            log.info("tablemgmt: process %s running as Spark application %s", process.id, app_id)
        except IllegalTransition as e:
            current = self.store.processes.get(process.id)
            if current.attempt == attempt and current.status == S.CANCELING:
                self.halt("canceled", f"canceled: {current.failure_reason or 'cancel requested'}")
            else:
                self.halt("superseded", f"superseded while its job started ({e})")

    def record(
        self, job: JobSpec, process: Process, result: JobResult, committed: Committed | None
    ) -> RunOutcome:
        """Record the job's end: SUCCESS with its summary (a cancel that arrived after the commit still
        ends SUCCESS: the table changed), or FAILED naming why."""
        req, attempt = self.req, process.attempt
        job_returned = time.perf_counter()
        self.current = None
        if self.killed.is_set():
            raise JobFailed(f"process {process.id} was killed")
        if committed is None:
            self.raise_if_stopped(process)
            reason = name_the_catalog(
                result.error_class, result.error or "the Spark job failed without a result", job.catalog
            )
            self.fail(process, reason, cost=result.cost)
            raise JobFailed(f"{req.action} on {req.table_id} failed (process {process.id}): {reason}")
        # A job that committed before a kill landed is recorded too, guarded by this attempt: if the
        # row is another attempt's now, that one finds the result file and records it.
        try:
            done = record_success(
                self.store,
                self.journal,
                process,
                attempt,
                committed.summary,
                snapshot_id=committed.snapshot_id,
                application_id=result.application_id,
            )
        except IllegalTransition as e:
            raise WorkerSuperseded(
                f"process {process.id} attempt {attempt}: its job succeeded but the row moved on ({e}); "
                "its result file is left for the attempt that recovers the process"
            ) from e
        observability.process_finished(done, self.elapsed())
        log.info(
            "tablemgmt: store before the job %.3fs, after it %.3fs",
            committed.store_before,
            time.perf_counter() - job_returned,
        )
        log.info("tablemgmt: process %s SUCCESS: %s", done.id, one_line(committed.summary))
        return RunOutcome(done, committed.summary)
