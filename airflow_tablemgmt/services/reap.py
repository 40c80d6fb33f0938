"""``reap``: close the processes whose worker is gone, on demand (CLI, REST) and before CLI work.

The operator reaps each time it starts; a deployment that runs only the CLI has no operator, so
``tablemgmt run`` / ``dt refresh`` reap first too, and ``tablemgmt reap`` (``POST /processes/reap``)
does it alone. One function for all of them: :func:`reap_processes`.

A row is judged by the heartbeat interval its own worker promised (recorded on the row): a short
``stale_after`` here cannot close a live worker's row that beats more slowly.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.timing import PENDING_STALE_AFTER
from airflow_tablemgmt.services.errors import InvalidInput

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)

#: The lifecycle's default (``lifecycle.STALE_AFTER``), repeated to keep this import light.
DEFAULT_STALE_AFTER = timedelta(seconds=90)


@dataclass(frozen=True)
class ReapedProcess:
    process_id: int
    table_id: str
    action: str
    instant: datetime
    was: str
    status: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "instant": self.instant.isoformat()}


def reap_processes(
    store: Store,
    *,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
    pending_after: timedelta = PENDING_STALE_AFTER,
) -> list[ReapedProcess]:
    """Close every process whose worker is gone (SUBMITTED/RUNNING -> FAILED, CANCELING -> CANCELED,
    PENDING -> FAILED after ``pending_after``); returns what it closed."""
    for name, value in (("stale_after", stale_after), ("pending_after", pending_after)):
        if value <= timedelta(0):
            raise InvalidInput(f"{name}: must be a positive duration, got {value.total_seconds():g}s")
    reaped = store.processes.reap(stale_after, pending_after=pending_after)
    # A gone worker's Spark Connect job runs on in the server: the reaper interrupts it (the table's next
    # holder then waits to see it ended, lifecycle/predecessor.py).
    from airflow_tablemgmt.lifecycle.predecessor import interrupt_reaped

    interrupt_reaped([r.process for r in reaped])
    from airflow_tablemgmt.factories.dynamic import after_reaped

    out = []
    for r in reaped:
        p = r.process
        reason = p.failure_reason or ""
        try:  # a dynamic table's closed creation: it stays CREATING for its DAG's next run (says so)
            note = after_reaped(store, p)
        except Exception:  # noqa: BLE001 - the row is closed; the note is information
            log.warning("tablemgmt: could not read the table of reaped process %s", p.id, exc_info=True)
            note = None
        if note:
            reason = f"{reason}; {note}"
        log.warning("tablemgmt: process %s %s -> %s: %s", p.id, r.was, p.status, reason)
        out.append(ReapedProcess(p.id, p.table_id, p.action, p.instant, str(r.was), str(p.status), reason))
    return out


def reap_before_work(store: Store, stale_after: timedelta | None = None) -> list[ReapedProcess]:
    """What a CLI command that starts work does first; housekeeping never fails that command."""
    try:
        return reap_processes(store, stale_after=stale_after or DEFAULT_STALE_AFTER)
    except Exception:  # noqa: BLE001
        log.warning("tablemgmt: reaping stale processes failed", exc_info=True)
        return []
