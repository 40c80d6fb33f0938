"""Another worker's process: is it orphaned, close a lost attempt, kill its application by id, or
wait for a live peer's outcome instead of running twice."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from airflow_tablemgmt.core.errors import IllegalTransition, JobFailed, LeaseUnavailable
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.core.timing import stale_bound
from airflow_tablemgmt.lifecycle.errors import canceled
from airflow_tablemgmt.lifecycle.model import (
    KillsById,
    NamesConnectServer,
    ObservesApplications,
    RunOutcome,
    RunRequest,
    RunSettings,
)
from airflow_tablemgmt.lifecycle.predecessor import end_applications, is_connect

log = logging.getLogger("airflow_tablemgmt.lifecycle")
S = ProcessStatus


def attempt_prefix(p: Process) -> str:
    """The start of every lease holder of this process attempt (``process:<id>:attempt:<n>:``)."""
    return f"process:{p.id}:attempt:{p.attempt}:"


def is_stale(runner: RunSettings, p: Process) -> bool:
    """No heartbeat for ``stale_after`` (or the row's own bound), by the database's clock."""
    beat = p.heartbeat_at or p.started_at or p.created_at
    bound = stale_bound(runner.stale_after, p.heartbeat_every_s)
    return beat is None or runner.store.processes.now() - beat > bound


def is_orphaned(runner: RunSettings, process: Process, req: RunRequest) -> bool:
    """A SUBMITTED/RUNNING/CANCELING process whose worker is gone: an earlier try of this same
    Airflow task (Airflow never runs two tries at once), or no heartbeat for ``stale_after`` by
    the database's clock."""
    prev_try = process.parameters.get("airflow_try")
    same_task = (process.dag_id, process.run_id, process.task_id) == (req.dag_id, req.run_id, req.task_id)
    if same_task and req.try_number is not None and prev_try is not None and int(prev_try) < req.try_number:
        return True
    return is_stale(runner, process)


def attempt_holds_lease(runner: RunSettings, p: Process) -> bool:
    lease = runner.store.leases.get(p.table_id)
    return (
        lease is not None
        and lease.holder.startswith(attempt_prefix(p))
        and not lease.expired(runner.store.leases.now())
    )


def close_orphan(runner: RunSettings, process: Process) -> Process:
    """Close a lost attempt as FAILED. Its lease is left alone: the lost worker's job may still be
    running, and the lease lapses on its own ``lease_ttl`` after the last renewal. Until then the
    next attempt stays PENDING (the operator defers, as for any held lease) -- unless the
    submitter can kill the old application by id and the master then reports it ended."""
    beat = process.heartbeat_at.isoformat() if process.heartbeat_at else "never"
    reason = (
        f"worker lost: attempt {process.attempt} was left {process.status} with its last heartbeat "
        f"at {beat} "
        f"(Spark application {process.external_id or 'unknown'}); the next attempt recovers it"
    )
    log.warning("tablemgmt: process %s: %s", process.id, reason)
    try:
        closed = runner.store.processes.transition(
            process.id, S.FAILED, expected=process.status, attempt=process.attempt, failure_reason=reason
        )
    except IllegalTransition:
        return runner.store.processes.get(process.id)
    kill_lost_application(runner, process)
    return closed


#: The longest a takeover waits for a killed application to be reported ended before it leaves the
#: lost attempt's lease to lapse instead (never longer than the lease has left).
KILL_CONFIRM_WAIT_S = 60.0
KILL_CONFIRM_POLL_S = 0.5


def kill_lost_application(runner: RunSettings, process: Process) -> None:
    """Where the master can kill by id, kill the lost attempt's application, and release its lease
    only once the engine reports the application ended (polled, bounded by
    :data:`KILL_CONFIRM_WAIT_S` and the lease's remaining time): an acknowledged kill is not a
    dead driver. Otherwise the lease is left to lapse and the next attempt waits for it."""
    submitter = runner.submitter
    if is_connect(process.external_id):
        end_lost_connect_job(runner, process)
        return
    if not isinstance(submitter, KillsById) or not process.external_id:
        return
    app = process.external_id
    try:
        if not submitter.kill_application(app):
            return
    except Exception:  # noqa: BLE001 - fall back to waiting for the lease
        log.warning("tablemgmt: killing %s failed", app, exc_info=True)
        return
    store = runner.store
    lease = store.leases.get(process.table_id)
    if lease is None or not lease.holder.startswith(attempt_prefix(process)):
        return
    if not isinstance(submitter, ObservesApplications):
        log.info(
            "tablemgmt: the kill of %s was acknowledged; this engine cannot report it ended, so the "
            "lost attempt's lease %s lapses on its own",
            app,
            lease.holder,
        )
        return
    left = (lease.expires_at - store.leases.now()).total_seconds()
    waited = wait_until_finished(submitter, app, min(KILL_CONFIRM_WAIT_S, left))
    if waited is None:
        log.warning(
            "tablemgmt: %s was not reported ended within %.0fs of its acknowledged kill; the lost "
            "attempt's lease %s lapses on its own",
            app,
            min(KILL_CONFIRM_WAIT_S, left),
            lease.holder,
        )
        return
    store.leases.release(process.table_id, lease.holder)
    log.info(
        "tablemgmt: killed %s (reported ended after %.1fs) and released the lost attempt's lease %s",
        app,
        waited,
        lease.holder,
    )


def end_lost_connect_job(runner: RunSettings, process: Process) -> None:
    """A lost attempt's Spark Connect job: interrupt it and release its lease only once the server
    reports its operations ended (an interrupt acknowledged is not an operation ended); otherwise the
    lease lapses, and whoever takes it then checks again (``predecessor.ensure_ended``)."""
    app = str(process.external_id)
    store = runner.store
    url = runner.submitter.url if isinstance(runner.submitter, NamesConnectServer) else None
    lease = store.leases.get(process.table_id)
    held = lease is not None and lease.holder.startswith(attempt_prefix(process))
    bound = KILL_CONFIRM_WAIT_S
    if held and lease is not None:
        bound = max(0.0, min(bound, (lease.expires_at - store.leases.now()).total_seconds()))
    if end_applications([app], bound or KILL_CONFIRM_POLL_S, url if isinstance(url, str) else None):
        log.warning(
            "tablemgmt: %s was interrupted but not reported ended; the lost attempt's lease lapses on "
            "its own",
            app,
        )
        return
    if held and lease is not None:
        store.leases.release(process.table_id, lease.holder)
        log.info(
            "tablemgmt: %s reported ended after its interrupt; released the lost attempt's lease %s",
            app,
            lease.holder,
        )


def wait_until_finished(submitter: ObservesApplications, app: str, bound_s: float) -> float | None:
    """Poll the engine until ``app`` is reported ended: the seconds it took, or None past ``bound_s``
    (a failing status query counts as not ended)."""
    started = time.monotonic()
    poll = threading.Event()
    while True:
        try:
            if submitter.application_finished(app):
                return time.monotonic() - started
        except Exception:  # noqa: BLE001 - unknown is not ended
            log.warning("tablemgmt: asking for the state of %s failed", app, exc_info=True)
        if time.monotonic() - started >= bound_s:
            return None
        poll.wait(min(KILL_CONFIRM_POLL_S, max(0.0, bound_s - (time.monotonic() - started))))


def wait_for_peer(
    runner: RunSettings, process: Process, req: RunRequest, judge_again: Callable[[RunRequest], RunOutcome]
) -> RunOutcome:
    """Another live worker runs this process: wait for its outcome instead of running twice. If
    that worker stops heartbeating meanwhile, or lets go before claiming it, ``judge_again`` (the
    runner's state machine) judges the row anew: a takeover runs it as a new attempt, which still
    waits for the lost attempt's lease. Bounded by ``runner.wait_for_peer`` (at most one lease
    TTL): past it :class:`LeaseUnavailable`, so the operator defers instead of holding a worker slot
    for the peer's whole job."""
    deadline = time.monotonic() + runner.wait_for_peer.total_seconds()
    poll = threading.Event()
    while time.monotonic() < deadline:
        p = runner.store.processes.get(process.id)
        if p.status == S.SUCCESS:
            return RunOutcome(p, p.summary or {}, reused=True)
        if p.status == S.CANCELED:
            raise canceled(p)
        if p.status.is_terminal:
            raise JobFailed(f"process {p.id} ({p.status}) run by another worker: {p.failure_reason}")
        if p.status == S.PENDING and not attempt_holds_lease(runner, p):
            return judge_again(req)  # the peer let go before claiming it: try again
        if p.status in (S.SUBMITTED, S.RUNNING, S.CANCELING) and is_stale(runner, p):
            log.warning("tablemgmt: process %s: the worker running it stopped heartbeating", p.id)
            return judge_again(req)
        poll.wait(min(2.0, max(0.05, runner.heartbeat_every.total_seconds())))
    raise LeaseUnavailable(
        f"process {process.id}: gave up waiting for the live worker running it after "
        f"{runner.wait_for_peer.total_seconds():g}s (one lease TTL); it stays with that worker, and the next "
        "look finds its outcome or takes it over once that worker is lost"
    )
