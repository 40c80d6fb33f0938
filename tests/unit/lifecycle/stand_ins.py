"""What the lifecycle unit tests share: a real SQLite store with one table, stand-in submitters (the
job engine is the one stand-in, as in ``tests/unit/lifecycle/test_observability.py``) and a stand-in
store-aware factory."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow_tablemgmt.core.factory import JobSpec, RunPlan, TableOutcome, TriggerContext
from airflow_tablemgmt.core.process import Process
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.core.triggers import Interval, TriggerStrategy
from airflow_tablemgmt.factories.discovery import FactoryRegistry, default_factories
from airflow_tablemgmt.lifecycle import ProcessRunner
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store

TABLE = "lake.sales.orders"
ACTION = "rewrite-files"
SUMMARY = {
    "rewritten_bytes_count": 5000,
    "before": {"data_files": 30, "delete_files": 2, "snapshots": 4},
    "after": {"data_files": 3, "delete_files": 0, "snapshots": 5, "current_snapshot_id": 77},
}


def instant(hour: int) -> datetime:
    return datetime(2026, 3, 1, hour, tzinfo=UTC)


def make_store(tmp_path: Path) -> Store:
    s = Store.for_url(f"sqlite:///{tmp_path / 'tms.db'}")
    s.catalogs.upsert(CatalogSpec(name="lake", warehouse=str(tmp_path / "wh")), Owner.STORE)
    spec = TableSpec.model_validate(
        {"catalog": "lake", "namespace": "sales", "name": "orders", "actions": {ACTION: {}}}
    )
    s.tables.upsert(spec, Owner.STORE)
    return s


class StandInSubmitter:
    """Returns ``result`` at once (or raises ``error``); ``hold`` makes ``submit`` wait until set."""

    def __init__(
        self,
        result: JobResult | None = None,
        *,
        error: BaseException | None = None,
        hold: threading.Event | None = None,
    ) -> None:
        self.result = result or JobResult(status="SUCCESS", summary=dict(SUMMARY))
        self.error = error
        self.hold = hold
        self.jobs: list[JobSpec] = []
        self.submitting = threading.Event()
        self.kills = 0

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        self.jobs.append(job)
        self.submitting.set()
        if on_started is not None:
            on_started("local-1")
        if self.hold is not None:
            self.hold.wait(30)
        if self.error is not None:
            raise self.error
        return self.result

    def kill(self) -> None:
        self.kills += 1


class KillingSubmitter(StandInSubmitter):
    """Can also kill an earlier attempt's application by id (``KillsById``)."""

    def __init__(self, acknowledge: bool = True, *, ends_after_polls: int | None = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.acknowledge = acknowledge
        self.killed_ids: list[str] = []
        # How many status polls after the kill report the application still running (None: never ends).
        self.ends_after_polls = ends_after_polls
        self.polls: list[str] = []
        self.ended_at: float | None = None

    def kill_application(self, application_id: str) -> bool:
        self.killed_ids.append(application_id)
        return self.acknowledge

    def application_finished(self, application_id: str) -> bool:
        self.polls.append(application_id)
        ended = self.ends_after_polls is not None and len(self.polls) > self.ends_after_polls
        if ended and self.ended_at is None:
            self.ended_at = time.monotonic()
        return ended

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        self.submitted_at = time.monotonic()
        return super().submit(job, on_started)


class AcknowledgingOnlySubmitter(StandInSubmitter):
    """Kills by id and is acknowledged, but cannot report whether the application ended."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.killed_ids: list[str] = []

    def kill_application(self, application_id: str) -> bool:
        self.killed_ids.append(application_id)
        return True


class StoreAwareStandIn:
    """A factory that reads the store (as dynamic tables do), recording what the lifecycle asks it."""

    name = "stand-in"

    def __init__(self, *, no_job: dict[str, Any] | None = None) -> None:
        self.no_job = no_job
        self.triggered: list[Process] = []
        self.finished: list[tuple[Process, dict[str, Any] | None, str | None]] = []

    def supported_actions(self) -> dict[str, set[str]]:
        return {"iceberg": {ACTION}}

    def trigger_strategy(self, format: str, action: str) -> TriggerStrategy:
        return TriggerStrategy(Interval.parse("1h"))

    def trigger(self, table: TableSpec, action: str, context: TriggerContext) -> JobSpec | None:
        raise AssertionError("the lifecycle must call trigger_process on a store-aware factory")

    def recover(self, table: TableSpec, process: Process, context: TriggerContext) -> JobSpec:
        raise AssertionError("the lifecycle must call trigger_process on a store-aware factory")

    def run_parameters(
        self,
        store: Any,
        table: TableSpec,
        action: str,
        *,
        conf: dict[str, Any] | None,
        run_type: str | None,
        instant: datetime,
    ) -> RunPlan:
        return RunPlan(dict(conf or {}))

    def trigger_process(
        self, store: Any, table: TableSpec, process: Process, context: TriggerContext
    ) -> JobSpec | dict[str, Any] | None:
        self.triggered.append(process)
        if self.no_job is not None:
            return dict(self.no_job)
        return JobSpec.build(table, context.catalog, process.action, {"from": "stand-in"})

    def complete_summary(
        self,
        process: Process,
        summary: dict[str, Any],
        *,
        application_id: str | None = None,
        duration_seconds: float | None = None,
    ) -> dict[str, Any]:
        return {**summary, "completed_by": self.name}

    def on_finished(
        self, store: Any, process: Process, summary: dict[str, Any] | None, error: str | None
    ) -> TableOutcome | None:
        self.finished.append((process, summary, error))
        if error is None:
            return TableOutcome(state="ACTIVE")
        return TableOutcome(state="SUSPENDED", halted=f"{process.table_id} is now suspended: {error}")


def registry(factory: Any) -> FactoryRegistry:
    r = FactoryRegistry()
    r.add(factory)
    return r


def runner(
    store: Store, submitter: Any, tmp_path: Path, factories: FactoryRegistry | None = None, **kwargs: Any
) -> ProcessRunner:
    return ProcessRunner(
        store, factories or default_factories(), submitter, result_dir=tmp_path / "results", **kwargs
    )


FAST = {"heartbeat_every": timedelta(milliseconds=100)}
