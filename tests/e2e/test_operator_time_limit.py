"""A run that passes its time limit ends FAILED with a reason naming the limit, through Airflow's own
timeout: the Task SDK's ``_run_execute_callable`` (what a worker runs) raises ``AirflowTaskTimeout``
in ``execute`` at ``execution_timeout`` and then calls ``on_kill``. The job is a real ``sleep``
subprocess standing in for spark-submit (tests/e2e/test_operator_lifecycle.py's harness): it must be
dead, the row FAILED (not KILLED, not RUNNING) with the limit and its source, the lease free. A refresh
job is handed the limit as ``timeout_seconds`` so its driver stops at the same wall clock.

Before issue 35 the same run recorded ``AirflowTaskTimeout: Timeout, PID: ...`` (no limit named) while
its job still ran, and a refresh's job never heard of a limit."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowTaskTimeout

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.core.time_limits import TimeLimit
from airflow_tablemgmt.operators.time_limit import TimeLimitedSubmitter, TimeLimitExceeded
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store
from tests.e2e.test_operator_lifecycle import ACTION, T0, TABLE, context, operator, store

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]
_ = store  # the module's fixture


def run_under_airflows_timeout(op: Any, ctx: dict[str, Any]) -> BaseException:
    """What the worker's task runner does with ``execute`` (the timeout, then ``on_kill``)."""
    from airflow.sdk.execution_time.task_runner import _run_execute_callable

    with pytest.raises(AirflowTaskTimeout) as raised:
        _run_execute_callable(ctx, op.execute, op)
    return raised.value


def test_airflows_timeout_kills_the_job_and_fails_the_process_naming_the_limit(store: Store) -> None:
    op = operator(300, execution_timeout=timedelta(seconds=3), timeout_source="the action's timeout 3s")
    started = time.monotonic()
    err = run_under_airflows_timeout(op, context(1))
    assert time.monotonic() - started < 60
    assert isinstance(err, TimeLimitExceeded), repr(err)
    assert op.job.dead()  # killed, not left running beside a FAILED row
    row = store.processes.find(TABLE, ACTION, T0)
    assert row is not None and row.status == ProcessStatus.FAILED, row
    assert "ran past its time limit of 3s (the action's timeout 3s)" in (row.failure_reason or "")
    assert store.leases.get(TABLE) is None


class Recording:
    """A submitter that records the job it was given and succeeds at once."""

    def __init__(self) -> None:
        self.jobs: list[JobSpec] = []
        self.killed = 0

    def submit(self, job: JobSpec, on_started: Any = None) -> JobResult:
        self.jobs.append(job)
        return JobResult(status="SUCCESS", summary={})

    def kill(self) -> None:
        self.killed += 1

    def kill_application(self, application_id: str) -> bool:
        return True


def test_a_refresh_job_gets_the_limit_as_timeout_seconds_and_the_protocols_stay() -> None:
    from airflow_tablemgmt.lifecycle import KillsById

    inner = Recording()
    limited = TimeLimitedSubmitter(
        inner, TimeLimit(timedelta(minutes=10), "x"), started=time.monotonic() - 60
    )
    refresh = JobSpec(table={}, catalog={}, action="refresh", options={"query": "SELECT 1"})
    limited.submit(refresh)
    limited.submit(JobSpec(table={}, catalog={}, action="rewrite-files", options={"strategy": "binpack"}))
    assert 535 <= inner.jobs[0].options["timeout_seconds"] <= 540  # what is left of the limit
    assert inner.jobs[0].options["query"] == "SELECT 1"
    assert inner.jobs[1].options == {"strategy": "binpack"}  # a maintainer's options are strict
    assert isinstance(limited, KillsById) and limited.kill_application("app") is True
