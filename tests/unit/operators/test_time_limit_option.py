"""The refresh job's wall clock has one option name: what the task side's ``TimeLimitedSubmitter`` puts
in a refresh job's options is what the driver's ``parse_options`` reads (``core.query_policy
.TIMEOUT_OPTION``), and operators/time_limit.py names no option of its own that could drift from it."""

from __future__ import annotations

import ast
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.query_policy import TIMEOUT_OPTION
from airflow_tablemgmt.core.time_limits import TimeLimit
from airflow_tablemgmt.operators import time_limit
from airflow_tablemgmt.spark.protocol import JobResult


class Recording:
    def __init__(self) -> None:
        self.jobs: list[JobSpec] = []

    def submit(self, job: JobSpec, on_started: Any = None) -> JobResult:
        self.jobs.append(job)
        return JobResult(status="SUCCESS", summary={})

    def kill(self) -> None:
        pass


def test_the_limit_handed_to_a_refresh_job_is_the_one_its_driver_reads() -> None:
    from airflow_tablemgmt.spark.job.refresh_query import parse_options

    inner = Recording()
    limited = time_limit.TimeLimitedSubmitter(
        inner, TimeLimit(timedelta(minutes=10), "x"), started=time.monotonic() - 60
    )
    options = {"mode": "create", "query": "SELECT 1 AS x"}
    limited.submit(JobSpec(table={}, catalog={}, action="refresh", options=options))
    parsed = parse_options(dict(inner.jobs[0].options))
    assert parsed.timeout_seconds is not None and 535 <= parsed.timeout_seconds <= 540


def test_operators_time_limit_defines_no_option_name_of_its_own() -> None:
    source = Path(time_limit.__file__).read_text()
    assigned = {
        target.id
        for node in ast.parse(source).body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    assert "TIMEOUT_OPTION" not in assigned and not any(
        '"timeout_seconds"' in line for line in source.splitlines()
    )
    assert time_limit.TIMEOUT_OPTION is TIMEOUT_OPTION
