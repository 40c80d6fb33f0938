"""A kept session's cost reads follow the server's jobs past the last one seen (``spark/connect/job_index.py``)
instead of listing every retained job at each read, against a real HTTP server serving Spark 3.5's status
API documents (``/jobs``, ``/jobs/<id>``, ``/stages/<id>``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from airflow_tablemgmt.spark.connect.cost import cost_reader
from airflow_tablemgmt.spark.connect.job_index import JobIndex
from tests.support.status_api import StatusApiServer

APP = "app-1"
PREFIX = f"/api/v1/applications/{APP}"


def tag(process: int, session: str = "s-1") -> str:
    return f"SparkConnect_SessionTag_User_u1_Session_{session}_Tag_tms-p{process}-a1"


def job(job_id: int, process: int, status: str = "SUCCEEDED", session: str = "s-1") -> dict[str, Any]:
    return {"jobId": job_id, "status": status, "stageIds": [job_id], "jobTags": [tag(process, session)]}


def stage(stage_id: int) -> dict[str, Any]:
    return {
        "stageId": stage_id,
        "attemptId": 0,
        "status": "COMPLETE",
        "executorRunTime": 1000,
        "numCompleteTasks": 1,
    }


class _Store:
    """The server's store: ``jobs`` by id (what ``/jobs`` lists, newest first as Spark does)."""

    def __init__(self) -> None:
        self.jobs: dict[int, dict[str, Any]] = {
            i: job(i, 1) for i in range(50)
        }  # a server that ran 50 jobs of an earlier process

    def answer(self, path: str) -> tuple[int, Any]:
        body: Any = None
        if path == f"{PREFIX}/jobs":
            body = [self.jobs[i] for i in sorted(self.jobs, reverse=True)]
        elif path.startswith(f"{PREFIX}/jobs/"):
            body = self.jobs.get(int(path[len(PREFIX) + 6 :]))
        elif path.startswith(f"{PREFIX}/stages/"):
            sid = int(path[len(PREFIX) + 8 :].split("?")[0])
            body = [stage(sid)] if any(sid in j["stageIds"] for j in self.jobs.values()) else None
        return (404, {"message": "unknown"}) if body is None else (200, body)


@pytest.fixture
def store() -> _Store:
    return _Store()


@pytest.fixture
def server(store: _Store) -> Iterator[StatusApiServer]:
    with StatusApiServer(answer=store.answer) as api:
        yield api


@pytest.fixture
def ui(server: StatusApiServer) -> str:
    return server.url


class _Session:
    """What ``cost_reader`` asks a session: where the UI is and the server's application id."""

    def __init__(self, ui: str) -> None:
        self.conf = self
        self.values = {"spark.tablemgmt.ui.url": ui, "spark.app.id": APP}

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


def read(ui: str, facts: dict[str, Any] | None, process: int) -> dict[str, Any] | None:
    reader = cost_reader(_Session(ui), "sc://h:15002", "s-1", f"tms-p{process}-a1", facts=facts)
    assert reader is not None
    return reader()


def test_a_kept_sessions_reads_list_the_jobs_once_then_ask_only_the_jobs_past_the_last_seen(
    ui: str, store: _Store, server: StatusApiServer
) -> None:
    facts: dict[str, Any] = {}
    store.jobs.update({50: job(50, 2), 51: job(51, 2)})
    first = read(ui, facts, 2)
    assert first is not None and first["jobs"] == 2 and first["core_seconds"] == 2.0
    assert server.requests.count(f"{PREFIX}/jobs") == 1

    for process, ids in ((3, (52, 53, 54)), (4, (55,))):  # the session's next jobs, one table each
        server.requests.clear()
        store.jobs.update({i: job(i, process) for i in ids})
        cost = read(ui, facts, process)
        assert cost is not None and cost["jobs"] == len(ids) and cost["stages"] == len(ids)
        asked = [r for r in server.requests if "/jobs" in r]
        assert f"{PREFIX}/jobs" not in asked  # the whole list is not read again (it was, at every read)
        assert {f"{PREFIX}/jobs/{i}" for i in ids} <= set(asked)
        assert len(asked) <= len(ids) + 2  # the new jobs and the two ids past them, nothing older
    # a read without a kept session's facts lists the jobs as before
    server.requests.clear()
    assert read(ui, None, 4) is not None and server.requests.count(f"{PREFIX}/jobs") == 1


def test_a_job_running_at_the_read_is_asked_again_until_it_ends(
    ui: str, store: _Store, server: StatusApiServer
) -> None:
    facts: dict[str, Any] = {}
    assert read(ui, facts, 1) is not None  # the list read once
    store.jobs[50] = job(50, 2, status="RUNNING")
    index: JobIndex = facts["jobs"]

    def get(url: str) -> Any:
        import time

        from airflow_tablemgmt.spark.connect.cost import _get

        return _get(url, time.monotonic() + 30)

    running = index.jobs(get, f"{ui}{PREFIX}")
    assert [j["status"] for j in running if j["jobId"] == 50] == ["RUNNING"]
    store.jobs[50] = job(50, 2)
    server.requests.clear()
    assert [j["status"] for j in index.jobs(get, f"{ui}{PREFIX}") if j["jobId"] == 50] == ["SUCCEEDED"]
    assert f"{PREFIX}/jobs/50" in server.requests and f"{PREFIX}/jobs/49" not in server.requests
    # another session's job still running is not asked again at each of this session's reads
    store.jobs[51] = job(51, 9, status="RUNNING", session="s-2")
    assert (read(ui, facts, 2) or {}).get("jobs") == 1
    server.requests.clear()
    assert (read(ui, facts, 2) or {}).get("jobs") == 1
    assert f"{PREFIX}/jobs/51" not in server.requests


def test_jobs_the_store_learns_of_out_of_order_or_late_are_still_found(
    ui: str, store: _Store, server: StatusApiServer
) -> None:
    facts: dict[str, Any] = {}
    assert read(ui, facts, 1) is not None
    # job 51 (this table's) is in the store, job 50 (another session's, submitted at once) not yet
    store.jobs[51] = job(51, 2)
    assert (read(ui, facts, 2) or {})["jobs"] == 1
    store.jobs[50] = job(50, 3, session="s-1")  # it arrives late; then this session's next job
    store.jobs[52] = job(52, 3)
    cost = read(ui, facts, 3)
    assert cost is not None and cost["jobs"] == 2  # 50 asked again and found, 52 past the top

    # ids past two missing ones: not reached by asking past the top; the read that finds none of its
    # jobs lists them all once, as a read without an index does
    store.jobs[55] = job(55, 4)
    server.requests.clear()
    cost = read(ui, facts, 4)
    assert cost is not None and cost["jobs"] == 1
    assert server.requests.count(f"{PREFIX}/jobs") == 1 and facts["jobs"].top == 55
