"""Before a job starts on a table, the jobs of earlier lease holders must have *ended*.

A lapsed lease ends a spark-submit job: its driver stops itself when the worker's confirmations stop
(``spark/job/lease_guard.py``), or dies with its worker (the parent-death signal). Not a Spark Connect
job: its operations run in the server's JVM, and a worker killed with -9 or frozen leaves its current
operation running (and committing) long after its lease lapsed. So whoever comes next ends it, and
starts only once the server *reports* the operations ended (``spark/connect/operations.py``):

* a Connect job's application id is recorded in its process row's parameters (``applications``, by
  attempt) when it starts, so it survives the row's next attempt;
* a worker about to take over a lapsed lease, and the takeover of a lost attempt, interrupt that
  holder's Connect job and observe its end (:func:`ensure_ended`);
* when the end is not observed within the bound, the lapsed lease is not taken: it stays as it is,
  naming its holder, so the next look by any worker checks again.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_tablemgmt.core.errors import LeaseUnavailable
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.lifecycle.model import NamesConnectServer, RunSettings

log = logging.getLogger("airflow_tablemgmt.lifecycle")

#: Where a process records its Connect jobs (parameters, by attempt: they outlive the attempt).
APPLICATIONS = "applications"
#: The longest a worker waits for a Connect server to report a predecessor's operations ended.
END_WAIT_S = 60.0
CONNECT_PREFIX = "connect:"


def is_connect(application_id: str | None) -> bool:
    return bool(application_id) and str(application_id).startswith(CONNECT_PREFIX)


def recorded(process: Process, attempt: int | None = None) -> list[str]:
    """The Connect jobs ``process`` recorded (of ``attempt``, or of every attempt)."""
    apps = (process.parameters or {}).get(APPLICATIONS) or {}
    out: list[str | None] = [apps.get(str(attempt))] if attempt is not None else list(apps.values())
    return [a for a in dict.fromkeys(out) if a is not None and is_connect(a)]


def with_application(parameters: dict[str, Any], attempt: int, application_id: str) -> dict[str, Any] | None:
    """``parameters`` with a Connect job recorded for ``attempt``; None for another engine's job."""
    if not is_connect(application_id):
        return None
    apps = dict(parameters.get(APPLICATIONS) or {})
    apps[str(attempt)] = application_id
    return {**parameters, APPLICATIONS: apps}


def holder_process(runner: RunSettings, holder: str | None) -> tuple[Process, int] | None:
    """The process attempt a lease holder name belongs to (``process:<id>:attempt:<n>:...``)."""
    if not holder or not holder.startswith("process:"):
        return None
    parts = holder.split(":")
    try:
        pid, attempt = int(parts[1]), int(parts[3])
        return runner.store.processes.get(pid), attempt
    except (IndexError, ValueError, LookupError):
        return None
    except Exception:  # noqa: BLE001 - a deleted row: nothing recorded to end
        log.debug("tablemgmt: no process for lease holder %s", holder, exc_info=True)
        return None


def end_applications(apps: list[str], bound_s: float, url: str | None = None) -> list[str]:
    """Interrupt each Connect job and wait for its server to report it ended; the ones not seen to end."""
    if not apps:
        return []
    from airflow_tablemgmt.hooks.spark_connect import end_connect_application

    return [app for app in apps if not end_connect_application(app, bound_s, url)]


def ensure_ended(runner: RunSettings, table_id: str, holder: str) -> bool:
    """Before this attempt takes the table's lease: if the lease lapsed under another holder whose job
    ran on Spark Connect, interrupt that job and wait until its server reports it ended. Raises
    :class:`LeaseUnavailable` when the server does not within :data:`END_WAIT_S`: the lapsed lease is
    then left as it is (its holder named), so the next look, by any worker, checks again.

    Returns True when the lease is still live under another holder whose job runs on Spark Connect: the
    caller must not try to take it on this look. The lease may lapse between this look and the acquire,
    and the acquire would then take it over with nobody having seen that job end (measured: a PostgreSQL
    store's round trips left that window open, and the next job started beside an operation the server
    was slow to interrupt); the next look sees it lapsed and ends the job first."""
    store = runner.store
    lease = store.leases.get(table_id)
    if lease is None or lease.holder == holder:
        return False  # nobody's, or ours
    prior = holder_process(runner, lease.holder)
    apps = recorded(prior[0], prior[1]) if prior is not None else []
    if not lease.expired(store.leases.now()):
        return bool(apps)  # live: refused now; a Connect holder's lapse is observed on the next look
    if not apps:
        return False
    url = runner.submitter.url if isinstance(runner.submitter, NamesConnectServer) else None
    left = end_applications(apps, END_WAIT_S, url if isinstance(url, str) else None)
    if left:
        raise LeaseUnavailable(
            f"table {table_id}: the lease of {lease.holder} lapsed while its Spark Connect job ran; the job "
            f"({', '.join(left)}) was interrupted but its server did not report it ended within "
            f"{END_WAIT_S:g}s, so nothing starts on the table yet; the next look checks again"
        )
    log.info(
        "tablemgmt: the Spark Connect job of %s, whose lease on %s lapsed, was interrupted and reported "
        "ended: %s",
        lease.holder,
        table_id,
        ", ".join(apps),
    )
    return False


def interrupt_reaped(processes: list[Process]) -> list[str]:
    """The reaper closed these processes (their workers are gone): interrupt their Spark Connect jobs,
    which their dead workers cannot. No wait: whoever takes the table next observes the end
    (:func:`ensure_ended`). Never raises; returns the jobs interrupted."""
    apps = [str(p.external_id) for p in processes if is_connect(p.external_id)]
    for app in apps:
        try:
            end_applications([app], 0.0)
        except Exception:  # noqa: BLE001 - housekeeping: the next holder ends it anyway
            log.warning("tablemgmt: interrupting %s failed", app, exc_info=True)
    return apps
