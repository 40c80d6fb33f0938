"""The process lifecycle: one process per (table, action, instant), attempts, leases, recovery.

Engine-agnostic: a ``Submitter`` runs the job (SparkSubmitHook under Airflow, a plain subprocess for
the CLI). The operator and the CLI both drive :class:`ProcessRunner`, so a run is recorded the same
way whichever started it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

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
from airflow_tablemgmt.factories.discovery import FactoryRegistry
from airflow_tablemgmt.spark.submit import JobResult
from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)
S = ProcessStatus


class Submitter(Protocol):
    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult: ...

    def kill(self) -> None: ...


class ProcessCanceled(TableMgmtError):
    """The process was canceled before it could run."""


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


@dataclass
class RunOutcome:
    process: Process
    summary: dict[str, Any]
    reused: bool = False  # True when an earlier success for the same instant was returned


def utcnow() -> datetime:
    return datetime.now(UTC)


class ProcessRunner:
    """Drives one process through PENDING -> SUBMITTED -> RUNNING -> SUCCESS | FAILED | KILLED."""

    def __init__(
        self,
        store: Store,
        factories: FactoryRegistry,
        submitter: Submitter,
        *,
        lease_ttl: timedelta = timedelta(minutes=10),
        heartbeat_every: timedelta = timedelta(seconds=20),
        stale_after: timedelta = timedelta(seconds=90),
        wait_for_peer: timedelta = timedelta(hours=6),
    ) -> None:
        self.store = store
        self.factories = factories
        self.submitter = submitter
        self.lease_ttl = lease_ttl
        self.heartbeat_every = heartbeat_every
        self.stale_after = stale_after
        self.wait_for_peer = wait_for_peer
        self._current: Process | None = None
        self._killed = threading.Event()

    # -- public ---------------------------------------------------------------------------------
    def run(self, req: RunRequest) -> RunOutcome:
        table = self.store.tables.get(req.table_id)
        catalog = self.store.catalogs.get(table.catalog)
        action = ACTIONS.get(req.action)
        factory = self.factories.for_action(table.format, action.name)
        params = {"airflow_try": req.try_number} if req.try_number is not None else {}
        process, created = self.store.processes.open(
            req.table_id, req.action, req.instant,
            parameters=params, dag_id=req.dag_id, run_id=req.run_id, task_id=req.task_id,
        )  # fmt: skip
        log.info(
            "tablemgmt: process %s for %s %s at %s (attempt %s, %s)",
            process.id, req.table_id, req.action, req.instant.isoformat(), process.attempt,
            "new" if created else f"existing, {process.status}",
        )  # fmt: skip

        recovering = False
        if process.status == S.SUCCESS:
            log.info("tablemgmt: process %s already succeeded; returning its summary", process.id)
            return RunOutcome(process, process.summary or {}, reused=True)
        if process.status == S.CANCELING:
            self.store.processes.transition(process.id, S.CANCELED, expected=S.CANCELING)
            raise ProcessCanceled(f"process {process.id} was canceled")
        if process.status in (S.SUBMITTED, S.RUNNING):
            if self._is_orphaned(process, req):
                process = self._close_orphan(process)
                recovering = True
            else:
                return self._wait_for_peer(process)
        if process.status in (S.FAILED, S.KILLED, S.CANCELED):
            recovering = recovering or process.status == S.FAILED
            process = self.store.processes.new_attempt(process.id, expected=process.status)
            log.info("tablemgmt: process %s retrying as attempt %s", process.id, process.attempt)

        holder = f"process:{process.id}:attempt:{process.attempt}:{req.holder}"
        needs_lease = action.mutates
        if needs_lease and not self.store.leases.acquire(req.table_id, holder, self.lease_ttl):
            lease = self.store.leases.get(req.table_id)
            raise LeaseUnavailable(
                f"table {req.table_id} is leased by {lease.holder if lease else '?'} until "
                f"{lease.expires_at.isoformat() if lease else '?'}; process {process.id} stays PENDING"
            )
        try:
            return self._claim_and_run(process, req, table, catalog, factory, recovering, holder)
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
                self.store.processes.transition(
                    p.id, S.KILLED, expected=(S.SUBMITTED, S.RUNNING, S.CANCELING), attempt=p.attempt,
                    failure_reason="killed: the task was stopped (on_kill) and its Spark application killed",
                )  # fmt: skip
            except IllegalTransition:
                log.info("tablemgmt: process %s already left the running states", p.id)

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
    ) -> RunOutcome:
        last = self.store.processes.last_successful(req.table_id, req.action)
        ctx = TriggerContext(
            instant=req.instant,
            catalog=catalog,
            last_snapshot_id=last.snapshot_id if last else None,
            last_success=last,
        )
        try:
            job = (
                factory.recover(table, process, ctx)
                if recovering
                else factory.trigger(table, req.action, ctx)
            )
        except RecoverProcessFailed as e:
            self.store.processes.transition(
                process.id,
                S.FAILED,
                expected=S.PENDING,
                attempt=process.attempt,
                failure_reason=f"abandoned: {e}",
            )
            raise
        if job is None:
            process = self.store.processes.transition(
                process.id, S.SUBMITTED, expected=S.PENDING, attempt=process.attempt
            )
            process = self.store.processes.transition(process.id, S.RUNNING, expected=S.SUBMITTED)
            summary = {"skipped": True, "reason": "nothing to do"}
            process = self.store.processes.transition(
                process.id, S.SUCCESS, expected=S.RUNNING, summary=summary
            )
            return RunOutcome(process, summary)
        job = JobSpec(**{**job.to_json_dict(), "process_id": process.id, "attempt": process.attempt})

        try:  # the claim: of two concurrent triggers, only one moves PENDING -> SUBMITTED
            process = self.store.processes.transition(
                process.id, S.SUBMITTED, expected=S.PENDING, attempt=process.attempt,
                parameters={**process.parameters, "options": job.options}, heartbeat_at=utcnow(),
                dag_id=req.dag_id, run_id=req.run_id, task_id=req.task_id,
            )  # fmt: skip
        except IllegalTransition:
            log.info("tablemgmt: process %s was claimed by another worker; waiting for it", process.id)
            return self._wait_for_peer(self.store.processes.get(process.id))
        self._current = process
        log.info(
            "tablemgmt: submitting %s on %s (process %s attempt %s)",
            req.action,
            req.table_id,
            process.id,
            process.attempt,
        )

        def on_started(app_id: str) -> None:
            nonlocal process
            process = self.store.processes.transition(
                process.id, S.RUNNING, expected=S.SUBMITTED, external_id=app_id
            )
            self._current = process
            log.info("tablemgmt: process %s running as Spark application %s", process.id, app_id)

        stop = threading.Event()
        beat = threading.Thread(
            target=self._heartbeat, args=(process, req.table_id, holder, stop), daemon=True
        )
        beat.start()
        try:
            result = self.submitter.submit(job, on_started=on_started)
        except BaseException as e:
            stop.set()
            self._fail(process, f"{type(e).__name__}: {e}")
            raise
        finally:
            stop.set()
        self._current = None
        process = self.store.processes.get(process.id)
        if self._killed.is_set() or process.status == S.KILLED:
            raise JobFailed(f"process {process.id} was killed")
        if process.status == S.SUBMITTED:
            process = self.store.processes.transition(
                process.id, S.RUNNING, expected=S.SUBMITTED, external_id=result.application_id
            )
        if result.status != "SUCCESS":
            reason = result.error or "the Spark job failed without a result"
            self._fail(process, reason)
            raise JobFailed(f"{req.action} on {req.table_id} failed (process {process.id}): {reason}")
        summary = result.summary or {}
        snapshot = _snapshot_after(summary)
        process = self.store.processes.transition(
            process.id,
            S.SUCCESS,
            expected=S.RUNNING,
            attempt=process.attempt,
            summary=summary,
            snapshot_id=snapshot,
        )
        log.info("tablemgmt: process %s SUCCESS: %s", process.id, _one_line(summary))
        return RunOutcome(process, summary)

    def _fail(self, process: Process, reason: str) -> None:
        try:
            self.store.processes.transition(
                process.id, S.FAILED, expected=(S.PENDING, S.SUBMITTED, S.RUNNING, S.CANCELING),
                attempt=process.attempt, failure_reason=reason[-4000:],
            )  # fmt: skip
        except IllegalTransition:
            log.info("tablemgmt: process %s already closed", process.id)

    def _heartbeat(self, process: Process, table_id: str, holder: str, stop: threading.Event) -> None:
        while not stop.wait(self.heartbeat_every.total_seconds()):
            try:
                self.store.processes.heartbeat(process.id, process.attempt)
                self.store.leases.renew(table_id, holder, self.lease_ttl)
            except Exception:  # noqa: BLE001 - a missed heartbeat must not fail the job
                log.warning("tablemgmt: heartbeat for process %s failed", process.id, exc_info=True)

    def _is_orphaned(self, process: Process, req: RunRequest) -> bool:
        """A SUBMITTED/RUNNING process whose worker is gone: an earlier try of this same Airflow task
        (Airflow never runs two tries at once), or no heartbeat for ``stale_after``."""
        prev_try = process.parameters.get("airflow_try")
        same_task = (process.dag_id, process.run_id, process.task_id) == (req.dag_id, req.run_id, req.task_id)
        if (
            same_task
            and req.try_number is not None
            and prev_try is not None
            and int(prev_try) < req.try_number
        ):
            return True
        beat = process.heartbeat_at or process.started_at or process.created_at
        return beat is None or utcnow() - beat > self.stale_after

    def _close_orphan(self, process: Process) -> Process:
        beat = process.heartbeat_at.isoformat() if process.heartbeat_at else "never"
        reason = (
            f"worker lost: attempt {process.attempt} was left {process.status} with its last heartbeat at {beat} "
            f"(Spark application {process.external_id or 'unknown'}); the next attempt recovers it"
        )
        log.warning("tablemgmt: process %s: %s", process.id, reason)
        try:
            closed = self.store.processes.transition(
                process.id, S.FAILED, expected=process.status, attempt=process.attempt, failure_reason=reason
            )
        except IllegalTransition:
            return self.store.processes.get(process.id)
        # The lost attempt's lease would otherwise block the recovery until it expires (lease_ttl).
        lease = self.store.leases.get(process.table_id)
        if lease is not None and lease.holder.startswith(f"process:{process.id}:attempt:{process.attempt}:"):
            self.store.leases.release(process.table_id, lease.holder)
            log.info("tablemgmt: released the lease %s held by the lost attempt", lease.holder)
        return closed

    def _wait_for_peer(self, process: Process) -> RunOutcome:
        """Another live worker runs this process: wait for its outcome instead of running twice."""
        deadline = time.monotonic() + self.wait_for_peer.total_seconds()
        while time.monotonic() < deadline:
            p = self.store.processes.get(process.id)
            if p.status == S.SUCCESS:
                return RunOutcome(p, p.summary or {}, reused=True)
            if p.status.is_terminal:
                raise JobFailed(f"process {p.id} ({p.status}) run by another worker: {p.failure_reason}")
            if (
                p.status in (S.SUBMITTED, S.RUNNING)
                and utcnow() - (p.heartbeat_at or p.created_at or utcnow()) > self.stale_after
            ):
                raise JobFailed(
                    f"process {p.id}: the worker running it stopped heartbeating; retry to recover it"
                )
            time.sleep(2)
        raise JobFailed(f"process {process.id}: gave up waiting for the worker running it")


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
        return (
            f"data files {before.get('data_files')} -> {after.get('data_files')}, "
            f"records {before.get('records')} -> {after.get('records')}"
        )
    return ", ".join(f"{k}={v}" for k, v in summary.items() if not isinstance(v, dict | list))[:500]
