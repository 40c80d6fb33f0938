"""A kept session's cost reads follow the server's jobs past the last one seen (``spark/connect/job_index.py``)
instead of listing every retained job at each read, against a real HTTP server serving Spark 3.5's status
API documents (``/jobs``, ``/jobs/<id>``, ``/stages/<id>``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from airflow_tablemgmt.spark.connect.cost import cost_reader
from airflow_tablemgmt.spark.connect.job_index import JobIndex

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


class _Server(BaseHTTPRequestHandler):
    """The server's store: ``jobs`` by id (what ``/jobs`` lists, newest first as Spark does)."""

    jobs: dict[int, dict[str, Any]] = {}
    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        cls = type(self)
        cls.requests.append(self.path)
        body: Any = None
        if self.path == f"{PREFIX}/jobs":
            body = [cls.jobs[i] for i in sorted(cls.jobs, reverse=True)]
        elif self.path.startswith(f"{PREFIX}/jobs/"):
            body = cls.jobs.get(int(self.path[len(PREFIX) + 6 :]))
        elif self.path.startswith(f"{PREFIX}/stages/"):
            sid = int(self.path[len(PREFIX) + 8 :].split("?")[0])
            body = [stage(sid)] if any(sid in j["stageIds"] for j in cls.jobs.values()) else None
        if body is None:
            self.send_error(404, "unknown")
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def ui() -> Iterator[str]:
    _Server.jobs = {i: job(i, 1) for i in range(50)}  # a server that ran 50 jobs of an earlier process
    _Server.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


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


def test_a_kept_sessions_reads_list_the_jobs_once_then_ask_only_the_jobs_past_the_last_seen(ui: str) -> None:
    facts: dict[str, Any] = {}
    _Server.jobs.update({50: job(50, 2), 51: job(51, 2)})
    first = read(ui, facts, 2)
    assert first is not None and first["jobs"] == 2 and first["core_seconds"] == 2.0
    assert _Server.requests.count(f"{PREFIX}/jobs") == 1

    for process, ids in ((3, (52, 53, 54)), (4, (55,))):  # the session's next jobs, one table each
        _Server.requests = []
        _Server.jobs.update({i: job(i, process) for i in ids})
        cost = read(ui, facts, process)
        assert cost is not None and cost["jobs"] == len(ids) and cost["stages"] == len(ids)
        asked = [r for r in _Server.requests if "/jobs" in r]
        assert f"{PREFIX}/jobs" not in asked  # the whole list is not read again (it was, at every read)
        assert {f"{PREFIX}/jobs/{i}" for i in ids} <= set(asked)
        assert len(asked) <= len(ids) + 2  # the new jobs and the two ids past them, nothing older
    # a read without a kept session's facts lists the jobs as before
    _Server.requests = []
    assert read(ui, None, 4) is not None and _Server.requests.count(f"{PREFIX}/jobs") == 1


def test_a_job_running_at_the_read_is_asked_again_until_it_ends(ui: str) -> None:
    facts: dict[str, Any] = {}
    assert read(ui, facts, 1) is not None  # the list read once
    _Server.jobs[50] = job(50, 2, status="RUNNING")
    index: JobIndex = facts["jobs"]

    def get(url: str) -> Any:
        import time

        from airflow_tablemgmt.spark.connect.cost import _get

        return _get(url, time.monotonic() + 30)

    running = index.jobs(get, f"{ui}{PREFIX}")
    assert [j["status"] for j in running if j["jobId"] == 50] == ["RUNNING"]
    _Server.jobs[50] = job(50, 2)
    _Server.requests = []
    assert [j["status"] for j in index.jobs(get, f"{ui}{PREFIX}") if j["jobId"] == 50] == ["SUCCEEDED"]
    assert f"{PREFIX}/jobs/50" in _Server.requests and f"{PREFIX}/jobs/49" not in _Server.requests
    # another session's job still running is not asked again at each of this session's reads
    _Server.jobs[51] = job(51, 9, status="RUNNING", session="s-2")
    assert (read(ui, facts, 2) or {}).get("jobs") == 1
    _Server.requests = []
    assert (read(ui, facts, 2) or {}).get("jobs") == 1
    assert f"{PREFIX}/jobs/51" not in _Server.requests


def test_jobs_the_store_learns_of_out_of_order_or_late_are_still_found(ui: str) -> None:
    facts: dict[str, Any] = {}
    assert read(ui, facts, 1) is not None
    # job 51 (this table's) is in the store, job 50 (another session's, submitted at once) not yet
    _Server.jobs[51] = job(51, 2)
    assert (read(ui, facts, 2) or {})["jobs"] == 1
    _Server.jobs[50] = job(50, 3, session="s-1")  # it arrives late; then this session's next job
    _Server.jobs[52] = job(52, 3)
    cost = read(ui, facts, 3)
    assert cost is not None and cost["jobs"] == 2  # 50 asked again and found, 52 past the top

    # ids past two missing ones: not reached by asking past the top; the read that finds none of its
    # jobs lists them all once, as a read without an index does
    _Server.jobs[55] = job(55, 4)
    _Server.requests = []
    cost = read(ui, facts, 4)
    assert cost is not None and cost["jobs"] == 1
    assert _Server.requests.count(f"{PREFIX}/jobs") == 1 and facts["jobs"].top == 55
