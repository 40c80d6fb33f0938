"""Process operations: list (with validated filters), show, cancel, clear, run now; a process's times.

A process's times (:func:`timings`) have one definition, used by ``tablemgmt processes`` /
``tablemgmt process N``, the REST API (``timings`` of a process), the History tab and the overview:

* **lease wait** (``lease_wait_s``) — opened (``created_at``: the task asked for the run) to the
  table's lease taken (``lease_acquired_at``), a PENDING process waiting (deferred, retried) while
  another process holds the table; None for an action that takes no lease (compute-stats);
* **queue wait** (``queue_wait_s``) — the lease taken (or, without a lease, opened) to running
  (``started_at``): reading the table's metadata to plan the job, the submission and the cluster's
  queue until the Spark application runs;
* **wait** (``wait_s``) — the two together: opened to running;
* **run** (``run_s``) — running to finished: the CLI's ``RUN`` column;
* **job** (``job_s``) — the Spark job itself (``summary.duration_seconds``);
* **total** (``total_s``) — opened to finished.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.actions import ACTIONS
from airflow_tablemgmt.core.errors import IllegalTransition
from airflow_tablemgmt.core.instants import InvalidInstant, check_run_instant
from airflow_tablemgmt.core.process import ACTIVE, Process, ProcessStatus
from airflow_tablemgmt.services.errors import InvalidInput

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store


def _seconds(a: datetime | None, b: datetime | None) -> float | None:
    """Seconds from ``a`` to ``b``; None when either is missing or they disagree (``b`` before ``a``:
    stamps written by hand, e.g. history imported after the fact)."""
    if a is None or b is None or b < a:
        return None
    return round((b - a).total_seconds(), 3)


def timings(p: Process) -> dict[str, float | None]:
    """Lease wait, queue wait, wait, run, job and total seconds of a process (the module docstring)."""
    job = (p.summary or {}).get("duration_seconds")
    lease_at = p.lease_acquired_at
    return {
        "lease_wait_s": _seconds(p.created_at, lease_at),
        "queue_wait_s": _seconds(lease_at or p.created_at, p.started_at),
        "wait_s": _seconds(p.created_at, p.started_at),
        "run_s": _seconds(p.started_at, p.finished_at),
        "job_s": float(job) if isinstance(job, int | float) and not isinstance(job, bool) else None,
        "total_s": _seconds(p.created_at, p.finished_at),
    }


def parse_instant(value: str | None, field: str = "--instant") -> datetime:
    """A run-now instant: a tz-aware ISO 8601 time within [the DAG's start, now + a few minutes]
    (``core.instants``, the REST API's rule too); now, to the second, when ``value`` is None."""
    if value is None:
        return datetime.now(UTC).replace(microsecond=0)
    try:
        return check_run_instant(value, field)
    except InvalidInstant as e:
        raise InvalidInput(str(e)) from None


def parse_status(value: str | None) -> ProcessStatus | None:
    if value is None:
        return None
    try:
        return ProcessStatus(value.upper())
    except ValueError:
        allowed = ", ".join(s.value.lower() for s in ProcessStatus)
        raise InvalidInput(f"--status: {value!r} is not a process status; allowed: {allowed}") from None


def check_known_table(store: Store, table_id: str) -> None:
    """A table that is or was registered (history outlives removal); else ``TableNotFound`` with hints."""
    if table_id not in {t.spec.id for t in store.tables.list(include_deleted=True)}:
        store.tables.get_registered(table_id)  # raises TableNotFound naming close matches


def list_processes(
    store: Store,
    *,
    table: str | None = None,
    action: str | None = None,
    status: ProcessStatus | None = None,
    limit: int = 50,
) -> list[Process]:
    """Processes, newest first. A filter naming an unknown table or action is an error, not an empty list."""
    if limit < 1:
        raise InvalidInput(f"--limit: must be at least 1, got {limit}")
    if action is not None:
        ACTIONS.get(action)
    if table is not None:
        check_known_table(store, table)
    return list(store.processes.list(table_id=table, action=action, status=status, limit=limit))


def get_process(store: Store, process_id: int) -> Process:
    return store.processes.get(process_id)


@dataclass(frozen=True)
class CancelResult:
    process_id: int
    status: str  # CANCELED, CANCELING, or the terminal status that could not be canceled
    action: str = ""
    instant: datetime | None = None

    @property
    def accepted(self) -> bool:
        return self.status in (ProcessStatus.CANCELED, ProcessStatus.CANCELING)


#: Where a cancel request may come from: a worker may move the row between these at any moment.
_CANCELABLE = (ProcessStatus.SUBMITTED, ProcessStatus.RUNNING)
_CANCEL_TRIES = 10


def cancel_process(store: Store, process_id: int, *, source: str = "the CLI") -> CancelResult:
    """PENDING ends CANCELED at once; SUBMITTED/RUNNING turn CANCELING (the running task stops it).

    Races with the worker are expected, not errors: the request to CANCELING is one guarded UPDATE
    accepting every status a worker may move a claimed process between (``status IN (SUBMITTED,
    RUNNING)``), and a PENDING -> CANCELED write that loses to the worker's claim reads the row again
    and goes on from what it finds. Only a finished process is reported as not canceled (its status).
    """
    S = ProcessStatus
    for _ in range(_CANCEL_TRIES):
        p = store.processes.get(process_id)
        try:
            if p.status == S.PENDING:
                done = store.processes.transition(
                    process_id, S.CANCELED, expected=S.PENDING, failure_reason=f"canceled from {source}"
                )
            elif p.status in _CANCELABLE:
                done = store.processes.transition(
                    process_id,
                    S.CANCELING,
                    expected=_CANCELABLE,
                    failure_reason=f"cancel requested from {source}",
                )
            else:  # CANCELING, CANCELED or finished: nothing to write
                return CancelResult(process_id, str(p.status), p.action, p.instant)
        except IllegalTransition:
            continue  # the worker moved the row meanwhile: judge it again
        return CancelResult(process_id, str(done.status), done.action, done.instant)
    p = store.processes.get(process_id)
    return CancelResult(process_id, str(p.status), p.action, p.instant)


def clear_table(store: Store, table_id: str, *, source: str = "the CLI") -> list[CancelResult]:
    """Cancel everything pending or running for a live table."""
    store.tables.get(table_id)
    procs = store.processes.list(table_id=table_id, status=list(ACTIVE), limit=10_000)
    return [cancel_process(store, p.id, source=source) for p in procs]


@dataclass(frozen=True)
class RunResult:
    process: Process
    reused: bool
    summary: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "process": self.process.id,
            "status": str(self.process.status),
            "attempt": self.process.attempt,
            "reused": self.reused,
            "summary": self.summary,
        }


def run_now(
    store: Store,
    table_id: str,
    action: str,
    instant: datetime,
    *,
    spark_conn_id: str = "spark_default",
    stale_after: timedelta | None = None,
    holder: str = "cli",
) -> RunResult:
    """Run ``action`` on the table now, outside the schedule, recorded as the process at ``instant``.

    Table and action are checked before Spark (and Airflow's hook machinery) is touched.
    """
    if stale_after:  # checked against the defaults the run uses for the other two
        from airflow_tablemgmt.core.timing import check_timing
        from airflow_tablemgmt.lifecycle import HEARTBEAT_EVERY, LEASE_TTL

        check_timing(
            lease_ttl=LEASE_TTL,
            heartbeat_every=HEARTBEAT_EVERY,
            stale_after=stale_after,
            where="--stale-after",
        )
    from airflow_tablemgmt.services.reap import reap_before_work

    reap_before_work(store, stale_after)  # a CLI-only deployment has no operator start to reap for it
    ACTIONS.get(action)
    spec = store.tables.get(table_id)
    from airflow_tablemgmt.factories.discovery import factories_for
    from airflow_tablemgmt.hooks.engine import submitter_for
    from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
    from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest

    kwargs: dict[str, Any] = {"stale_after": stale_after} if stale_after else {}
    factories = factories_for(spec.format, action)
    runner = ProcessRunner(
        store,
        factories,
        submitter_for(table_id, action, spark_conn_id, store=store),
        resolve_catalog=resolve_catalog_spec,
        **kwargs,
    )
    outcome = runner.run(RunRequest(table_id, action, instant, holder=holder))
    return RunResult(outcome.process, outcome.reused, outcome.summary)
