"""A run's cost from Spark's stage documents (``spark/cost.py``), and the Spark Connect side's read of a
server's REST status API (``spark/connect/cost.py``) against a real HTTP server serving those documents."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_tablemgmt.core.cost import RunCost
from airflow_tablemgmt.spark.connect.cost import read_cost, ui_url
from airflow_tablemgmt.spark.cost import stage_cost, stage_ids, tagged_jobs, unfinished
from airflow_tablemgmt.spark.protocol import failure_line, parse_result, success_line
from tests.support.status_api import StatusApiServer


def stage(stage_id: int, attempt: int = 0, status: str = "COMPLETE", **metrics: int) -> dict[str, Any]:
    """A ``StageData`` document as Spark 3.5's status store writes it (the fields the cost reads)."""
    base = {
        "status": status,
        "stageId": stage_id,
        "attemptId": attempt,
        "numTasks": 2,
        "numCompleteTasks": 2,
        "numFailedTasks": 0,
        "numKilledTasks": 0,
        "executorRunTime": 0,
        "executorCpuTime": 0,
        "inputBytes": 0,
        "outputBytes": 0,
        "shuffleReadBytes": 0,
        "shuffleWriteBytes": 0,
        "name": "collect at <unknown>:0",
    }
    return {**base, **metrics}


STAGES = [
    stage(0, executorRunTime=1500, executorCpuTime=900_000_000, inputBytes=4000, shuffleWriteBytes=3000),
    # A retried stage: the failed attempt cost its executors too.
    stage(
        1, 0, "FAILED", executorRunTime=200, executorCpuTime=100_000_000, numCompleteTasks=0, numFailedTasks=1
    ),
    stage(1, 1, executorRunTime=800, executorCpuTime=700_000_000, shuffleReadBytes=3000, outputBytes=2500),
    stage(2, status="SKIPPED", executorRunTime=999_999),  # never ran: not counted
]


def test_stages_sum_to_core_seconds_cpu_seconds_and_bytes() -> None:
    cost = stage_cost([*STAGES, STAGES[0]], jobs=2, scope="application", source="status-store")
    assert cost == {
        "core_seconds": 2.5,  # 1500 + 200 + 800 ms of task run time
        "cpu_seconds": 1.7,
        "bytes_read": 4000,
        "bytes_written": 2500,  # storage writes only: the shuffle's are apart
        "shuffle_read_bytes": 3000,
        "shuffle_write_bytes": 3000,
        "tasks": 4,
        "failed_tasks": 1,
        "stages": 3,  # stage 0 listed twice counts once; the skipped one not at all
        "jobs": 2,
        "scope": "application",
        "source": "status-store",
    }
    assert RunCost.parse(cost) == RunCost(2.5, 1.7, 4000, 2500)


CONNECT_TAG = "SparkConnect_SessionTag_User_u1_Session_s-1_Tag_tms-p7-a1"
JOBS = [
    {
        "jobId": 3,
        "status": "SUCCEEDED",
        "stageIds": [0, 1],
        "jobTags": ["SparkConnect_OperationTag_User_u1_Session_s-1_Operation_o1", CONNECT_TAG],
    },
    {"jobId": 4, "status": "SUCCEEDED", "stageIds": [2], "jobTags": [CONNECT_TAG]},
    # Another job of the same session (an earlier task's tag), and one of another session.
    {
        "jobId": 5,
        "status": "SUCCEEDED",
        "stageIds": [5],
        "jobTags": ["SparkConnect_SessionTag_User_u1_Session_s-1_Tag_tms-p6-a1"],
    },
    {
        "jobId": 6,
        "status": "RUNNING",
        "stageIds": [6],
        "jobTags": ["SparkConnect_SessionTag_User_u1_Session_s-2_Tag_tms-p7-a1"],
    },
]


def test_the_jobs_of_a_tag_and_their_stages() -> None:
    mine = tagged_jobs(JOBS, "Session_s-1_Tag_tms-p7-a1")
    assert [j["jobId"] for j in mine] == [3, 4]
    assert stage_ids(mine) == {0, 1, 2}
    assert unfinished(mine) == [] and unfinished(JOBS) == [6]
    # A classic session's own tag is the tag itself.
    assert [j["jobId"] for j in tagged_jobs([{"jobId": 1, "jobTags": ["tms-cost-p1"]}], "tms-cost-p1")] == [1]


def test_a_failed_run_carries_its_cost_beside_its_error() -> None:
    cost = stage_cost(STAGES, jobs=1, scope="application", source="status-store")
    failed = parse_result([failure_line("rewrite-files", "lake.db.t", "Boom", "it broke", cost=cost)])
    assert not failed.ok and failed.cost == cost
    ok = parse_result([success_line("rewrite-files", "lake.db.t", {"cost": cost, "before": {}})])
    assert ok.ok and ok.cost == cost
    assert parse_result([failure_line("x", "lake.db.t", "Boom", "e")]).cost is None


@pytest.fixture
def server() -> Iterator[StatusApiServer]:
    """Spark's REST status API for application ``app-1``: its jobs, and each stage's attempts."""
    prefix = "/api/v1/applications/app-1"
    documents: dict[str, Any] = {f"{prefix}/jobs": JOBS}
    for attempt in STAGES:
        documents.setdefault(f"{prefix}/stages/{attempt['stageId']}", []).append(attempt)
    with StatusApiServer(documents) as api:
        yield api


@pytest.fixture
def ui(server: StatusApiServer) -> str:
    return server.url


def test_a_connect_job_cost_is_its_tagged_jobs_stages(ui: str, server: StatusApiServer) -> None:
    cost = read_cost(ui, "app-1", "Session_s-1_Tag_tms-p7-a1", settle_s=0)
    assert cost is not None
    assert (cost["core_seconds"], cost["stages"], cost["jobs"], cost["scope"]) == (2.5, 3, 2, "operations")
    assert not any("/stages/5" in r or "/stages/6" in r for r in server.requests)  # other jobs' stages unread


def test_a_read_after_the_job_looks_once_more_for_a_job_the_store_did_not_list_yet() -> None:
    """A batch's read after the job asks at once (no first wait): when the server's store has not listed
    the job yet, it asks again after one pause instead of answering with no jobs."""
    prefix = "/api/v1/applications/app-1"
    lists = []
    documents: dict[str, Any] = {}
    for attempt in STAGES:
        documents.setdefault(f"{prefix}/stages/{attempt['stageId']}", []).append(attempt)

    def answer(path: str) -> tuple[int, Any]:
        if path == f"{prefix}/jobs":
            lists.append(path)
            return 200, (JOBS[2:] if len(lists) == 1 else JOBS)  # the first list lags behind the answer
        return (200, documents[path.split("?")[0]]) if path.split("?")[0] in documents else (404, {})

    with StatusApiServer(answer=answer) as api:
        tag = "Session_s-1_Tag_tms-p7-a1"
        cost = read_cost(api.url, "app-1", tag, settle_s=0, poll=0.01, look_again=True)
        assert cost is not None and cost["jobs"] == 2 and len(lists) == 2
        lists.clear()
        assert read_cost(api.url, "app-1", tag, settle_s=0)["jobs"] == 0  # type: ignore[index] - at once


def test_another_applications_ui_or_no_ui_gives_no_cost(ui: str) -> None:
    assert read_cost(ui, "app-2", "Session_s-1_Tag_tms-p7-a1", settle_s=0) is None
    assert read_cost("http://127.0.0.1:9", "app-1", "x", settle_s=0) is None  # nothing listens


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


class _Session:
    def __init__(self, values: dict[str, str]) -> None:
        self.conf = _Conf(values)


def test_where_the_servers_ui_is() -> None:
    assert (
        ui_url(_Session({"spark.ui.port": "4050"}), "sc://spark-connect:15002/;token=x")
        == "http://spark-connect:4050"
    )
    assert ui_url(_Session({}), "sc://h:15002") == "http://h:4040"
    assert ui_url(_Session({"spark.ui.enabled": "false"}), "sc://h:15002") is None
    published = {"spark.tablemgmt.ui.url": "https://ui.example/spark/", "spark.ui.enabled": "false"}
    assert ui_url(_Session(published), "sc://h:15002") == "https://ui.example/spark"


def test_the_connect_server_serves_its_status_api_read_only_when_asked() -> None:
    from airflow_tablemgmt.spark.connect.server import ServerSpec

    on = ServerSpec(connect_jar="/j/c.jar", port=15010, ui_port=15011).settings()
    assert (on["spark.ui.enabled"], on["spark.ui.port"], on["spark.ui.killEnabled"]) == (
        "true",
        "15011",
        "false",
    )
    assert ServerSpec(connect_jar="/j/c.jar", port=15010).settings()["spark.ui.enabled"] == "false"
    # Its SQL pages show each session's settings: a catalog's secrets are redacted by the project's rule.
    redact = re.compile(on["spark.redaction.regex"])
    for key in (
        "spark.sql.catalog.lake.credential",
        "spark.sql.catalog.lake.s3.secret-access-key",
        "jdbc.password",
    ):
        assert redact.search(key), key
    assert not redact.search("spark.sql.catalog.lake.warehouse")
