"""The lifecycle through the Airflow path production takes: TableMaintenanceOperator.execute()/on_kill()
and SnapshotGateOperator.execute(), with a real store (SQLite file), a real context-like object and
real child processes.

Where the point is the lifecycle (who writes the row, who kills what), the job is a real ``sleep``
subprocess standing in for spark-submit (:class:`SleepJob`): it has a pid that can be checked for
being dead, and it runs as long as a test needs without a JVM. No Spark runs in this module.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.exceptions import AirflowException, TaskDeferred
from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
from airflow_tablemgmt.operators.gate import SnapshotGateOperator
from airflow_tablemgmt.operators.maintenance import TableMaintenanceOperator
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store
from tests.support.threads import in_thread

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

S = ProcessStatus
TABLE = "opl.db.orders"
ACTION = "rewrite-files"
T0 = datetime(2026, 2, 1, tzinfo=UTC)
DAG, RUN, TASK = "tms__opl.db.orders__rewrite-files", "scheduled__2026-02-01T00:00:00+00:00", "maintain"
WAIT = 60.0  # bound on every wait in this module (each test's timeout covers its waits)


class SleepJob:
    """Runs ``sleep <seconds>`` as the job: SUCCESS when it exits 0, FAILED when it was killed."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = threading.Event()

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        self.proc = subprocess.Popen(["sleep", str(self.seconds)])
        if on_started is not None:
            on_started(f"local-sleep-{self.proc.pid}")
        self.started.set()
        code = self.proc.wait()
        if code != 0:
            return JobResult(status="FAILED", error=f"sleep exited with {code}", error_class="Killed")
        return JobResult(status="SUCCESS", summary={"slept": self.seconds, "process_id": job.process_id})

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()

    def dead(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None


class Operator(TableMaintenanceOperator):
    """The production operator; only what runs the job differs (a SleepJob instead of spark-submit)."""

    job: SleepJob

    def make_submitter(self) -> SleepJob:  # type: ignore[override]
        return self.job


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    url = f"sqlite:///{tmp_path / 'tablemgmt.db'}"
    monkeypatch.setenv("TABLEMGMT_STORE_URL", url)
    store = Store.for_url(url)
    store.catalogs.upsert(CatalogSpec(name="opl", warehouse=str(tmp_path / "wh")), Owner.STORE)
    spec = TableSpec.model_validate(
        {"catalog": "opl", "namespace": "db", "name": "orders", "actions": {ACTION: {}}}
    )
    store.tables.upsert(spec, Owner.STORE)
    return store


def operator(seconds: float, **kw: Any) -> Operator:
    kw.setdefault("heartbeat_every", timedelta(seconds=0.2))
    kw.setdefault("lease_ttl", timedelta(seconds=30))
    kw.setdefault("stale_after", timedelta(seconds=20))  # the timing rules: below lease_ttl
    op = Operator(task_id=TASK, table=TABLE, action=ACTION, tablemgmt_conn_id="tms_no_such_conn", **kw)
    op.job = SleepJob(seconds)
    return op


def context(try_number: int) -> dict[str, Any]:
    ti = SimpleNamespace(dag_id=DAG, run_id=RUN, task_id=TASK, try_number=try_number)
    return {"ti": ti, "logical_date": T0}


def wait_for(what: str, check: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {WAIT}s waiting for {what}")


def running(store: Store) -> Any:
    p = store.processes.find(TABLE, ACTION, T0)
    return p if p is not None and p.status == S.RUNNING and p.external_id else None


def test_retry_after_a_dead_worker_defers_for_its_lease_then_recovers(store: Store) -> None:
    """Try 1 died with the row RUNNING and its lease live. Try 2 closes attempt 1 and opens attempt
    2, but does not start a second job while attempt 1's lease is live: it defers with a
    DateTimeTrigger; resumed after the lease lapsed, it runs and succeeds."""
    p, _ = store.processes.open(
        TABLE, ACTION, T0, parameters={"airflow_try": 1}, dag_id=DAG, run_id=RUN, task_id=TASK
    )
    store.processes.transition(p.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    store.processes.transition(p.id, S.RUNNING, expected=S.SUBMITTED, attempt=1, external_id="local-dead")
    old_holder = f"process:{p.id}:attempt:1:{DAG}/{RUN}/{TASK}/1"
    assert store.leases.acquire(TABLE, old_holder, timedelta(seconds=3))

    op = operator(0)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context(2))
    assert isinstance(deferred.value.trigger, DateTimeTrigger)
    assert deferred.value.method_name == "resume_after_lease_wait"
    assert op.job.proc is None  # no second job while attempt 1's lease is live
    row = store.processes.get(p.id)
    assert (row.status, row.attempt) == (S.PENDING, 2)
    assert store.leases.get(TABLE).holder == old_holder

    wait_for(
        "attempt 1's lease to lapse (database time)",
        lambda: store.leases.get(TABLE).expired(store.leases.now()),
    )
    summary = op.resume_after_lease_wait(context(2), **deferred.value.kwargs)
    assert summary["process_id"] == p.id
    row = store.processes.get(p.id)
    assert (row.status, row.attempt, row.external_id) == (S.SUCCESS, 2, f"local-sleep-{op.job.proc.pid}")
    assert store.leases.get(TABLE) is None


def test_on_kill_kills_the_job_and_records_killed(store: Store) -> None:
    op = operator(300)
    thread, out = in_thread(lambda: op.execute(context(1)))
    p = wait_for("the job RUNNING", lambda: running(store))
    op.on_kill()
    thread.join(WAIT)
    assert not thread.is_alive()
    [err] = out
    assert isinstance(err, AirflowException) and "killed" in str(err), err
    assert op.job.dead()
    row = store.processes.get(p.id)
    assert row.status == S.KILLED and "on_kill" in (row.failure_reason or "")
    assert store.leases.get(TABLE) is None


def test_cancel_during_a_run_kills_the_job_and_fails_the_task_without_retry(store: Store) -> None:
    op = operator(300)
    thread, out = in_thread(lambda: op.execute(context(1)))
    p = wait_for("the job RUNNING", lambda: running(store))
    store.processes.transition(
        p.id, S.CANCELING, expected=S.RUNNING, failure_reason="cancel requested from the CLI"
    )
    thread.join(WAIT)
    assert not thread.is_alive()
    [err] = out
    assert isinstance(err, AirflowFailException), err  # no retry: a cancel is final
    assert f"process {p.id} was canceled" in str(err) and "cancel requested from the CLI" in str(err)
    assert op.job.dead()
    row = store.processes.get(p.id)
    assert row.status == S.CANCELED and row.finished_at is not None
    # The next try of the same task does not re-open it.
    again = operator(0)
    with pytest.raises(AirflowFailException, match="was canceled"):
        again.execute(context(2))
    assert again.job.proc is None
    assert store.processes.get(p.id).status == S.CANCELED


def test_worker_losing_its_lease_mid_run_kills_the_job_and_writes_nothing(store: Store) -> None:
    op = operator(300)
    thread, out = in_thread(lambda: op.execute(context(1)))
    p = wait_for("the job RUNNING", lambda: running(store))
    lease = store.leases.get(TABLE)
    # The lease lapsed (a stall) and another worker took the table.
    assert store.leases.release(TABLE, lease.holder)
    assert store.leases.acquire(TABLE, "another-worker", timedelta(minutes=5))
    thread.join(WAIT)
    assert not thread.is_alive()
    [err] = out
    assert isinstance(err, AirflowException) and "lost the lease" in str(err), err
    assert op.job.dead()
    row = store.processes.get(p.id)
    # The loser closes its own row (guarded by its attempt), and records no result.
    assert row.status == S.FAILED and row.summary is None, row
    assert "lost the lease" in (row.failure_reason or ""), row.failure_reason
    assert store.leases.get(TABLE).holder == "another-worker"


def test_operator_start_reaps_stuck_processes(store: Store) -> None:
    from sqlalchemy import update

    from airflow_tablemgmt.store.models import ProcessRow

    other, _ = store.processes.open("opl.db.orders", "expire-snapshots", T0)
    store.processes.transition(other.id, S.SUBMITTED, expected=S.PENDING, attempt=1)
    with store.engine.begin() as conn:
        conn.execute(
            update(ProcessRow.__table__).values(heartbeat_at=store.processes.now() - timedelta(hours=1))
        )
    op = operator(0)
    op.execute(context(1))
    row = store.processes.get(other.id)
    assert row.status == S.FAILED and (row.failure_reason or "").startswith("reaped: worker lost")


def _empty_iceberg_table(warehouse: Path) -> None:
    """A hadoop-layout Iceberg table with no snapshot, written with pyiceberg (no JVM)."""
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
    from pyiceberg.types import LongType, NestedField

    location = warehouse / "db" / "orders"
    meta = new_table_metadata(
        Schema(NestedField(1, "id", LongType(), required=False)),
        UNPARTITIONED_PARTITION_SPEC,
        UNSORTED_SORT_ORDER,
        str(location),
        {},
    )
    (location / "metadata").mkdir(parents=True)
    (location / "metadata" / "v1.metadata.json").write_text(meta.model_dump_json())
    (location / "metadata" / "version-hint.text").write_text("1")


def test_gate_skips_when_the_snapshot_is_unchanged(store: Store, tmp_path: Path) -> None:
    _empty_iceberg_table(tmp_path / "wh")
    gate = SnapshotGateOperator(
        task_id="gate", table=TABLE, action=ACTION, tablemgmt_conn_id="tms_no_such_conn"
    )
    assert gate.execute({}) is None  # never handled: run
    p, _ = store.processes.open(TABLE, ACTION, T0)
    for to, expected in ((S.SUBMITTED, S.PENDING), (S.RUNNING, S.SUBMITTED), (S.SUCCESS, S.RUNNING)):
        store.processes.transition(p.id, to, expected=expected, attempt=1)
    with pytest.raises(AirflowSkipException, match="already handled; nothing to do"):
        gate.execute({})
    assert json.loads((tmp_path / "wh" / "db" / "orders" / "metadata" / "version-hint.text").read_text()) == 1
    assert os.path.exists(tmp_path / "wh" / "db" / "orders" / "metadata" / "v1.metadata.json")
