"""The Spark Connect server's jobs as one kept session's cost reads follow them (``cost.py``): the whole
retained list read once (``/jobs``), then only the jobs past the highest id seen, one small request each
(``/jobs/<id>``), and the jobs seen running asked again until they end.

Why: a batch reads each job's cost after the job, while the server runs the next table's procedure. The
list ``/jobs`` is every job the server retains (``spark.ui.retainedJobs``, 1,000 by default: ≈ 1 MB for
small tables' jobs), serialised by the server's driver and parsed by the worker at every read, twice when
the first read still found the job running: work on both sides, beside the procedure, that grows with the
server's age rather than with the job.

Spark numbers a server's jobs in submission order (the DAGScheduler's counter) and its status store learns
of each through the listener bus; two jobs submitted at once from two threads may reach the store out of
order. So an id not found yet is not taken as the end for good: the read looks :data:`LOOKAHEAD` ids past
it, an id skipped over is asked again by the next reads (:data:`MISSING_TRIES`), and a read that finds
none of its job's jobs lists ``/jobs`` in full once more (:meth:`JobIndex.relist`) before it gives its
answer, so what it can miss is never more than the whole list would.

No pyspark here; the HTTP request is the caller's (``cost._get``), so tests hand in their own.
"""

from __future__ import annotations

import threading
import urllib.error
from collections.abc import Callable, Mapping
from typing import Any

from airflow_tablemgmt.spark.cost import unfinished

#: Ids looked at past one the store does not know (yet): 1 asks two ids before it stops.
LOOKAHEAD = 1
#: How many later reads ask again for an id that was skipped over (a job the store learnt of late).
MISSING_TRIES = 20
#: Jobs kept, the newest ids: a job older than this many of the server's jobs is no read's any more.
KEEP = 1000

Get = Callable[[str], Any]


class JobIndex:
    """What one reader (a batch's kept session: its ``facts``) knows of a server's jobs; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.top: int | None = None  # the highest job id seen; None: the list not read yet
        self._jobs: dict[int, Mapping[str, Any]] = {}
        self._missing: dict[int, int] = {}  # ids skipped over -> tries left
        #: Requests made, the whole list's apart (tests and the benchmark look at them).
        self.job_requests = 0
        self.list_requests = 0

    def jobs(
        self, get: Get, api: str, mine: Callable[[Mapping[str, Any]], bool] | None = None
    ) -> list[Mapping[str, Any]]:
        """The server's jobs as known after this read: the whole list the first time, else what changed.
        ``mine``: the jobs whose end this read waits for (only those of them seen running are asked
        again; another session's long job is not asked at every read)."""
        with self._lock:
            if self.top is None:
                self._relist(get, api)
            else:
                again = [i for i, j in self._jobs.items() if unfinished([j]) and (mine is None or mine(j))]
                for job_id in [*again, *self._missing]:
                    self._ask(get, api, job_id)
                self._advance(get, api)
                self._trim()
            return list(self._jobs.values())

    def relist(self, get: Get, api: str) -> list[Mapping[str, Any]]:
        """The whole list read again (a read that found none of its jobs): it also resets the index."""
        with self._lock:
            self._relist(get, api)
            return list(self._jobs.values())

    def _relist(self, get: Get, api: str) -> None:
        listing = get(f"{api}/jobs")
        self.list_requests += 1
        self._jobs = {int(j["jobId"]): j for j in listing if isinstance(j, Mapping) and "jobId" in j}
        self._missing = {}
        self.top = max(self._jobs, default=-1)

    def _fetch(self, get: Get, api: str, job_id: int) -> Mapping[str, Any] | None:
        """Job ``job_id``'s document, or None when the store does not know it (404)."""
        self.job_requests += 1
        try:
            job = get(f"{api}/jobs/{job_id}")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise
        return job if isinstance(job, Mapping) else None

    def _ask(self, get: Get, api: str, job_id: int) -> None:
        job = self._fetch(get, api, job_id)
        if job is not None:
            self._jobs[job_id] = job
            self._missing.pop(job_id, None)
        elif job_id in self._missing:
            self._missing[job_id] -= 1
            if self._missing[job_id] <= 0:
                del self._missing[job_id]
        else:  # known before, gone now: the store let it go (retention)
            self._jobs.pop(job_id, None)

    def _advance(self, get: Get, api: str) -> None:
        assert self.top is not None
        nxt, misses = self.top + 1, 0
        while misses <= LOOKAHEAD:
            job = self._fetch(get, api, nxt)
            if job is None:
                misses += 1
            else:
                for gap in range(self.top + 1, nxt):
                    self._missing.setdefault(gap, MISSING_TRIES)
                self._jobs[nxt] = job
                self.top, misses = nxt, 0
            nxt += 1

    def _trim(self) -> None:
        if self.top is None:
            return
        floor = self.top - KEEP
        for job_id in [i for i in self._jobs if i <= floor]:
            del self._jobs[job_id]
        for job_id in [i for i in self._missing if i <= floor]:
            del self._missing[job_id]


__all__ = ["KEEP", "LOOKAHEAD", "MISSING_TRIES", "JobIndex"]
