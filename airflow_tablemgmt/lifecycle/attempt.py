"""One attempt of a PENDING process whose lease is held: ask the factory for the job, claim the row
(PENDING -> SUBMITTED), submit with the heartbeat and the lease watchdog beside it, record the result."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from airflow_tablemgmt import observability
from airflow_tablemgmt.core.errors import IllegalTransition, JobFailed, RecoverProcessFailed
from airflow_tablemgmt.core.factory import JobSpec, ProcessFactory, StoreAwareFactory, TriggerContext
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.lifecycle.beat import confirm_before_submit, confirm_to_job, heartbeat, start_watchdog
from airflow_tablemgmt.lifecycle.errors import WorkerSuperseded, canceled
from airflow_tablemgmt.lifecycle.model import RunnerState, RunOutcome, RunRequest
from airflow_tablemgmt.lifecycle.predecessor import with_application
from airflow_tablemgmt.lifecycle.results import close_own_row, record_predecessor_success, record_success
from airflow_tablemgmt.lifecycle.summary import complete_summary, one_line, snapshot_after
from airflow_tablemgmt.lifecycle.table_marks import committed_in_table
from airflow_tablemgmt.lifecycle.takeover import wait_for_peer
from airflow_tablemgmt.spark.protocol import name_the_catalog

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec

log = logging.getLogger("airflow_tablemgmt.lifecycle")
S = ProcessStatus


def claim_and_run(
    runner: RunnerState,
    process: Process,
    req: RunRequest,
    table: TableSpec,
    catalog: CatalogSpec,
    factory: ProcessFactory,
    recovering: bool,
    holder: str,
    needs_lease: bool,
) -> RunOutcome:
    store = runner.store
    attempt = process.attempt  # every write below is guarded by it
    last = store.processes.last_successful(req.table_id, req.action)
    ctx = TriggerContext(
        instant=req.instant,
        catalog=catalog,
        last_snapshot_id=last.snapshot_id if last else None,
        last_success=last,
        resolve_catalog=runner.resolve_catalog,
    )
    if recovering:  # did a predecessor commit its job without recording it? Its result file, else the table
        found = runner._journal.committed_before(store, process)
        if found is None:
            resolved = runner.resolve_catalog(catalog) if runner.resolve_catalog is not None else catalog
            found = committed_in_table(table, resolved, process)
        if found is not None:
            runner._claimed_at = time.monotonic()
            done = record_predecessor_success(store, runner._journal, process, found)
            observability.process_finished(done, 0.0)
            return RunOutcome(done, done.summary or {})
    try:
        job: JobSpec | dict | None
        if isinstance(factory, StoreAwareFactory):  # a factory that reads the store (dynamic tables)
            job = factory.trigger_process(store, table, process, ctx)
        elif recovering:
            job = factory.recover(table, process, ctx)
        else:
            job = factory.trigger(table, req.action, ctx)
    except RecoverProcessFailed as e:
        abandoned = store.processes.transition(
            process.id, S.FAILED, expected=S.PENDING, attempt=attempt, failure_reason=f"abandoned: {e}"
        )
        observability.process_finished(abandoned, 0.0)
        raise
    if job is None or isinstance(job, dict):
        summary = {"skipped": True, "reason": "nothing to do"} if job is None else dict(job)
        summary = complete_summary(factory, process, summary, None, 0.0)
        runner._claimed_at = time.monotonic()
        observability.process_started(process)
        for to, expected in ((S.SUBMITTED, S.PENDING), (S.RUNNING, S.SUBMITTED), (S.SUCCESS, S.RUNNING)):
            process = store.processes.transition(
                process.id, to, expected=expected, attempt=attempt,
                **({"summary": summary} if to == S.SUCCESS else {}),
            )  # fmt: skip
        observability.process_finished(process, runner._elapsed())
        return RunOutcome(process, summary)
    job = JobSpec(**{**job.to_json_dict(), "process_id": process.id, "attempt": attempt})
    if needs_lease:  # the set-up above may have outlived the lease: confirm it before anything runs
        runner._lease_taken_at = confirm_before_submit(runner, process, req.table_id, holder)
        confirm_to_job(runner, runner._lease_taken_at)  # the job's own deadline starts from there too

    try:  # the claim: of two concurrent triggers, only one moves PENDING -> SUBMITTED
        process = store.processes.transition(
            process.id, S.SUBMITTED, expected=S.PENDING, attempt=attempt,
            parameters={**process.parameters, "options": job.options},
            dag_id=req.dag_id, run_id=req.run_id, task_id=req.task_id,
            heartbeat_every_s=runner.heartbeat_every.total_seconds(),
        )  # fmt: skip
    except IllegalTransition:
        log.info("tablemgmt: process %s was claimed by another worker; waiting for it", process.id)
        return wait_for_peer(runner, store.processes.get(process.id), req)
    runner._claimed_at = time.monotonic()
    observability.process_started(process)
    runner._current = process
    runner._stop = None
    log.info("tablemgmt: submitting %s on %s (process %s attempt %s)", req.action, req.table_id,
             process.id, attempt)  # fmt: skip

    def on_started(app_id: str) -> None:
        try:
            # A Spark Connect job's id also goes into the parameters, which outlive this attempt: whoever
            # takes the table next ends that job and waits to see it ended (predecessor.py).
            recorded = with_application(process.parameters or {}, attempt, app_id)
            runner._current = store.processes.transition(
                process.id, S.RUNNING, expected=S.SUBMITTED, attempt=attempt, external_id=app_id,
                **({"parameters": recorded} if recorded is not None else {}),
            )  # fmt: skip
            log.info("tablemgmt: process %s running as Spark application %s", process.id, app_id)
        except IllegalTransition as e:
            # The row moved on while the job was starting (a stall): stop at once, do not wait
            # for the next heartbeat, which may be far off if this worker is starved.
            current = store.processes.get(process.id)
            if current.attempt == attempt and current.status == S.CANCELING:
                runner._halt(process, "canceled", f"canceled: {current.failure_reason or 'cancel requested'}")
            else:
                runner._halt(process, "superseded", f"superseded while its job started ({e})")

    stop = threading.Event()
    watchdog = start_watchdog(runner, process, req.table_id, runner._lease_taken_at) if needs_lease else None
    beat = threading.Thread(
        target=heartbeat,
        args=(runner, process, req.table_id, holder, needs_lease, stop, watchdog),
        daemon=True,
    )
    beat.start()
    # Store round-trips and set-up before the job (process row, lease, transitions): a share of
    # the run's overhead the job's own timings cannot see.
    store_before = time.perf_counter() - runner._store_started
    try:
        result = runner.submitter.submit(job, on_started=on_started)
    except BaseException as e:
        stop.set()
        if watchdog is not None:
            watchdog.stop()
        beat.join(runner.heartbeat_every.total_seconds() + 5)
        if runner._stop is None and not runner._killed.is_set():
            runner._fail(process, f"{type(e).__name__}: {e}")
        raise_if_stopped(runner, process)
        raise
    finally:
        stop.set()
        if watchdog is not None:
            watchdog.stop()
    if result.status == "SUCCESS":
        summary = complete_summary(
            factory, process, result.summary or {}, result.application_id, result.duration_seconds
        )
        if isinstance(summary.get("timings"), dict):
            summary["timings"]["store_before_job"] = round(store_before, 3)
        snapshot_id = snapshot_after(summary)
        # The job committed: its result goes where a next attempt finds it at once, before
        # waiting for the heartbeat thread (which may be blocked in the store) or any store write.
        runner._journal.write(store, process, attempt, {
            "summary": summary, "snapshot_id": snapshot_id, "application_id": result.application_id,
        })  # fmt: skip
    beat.join(runner.heartbeat_every.total_seconds() + 5)
    job_returned = time.perf_counter()
    runner._current = None
    if runner._killed.is_set():
        raise JobFailed(f"process {process.id} was killed")
    if result.status != "SUCCESS":
        raise_if_stopped(runner, process)
        reason = name_the_catalog(result.error_class, result.error or "the Spark job failed without a result",
                                  job.catalog)  # fmt: skip
        runner._fail(process, reason)
        raise JobFailed(f"{req.action} on {req.table_id} failed (process {process.id}): {reason}")
    # A job that committed before a kill landed is recorded too, guarded by this attempt: if the
    # row is another attempt's now, that one finds the result file and records it.
    try:  # a cancel that arrived after the job committed still ends SUCCESS: the table changed
        process = record_success(store, runner._journal, process, attempt, summary,
                                 snapshot_id=snapshot_id, application_id=result.application_id)  # fmt: skip
    except IllegalTransition as e:
        raise WorkerSuperseded(
            f"process {process.id} attempt {attempt}: its job succeeded but the row moved on ({e}); "
            "its result file is left for the attempt that recovers the process"
        ) from e
    observability.process_finished(process, runner._elapsed())
    log.info(
        "tablemgmt: store before the job %.3fs, after it %.3fs",
        store_before,
        time.perf_counter() - job_returned,
    )
    log.info("tablemgmt: process %s SUCCESS: %s", process.id, one_line(summary))
    return RunOutcome(process, summary)


def raise_if_stopped(runner: RunnerState, process: Process) -> None:
    """After the heartbeat killed the job: end CANCELED, or stop without writing."""
    stop = runner._stop
    if stop is None:
        return
    store = runner.store
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
            process.id, S.CANCELED, expected=S.CANCELING, attempt=process.attempt,
            failure_reason=f"{stop.reason}; its Spark application was killed",
        )  # fmt: skip
        observability.process_finished(closed, runner._elapsed())
    except IllegalTransition:
        closed = store.processes.get(process.id)
    raise canceled(closed)
