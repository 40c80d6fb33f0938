"""A finished job's result survives a store that is unreachable when it ends.

When a job has committed, the worker writes its result to a *result file* (keyed by the process row
and the attempt) before it records SUCCESS, then retries that final write a few times with backoff
(:func:`write_final`). If every try fails, the row stays RUNNING and the next attempt, recovering the
process, finds the predecessor's result file (:meth:`ResultJournal.committed_before`) and records
SUCCESS from it instead of running the job again. The file is removed once a row holds the result.

Where: ``TABLEMGMT_RESULT_DIR``, else ``$AIRFLOW_HOME/tablemgmt/results``. Workers of one deployment
that may recover each other's processes should share it (the same volume as the logs, typically);
a worker that cannot see the file falls back to running the job again, as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy.exc import DBAPIError

from airflow_tablemgmt.core.errors import IllegalTransition
from airflow_tablemgmt.core.process import Process, ProcessStatus

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

log = logging.getLogger("airflow_tablemgmt.lifecycle")
T = TypeVar("T")

#: Seconds slept before each retry of the final write (then it gives up): about 7.5 s in all,
#: well inside the default lease TTL.
FINAL_WRITE_BACKOFF = (0.25, 0.5, 1.0, 2.0, 4.0)


def default_result_dir() -> Path:
    configured = os.environ.get("TABLEMGMT_RESULT_DIR")
    if configured:
        return Path(configured).expanduser()
    home = os.environ.get("AIRFLOW_HOME") or "~/airflow"
    return Path(home).expanduser() / "tablemgmt" / "results"


class ResultJournal:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or default_result_dir()

    def _path(self, store: Store, process: Process, attempt: int) -> Path:
        # The row's identity: its id alone repeats in another database or schema, so the key adds the
        # row's (table, action, instant) and its creation time (database clock, microseconds). Not the
        # store's URL: two workers may reach one database by different routes (hosts, proxies).
        created = process.created_at.isoformat() if process.created_at else ""
        ident = f"{process.id}|{process.table_id}|{process.action}|{process.instant.isoformat()}|{created}"
        key = hashlib.sha256(ident.encode()).hexdigest()[:20]
        return self.directory / f"{key}-attempt{attempt}.json"

    def write(self, store: Store, process: Process, attempt: int, result: dict[str, Any]) -> Path | None:
        """Record a committed job's result; never fails the run (returns None when it could not)."""
        path = self._path(store, process, attempt)
        record = {
            "process_id": process.id,
            "table_id": process.table_id,
            "action": process.action,
            "instant": process.instant.isoformat(),
            "attempt": attempt,
            **result,
        }
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(record, out, default=str)
                out.flush()  # survives the worker's death (not the host's: no fsync on the run path)
            os.replace(tmp, path)
            return path
        except OSError:
            log.warning("tablemgmt: could not write the result file %s", path, exc_info=True)
            return None

    def discard(self, store: Store, process: Process, attempt: int) -> None:
        with contextlib.suppress(OSError):
            self._path(store, process, attempt).unlink()

    def committed_before(self, store: Store, process: Process) -> dict[str, Any] | None:
        """The result an earlier attempt of ``process`` committed but could not record, if any."""
        for attempt in range(process.attempt - 1, 0, -1):
            path = self._path(store, process, attempt)
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            same = (record.get("process_id"), record.get("table_id"), record.get("action")) == (
                process.id,
                process.table_id,
                process.action,
            )
            if same and isinstance(record.get("summary"), dict):
                return record
        return None

    def discard_before(self, store: Store, process: Process) -> None:
        for attempt in range(1, process.attempt):
            self.discard(store, process, attempt)


def write_final(
    store: Store,
    process_id: int,
    attempt: int,
    write: Callable[[], T],
    *,
    backoff: tuple[float, ...] = FINAL_WRITE_BACKOFF,
    landed: ProcessStatus = ProcessStatus.SUCCESS,
) -> T | Process:
    """Run ``write`` (the final transition), retrying a store error after each ``backoff`` delay.

    A retry that meets :class:`IllegalTransition` may be looking at its own earlier try, whose COMMIT
    landed before the connection dropped: if the row is ``landed`` at this attempt, that is success.
    The last store error is raised when every try failed.
    """
    failed_once = False
    for delay in (*backoff, None):
        try:
            return write()
        except IllegalTransition:
            if failed_once:
                current = store.processes.get(process_id)
                if current.attempt == attempt and current.status == landed:
                    return current
            raise
        except DBAPIError as e:
            if delay is None:
                raise
            failed_once = True
            log.warning(
                "tablemgmt: recording process %s attempt %s failed (%s); trying again in %gs",
                process_id,
                attempt,
                type(e.orig or e).__name__,
                delay,
            )
            time.sleep(delay)
    raise AssertionError("unreachable")


def record_success(
    store: Store,
    journal: ResultJournal,
    process: Process,
    attempt: int,
    summary: dict[str, Any],
    *,
    snapshot_id: int | None,
    application_id: str | None,
) -> Process:
    """The final writes of a committed job: SUBMITTED -> RUNNING if the start was never recorded,
    then RUNNING/CANCELING -> SUCCESS, each retried on a store error (:func:`write_final`). A cancel
    that arrived after the commit is noted in the summary (``cancel_after_commit``), not left as the
    failure reason. Raises :class:`IllegalTransition` when the row belongs to another attempt now."""
    S = ProcessStatus
    current = write_final(store, process.id, attempt, lambda: store.processes.get(process.id))
    assert isinstance(current, Process)
    if current.attempt == attempt and current.status == S.SUBMITTED:
        write_final(
            store,
            process.id,
            attempt,
            lambda: store.processes.transition(
                process.id,
                S.RUNNING,
                expected=S.SUBMITTED,
                attempt=attempt,
                external_id=application_id,
            ),
            landed=S.RUNNING,
        )
    if current.attempt == attempt and current.status == S.CANCELING:
        summary = {**summary, "cancel_after_commit": current.failure_reason or "cancel requested"}
    done = write_final(
        store,
        process.id,
        attempt,
        lambda: store.processes.transition(
            process.id,
            S.SUCCESS,
            expected=(S.RUNNING, S.CANCELING),
            attempt=attempt,
            summary=summary,
            snapshot_id=snapshot_id,
            failure_reason=None,
        ),
    )
    journal.discard(store, process, attempt)
    return done


def record_predecessor_success(
    store: Store, journal: ResultJournal, process: Process, record: dict[str, Any]
) -> Process:
    """Record SUCCESS for a recovering attempt from the result its predecessor committed but could not
    record: PENDING -> SUBMITTED -> RUNNING -> SUCCESS, without running anything."""
    S = ProcessStatus
    summary = {**record["summary"], "recorded_from_attempt": record.get("attempt")}
    p = process
    for to, expected in ((S.SUBMITTED, S.PENDING), (S.RUNNING, S.SUBMITTED), (S.SUCCESS, S.RUNNING)):
        fields: dict[str, Any] = {}
        if to == S.RUNNING:
            fields["external_id"] = record.get("application_id")
        if to == S.SUCCESS:
            fields.update(summary=summary, snapshot_id=record.get("snapshot_id"), failure_reason=None)
        p = store.processes.transition(p.id, to, expected=expected, attempt=p.attempt, **fields)
    journal.discard_before(store, process)
    log.warning(
        "tablemgmt: process %s: attempt %s had committed its job but could not record it; "
        "attempt %s recorded SUCCESS from its result instead of running it again",
        process.id,
        record.get("attempt"),
        process.attempt,
    )
    return p


def close_own_row(store: Store, process: Process, reason: str) -> Process | None:
    """A worker that stopped its job because it lost its lease or was superseded closes its own row:
    FAILED (CANCELED if a cancel was requested), guarded by its attempt so a later attempt's row is
    never touched. Best effort: the store may be what failed; the reaper or the next try closes it."""
    S = ProcessStatus
    why = f"worker stopped: {reason}; its Spark application was killed"
    try:
        try:
            return store.processes.transition(
                process.id,
                S.FAILED,
                expected=(S.SUBMITTED, S.RUNNING),
                attempt=process.attempt,
                failure_reason=why,
            )
        except IllegalTransition:
            current = store.processes.get(process.id)
            if current.attempt != process.attempt or current.status != S.CANCELING:
                return None  # another attempt's row, or already closed
            return store.processes.transition(
                process.id,
                S.CANCELED,
                expected=S.CANCELING,
                attempt=process.attempt,
                failure_reason=f"{current.failure_reason or 'cancel requested'}; {why}",
            )
    except IllegalTransition:
        return None
    except Exception:  # noqa: BLE001 - the store may be the reason it stopped
        log.warning(
            "tablemgmt: process %s attempt %s: could not close its own row",
            process.id,
            process.attempt,
            exc_info=True,
        )
        return None
