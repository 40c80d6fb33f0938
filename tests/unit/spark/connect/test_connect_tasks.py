"""Issue 36: an interrupted Connect job counts as ended only once its Spark tasks ended too, as the
server's status REST API reports them (``spark/connect/tasks.py``).

No server: the session is a stand-in that answers the settings and runs the barrier job, and the status
API is a real HTTP server on a loopback port serving what Spark 3.5's API serves (``/jobs`` with
``jobTags`` and ``stageIds``, ``/stages/<id>`` with ``numActiveTasks``). The real server's answers are
proven in tests/faults/test_connect_tasks.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_tablemgmt.spark.connect import tasks
from tests.support.status_api import StatusApiServer

SESSION = "3f0c6c8e-0000-4000-8000-000000000000"
TAG = "tms-p1-a1"
OP = "0d1c9a9e-0000-4000-8000-00000000000a"


def _tag(kind: str, value: str, session: str = SESSION) -> str:
    prefix = "SparkConnect_OperationTag" if kind == "Operation" else "SparkConnect_SessionTag"
    return f"{prefix}_User_me_Session_{session}_{kind}_{value}"


class Api:
    """What the status API answers; tests change it while the poller runs."""

    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []
        self.stages: dict[int, list[dict[str, Any]]] = {}
        self.barrier_seen_after = 0.0  # the barrier job shows up (ended) this long after it ran
        self.barrier_tag: str | None = None
        self.barrier_at: float | None = None

    def answer(self, path: str) -> tuple[int, Any]:
        base = "/api/v1/applications/app-1"
        if not path.startswith(base):
            return 404, {}
        path = path[len(base) :]
        if path == "/jobs":
            out = list(self.jobs)
            if (
                self.barrier_tag
                and self.barrier_at
                and time.monotonic() - self.barrier_at >= self.barrier_seen_after
            ):
                out.append({"jobId": 99, "status": "SUCCEEDED", "jobTags": [_tag("Tag", self.barrier_tag)],
                            "stageIds": []})  # fmt: skip
            return 200, out
        if path.startswith("/stages/"):
            sid = int(path.split("/")[2].split("?")[0])
            return (200, self.stages[sid]) if sid in self.stages else (404, {})
        return 404, {}


class Session:
    """The parts of a pyspark Connect session ``tasks_ended`` uses."""

    def __init__(self, api: Api, port: int, ui: str = "true") -> None:
        self.api = api
        self.settings = {"spark.ui.enabled": ui, "spark.ui.port": str(port), "spark.app.id": "app-1"}
        self.tags: list[str] = []

        class Client:
            _session_id = SESSION

        self.client = Client()

    def addTag(self, tag: str) -> None:  # noqa: N802 - pyspark's name
        self.tags.append(tag)

    def removeTag(self, tag: str) -> None:  # noqa: N802
        self.tags.remove(tag)

    def range(self, *args: int) -> Session:
        return self

    def collect(self) -> list[Any]:
        self.api.barrier_tag = next(t for t in self.tags if t.startswith(tasks.BARRIER_PREFIX))
        self.api.barrier_at = time.monotonic()
        return []


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Api, StatusApiServer]]:
    state = Api()

    def settings(session: Any, prefix: str) -> list[tuple[str, str]]:
        return [(k, v) for k, v in session.settings.items() if k.startswith(prefix)]

    monkeypatch.setattr("airflow_tablemgmt.spark.connect.config.conf_with_prefix", settings)
    monkeypatch.setattr(tasks, "POLL_S", 0.05)
    with StatusApiServer(answer=state.answer) as server:
        yield state, server


def test_the_status_api_is_on_the_connect_host_at_the_ui_port() -> None:
    settings = {"spark.app.id": "local-17", "spark.ui.port": "4050"}
    assert tasks.api_base("sc://spark-connect:15002/;token=x", settings) == (
        "http://spark-connect:4050/api/v1/applications/local-17"
    )
    assert tasks.api_base("sc://h:1", {"spark.app.id": "a"}) == "http://h:4040/api/v1/applications/a"
    explicit = {**settings, tasks.UI_URL_CONF: "http://ui.example:80/"}
    assert tasks.api_base("sc://h:1", explicit) == "http://ui.example:80/api/v1/applications/local-17"
    assert tasks.api_base("sc://h:1", {**settings, "spark.ui.enabled": "false"}) is None
    assert tasks.api_base("sc://h:1", {"spark.ui.port": "1"}) is None  # no application id


def test_a_job_is_ours_by_its_session_and_tag_or_operation() -> None:
    assert tasks.is_ours({"jobTags": [_tag("Tag", TAG)]}, SESSION, TAG, [])
    assert tasks.is_ours({"jobTags": [_tag("Operation", OP)]}, SESSION, TAG, [OP])
    assert not tasks.is_ours({"jobTags": [_tag("Tag", TAG, session="another")]}, SESSION, TAG, [OP])
    assert not tasks.is_ours({"jobTags": [_tag("Tag", TAG + "0")]}, SESSION, TAG, [])  # tms-p1-a10
    assert not tasks.is_ours({"jobTags": []}, SESSION, TAG, [])


def test_ended_only_once_the_cancelled_job_s_last_task_ended(api: tuple[Api, StatusApiServer]) -> None:
    state, server = api
    port = server.port
    # The job was cancelled (FAILED), but one task of its stage still writes its file.
    state.jobs = [{"jobId": 3, "status": "FAILED", "jobTags": [_tag("Tag", TAG)], "stageIds": [5, 6]}]
    state.stages = {5: [{"status": "FAILED", "numActiveTasks": 1}]}  # 6: never submitted (404)
    threading.Timer(
        0.6, lambda: state.stages.update({5: [{"status": "FAILED", "numActiveTasks": 0}]})
    ).start()
    started = time.monotonic()
    assert tasks.tasks_ended(Session(state, port), f"sc://127.0.0.1:{port}", TAG, [], started + 10) is True
    assert time.monotonic() - started >= 0.55


def test_the_store_is_read_only_after_the_barrier_job_shows_ended(api: tuple[Api, StatusApiServer]) -> None:
    state, server = api
    port = server.port
    # The listener bus lags: the job's start is not in the store yet, so it looks as if nothing ran.
    state.barrier_seen_after = 0.5
    started = time.monotonic()
    assert tasks.tasks_ended(Session(state, port), f"sc://127.0.0.1:{port}", TAG, [], started + 10) is True
    assert time.monotonic() - started >= 0.45


def test_a_running_job_or_a_deadline_is_not_an_end(api: tuple[Api, StatusApiServer]) -> None:
    state, server = api
    port = server.port
    state.jobs = [{"jobId": 3, "status": "RUNNING", "jobTags": [_tag("Operation", OP)], "stageIds": []}]
    deadline = time.monotonic() + 0.5
    assert tasks.tasks_ended(Session(state, port), f"sc://127.0.0.1:{port}", TAG, [OP], deadline) is False


def test_without_a_ui_there_is_nothing_to_ask(api: tuple[Api, StatusApiServer]) -> None:
    state, server = api
    port = server.port
    off = Session(state, port, ui="false")
    assert tasks.tasks_ended(off, f"sc://127.0.0.1:{port}", TAG, [], time.monotonic() + 5) is None
    assert server.requests == []
    # A UI of another application on that port (404 for this one's id): not this server's to ask.
    other = Session(state, port)
    other.settings["spark.app.id"] = "app-2"
    assert tasks.tasks_ended(other, f"sc://127.0.0.1:{port}", TAG, [], time.monotonic() + 5) is None


def test_the_worker_lets_its_lease_go_only_once_its_interrupted_job_is_seen_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow_tablemgmt.hooks import spark_connect
    from airflow_tablemgmt.lifecycle import ConfirmsStop

    asked: list[tuple[str, float, str | None]] = []
    seen = {"ended": False}

    def end(app: str, bound_s: float, url: str | None = None) -> bool:
        asked.append((app, bound_s, url))
        return seen["ended"]

    monkeypatch.setattr(spark_connect, "end_connect_application", end)
    hook = spark_connect.SparkConnectJobHook(url="sc://h:1")
    assert isinstance(hook, ConfirmsStop)
    assert hook.job_stopped() is True and asked == []  # no job, or one that returned cleanly
    hook._unclean = "connect:sc://h:1#s/tms-p1-a1"  # interrupted or failed
    assert hook.job_stopped() is False  # its tasks not seen to end: the lease is kept, to lapse
    assert asked == [("connect:sc://h:1#s/tms-p1-a1", spark_connect.STOP_CONFIRM_S, "sc://h:1")]
    hook._unclean = "connect:sc://h:1#s/tms-p1-a2"
    seen["ended"] = True
    assert hook.job_stopped() is True
