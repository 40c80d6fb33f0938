"""The running worker's two guards: the heartbeat thread and the lease watchdog beside it.

The heartbeat stamps the process row and renews the table's lease every ``heartbeat_every``; on a
cancel request, a superseded attempt, a lost lease or a store that keeps *failing* for nearly a lease
TTL it stops the job (:meth:`~airflow_tablemgmt.lifecycle.attempt_state.AttemptState.halt`). A store
that *hangs* blocks the heartbeat inside its call, so the
:class:`~airflow_tablemgmt.lifecycle.watchdog.LeaseWatchdog` (which never touches the store) stops the
job when no renewal has succeeded for ``lease_ttl - heartbeat_every``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from airflow_tablemgmt.core.errors import IllegalTransition, LeaseUnavailable
from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.lifecycle.model import ConfirmsLease, RunSettings
from airflow_tablemgmt.lifecycle.watchdog import LeaseWatchdog

if TYPE_CHECKING:
    from airflow_tablemgmt.lifecycle.attempt_state import AttemptState

log = logging.getLogger("airflow_tablemgmt.lifecycle")


def watchdog_deadline(runner: RunSettings) -> float:
    """Seconds without a successful renewal after which the worker kills its own job: the lease TTL
    minus one heartbeat interval (the margin for the kill), never below half the TTL."""
    ttl = runner.lease_ttl.total_seconds()
    return max(ttl - runner.heartbeat_every.total_seconds(), ttl / 2)


def confirm_before_submit(
    runner: RunSettings, process: Process, table_id: str, holder: str, taken_at: float
) -> float:
    """Renew the lease right before the job is submitted, so the factory's set-up (reading table
    metadata, which may take longer than the lease TTL) is covered: the lease was taken before it, and
    is confirmed after it (``taken_at``: when the lease call was sent, monotonic). Returns the monotonic
    time the renewal was sent (the watchdog's start).

    Raises :class:`LeaseUnavailable` (nothing submitted, the row stays PENDING) when the lease is no
    longer this holder's (it lapsed during the set-up and another worker took it), or when the renewal
    itself took so long that the watchdog's deadline already passed."""
    sent = time.monotonic()
    store = runner.store
    setup = sent - taken_at
    if not store.leases.renew(table_id, holder, runner.lease_ttl):
        lease = store.leases.get(table_id)
        raise LeaseUnavailable(
            f"table {table_id}: the lease taken for process {process.id} attempt {process.attempt} lapsed "
            f"during the job's set-up ({setup:.1f}s, lease_ttl {runner.lease_ttl.total_seconds():g}s) and is "
            f"now held by {lease.holder if lease else 'nobody'}; the job was not submitted and the process "
            "stays PENDING"
        )
    took = time.monotonic() - sent
    if took >= watchdog_deadline(runner):
        raise LeaseUnavailable(
            f"table {table_id}: confirming the lease before submitting process {process.id} took {took:.1f}s, "
            f"past the watchdog's {watchdog_deadline(runner):g}s; the job was not submitted and the process "
            "stays PENDING"
        )
    return sent


def confirm_to_job(runner: RunSettings, sent: float) -> None:
    """Tell a job that keeps its own deadline (:class:`ConfirmsLease`) that the lease renewed by the
    call sent at monotonic ``sent`` holds for the watchdog's deadline from then. Never fails the beat:
    a job that hears nothing stops itself, which is the safe side."""
    submitter = runner.submitter
    if not isinstance(submitter, ConfirmsLease):
        return
    try:
        submitter.confirm_lease(sent, watchdog_deadline(runner))
    except Exception:  # noqa: BLE001
        log.warning("tablemgmt: confirming the lease to the job failed", exc_info=True)


def start_watchdog(
    runner: RunSettings, attempt: AttemptState, process: Process, table_id: str, taken_at: float
) -> LeaseWatchdog:
    """Watch the lease taken (or last renewed) at monotonic ``taken_at``; on expiry ``attempt`` halts."""

    def expired(silent: float) -> None:
        if attempt.stopped is not None:
            return  # already stopping (a cancel, a lost lease): its reason stands
        attempt.halt(
            "superseded",
            f"no lease renewal on {table_id} succeeded for {silent:.1f}s (lease_ttl "
            f"{runner.lease_ttl.total_seconds():g}s): the store hangs or is unreachable, and the lease "
            "may lapse before this job could finish",
        )

    dog = LeaseWatchdog(watchdog_deadline(runner), expired, name=f"process-{process.id}")
    return dog.start(renewed_at=taken_at)


def heartbeat(
    runner: RunSettings,
    attempt: AttemptState,
    process: Process,
    table_id: str,
    holder: str,
    needs_lease: bool,
    stop: threading.Event,
    watchdog: LeaseWatchdog | None,
) -> None:
    """Stamp the row and renew the lease; on losing either, or on a cancel request, ``attempt`` halts.

    A store that stays unreachable (calls that fail) for ``lease_ttl - 2 * heartbeat_every`` counts
    as lost: by then the lease may lapse and another worker may start, so this one must be gone.
    """
    store = runner.store
    every = runner.heartbeat_every.total_seconds()
    give_up_after = max(every, runner.lease_ttl.total_seconds() - 2 * every)
    last_ok = time.monotonic()
    while not stop.wait(every):
        sent = time.monotonic()
        try:
            status = store.processes.heartbeat(process.id, process.attempt)
            if status == ProcessStatus.CANCELING:
                current = store.processes.get(process.id)
                reason = f"canceled: {current.failure_reason or 'cancel requested'}"
                attempt.halt("canceled", reason)
                return
            if needs_lease and not store.leases.renew(table_id, holder, runner.lease_ttl):
                lease = store.leases.get(table_id)
                who = f"{lease.holder}" if lease else "nobody (released)"
                attempt.halt("superseded", f"lost the lease on {table_id} (now held by {who})")
                return
            if watchdog is not None:
                watchdog.renewed(sent)
            if needs_lease:
                confirm_to_job(runner, sent)
            last_ok = time.monotonic()
        except IllegalTransition as e:
            attempt.halt("superseded", f"superseded: {e}")
            return
        except Exception:  # noqa: BLE001 - a transient store error; give up only near the lease TTL
            log.warning("tablemgmt: heartbeat for process %s failed", process.id, exc_info=True)
            if time.monotonic() - last_ok >= give_up_after:
                reason = f"the store was unreachable for {give_up_after:g}s, so its lease may lapse"
                attempt.halt("superseded", reason)
                return
        if watchdog is not None and watchdog.fired.is_set():
            return
