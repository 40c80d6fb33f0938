"""What one attempt of a process owns, and how it ends: :class:`AttemptState`.

Its clock (when the run began to judge the row, when it took the lease, when it claimed the row), the
row while its job runs (``current``, what a kill records), why its guards stopped the job (``stopped``,
the first reason stands), whether it failed the row itself, and the run's kill handle and result
journal that the :class:`~airflow_tablemgmt.lifecycle.runner.ProcessRunner` hands it. The steps of the
attempt are :class:`~airflow_tablemgmt.lifecycle.attempt.Attempt`'s; the heartbeat and the watchdog
(:mod:`.beat`) stop the job through :meth:`AttemptState.halt`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from airflow_tablemgmt import observability
from airflow_tablemgmt.core.cost import cost_columns
from airflow_tablemgmt.core.errors import IllegalTransition
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.lifecycle.errors import WorkerSuperseded, canceled
from airflow_tablemgmt.lifecycle.model import ConfirmsStop, RunOutcome, RunRequest, RunSettings, Stop
from airflow_tablemgmt.lifecycle.results import ResultJournal, close_own_row

log = logging.getLogger("airflow_tablemgmt.lifecycle")
S = ProcessStatus


class AttemptState:
    """The state of one attempt of ``process`` (PENDING) for ``req`` under ``holder``; see the module."""

    def __init__(
        self,
        settings: RunSettings,
        req: RunRequest,
        process: Process,
        *,
        holder: str,
        needs_lease: bool,
        journal: ResultJournal,
        killed: threading.Event,
        store_started: float,
        judge_again: Callable[[RunRequest], RunOutcome],
    ) -> None:
        now = time.monotonic()
        self.settings, self.store, self.req = settings, settings.store, req
        self.process = process
        self.holder, self.needs_lease = holder, needs_lease
        self.journal, self.killed, self.judge_again = journal, killed, judge_again
        self.store_started = store_started  # perf_counter: when the run began to judge the row
        self.lease_taken_at = now  # monotonic, set again before the lease call (the watchdog errs early)
        self.claimed_at = now  # monotonic, set when the row is claimed (the duration metric)
        self.current: Process | None = None  # the row while its job runs: what a kill records KILLED
        self.stopped: Stop | None = None  # why the guards stopped the job (the first reason stands)
        self.failed_here = False  # whether this attempt ended its row FAILED itself

    # -- how the attempt ends -----------------------------------------------------------------------
    def elapsed(self) -> float:
        """Seconds since this attempt claimed its row."""
        return time.monotonic() - self.claimed_at

    def fail(self, process: Process, reason: str, cost: dict[str, Any] | None = None) -> None:
        """End the row FAILED with ``reason`` (guarded by this attempt; a closed row stays closed), and
        what the failed job cost when its result measured it (``core/cost.py``)."""
        self.failed_here = True
        try:
            failed = self.store.processes.transition(
                process.id,
                S.FAILED,
                expected=(S.PENDING, S.SUBMITTED, S.RUNNING, S.CANCELING),
                attempt=process.attempt,
                failure_reason=reason[-4000:],
                **cost_columns({"cost": cost}),
            )
            observability.process_finished(failed, self.elapsed())
        except IllegalTransition:
            log.info("tablemgmt: process %s already closed", process.id)

    def record_killed(self) -> None:
        """The task was stopped (``on_kill``): the running row ends KILLED."""
        p = self.current
        if p is None:
            return
        try:
            killed = self.store.processes.transition(
                p.id,
                S.KILLED,
                expected=(S.SUBMITTED, S.RUNNING, S.CANCELING),
                attempt=p.attempt,
                failure_reason="killed: the task was stopped (on_kill) and its Spark application killed",
            )
            observability.process_finished(killed, self.elapsed())
        except IllegalTransition:
            log.info("tablemgmt: process %s already left the running states", p.id)

    def halt(self, kind: str, reason: str) -> None:
        """Stop the job (a guard or the start saw a cancel, a lost lease, a superseded row); the
        first reason is the one recorded."""
        if self.stopped is None:
            self.stopped = Stop(kind, reason)
        process = self.process
        log.warning(
            "tablemgmt: process %s attempt %s: %s; killing its Spark application",
            process.id,
            process.attempt,
            reason,
        )
        try:
            self.settings.submitter.kill()
        except Exception:  # noqa: BLE001 - keep trying to stop; the lease TTL is the backstop
            log.exception("tablemgmt: killing the Spark application of process %s failed", process.id)

    def raise_if_stopped(self, process: Process) -> None:
        """After the guards killed the job: end CANCELED, or stop without writing."""
        stop = self.stopped
        if stop is None:
            return
        store = self.store
        if stop.kind == "superseded":
            closed = close_own_row(store, process, stop.reason)
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
            closed = store.processes.transition(
                process.id,
                S.CANCELED,
                expected=S.CANCELING,
                attempt=process.attempt,
                failure_reason=f"{stop.reason}; its Spark application was killed",
            )
            observability.process_finished(closed, self.elapsed())
        except IllegalTransition:
            closed = store.processes.get(process.id)
        raise canceled(closed)

    def job_gone(self) -> bool:
        """Whether the job this attempt ran is gone, so its lease may go: a submitter that killed
        its job and cannot confirm the job's processes ended keeps the lease, to lapse on its own."""
        submitter, process = self.settings.submitter, self.process
        if not isinstance(submitter, ConfirmsStop):
            return True
        try:
            gone = submitter.job_stopped()
        except Exception:  # noqa: BLE001 - unknown is not gone
            log.warning(
                "tablemgmt: process %s: could not tell whether its job ended", process.id, exc_info=True
            )
            gone = False
        if not gone:
            log.warning(
                "tablemgmt: process %s attempt %s: its killed Spark job was not seen to end; the table's "
                "lease is kept and lapses on its own",
                process.id,
                process.attempt,
            )
        return gone
