"""``ProcessRepository``: one row per (table, action, instant) and its guarded lifecycle.

(Over 400 lines on purpose (461 with the cost columns; the next split moves the cost and rollup writes
into store/process_cost.py): every guarded transition of a process row in one place, so the legal
transitions and the statements that enforce them are read together; the page's read-only listings
live in ``store/listing.py``.)

Every status change is ``UPDATE ... WHERE id = :id AND status IN (:expected) [AND attempt = :n]``
with a rowcount check, so two workers racing on one process cannot both win: the loser gets
:class:`IllegalTransition` naming the status it lost to. A worker's writes (every transition except
a user's cancel request) must name the attempt they belong to, so a superseded worker can never
write the row a later attempt owns. Timestamps come from the database's clock
(:func:`store.clock.db_now`). Rows never leave this module; callers get
:class:`core.process.Process` dataclasses.
"""

from __future__ import annotations

import builtins
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Connection, Engine, Row, Table, and_, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from airflow_tablemgmt.core.cost import COST_COLUMNS, cost_columns
from airflow_tablemgmt.core.errors import IllegalTransition, ProcessNotFound
from airflow_tablemgmt.core.process import ACTIVE, TERMINAL, Process, ProcessStatus, check_transition
from airflow_tablemgmt.core.timing import stale_bound
from airflow_tablemgmt.store import process_rollup
from airflow_tablemgmt.store.clock import as_utc, db_now
from airflow_tablemgmt.store.models import ProcessRow

_T = cast(Table, ProcessRow.__table__)

#: Columns :meth:`ProcessRepository.transition` may set besides the status.
TRANSITION_FIELDS = frozenset(
    {
        "external_id",
        "summary",
        "failure_reason",
        "snapshot_id",
        "started_at",
        "finished_at",
        "heartbeat_at",
        "parameters",
        "dag_id",
        "run_id",
        "task_id",
        "heartbeat_every_s",
        *COST_COLUMNS,
    }
)
_TIMESTAMP_FIELDS = frozenset({"started_at", "finished_at", "heartbeat_at"})
#: Statuses whose owner is a worker that heartbeats; a transition into them is a sign of life.
_BEATING = frozenset({ProcessStatus.SUBMITTED, ProcessStatus.RUNNING})

StatusFilter = ProcessStatus | str | Collection[ProcessStatus | str]


class ProcessRepository:
    """Processes: runs of one action on one table at one instant."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def open(
        self,
        table_id: str,
        action: str,
        instant: datetime,
        *,
        parameters: dict[str, Any] | None = None,
        dag_id: str | None = None,
        run_id: str | None = None,
        task_id: str | None = None,
    ) -> tuple[Process, bool]:
        """Get or create the process for (table_id, action, instant); True if this call created it.

        A new process is PENDING, attempt 1. Concurrent callers for one key all get the same row:
        the unique constraint picks the creator and everyone else reads its row.
        """
        instant = as_utc(instant, "instant")
        existing = self.find(table_id, action, instant)
        if existing is not None:
            return existing, False
        try:
            with self._engine.begin() as conn:
                result = conn.execute(
                    insert(_T).values(
                        table_id=table_id,
                        action=action,
                        instant=instant,
                        status=str(ProcessStatus.PENDING),
                        attempt=1,
                        engine="spark",
                        parameters=dict(parameters or {}),
                        dag_id=dag_id,
                        run_id=run_id,
                        task_id=task_id,
                        created_at=db_now(conn),
                    )
                )
                key = result.inserted_primary_key
                assert key is not None
                created = _load(conn, key[0])
                process_rollup.opened(conn, created)
                return created, True
        except IntegrityError:
            existing = self.find(table_id, action, instant)
            if existing is None:
                raise
            return existing, False

    def transition(
        self,
        process_id: int,
        to: ProcessStatus,
        *,
        expected: ProcessStatus | Collection[ProcessStatus],
        attempt: int | None = None,
        **fields: Any,
    ) -> Process:
        """Move the process to ``to`` if it is in one of the ``expected`` statuses and ``attempt``.

        Every ``expected -> to`` pair must be legal (:func:`core.process.check_transition`).
        ``attempt`` is required (TypeError without it) except for a cancel request
        (CANCELING, or CANCELED from PENDING): a worker's write that does not say which attempt
        it belongs to could land on a later attempt's row. ``fields`` may set any of
        :data:`TRANSITION_FIELDS`. A terminal ``to`` sets ``finished_at``, RUNNING sets
        ``started_at``, SUBMITTED/RUNNING set ``heartbeat_at`` (database time) unless given. If
        the row is no longer in an expected status (or attempt), raises
        :class:`IllegalTransition` naming what it is.
        """
        to = ProcessStatus(to)
        allowed = _statuses(expected)
        if attempt is None and not _is_cancel_request(to, allowed):
            raise TypeError(
                f"transition() to {to} needs attempt=<the attempt this worker runs>: only a cancel "
                f"request (CANCELING, or CANCELED from PENDING) may omit it"
            )
        for status in sorted(allowed):
            check_transition(status, to)
        unknown = set(fields) - TRANSITION_FIELDS
        if unknown:
            raise TypeError(
                f"transition() got unknown field(s) {', '.join(sorted(unknown))}; "
                f"allowed: {', '.join(sorted(TRANSITION_FIELDS))}"
            )
        values: dict[str, Any] = dict(fields)
        if "summary" in values:  # the cost a job's summary carries goes to the cost columns (core/cost.py)
            values = {**cost_columns(values["summary"]), **values}
        for name in _TIMESTAMP_FIELDS & values.keys():
            if values[name] is not None:
                values[name] = as_utc(values[name], name)
        values["status"] = str(to)
        if values.get("external_id"):  # the job started: the engine that runs it (issue 26)
            values["engine"] = engine_of(str(values["external_id"]))
        guard = [_T.c.id == process_id, _T.c.status.in_([str(s) for s in allowed])]
        if attempt is not None:
            guard.append(_T.c.attempt == attempt)
        with self._engine.begin() as conn:
            now = db_now(conn)
            if to in TERMINAL:
                values.setdefault("finished_at", now)
            if to == ProcessStatus.RUNNING:
                values.setdefault("started_at", now)
            if to in _BEATING:
                values.setdefault("heartbeat_at", now)
            if conn.execute(update(_T).where(*guard).values(**values)).rowcount != 1:
                current = _load(conn, process_id)
                raise IllegalTransition(_lost(current, to, allowed, attempt))
            moved = _load(conn, process_id)
            process_rollup.record(conn, moved)
            return moved

    def new_attempt(self, process_id: int, *, expected: ProcessStatus | Collection[ProcessStatus]) -> Process:
        """Re-open a FAILED / KILLED process as PENDING with ``attempt + 1`` (CANCELED is final).

        Clears what belonged to the previous attempt (external_id, summary, failure_reason,
        started_at, finished_at, its cost) and stamps ``heartbeat_at`` with the database's time, so the
        reaper measures the new attempt from its start, not from the row's creation. The UPDATE
        is guarded by the attempt it read,
        so of two racing retries exactly one creates the new attempt; the other gets
        :class:`IllegalTransition`.
        """
        allowed = _statuses(expected)
        for status in sorted(allowed):
            check_transition(status, ProcessStatus.PENDING)
        with self._engine.begin() as conn:
            current = _load(conn, process_id)
        if current.status not in allowed:
            raise IllegalTransition(_lost(current, ProcessStatus.PENDING, allowed, None))
        with self._engine.begin() as conn:
            changed = conn.execute(
                update(_T)
                .where(
                    _T.c.id == process_id,
                    _T.c.status.in_([str(s) for s in allowed]),
                    _T.c.attempt == current.attempt,
                )
                .values(
                    status=str(ProcessStatus.PENDING),
                    attempt=current.attempt + 1,
                    external_id=None,
                    summary=None,
                    failure_reason=None,
                    started_at=None,
                    finished_at=None,
                    heartbeat_at=db_now(conn),
                    heartbeat_every_s=None,
                    lease_acquired_at=None,
                    **dict.fromkeys(COST_COLUMNS),
                )
            ).rowcount
            if changed != 1:
                latest = _load(conn, process_id)
                raise IllegalTransition(_lost(latest, ProcessStatus.PENDING, allowed, current.attempt))
            reopened = _load(conn, process_id)
            process_rollup.record(conn, reopened)
            return reopened

    def heartbeat(self, process_id: int, attempt: int) -> ProcessStatus:
        """Record that the worker running ``attempt`` is alive; returns the row's status, so the
        worker sees a cancel request (CANCELING).

        Raises :class:`IllegalTransition` if that attempt is no longer the live one (a retry
        superseded it, or the process finished): the caller should stop working on it.
        """
        with self._engine.begin() as conn:
            now = db_now(conn)
            changed = conn.execute(
                update(_T)
                .where(
                    _T.c.id == process_id,
                    _T.c.attempt == attempt,
                    _T.c.status.in_([str(s) for s in ACTIVE]),
                )
                .values(heartbeat_at=now)
            ).rowcount
            current = _load(conn, process_id)
            if changed != 1:
                raise IllegalTransition(
                    f"process {_describe(current)} is {current.status} at attempt {current.attempt}; "
                    f"attempt {attempt} is no longer running"
                )
            return current.status

    def lease_taken(self, process_id: int, attempt: int) -> None:
        """Stamp (database time) when ``attempt`` took the table's lease: the History tab's and the
        CLI's lease wait is ``created_at`` to this. A superseded attempt's stamp writes nothing."""
        with self._engine.begin() as conn:
            conn.execute(
                update(_T)
                .where(_T.c.id == process_id, _T.c.attempt == attempt)
                .values(lease_acquired_at=db_now(conn))
            )

    def now(self) -> datetime:
        """The database's current time: the clock heartbeats are stamped and judged by."""
        with self._engine.connect() as conn:
            return db_now(conn)

    def reap(
        self, stale_after: timedelta, *, pending_after: timedelta | None = None
    ) -> builtins.list[Reaped]:
        """Close every active process whose worker is gone; returns what it closed.

        SUBMITTED / RUNNING / CANCELING rows whose last sign of life (``heartbeat_at``, else
        ``started_at``/``created_at``) is older than ``stale_after`` by the database's clock (or than
        two beats at the interval the row's worker promised, ``heartbeat_every_s``, if longer) are
        closed: CANCELING -> CANCELED, the others -> FAILED, with a reason naming the last
        heartbeat. PENDING rows are judged against ``pending_after`` (default: 10 x
        ``stale_after``): a PENDING row has no job yet, and a task that waits for a lease
        refreshes it only each time it polls. Each close is guarded by (status, attempt,
        heartbeat) as read, so a worker that beats in between keeps its row. When nothing is
        stale this is one indexed SELECT.
        """
        if stale_after <= timedelta(0):
            raise ValueError(f"stale_after: must be positive, got {stale_after}")
        pending_after = pending_after if pending_after is not None else 10 * stale_after
        if pending_after <= timedelta(0):
            raise ValueError(f"pending_after: must be positive, got {pending_after}")
        last_beat = func.coalesce(_T.c.heartbeat_at, _T.c.started_at, _T.c.created_at)
        reaped: builtins.list[Reaped] = []
        with self._engine.begin() as conn:
            now = db_now(conn)
            running = [
                str(s) for s in (ProcessStatus.SUBMITTED, ProcessStatus.RUNNING, ProcessStatus.CANCELING)
            ]
            stmt = select(_T).where(
                or_(
                    and_(_T.c.status.in_(running), last_beat < now - stale_after),
                    and_(_T.c.status == str(ProcessStatus.PENDING), last_beat < now - pending_after),
                )
            )
            candidates = [_to_process(r) for r in conn.execute(stmt)]
        for p in candidates:
            beat = p.heartbeat_at or p.started_at or p.created_at
            if p.status == ProcessStatus.PENDING:
                bound = pending_after
            else:  # judged by the interval its own worker promised, never less than stale_after
                bound = stale_bound(stale_after, p.heartbeat_every_s)
                if beat is not None and beat >= now - bound:
                    continue
            to = ProcessStatus.CANCELED if p.status == ProcessStatus.CANCELING else ProcessStatus.FAILED
            what = "the cancel request was never picked up" if to == ProcessStatus.CANCELED else "worker lost"
            reason = (
                f"reaped: {what}; attempt {p.attempt} was {p.status} with its last heartbeat at "
                f"{beat.isoformat() if beat else 'never'}, more than {_seconds(bound)} ago"
            )
            if p.status == ProcessStatus.CANCELING and p.failure_reason:
                reason = f"{p.failure_reason}; {reason}"
            guard = [_T.c.id == p.id, _T.c.status == str(p.status), _T.c.attempt == p.attempt]
            guard.append(
                _T.c.heartbeat_at.is_(None) if p.heartbeat_at is None else _T.c.heartbeat_at == p.heartbeat_at
            )
            with self._engine.begin() as conn:
                values = {"status": str(to), "failure_reason": reason, "finished_at": db_now(conn)}
                if conn.execute(update(_T).where(*guard).values(**values)).rowcount == 1:
                    closed = _load(conn, p.id)
                    process_rollup.record(conn, closed)
                    reaped.append(Reaped(closed, p.status, beat))
        return reaped

    def get(self, process_id: int) -> Process:
        with self._engine.connect() as conn:
            return _load(conn, process_id)

    def find(self, table_id: str, action: str, instant: datetime) -> Process | None:
        stmt = select(_T).where(
            _T.c.table_id == table_id, _T.c.action == action, _T.c.instant == as_utc(instant, "instant")
        )
        with self._engine.connect() as conn:
            row = conn.execute(stmt).first()
        return _to_process(row) if row is not None else None

    def list(
        self,
        *,
        table_id: str | None = None,
        action: str | None = None,
        status: StatusFilter | None = None,
        limit: int | None = 100,
    ) -> builtins.list[Process]:
        """Processes matching every given filter, newest instant first (``limit=None``: all)."""
        stmt = select(_T).order_by(_T.c.instant.desc(), _T.c.id.desc())
        if table_id is not None:
            stmt = stmt.where(_T.c.table_id == table_id)
        if action is not None:
            stmt = stmt.where(_T.c.action == action)
        if status is not None:
            stmt = stmt.where(_T.c.status.in_([str(s) for s in _statuses(status)]))
        if limit is not None:
            stmt = stmt.limit(limit)
        with self._engine.connect() as conn:
            return [_to_process(r) for r in conn.execute(stmt)]

    def last_successful(self, table_id: str, action: str) -> Process | None:
        """The SUCCESS process of (table_id, action) with the newest instant."""
        found = self.list(table_id=table_id, action=action, status=ProcessStatus.SUCCESS, limit=1)
        return found[0] if found else None

    def last_finished_success(self, table_id: str, action: str) -> Process | None:
        """The SUCCESS process of (table_id, action) that finished last, whatever its instant: runs of one
        table are serialized by its lease, so it is the last one that committed (an incremental refresh
        adds to what that one left; a backfilled instant can be older)."""
        stmt = (
            select(_T)
            .where(_T.c.table_id == table_id, _T.c.action == action)
            .where(_T.c.status == str(ProcessStatus.SUCCESS), _T.c.finished_at.is_not(None))
            .order_by(_T.c.finished_at.desc(), _T.c.id.desc())
            .limit(1)
        )
        with self._engine.connect() as conn:
            row = conn.execute(stmt).first()
        return None if row is None else _to_process(row)

    def active(self, table_id: str | None = None) -> builtins.list[Process]:
        """Processes not yet finished (PENDING, SUBMITTED, RUNNING, CANCELING), oldest instant first."""
        stmt = select(_T).where(_T.c.status.in_([str(s) for s in ACTIVE])).order_by(_T.c.instant, _T.c.id)
        if table_id is not None:
            stmt = stmt.where(_T.c.table_id == table_id)
        with self._engine.connect() as conn:
            return [_to_process(r) for r in conn.execute(stmt)]


@dataclass(frozen=True)
class Reaped:
    """A process the reaper closed: as it is now, the status it was left in, its last heartbeat."""

    process: Process
    was: ProcessStatus
    last_heartbeat: datetime | None


def _is_cancel_request(to: ProcessStatus, allowed: frozenset[ProcessStatus]) -> bool:
    """The only writes that may omit ``attempt``: a user's cancel request targets whichever attempt
    is live. Every other transition is a worker's and must name its attempt."""
    return to == ProcessStatus.CANCELING or (
        to == ProcessStatus.CANCELED and allowed == {ProcessStatus.PENDING}
    )


def _seconds(d: timedelta) -> str:
    return f"{d.total_seconds():g}s"


def _statuses(value: StatusFilter) -> frozenset[ProcessStatus]:
    # A ProcessStatus is a str, and a str is a Collection: test for it first.
    if isinstance(value, str):
        return frozenset({ProcessStatus(value)})
    statuses = frozenset(ProcessStatus(s) for s in value)
    if not statuses:
        raise ValueError("expected at least one process status")
    return statuses


def _load(conn: Connection, process_id: int) -> Process:
    row = conn.execute(select(_T).where(_T.c.id == process_id)).first()
    if row is None:
        raise ProcessNotFound(f"no process with id {process_id}")
    return _to_process(row)


def engine_of(external_id: str) -> str:
    """What ran a job, from its application id: ``spark-connect sc://host:port`` for a Spark Connect
    session's id (``connect:<server>#<session>[/<tag>]``, ``spark/connect/session.py``), else ``spark-submit``."""
    if external_id.startswith("connect:"):
        return "spark-connect " + external_id[len("connect:") :].split("#", 1)[0][:240]
    return "spark-submit"


def _describe(p: Process) -> str:
    return f"{p.id} ({p.table_id} {p.action} @ {p.instant.isoformat()})"


def _lost(current: Process, to: ProcessStatus, allowed: frozenset[ProcessStatus], attempt: int | None) -> str:
    wanted = " or ".join(sorted(allowed))
    if attempt is not None:
        wanted += f" at attempt {attempt}"
    return (
        f"process {_describe(current)} cannot go to {to}: it is {current.status} at attempt "
        f"{current.attempt}, expected {wanted}"
    )


def _to_process(row: Row[Any]) -> Process:
    return Process(
        id=row.id,
        table_id=row.table_id,
        action=row.action,
        instant=row.instant,
        status=ProcessStatus(row.status),
        attempt=row.attempt,
        engine=row.engine,
        external_id=row.external_id,
        snapshot_id=row.snapshot_id,
        parameters=row.parameters or {},
        summary=row.summary,
        failure_reason=row.failure_reason,
        dag_id=row.dag_id,
        run_id=row.run_id,
        task_id=row.task_id,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        heartbeat_at=row.heartbeat_at,
        heartbeat_every_s=row.heartbeat_every_s,
        lease_acquired_at=row.lease_acquired_at,
        core_seconds=row.core_seconds,
        cpu_seconds=row.cpu_seconds,
        bytes_read=row.bytes_read,
        bytes_written=row.bytes_written,
    )
