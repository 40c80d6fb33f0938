"""The real parts a planned batch runs with (``services/batches.py`` takes them as arguments, so its own
tests can hand in a stand-in job engine and still run the real lifecycle and store).

Each is what ``TableMaintenanceOperator`` does for its one table, per table of the batch:

* :func:`runner_for`: a :class:`ProcessRunner` per table with the table's own engine (spark-submit, or the
  Spark Connect server ``[tablemgmt] spark_connect_conn_id`` names for it, which leases one of the
  server's slots), its time limit, and the parent run's lineage conf; the batch's spark-submit tables run
  in one driver (``hooks/spark_batch.py``, ``[tablemgmt] plan_shared_driver``), each its own submitter,
  and its Connect tables one after another on a session the batch keeps per catalog
  (``spark/connect/kept.py``), each its own job;
* :func:`time_limit_for`: the table's time limit (its action's ``timeout``, else ``[tablemgmt]
  maintenance_timeout``, else 4 h) enforced around its run: Airflow's own per-task timeout would bound the
  whole batch, not each table;
* :func:`snapshot_gate`: the snapshot gate of an ``on-new-snapshot`` action;
* :func:`after_table`: the table measured again and remembered (``tms_table_health``: the next plan reads
  what the process left, not what it found), the ``unhealthy`` notification, and on a final failure the
  table's failure notifications (``failed``, ``failing-streak``) as the failure callback sends them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.errors import TableMgmtError
from airflow_tablemgmt.core.schedule import SchedulePlan
from airflow_tablemgmt.core.time_limits import TimeLimit, maintenance_time_limit
from airflow_tablemgmt.lifecycle import ProcessRunner, TakesJobConf, UsesStore
from airflow_tablemgmt.services.batches import BatchRun, LimitFor, Outcome, TableRun
from airflow_tablemgmt.store.effective import effective_table

if TYPE_CHECKING:
    from airflow_tablemgmt.metadata.health import HealthScore
    from airflow_tablemgmt.store import Store

log = logging.getLogger(__name__)


def table_time_limit(store: Store, table_id: str, action: str) -> TimeLimit:
    """One run of ``action`` on ``table_id``: its action's ``timeout``, else the setting, else the default."""
    from airflow_tablemgmt.core.durations import to_timedelta
    from airflow_tablemgmt.hooks.airflow_settings import setting_or_airflow

    try:
        timeout = getattr(effective_table(store, table_id).action_settings(action), "timeout", None)
    except TableMgmtError:  # retired or changed since the plan: the batch skips it, under the default limit
        timeout = None
    text = (setting_or_airflow("tablemgmt", "maintenance_timeout") or "").strip()
    setting: timedelta | None = None
    if text:
        try:
            setting = to_timedelta(text)
        except ValueError:
            log.warning(
                "tablemgmt: [tablemgmt] maintenance_timeout %r is not a duration; the default applies", text
            )
    return maintenance_time_limit(timeout, setting)


def shared_driver() -> bool:
    """``[tablemgmt] plan_shared_driver`` (default True): a batch's spark-submit tables share one driver."""
    from airflow_tablemgmt.hooks.airflow_settings import setting_or_airflow

    text = (setting_or_airflow("tablemgmt", "plan_shared_driver") or "").strip().lower()
    if text in ("", "true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    log.warning("tablemgmt: [tablemgmt] plan_shared_driver %r is not a boolean; True applies", text)
    return True


class BatchRunners:
    """Makes each table's runner, as the operator makes its one (a callable, :data:`RunnerFor`). With a
    shared driver (``hooks/spark_batch.py``) the tables whose engine is spark-submit run in the batch's one
    driver, each still its own submitter to the lifecycle; :meth:`close` ends that driver after the batch."""

    def __init__(
        self,
        store: Store,
        action: str,
        context: Mapping[str, Any] | None = None,
        spark_conn_id: str = "spark_default",
        shared: bool | None = None,
    ) -> None:
        from airflow_tablemgmt.factories.discovery import default_factories
        from airflow_tablemgmt.hooks.spark_batch import BatchDriver
        from airflow_tablemgmt.lineage.spark import parent_job_conf
        from airflow_tablemgmt.spark.connect.kept import BatchSessions

        self.store, self.action, self.spark_conn_id = store, action, spark_conn_id
        self.factories = default_factories()
        self.lineage = parent_job_conf(context) if context else {}
        self.driver = BatchDriver(spark_conn_id) if (shared_driver() if shared is None else shared) else None
        # the batch's Spark Connect tables, one after another on a session it keeps per catalog (kept.py); each
        # job's cost read after its job, in the table's thread (run_batch completes each result)
        self.connect_sessions = BatchSessions()
        self.connect_sessions.defer_cost = True

    def __call__(self, table_id: str) -> ProcessRunner:
        from airflow_tablemgmt.hooks.engine import submitter_for
        from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
        from airflow_tablemgmt.hooks.spark_batch import BatchTableSubmitter
        from airflow_tablemgmt.hooks.spark_connect import SparkConnectJobHook
        from airflow_tablemgmt.hooks.spark_job import SparkJobHook
        from airflow_tablemgmt.operators.time_limit import TimeLimitedSubmitter

        submitter: Any = submitter_for(table_id, self.action, self.spark_conn_id, store=self.store)
        if self.driver is not None and type(submitter) is SparkJobHook:
            submitter = BatchTableSubmitter(self.driver, submitter)
        if isinstance(submitter, SparkConnectJobHook):
            submitter.use_batch(self.connect_sessions)
        if isinstance(submitter, UsesStore):
            submitter.use_store(self.store)
        if self.lineage and isinstance(submitter, TakesJobConf) and isinstance(submitter.extra_conf, dict):
            submitter.extra_conf.update(self.lineage)
        limited = TimeLimitedSubmitter(submitter, table_time_limit(self.store, table_id, self.action))
        return ProcessRunner(self.store, self.factories, limited, resolve_catalog=resolve_catalog_spec)

    def close(self) -> None:
        """The batch is over: its driver, if one runs, stops its session and exits; the Connect sessions
        it kept are closed."""
        self.connect_sessions.close()
        if self.driver is not None:
            self.driver.close()


def runner_for(
    store: Store, action: str, context: Mapping[str, Any] | None = None, spark_conn_id: str = "spark_default"
) -> BatchRunners:
    """A function making each table's runner (:class:`BatchRunners`; close it after the batch)."""
    return BatchRunners(store, action, context, spark_conn_id)


def reap(store: Store) -> None:
    """Close processes whose worker is gone, once per batch (the operator does it once per task)."""
    from airflow_tablemgmt.core.timing import PENDING_STALE_AFTER
    from airflow_tablemgmt.lifecycle import STALE_AFTER

    try:
        reaped = store.processes.reap(STALE_AFTER, pending_after=PENDING_STALE_AFTER)
        for r in reaped:
            log.warning("tablemgmt: process %s %s -> %s", r.process.id, r.was, r.process.status)
    except Exception:  # noqa: BLE001 - housekeeping for other rows never fails a batch
        log.warning("tablemgmt: reaping stale processes failed", exc_info=True)


def time_limit_for(store: Store, action: str) -> LimitFor:
    """Each table's own time limit around its run (Airflow's timer, the one its tasks use): at the limit the
    table's job is killed (``TimeLimitedSubmitter``) and its process ends FAILED naming the limit. Its
    ``prepare(table_id)`` reads a table's limit ahead (an overlapped batch does it in the table's own thread,
    so the thread that runs the jobs makes no store read between two jobs: ``batch_overlap.py``)."""
    bounds: dict[str, TimeLimit] = {}

    def prepare(table_id: str) -> TimeLimit:
        bound = bounds[table_id] = table_time_limit(store, table_id, action)
        return bound

    @contextmanager
    def limit(table_id: str) -> Iterator[None]:
        from airflow.sdk.exceptions import AirflowTaskTimeout
        from airflow.sdk.execution_time.timeout import timeout

        from airflow_tablemgmt.operators.time_limit import TimeLimitExceeded

        bound = bounds.pop(table_id, None) or prepare(table_id)
        bounds.pop(table_id, None)
        try:
            with timeout(int(bound.limit.total_seconds()), bound.reason(action)):
                yield
        except TimeLimitExceeded:
            raise
        except AirflowTaskTimeout as e:  # outside the job (a gate's read, the lease): a failure of this table
            raise TimeLimitExceeded(bound.reason(action)) from e

    def limit_of(table_id: str) -> AbstractContextManager[None]:
        return limit(table_id)

    limit_of.prepare = prepare  # type: ignore[attr-defined]
    return limit_of


def snapshot_gate(store: Store, table_id: str, action: str) -> str | None:
    """Why ``table_id`` is skipped by the snapshot gate (an ``on-new-snapshot`` action still at the snapshot
    its last success left), or None. A check that cannot be made raises (the table fails, as its task would)."""
    from airflow.sdk.exceptions import AirflowSkipException

    from airflow_tablemgmt.factories.discovery import default_factories
    from airflow_tablemgmt.operators.gate import check_snapshot

    spec = effective_table(store, table_id)
    strategy = default_factories().for_action(spec.format, action).trigger_strategy(spec.format, action)
    if not SchedulePlan.resolve(spec.action_settings(action), strategy).gate:
        return None
    try:
        check_snapshot(store, table_id, action, log)
    except AirflowSkipException as e:
        return str(e).removeprefix("tablemgmt: ")
    return None


def after_table(context: Mapping[str, Any] | None) -> Any:
    """What follows each table's process (see the module docstring), with the task's ``context``."""

    def after(store: Store, run: BatchRun, done: TableRun, error: BaseException | None) -> None:
        from airflow_tablemgmt.notifications.health import after_process
        from airflow_tablemgmt.services.health import table_health

        if done.outcome == Outcome.FAILED and run.last_try:
            _failure_alerts(store, run, done, error, context or {})
        if done.outcome in (Outcome.SUCCESS, Outcome.SKIPPED, Outcome.FAILED):
            score: HealthScore | None = None
            try:  # measured again and remembered for the next plan (at the metadata file the job's own
                # figures after read, that read's walk: metadata/recent.py)
                score = table_health(store, done.table_id, ttl=0, actions=False).score
            except Exception:  # noqa: BLE001 - an unreadable table: the next plan measures it
                log.info(
                    "tablemgmt: health of %s not measured after %s", done.table_id, run.action, exc_info=True
                )
            if score is None:
                after_process(store, done.table_id, run.action, context, process_id=done.process_id)
            else:  # the unhealthy alert decides on that measurement, not on a read of its own
                measured = score
                after_process(
                    store,
                    done.table_id,
                    run.action,
                    context,
                    process_id=done.process_id,
                    read=lambda _store, _spec: measured,
                )

    return after


def _failure_alerts(
    store: Store, run: BatchRun, done: TableRun, error: BaseException | None, context: Mapping[str, Any]
) -> None:
    """The failure callback's notifications for one table (``notifications/callback.py``): the batch's task
    has no one table, so its own callback cannot send them."""
    from airflow_tablemgmt.notifications.callback import decide
    from airflow_tablemgmt.notifications.dispatch import global_notify, send_routed

    spec = store.tables.get(done.table_id)
    decided = decide(
        store,
        done.table_id,
        run.action,
        table_notify=getattr(spec, "notify", None),
        global_spec=global_notify(),
        exception=error or done.reason,
        dag_id=run.dag_id,
        run_id=run.run_id,
    )
    send_routed(decided, context)


__all__ = [
    "BatchRunners",
    "after_table",
    "reap",
    "runner_for",
    "shared_driver",
    "snapshot_gate",
    "table_time_limit",
    "time_limit_for",
]
