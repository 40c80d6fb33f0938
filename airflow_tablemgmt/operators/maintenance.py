"""TableMaintenanceOperator: runs one maintenance action on one table as a recorded process."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from airflow_tablemgmt.core.outcomes import TableHalted
from airflow_tablemgmt.core.timing import HEARTBEAT_EVERY, LEASE_TTL, STALE_AFTER, check_timing
from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook
from airflow_tablemgmt.operators.gate import GATES

# What only running the task needs is imported in ``execute``: a task start first parses the DAG file, which
# builds this operator, and that parse pays for every module imported here (issue 40's single-DAG parse,
# ``tests/unit/dag_factory/test_task_start_imports.py``).
if TYPE_CHECKING:
    from airflow_tablemgmt.core.errors import LeaseUnavailable
    from airflow_tablemgmt.core.factory import RunPlan
    from airflow_tablemgmt.factories.discovery import FactoryRegistry
    from airflow_tablemgmt.lifecycle import ProcessRunner, Submitter
    from airflow_tablemgmt.store import Store


class TableHaltedFailure(AirflowFailException, TableHalted):
    """The run failed and its outcome halted the table: the task fails without retries, and the
    failure callback reads the typed outcome (``notifications/callback.py``)."""


def run_instant(context: Any) -> datetime:
    """The process instant: the run's logical date, or its run-after time for manual/asset runs."""
    instant = context.get("logical_date")
    if instant is None:
        dag_run = context.get("dag_run")
        instant = getattr(dag_run, "run_after", None) or datetime.now(UTC)
    return instant


class TableMaintenanceOperator(BaseOperator):
    """Open (or resume) the process for (table, action, the run's instant), take the table's lease,
    run the factory's Spark job through ``spark_default``, and return the job's summary as XCom.
    A factory that reads the store (:class:`~airflow_tablemgmt.core.factory.StoreAwareFactory`)
    makes the process parameters from the DAG run, may skip the run, and may report that the table
    stopped taking scheduled work (the task then fails without retries).

    When another job holds the table's lease the task defers (freeing its worker slot) and tries
    again every ``lease_poll`` until ``lease_wait`` has passed, then fails naming the holder.

    ``gate`` (what the DAG factory sets for snapshot-driven actions): before anything else the task
    makes the snapshot gate's check (:mod:`airflow_tablemgmt.operators.gate`) and ends as *skipped*
    when the table has no snapshot newer than the last success (``"snapshot"``), or, first, when the
    watcher event that started the run is for other actions of the table (``"event"``). A skipped
    run opens no process and takes no lease. A run whose process exists already (a retry, a resume)
    is not checked again: it resumes its process.

    On start it reaps processes whose worker is gone (no heartbeat for ``stale_after``; PENDING
    rows after :data:`PENDING_STALE_AFTER`). A canceled process fails the task without retries
    (:class:`AirflowFailException`); ``on_kill`` kills the Spark job and records KILLED.

    ``execution_timeout`` (the DAG factory sets it: core/time_limits.py) bounds a run; ``timeout_source``
    says where the limit came from. At the limit the Spark job is killed and the process ends FAILED
    with a reason naming both (``operators/time_limit.py``); a refresh job gets the limit too, as
    ``timeout_seconds``, and cancels itself at the same wall clock.
    """

    template_fields: Sequence[str] = ("table", "action")
    ui_color = "#d6eaf8"

    # The defaults live on the class and an instance stores only what differs: every attribute an
    # operator sets goes through BaseOperator.__setattr__, and a full parse builds one of these per
    # DAG (``benchmarks/dag_parse.py``).
    tablemgmt_conn_id: str = TableMgmtHook.default_conn_name
    spark_conn_id: str = "spark_default"
    lease_wait: timedelta = timedelta(hours=1)
    lease_poll: timedelta = timedelta(seconds=30)
    lease_ttl: timedelta = LEASE_TTL
    heartbeat_every: timedelta = HEARTBEAT_EVERY
    stale_after: timedelta = STALE_AFTER
    gate: str | None = None
    timeout_source: str | None = None
    _runner: ProcessRunner | None = None
    _timed_out: str | None = None  # the failure reason, once Airflow's timeout fired

    def __init__(
        self,
        *,
        table: str,
        action: str,
        tablemgmt_conn_id: str = TableMgmtHook.default_conn_name,
        spark_conn_id: str = "spark_default",
        lease_wait: timedelta = timedelta(hours=1),
        lease_poll: timedelta = timedelta(seconds=30),
        lease_ttl: timedelta = LEASE_TTL,
        heartbeat_every: timedelta = HEARTBEAT_EVERY,
        stale_after: timedelta = STALE_AFTER,
        gate: str | None = None,
        timeout_source: str | None = None,
        **kwargs: Any,
    ) -> None:
        if gate not in GATES:
            raise ValueError(f"gate: must be one of 'snapshot', 'event' or None, not {gate!r}")
        check_timing(
            lease_ttl=lease_ttl,
            heartbeat_every=heartbeat_every,
            stale_after=stale_after,
            where=f"TableMaintenanceOperator {kwargs.get('task_id', '')}".rstrip(),
        )
        super().__init__(**kwargs)
        self.table = table
        self.action = action
        for name, value in (
            ("tablemgmt_conn_id", tablemgmt_conn_id),
            ("spark_conn_id", spark_conn_id),
            ("lease_wait", lease_wait),
            ("lease_poll", lease_poll),
            ("lease_ttl", lease_ttl),
            ("heartbeat_every", heartbeat_every),
            ("stale_after", stale_after),
            ("gate", gate),
            ("timeout_source", timeout_source),
        ):
            if value != getattr(type(self), name):
                setattr(self, name, value)

    def make_submitter(self) -> Submitter:
        """What runs the job: spark-submit through ``spark_conn_id``, or the Spark Connect server that
        ``[tablemgmt] spark_connect_conn_id`` names for this table (``hooks/engine.py``)."""
        from airflow_tablemgmt.hooks.engine import submitter_for

        return submitter_for(self.table, self.action, self.spark_conn_id)

    def execute(self, context: Any, event: dict[str, Any] | None = None) -> dict[str, Any]:
        from airflow.exceptions import AirflowException
        from airflow.sdk.exceptions import AirflowSkipException, AirflowTaskTimeout

        from airflow_tablemgmt import observability
        from airflow_tablemgmt.core.errors import LeaseUnavailable, TableMgmtError
        from airflow_tablemgmt.core.time_limits import TimeLimit
        from airflow_tablemgmt.core.timing import PENDING_STALE_AFTER
        from airflow_tablemgmt.factories.discovery import default_factories
        from airflow_tablemgmt.hooks.secrets import resolve_catalog_spec
        from airflow_tablemgmt.lifecycle import (
            ProcessCanceled,
            ProcessRunner,
            RunRequest,
            TakesJobConf,
            UsesStore,
        )
        from airflow_tablemgmt.lineage.spark import parent_job_conf
        from airflow_tablemgmt.notifications.health import after_process
        from airflow_tablemgmt.operators.gate import check_event, check_snapshot
        from airflow_tablemgmt.operators.time_limit import TimeLimitedSubmitter, TimeLimitExceeded

        # Again here: a cluster policy or a subclass may have changed them after the constructor.
        check_timing(
            lease_ttl=self.lease_ttl,
            heartbeat_every=self.heartbeat_every,
            stale_after=self.stale_after,
            where=f"TableMaintenanceOperator {self.task_id}",
        )
        gated = self.gate is not None and event is None  # a resume after a lease wait was checked
        if gated and self.gate == "event":
            check_event(self.table, self.action, context)
        store = TableMgmtHook(self.tablemgmt_conn_id).get_store()
        if gated:
            existing = store.processes.find(self.table, self.action, run_instant(context))
            if existing is None:
                check_snapshot(store, self.table, self.action, self.log)
            else:
                self.log.info(
                    "tablemgmt: this run's process %s exists (%s); resuming it without a snapshot check",
                    existing.id,
                    existing.status,
                )
        factories = default_factories()
        submitter = self.make_submitter()
        if self.execution_timeout:
            limit = TimeLimit(self.execution_timeout, self.timeout_source or "the task's execution_timeout")
            submitter = TimeLimitedSubmitter(submitter, limit)
        if isinstance(submitter, UsesStore):  # a Spark Connect job leases a server slot there
            submitter.use_store(store)
        if isinstance(submitter, TakesJobConf) and isinstance(submitter.extra_conf, dict):
            submitter.extra_conf.update(parent_job_conf(context))
        self._runner = ProcessRunner(
            store,
            factories,
            submitter,
            lease_ttl=self.lease_ttl,
            heartbeat_every=self.heartbeat_every,
            stale_after=self.stale_after,
            resolve_catalog=resolve_catalog_spec,
        )
        try:
            self._runner.reap(pending_after=max(PENDING_STALE_AFTER, 4 * self.lease_poll))
        except Exception:  # noqa: BLE001 - housekeeping for other rows never fails this task
            self.log.warning("tablemgmt: reaping stale processes failed", exc_info=True)
        ti = context["ti"]
        try:
            plan = self._plan(store, factories, context)
        except TableMgmtError as e:  # an unknown table or action fails as a run of it would
            raise AirflowException(str(e)) from e
        if plan.skip_reason:
            raise AirflowSkipException(f"tablemgmt: {plan.skip_reason}")
        request = RunRequest(
            table_id=self.table,
            action=self.action,
            instant=run_instant(context),
            dag_id=ti.dag_id,
            run_id=ti.run_id,
            task_id=ti.task_id,
            try_number=ti.try_number,
            holder=f"{ti.dag_id}/{ti.run_id}/{ti.task_id}/{ti.try_number}",
            parameters=plan.parameters,
            last_try=ti.try_number is None or ti.try_number > (self.retries or 0),
        )
        try:
            outcome = self._runner.run(request)
            if event and "waiting_since" in event:
                waited = datetime.now(UTC) - datetime.fromisoformat(event["waiting_since"])
                observability.lease_waited(self.table, self.action, waited.total_seconds())
        except LeaseUnavailable as e:
            self._wait_for_lease(e, event)
            raise  # unreachable: _wait_for_lease defers or raises
        except ProcessCanceled as e:  # a cancel is final: retrying would only fail again
            raise AirflowFailException(f"tablemgmt: {e}") from e
        except AirflowTaskTimeout as e:  # Airflow calls on_kill next, which must not record KILLED
            limit = TimeLimit(
                self.execution_timeout or timedelta(0), self.timeout_source or "execution_timeout"
            )
            self._timed_out = str(e) if isinstance(e, TimeLimitExceeded) else limit.reason(self.action)
            raise
        except TableMgmtError as e:
            table_outcome = self._runner.table_outcome
            if table_outcome is not None and table_outcome.halted:
                # Task code cannot pause its DAG (no metadata-DB access under Airflow 3): the factory
                # recorded the table's new state in the store, and later scheduled runs skip.
                self.log.error("tablemgmt: %s", table_outcome.halted)
                raise TableHaltedFailure(f"tablemgmt: {e}; {table_outcome.halted}", table_outcome) from e
            raise AirflowException(str(e)) from e
        if not outcome.reused:  # the unhealthy notification, once per crossing (docs/notifications.md)
            after_process(store, self.table, self.action, context, process_id=outcome.process.id)
        return outcome.summary

    def _plan(self, store: Store, factories: FactoryRegistry, context: Any) -> RunPlan:
        """What a store-aware factory makes of this DAG run (the process parameters, or a skip);
        other factories need nothing from the run."""
        from airflow_tablemgmt.core.factory import RunPlan, StoreAwareFactory
        from airflow_tablemgmt.store.effective import effective_table

        table = effective_table(store, self.table)  # its declaration with the policies merged in
        factory = factories.for_action(table.format, self.action)
        if not isinstance(factory, StoreAwareFactory):
            return RunPlan()
        dag_run = context.get("dag_run")
        run_type = getattr(dag_run, "run_type", None)
        run_type = getattr(run_type, "value", run_type)
        return factory.run_parameters(
            store,
            table,
            self.action,
            conf=getattr(dag_run, "conf", None) or {},
            run_type=str(run_type) if run_type else None,
            instant=run_instant(context),
        )

    def _wait_for_lease(self, error: LeaseUnavailable, event: dict[str, Any] | None) -> None:
        from airflow.exceptions import AirflowException
        from airflow.providers.standard.triggers.temporal import DateTimeTrigger

        now = datetime.now(UTC)
        first = datetime.fromisoformat(event["waiting_since"]) if event and "waiting_since" in event else now
        if now - first >= self.lease_wait:
            raise AirflowException(f"gave up after waiting {now - first} for the table lease: {error}")
        self.log.info("tablemgmt: %s; deferring for %s", error, self.lease_poll)
        self.defer(
            trigger=DateTimeTrigger(moment=now + self.lease_poll),
            method_name="resume_after_lease_wait",
            kwargs={"waiting_since": first.isoformat()},
        )

    def resume_after_lease_wait(
        self, context: Any, event: Any = None, waiting_since: str | None = None
    ) -> Any:
        return self.execute(context, event={"waiting_since": waiting_since} if waiting_since else None)

    def on_kill(self) -> None:
        if self._runner is None:
            return
        if self._timed_out is not None:
            # Airflow's timeout: the job is stopped first, then the row ends FAILED naming the limit
            # (already so when the timeout fired in the job; then this finds the row closed).
            self._runner.fail_running(self._timed_out)
        self._runner.kill()
