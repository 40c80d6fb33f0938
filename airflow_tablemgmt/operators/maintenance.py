"""TableMaintenanceOperator: runs one maintenance action on one table as a recorded process."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.exceptions import AirflowException
from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.sdk import BaseOperator

from airflow_tablemgmt.core.errors import LeaseUnavailable, TableMgmtError
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.hooks.spark_job import SparkJobHook
from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook
from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest


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

    When another job holds the table's lease the task defers (freeing its worker slot) and tries
    again every ``lease_poll`` until ``lease_wait`` has passed, then fails naming the holder.
    """

    template_fields: Sequence[str] = ("table", "action")
    ui_color = "#d6eaf8"

    def __init__(
        self,
        *,
        table: str,
        action: str,
        tablemgmt_conn_id: str = TableMgmtHook.default_conn_name,
        spark_conn_id: str = "spark_default",
        lease_wait: timedelta = timedelta(hours=1),
        lease_poll: timedelta = timedelta(seconds=30),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.action = action
        self.tablemgmt_conn_id = tablemgmt_conn_id
        self.spark_conn_id = spark_conn_id
        self.lease_wait = lease_wait
        self.lease_poll = lease_poll
        self._runner: ProcessRunner | None = None

    def execute(self, context: Any, event: dict[str, Any] | None = None) -> dict[str, Any]:
        store = TableMgmtHook(self.tablemgmt_conn_id).get_store()
        self._runner = ProcessRunner(store, default_factories(), SparkJobHook(self.spark_conn_id))
        ti = context["ti"]
        request = RunRequest(
            table_id=self.table,
            action=self.action,
            instant=run_instant(context),
            dag_id=ti.dag_id,
            run_id=ti.run_id,
            task_id=ti.task_id,
            try_number=ti.try_number,
            holder=f"{ti.dag_id}/{ti.run_id}/{ti.task_id}/{ti.try_number}",
        )
        try:
            outcome = self._runner.run(request)
        except LeaseUnavailable as e:
            self._wait_for_lease(e, event)
            raise  # unreachable: _wait_for_lease defers or raises
        except TableMgmtError as e:
            raise AirflowException(str(e)) from e
        return outcome.summary

    def _wait_for_lease(self, error: LeaseUnavailable, event: dict[str, Any] | None) -> None:
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
        if self._runner is not None:
            self._runner.kill()
