"""Run one batch of a policy's planned (policy, action) DAG run (ADR 0004, decisions 3 and 4).

A batch is a list of table ids the planning step selected (``services/plan_runs.py``). Its tables run one
after another, each exactly as a run of its own would run: through the lifecycle (``ProcessRunner``) with its
own process row keyed by (table, action, the DAG run's instant), its own lease, its own history, cost and
alert. Nothing is shared between two tables but the worker process (and so a warm Spark Connect client,
which the Connect engine keeps per process), so a failure or a lost lease affects one table, never the
batch:

* a table whose lease another job holds is **skipped** with that reason, recorded on its process (a
  skipped SUCCESS, like the health gate's skips), and left for the next plan: a batch never waits for a
  lease, which would hold the batch's other tables back;
* a table whose job fails ends its own process FAILED (the lifecycle records why) and the batch goes on;
  :func:`run_batch` returns every table's outcome and the caller (the mapped task) fails at the end when a
  table failed, naming them (:class:`BatchFailed`), so Airflow's retries and alerting still apply: a retry
  runs the batch again, where the tables that succeeded (or were skipped) are the same processes and are
  not run twice;
* the gates stay the last word: the snapshot gate (``on-new-snapshot`` actions) before a process opens,
  the format's health gate (the factory) inside the lifecycle, both reading the table again, so a plan made
  from stored health cannot start a job on a table that stopped needing it.

Each process records its DAG run and map index in its parameters (``plan``), so a table's history leads to
the task log of the batch that ran it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.errors import IllegalTransition, LeaseUnavailable, TableMgmtError, TableNotFound
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import Owner
from airflow_tablemgmt.lifecycle import ProcessCanceled, ProcessRunner, RunRequest

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)
S = ProcessStatus

#: The gate name a lease skip's summary carries (the health gate's is ``health``).
LEASE_GATE = "lease"


class BatchFailed(TableMgmtError):
    """Some tables of a batch failed; the others ran. The message names each failed table and why."""


class Outcome(StrEnum):
    """How one table of a batch ended."""

    SUCCESS = "success"  # its job ran and committed, or its process had succeeded already (a retry)
    SKIPPED = "skipped"  # a gate, its lease held elsewhere, or no longer this policy's: nothing ran
    FAILED = "failed"  # its process ended FAILED (or it could not be started)
    CANCELED = "canceled"  # a user canceled its process: final, not a failure of the batch


@dataclass(frozen=True)
class BatchRun:
    """Where a batch runs: the (policy, action), the DAG run's instant (every table's process instant) and
    the Airflow ids recorded on each process. ``last_try``: whether a failure is final (no Airflow retry
    follows), which decides whether a failed table's alert is sent now."""

    policy: str
    action: str
    instant: datetime
    dag_id: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    map_index: int | None = None
    try_number: int | None = None
    last_try: bool = True

    @property
    def holder(self) -> str:
        """The lease holder's name (the runner adds its attempt and a token of its own)."""
        index = "" if self.map_index is None else f"[{self.map_index}]"
        return f"{self.dag_id or 'plan'}/{self.run_id or '-'}/{self.task_id or 'run_batch'}{index}/{self.try_number or 1}"

    def parameters(self) -> dict[str, Any]:
        """What a process this batch opens records of the batch (ADR 0004's consequences: a table's
        history leads to the batch's task log)."""
        return {
            "plan": {
                "policy": self.policy,
                "dag_id": self.dag_id,
                "run_id": self.run_id,
                "task_id": self.task_id,
                "map_index": self.map_index,
            }
        }


@dataclass(frozen=True)
class TableRun:
    """One table's outcome in a batch: its process (None when none was opened) and why."""

    table_id: str
    outcome: Outcome
    reason: str
    process_id: int | None = None


@dataclass
class BatchResult:
    """Every table's outcome, in the batch's order."""

    run: BatchRun
    tables: list[TableRun] = field(default_factory=list)

    @property
    def failed(self) -> list[TableRun]:
        return [t for t in self.tables if t.outcome == Outcome.FAILED]

    def counts(self) -> dict[str, int]:
        return {o.value: sum(1 for t in self.tables if t.outcome == o) for o in Outcome}

    def to_dict(self) -> dict[str, Any]:
        """The mapped task's XCom: the counts and each table's outcome."""
        return {
            "policy": self.run.policy,
            "action": self.run.action,
            "map_index": self.run.map_index,
            "counts": self.counts(),
            "tables": [{**asdict(t), "outcome": t.outcome.value} for t in self.tables],
        }

    def raise_if_failed(self) -> None:
        """:class:`BatchFailed` naming each failed table and its reason, when one failed."""
        failed = self.failed
        if failed:
            raise BatchFailed(
                f"{len(failed)} of {len(self.tables)} table(s) of this batch failed ({self.run.action}, policy "
                f"{self.run.policy}); the others ran: "
                + "; ".join(f"{t.table_id} (process {t.process_id}): {t.reason}" for t in failed)
            )


#: Makes the runner of one table (its own submitter, time limit and lease holder); see :func:`default_runner`.
RunnerFor = Callable[[str], ProcessRunner]
#: The snapshot gate of one table: why it is skipped, or None to run it (``operators.gate.check_snapshot``).
SnapshotGate = Callable[["Store", str, str], str | None]
#: A time limit around one table's run (the mapped task's caller gives each table its own).
LimitFor = Callable[[str], AbstractContextManager[Any]]
#: What follows a table's process (its health measured again, its alerts sent): the store, the batch, the
#: table's outcome and the error that failed it, if one did. Called only for a table that has a process.
AfterTable = Callable[["Store", BatchRun, TableRun, BaseException | None], None]


def run_batch(
    store: Store,
    run: BatchRun,
    tables: Sequence[str],
    *,
    runner_for: RunnerFor,
    snapshot_gate: SnapshotGate | None = None,
    limit_for: LimitFor | None = None,
    after_table: AfterTable | None = None,
    overlap: bool | None = None,
) -> BatchResult:
    """Run ``run.action`` on each of ``tables``, one job after another (see the module docstring). Never
    raises for one table's failure: the result says how each ended (:meth:`BatchResult.raise_if_failed`).

    ``overlap`` (default ``[tablemgmt] plan_batch_overlap``, true): each table's bookkeeping runs in a thread
    of its own beside the neighbouring tables' jobs, which still run one at a time, on this thread and in
    order (``batch_overlap.py``); false: each table from its first check to its health's write before the
    next one starts."""
    result = BatchResult(run)
    limits = limit_for or _no_limit
    if not (batch_overlap() if overlap is None else overlap) or len(tables) < 2:
        from airflow_tablemgmt.services.batch_finish import Completes

        def completing(tid: str) -> ProcessRunner:
            runner = runner_for(tid)
            runner.submitter = Completes(runner.submitter)
            return runner

        for i, table_id in enumerate(tables, 1):
            log.info("tablemgmt: batch table %d of %d: %s %s", i, len(tables), run.action, table_id)
            with_limit = _limited(limits, table_id)
            done, error = _table(store, run, table_id, completing, snapshot_gate, with_limit)
            result.tables.append(done)
            _after(store, run, done, error, after_table)
        return result

    from airflow_tablemgmt.services.batch_overlap import JobLane, run_overlapped

    prepare = getattr(limit_for, "prepare", None)
    errors: dict[int, BaseException | None] = {}

    def run_one(k: int, table_id: str, lane: JobLane) -> TableRun:
        log.info("tablemgmt: batch table %d of %d: %s %s", k + 1, len(tables), run.action, table_id)
        if prepare is not None:
            prepare(table_id)  # its limit read here, not between two jobs on the lane's thread

        def in_lane(tid: str) -> ProcessRunner:
            runner = runner_for(tid)
            lane.track(k, runner)
            return runner

        done, errors[k] = _table(store, run, table_id, in_lane, snapshot_gate, None)
        return done

    def after_one(k: int, done: TableRun) -> None:
        _after(store, run, done, errors.get(k), after_table)

    def missing(table_id: str, why: str, failed: bool) -> TableRun:
        outcome = Outcome.FAILED if failed else Outcome.SKIPPED
        return TableRun(table_id, outcome, why, _process_id(store, run, table_id))

    result.tables.extend(run_overlapped(tables, run_one, after_one, limits, missing))
    return result


def batch_overlap() -> bool:
    """``[tablemgmt] plan_batch_overlap`` (default True): a batch's bookkeeping beside its next job."""
    from airflow_tablemgmt.hooks.airflow_settings import setting_or_airflow

    text = (setting_or_airflow("tablemgmt", "plan_batch_overlap") or "").strip().lower()
    if text in ("false", "0", "no", "off"):
        return False
    if text not in ("", "true", "1", "yes", "on"):
        log.warning("tablemgmt: [tablemgmt] plan_batch_overlap %r is not a boolean; True applies", text)
    return True


def _limited(limits: LimitFor, table_id: str) -> Callable[[Callable[[], TableRun]], TableRun]:
    def call(body: Callable[[], TableRun]) -> TableRun:
        with limits(table_id):
            return body()

    return call


def _table(
    store: Store,
    run: BatchRun,
    table_id: str,
    runner_for: RunnerFor,
    snapshot_gate: SnapshotGate | None,
    with_limit: Callable[[Callable[[], TableRun]], TableRun] | None,
) -> tuple[TableRun, BaseException | None]:
    """One table's run (inside ``with_limit`` when given) and its outcome; the error that failed it."""
    error: BaseException | None = None

    def body() -> TableRun:
        return _run_table(store, run, table_id, runner_for, snapshot_gate)

    try:
        done = with_limit(body) if with_limit is not None else body()
    except ProcessCanceled as e:
        done = TableRun(table_id, Outcome.CANCELED, str(e), _process_id(store, run, table_id))
    except Exception as e:  # noqa: BLE001 - one table's failure ends its process, never the batch
        error = e
        reason = str(e) if isinstance(e, TableMgmtError) else f"{type(e).__name__}: {e}"
        done = TableRun(table_id, Outcome.FAILED, reason, _process_id(store, run, table_id))
    log.info(
        "tablemgmt: %s %s: %s (process %s): %s",
        run.action,
        table_id,
        done.outcome.value,
        done.process_id,
        done.reason,
    )
    return done, error


def _after(
    store: Store, run: BatchRun, done: TableRun, error: BaseException | None, after_table: AfterTable | None
) -> None:
    if after_table is None or done.process_id is None:
        return
    try:
        after_table(store, run, done, error)
    except Exception:  # noqa: BLE001 - alerts and health are never a reason to fail a table
        log.exception("tablemgmt: after %s on %s", run.action, done.table_id)


def _no_limit(table_id: str) -> AbstractContextManager[Any]:
    return nullcontext()


def _run_table(
    store: Store, run: BatchRun, table_id: str, runner_for: RunnerFor, snapshot_gate: SnapshotGate | None
) -> TableRun:
    why_not = _not_this_policys(store, run, table_id)
    if why_not is not None:
        return TableRun(table_id, Outcome.SKIPPED, why_not)
    # A retry of the batch resumes an existing process; only a new one is checked against its snapshot.
    if snapshot_gate is not None and store.processes.find(table_id, run.action, run.instant) is None:
        skip = snapshot_gate(store, table_id, run.action)
        if skip is not None:
            return TableRun(table_id, Outcome.SKIPPED, skip)
    request = RunRequest(
        table_id=table_id,
        action=run.action,
        instant=run.instant,
        dag_id=run.dag_id,
        run_id=run.run_id,
        task_id=run.task_id,
        try_number=run.try_number,
        holder=run.holder,
        parameters=run.parameters(),
        last_try=run.last_try,
    )
    try:
        outcome = runner_for(table_id).run(request)
    except LeaseUnavailable as e:
        return skip_leased(store, run, table_id, str(e))
    summary = outcome.summary or {}
    if summary.get("skipped"):
        return TableRun(
            table_id, Outcome.SKIPPED, str(summary.get("reason") or "skipped"), outcome.process.id
        )
    reason = "succeeded earlier (this retry reused its process)" if outcome.reused else "succeeded"
    return TableRun(table_id, Outcome.SUCCESS, reason, outcome.process.id)


def _not_this_policys(store: Store, run: BatchRun, table_id: str) -> str | None:
    """Why ``table_id`` is no longer this plan's to run (retired, declared meanwhile, enrolled by another
    policy, the action turned off), or None. Checked right before the table runs: the plan is minutes old."""
    try:
        row = store.tables.get_registered(table_id)
    except TableNotFound as e:
        return f"no longer registered: {e}"
    if row.managed_by != Owner.POLICY or row.policy != run.policy:
        owner = (
            f"policy {row.policy}" if row.managed_by == Owner.POLICY else f"its {row.managed_by} declaration"
        )
        return f"now managed by {owner}, whose own DAGs run it"
    # an enrolled row is its effective table already (store/effective.py): no second read
    if run.action not in row.spec.enabled_actions():
        return f"{run.action} is no longer enabled on it"
    return None


def skip_leased(store: Store, run: BatchRun, table_id: str, reason: str) -> TableRun:
    """Close the PENDING process of a table whose lease another job holds as a recorded skip (its reason
    and that the next plan takes it again): a batch does not wait for one table's lease."""
    process = store.processes.find(table_id, run.action, run.instant)
    text = f"not run: {reason}; left for the next plan"
    if process is None or process.status != S.PENDING:
        return TableRun(table_id, Outcome.SKIPPED, text, process.id if process else None)
    summary = {"skipped": True, "gate": LEASE_GATE, "reason": text}
    try:
        for to, expected in ((S.SUBMITTED, S.PENDING), (S.RUNNING, S.SUBMITTED), (S.SUCCESS, S.RUNNING)):
            process = store.processes.transition(
                process.id,
                to,
                expected=expected,
                attempt=process.attempt,
                **({"summary": summary} if to == S.SUCCESS else {}),
            )
    except IllegalTransition:  # another worker took the row meanwhile: it is theirs now
        current = store.processes.get(process.id)
        return TableRun(
            table_id, Outcome.SKIPPED, f"{text} (its process is now {current.status})", current.id
        )
    return TableRun(table_id, Outcome.SKIPPED, text, process.id)


def _process_id(store: Store, run: BatchRun, table_id: str) -> int | None:
    try:
        found = store.processes.find(table_id, run.action, run.instant)
    except Exception:  # noqa: BLE001 - the store itself may be what failed
        return None
    return found.id if found is not None else None


__all__ = [
    "LEASE_GATE",
    "batch_overlap",
    "BatchFailed",
    "BatchResult",
    "BatchRun",
    "Outcome",
    "TableRun",
    "run_batch",
    "skip_leased",
]
