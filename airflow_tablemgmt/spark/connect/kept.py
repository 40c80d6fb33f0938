"""The Connect sessions a planned batch keeps open between its tables (issue 40: batched execution).

A batch runs its tables' jobs one after another in one task process. A new server-side session per job
costs every job the session's set-up on the server (its catalog made anew, the procedure's first
resolution in it: ≈ 0.26 s of a small table's 0.7 s procedure, measured) and a client's channel. So a
batch keeps, per server and set of catalog settings, one open session (client and server side) and hands
it from one table's job to the next:

* each job still sends its catalog's settings (one ``Config`` request: a server that restarted comes back
  with an empty session of that id), carries its own operation tag (the tag set is cleared between jobs)
  and records its own operations; its guard, interrupt and observation act on its tag only;
* only a job that ended cleanly hands the session on: after a failure, an interrupt or a kill the session
  is closed and the next table opens a new one (as a slot does: ``pool.py``), so whatever a stopped job
  left running on the server never shares a session with the next table's job;
* a table is read anew (``REFRESH TABLE``) only when a job of this session already loaded it: the session
  is the batch's own, so no other job has cached a table in it;
* what the cost read needs of the server (its UI's address, its application id) is asked once per
  session (``cost.py``);
* one guard process watches each job's lease in turn (``guard.py``): each job keeps its own deadline;
* one of the server's slots (``pool.py``) is held by the batch's jobs in turn: leased by its first job, kept
  (and renewed) while each job ends cleanly, given back after a failure and at the batch's end. The batch
  runs one job at a time, so it still takes one slot of the server's limit, without a lease and a release
  in the store around every table's job.

One job at a time holds a session (:meth:`BatchSessions.take` hands it out and forgets it until
:meth:`BatchSessions.give_back`), so concurrent jobs never share one. pyspark is imported inside functions.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class KeptSession:
    """One session a batch keeps: its id, the open client (None until the first job opens it) and what
    the jobs that ran on it left to know."""

    url: str
    conf_hash: str
    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    session: Any = None
    #: Tables (``catalog.namespace.name``) that jobs on this session loaded: refreshed before another job.
    loaded: set[str] = field(default_factory=set)
    #: The server's constants the cost read asks once (``cost.connect_cost``).
    facts: dict[str, Any] = field(default_factory=dict)
    jobs: int = 0
    #: The batch reads each job's cost after the job, in the table's own thread (``session._measure``).
    defer_cost: bool = False

    @property
    def open(self) -> bool:
        return self.session is not None

    def close(self) -> None:
        """Close the client's channel (the server-side session expires on the server). Never raises."""
        session, self.session = self.session, None
        if session is None:
            return
        from airflow_tablemgmt.spark.connect.client import close_session

        try:
            close_session(session)
        except Exception:  # noqa: BLE001 - the channel of a dead server
            log.debug("closing a kept Connect session failed", exc_info=True)


class BatchSessions:
    """What one batch's Connect jobs share: the sessions it keeps, one per (server URL, catalog settings
    hash), and the process that guards each job's lease in turn (``guard.GuardProcess``)."""

    def __init__(self) -> None:
        from airflow_tablemgmt.spark.connect.guard import GuardProcess

        self._kept: dict[tuple[str, str], KeptSession] = {}
        self._lock = threading.Lock()
        self.closed = False
        #: Each job's cost is read after its job, by the batch (``session.FINISH_LATER``): set by a batch
        #: that calls it (``services/batch_overlap.py``).
        self.defer_cost = False
        self.guard = GuardProcess()
        #: The connections the batch's hooks looked up: connection id -> (server URL, extras).
        self.targets: dict[str, tuple[str, dict[str, Any]]] = {}
        self._slots: dict[str, Any] = {}  # server -> the SlotLease its jobs hold in turn

    def slot(self, server: str, lease: Callable[[], Any]) -> Any:
        """The slot of ``server`` the batch holds, now the caller's job's; ``lease()`` leases one when the
        batch holds none (or lost the one it held)."""
        with self._lock:
            held = self._slots.pop(server, None)
        if held is not None and not held.lost.is_set():
            return held
        if held is not None:
            held.release(keep_session=False)
        return lease()

    def slot_back(self, server: str, held: Any, *, clean: bool) -> None:
        """The job on ``held`` ended: kept for the batch's next job when it ended cleanly, else given back."""
        with self._lock:
            keep = clean and not self.closed and not held.lost.is_set() and server not in self._slots
            if keep:
                self._slots[server] = held
        if not keep:
            held.release(keep_session=False)

    def take(self, url: str, conf_hash: str) -> KeptSession:
        """The kept session of ``url`` with these settings, now the caller's alone; a new (not yet open)
        one when none is kept."""
        with self._lock:
            kept = self._kept.pop((url, conf_hash), None)
        kept = kept if kept is not None else KeptSession(url, conf_hash)
        kept.defer_cost = self.defer_cost
        return kept

    def give_back(self, kept: KeptSession) -> None:
        """A job ended cleanly on ``kept``: the next job of these settings attaches to it."""
        if not kept.open:
            return
        key = (kept.url, kept.conf_hash)
        with self._lock:
            if self.closed:  # the batch ended meanwhile: nobody will take it
                stale: KeptSession | None = kept
            else:  # one per key: an older one (there is none while jobs run one at a time) is closed
                stale = self._kept.get(key)
                self._kept[key] = kept
        if stale is not None:
            stale.close()

    def close(self) -> None:
        """The batch is over: every kept session's channel is closed, every slot it held given back."""
        with self._lock:
            self.closed = True
            kept, self._kept = list(self._kept.values()), {}
            slots, self._slots = list(self._slots.values()), {}
        for k in kept:
            k.close()
        for held in slots:
            held.release(keep_session=False)
        self.guard.close()


__all__ = ["BatchSessions", "KeptSession"]
