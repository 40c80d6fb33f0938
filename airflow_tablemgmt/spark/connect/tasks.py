"""Whether a Connect job's Spark *tasks* have ended, not only its operations.

An operation the server reports ended (``operations.py``) is one whose execution thread ended. Its Spark
jobs' tasks may not have: an interrupt cancels the operation's Spark jobs, the scheduler marks them failed
at once (which ends the thread) and asks the executors to kill their running tasks, and a task that does not
look at its kill flag while it works -- one writing a data file -- runs on and finishes its file (measured:
an interrupted compaction's task wrote a data file after the next job on the table had started, 2 of 49
fault rounds). Spark 3.5's Connect API reports no jobs or tasks; the server's status REST API (its UI) does:

* ``/api/v1/applications/<app>/jobs`` lists every job with its ``jobTags``: the Connect server tags each
  Spark job of an operation with the operation's id and with the client's tags, each with the user and
  session (``SparkConnect_OperationTag_User_<user>_Session_<session>_Operation_<id>`` and ``..._Tag_<tag>``);
* ``/stages/<id>`` gives each attempt of a stage its ``numActiveTasks``, which falls only when a task's end
  reaches the driver, after the task wrote its file.

The status store is filled by the driver's listener bus, asynchronously. Its events are processed in the
order they were posted, so :func:`tasks_ended` first runs a *barrier* -- one tiny Spark job tagged with a
tag of its own -- and reads the store only once that job shows as ended: every event posted before it (the
job's own jobs' starts and their tasks' starts) is then in the store. Only then are the tagged jobs and
their stages' active tasks counted, until none is left.

Where the server's UI is off (``spark.ui.enabled=false``) there is nothing to ask: :func:`tasks_ended`
answers None and the caller says so. The servers this project starts keep the UI on (``server.py``).
pyspark is imported inside functions only (through the session).
"""

from __future__ import annotations

import logging
import time
import urllib.error
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from airflow_tablemgmt.spark.connect.ui_http import get_json

log = logging.getLogger(__name__)

UI_ENABLED = "spark.ui.enabled"
UI_PORT = "spark.ui.port"
APP_ID = "spark.app.id"
#: Where the server's UI is when not on its ``sc://`` host (the setting ``spark/connect/cost.py`` reads too).
UI_URL_CONF = "spark.tablemgmt.ui.url"
#: Spark's default UI port (a server started with another sets ``spark.ui.port``; this project's do).
DEFAULT_UI_PORT = "4040"
POLL_S = 0.25
#: The longest one REST request may take (the API's first request on a busy server loads its web
#: framework: 24 s measured at load 26; later ones take milliseconds). A request that times out is made
#: again while the caller's deadline lasts.
REQUEST_TIMEOUT_S = 30.0
BARRIER_PREFIX = "tms-barrier-"
_RUNNING = ("RUNNING", "UNKNOWN")


@dataclass(frozen=True)
class StatusApi:
    """The status REST API of one Connect server's application."""

    base: str  # http://host:port/api/v1/applications/<app id>

    def get(self, path: str, timeout: float = REQUEST_TIMEOUT_S) -> Any:
        """The JSON at ``path`` on a kept-alive connection (``ui_http.py``); an answer of 400 or more raises
        ``urllib.error.HTTPError``, no answer in ``timeout`` a ``TimeoutError``."""
        return get_json(self.base + path, time.monotonic() + timeout)


def api_base(connect_url: str, settings: dict[str, str]) -> str | None:
    """The status API's base URL for the server at ``connect_url`` whose application ``settings`` (its
    ``spark.ui.*``, ``spark.app.id`` and :data:`UI_URL_CONF`) are given; None when its UI is off or it
    has no application id. The UI is at :data:`UI_URL_CONF` when the server set one (a container that
    publishes its UI elsewhere), else at the ``sc://`` host on ``spark.ui.port`` (default 4040)."""
    if settings.get(UI_ENABLED, "true").strip().lower() == "false":
        return None
    app = settings.get(APP_ID)
    if not app:
        return None
    explicit = settings.get(UI_URL_CONF)
    if explicit:
        return f"{explicit.rstrip('/')}/api/v1/applications/{quote(app, safe='')}"
    host = urlsplit(connect_url.split("/;", 1)[0].replace("sc://", "http://", 1)).hostname
    if not host:
        return None
    port = settings.get(UI_PORT, DEFAULT_UI_PORT)
    return f"http://{host}:{port}/api/v1/applications/{quote(app, safe='')}"


def status_api(session: Any, connect_url: str) -> StatusApi | None:
    """The status API of the server ``session`` is on (None when it cannot be asked: UI off)."""
    from airflow_tablemgmt.spark.connect.config import conf_with_prefix

    settings = dict(conf_with_prefix(session, "spark.ui."))
    settings.update(conf_with_prefix(session, APP_ID))
    settings.update(conf_with_prefix(session, UI_URL_CONF))
    base = api_base(connect_url, settings)
    return StatusApi(base) if base is not None else None


def is_ours(job: dict[str, Any], session_id: str, tag: str, operations: list[str]) -> bool:
    """Whether the Spark job ``job`` (a ``/jobs`` entry) ran for the Connect job ``tag`` of ``session_id``:
    one of its tags names that session and the tag, or one of the job's operations."""
    for t in job.get("jobTags") or ():
        if f"_Session_{session_id}_" not in t:
            continue
        if t.endswith(f"_Tag_{tag}") or any(t.endswith(f"_Operation_{op}") for op in operations):
            return True
    return False


def active_tasks(
    api: StatusApi, jobs: list[dict[str, Any]], timeout: float = REQUEST_TIMEOUT_S
) -> tuple[int, int]:
    """``(running jobs, active tasks)`` among ``jobs`` (from ``/jobs``) and their stages, as the store says."""
    running = sum(1 for j in jobs if j.get("status") in _RUNNING)
    tasks = 0
    for stage_id in sorted({s for j in jobs for s in j.get("stageIds") or ()}):
        try:
            attempts = api.get(f"/stages/{stage_id}?details=false", timeout)
        except urllib.error.HTTPError as e:
            if e.code == 404:  # never submitted (skipped), or evicted from the store: no task of it runs
                continue
            raise
        for attempt in attempts if isinstance(attempts, list) else [attempts]:
            tasks += int(attempt.get("numActiveTasks") or 0)
            if attempt.get("status") == "ACTIVE":
                tasks += 0 if attempt.get("numActiveTasks") else 1  # submitted, its tasks not yet seen
    return running, tasks


def unreachable(e: BaseException) -> bool:
    """An answer that says the status API is not there to ask (nothing listens on the port, another
    application's UI, a UI behind authentication), as against one that failed this time."""
    if isinstance(e, urllib.error.HTTPError):
        return e.code in (401, 403, 404)
    reason = getattr(e, "reason", e)
    return isinstance(reason, ConnectionRefusedError) or isinstance(e, ConnectionRefusedError)


def timed_out(e: BaseException) -> bool:
    """A request that got no answer in time (a busy server), as against one that was answered."""
    reason = getattr(e, "reason", e)
    return isinstance(reason, TimeoutError) or isinstance(e, TimeoutError)


def run_barrier(session: Any) -> str:
    """One tiny Spark job on ``session``'s server, tagged with a tag of its own (returned)."""
    tag = f"{BARRIER_PREFIX}{uuid.uuid4().hex[:16]}"
    session.addTag(tag)
    try:
        session.range(0, 2, 1, 2).collect()
    finally:
        session.removeTag(tag)
    return tag


def tasks_ended(
    session: Any, connect_url: str, tag: str, operations: list[str], deadline: float
) -> bool | None:
    """Wait until no Spark job of the Connect job ``tag`` (of ``session``'s server-side session) runs and
    none of their stages has a task still active: True; False when ``deadline`` (monotonic) passed first or
    the server's status API failed; None when the server cannot be asked (its UI is off)."""
    session_id = session.client._session_id  # noqa: SLF001 - the server-side session the job ran in
    try:
        api = status_api(session, connect_url)
    except Exception as e:  # noqa: BLE001 - a server that cannot answer its settings cannot be observed
        log.warning("could not read the Connect server's status API settings: %s", str(e)[:300])
        return False
    if api is None:
        return None
    try:
        barrier = run_barrier(session)
    except Exception as e:  # noqa: BLE001
        log.warning("the status barrier job on the Connect server failed: %s", str(e)[:300])
        return False
    seen_barrier = False
    while True:
        timeout = max(1.0, min(REQUEST_TIMEOUT_S, deadline - time.monotonic()))
        try:
            jobs = api.get("/jobs", timeout)
            if not seen_barrier:
                mine = [j for j in jobs if any(t.endswith(f"_Tag_{barrier}") for t in j.get("jobTags") or ())]
                seen_barrier = bool(mine) and all(j.get("status") not in _RUNNING for j in mine)
            if seen_barrier:
                ours = [j for j in jobs if is_ours(j, session_id, tag, operations)]
                running, tasks = active_tasks(api, ours, timeout)
                if running == 0 and tasks == 0:
                    log.info("%s: %d Spark job(s) ended, no task left active", tag, len(ours))
                    return True
                log.debug("%s: %d Spark job(s) running, %d task(s) active", tag, running, tasks)
        except (OSError, ValueError) as e:  # urllib's errors are OSErrors; a body that is not JSON
            if timed_out(e):
                log.info("the Connect server's status API at %s was slow to answer; asking again", api.base)
                if time.monotonic() + POLL_S > deadline:
                    return False
                continue
            if unreachable(e):
                log.warning("the Connect server's status API is not at %s (%s)", api.base, str(e)[:300])
                return None
            log.warning("the Connect server's status API at %s failed: %s", api.base, str(e)[:300])
            return False
        if time.monotonic() + POLL_S > deadline:
            return False
        time.sleep(POLL_S)


__all__ = ["StatusApi", "api_base", "is_ours", "status_api", "tasks_ended"]
