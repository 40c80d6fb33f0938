"""A Spark Connect job's cost: the stages of the server's jobs that carry the job's operation tag, read
from the server's REST status API (``spark/cost.py`` sums them).

Spark 3.5's Connect server runs every operation's Spark jobs with job tags: the operation's own
(``SparkConnect_OperationTag_User_<u>_Session_<s>_Operation_<op>``) and one per tag the client added
(``SparkConnect_SessionTag_User_<u>_Session_<s>_Tag_<tag>``); the job's own ``tms-p<process>-a<attempt>``
(``session.py``) is one of those, so the jobs with a tag ending ``_Session_<session>_Tag_<tag>`` are
exactly this job's. The server's status store lists them with their ``jobTags`` and ``stageIds``
(``/api/v1/applications/<app>/jobs``, Spark 3.5) and each stage's summed task metrics
(``/stages/<id>``). The API is the server's web UI: a server started with ``spark.ui.enabled=false``
has none, and the job's cost is then not measured (said once in the log, never guessed).

Where the UI is: ``spark.tablemgmt.ui.url`` in the server's settings when it set one (a container that
publishes its UI elsewhere), else ``http://<the sc:// host>:<spark.ui.port, default 4040>``. The answer's
application id must be the server's own (``spark.app.id``): a UI of another application on that port is
never read as this job's.

A batch's kept session follows the server's jobs in a :class:`~airflow_tablemgmt.spark.connect.job_index.JobIndex`
(its ``facts``): the whole list once, then only the jobs past the last one seen (``job_index.py`` says why).
"""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlsplit

from airflow_tablemgmt.spark.connect.job_index import JobIndex
from airflow_tablemgmt.spark.connect.ui_http import get_json
from airflow_tablemgmt.spark.cost import stage_cost, stage_ids, tagged_jobs, unfinished

log = logging.getLogger(__name__)

UI_URL_CONF = "spark.tablemgmt.ui.url"
#: How long the reader waits for the server's store to see the job's last jobs end.
SETTLE_S = 10.0
#: The most the whole read may take (the UI's first REST request starts its Jersey application: seconds on
#: a loaded host, 5 s measured too short at a load of 26 on 2 cores).
BUDGET_S = 45.0
#: How often the reader asks again while the server's store still has one of the job's jobs running (its
#: listener bus lags the job's end by milliseconds: a small table's job should not wait much longer).
SETTLE_POLL_S = 0.05
#: A read after the job, off the jobs' path (a batch's: ``session._measure``) asks at once: by the time the
#: client has the procedure's answer, its Spark jobs ended before its commit, and the server's store has
#: almost always seen them end (a first wait of 0.1 s, kept until 2026-11-29, was a batch's last table's
#: 0.1 s at its end). It asks again less often than a read on the jobs' path (each ask is work the server's
#: driver does beside the next job's procedure), and a job it does not find listed is looked for once more
#: after one such pause (the store's listener may lag; a procedure that ran no Spark job pays that pause).
LATER_POLL_S = 0.15


def ui_url(session: Any, url: str) -> str | None:
    """Where the server's REST status API is, from its own settings; None when its UI is off."""
    conf = session.conf
    explicit = conf.get(UI_URL_CONF, None)
    if explicit:
        return str(explicit).rstrip("/")
    if str(conf.get("spark.ui.enabled", "true")).lower() == "false":
        return None
    host = urlsplit(url.replace("sc://", "http://", 1).split(";", 1)[0]).hostname or "127.0.0.1"
    port = int(str(conf.get("spark.ui.port", "4040")))
    return f"http://{host}:{port}"


def _get(url: str, deadline: float) -> Any:
    """The status API's JSON at ``url`` on a kept-alive connection (``ui_http.py``: a batch's reads beside
    the next table's procedure cost the server's driver no connection set-up each)."""
    return get_json(url, deadline)


def connect_cost(
    session: Any, url: str, session_id: str, tag: str, facts: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """The cost document of the job tagged ``tag`` on ``session`` (its server at ``url``); None when the
    server has no status API or it could not be read. ``facts``: where the server's UI and application id
    are kept once asked (a batch's kept session asks once for all its jobs, ``kept.py``; they change only
    with the server, whose restart ends the session)."""
    read = cost_reader(session, url, session_id, tag, facts)
    return read() if read is not None else None


def cost_reader(
    session: Any,
    url: str,
    session_id: str,
    tag: str,
    facts: dict[str, Any] | None = None,
    later: bool = False,
) -> Callable[[], dict[str, Any] | None] | None:
    """:func:`connect_cost` in two steps: what the server's settings say is asked now, on ``session``; the
    returned call reads the status API (no session: any thread, after the session went on to another job;
    ``later``: as a read after the job, :data:`LATER_POLL_S`). None when there is
    nothing to read (the UI off, the settings unreadable). With ``facts`` (a kept session's) the server's
    jobs are followed in one :class:`JobIndex` kept there for all the session's jobs."""
    kept = facts is not None  # a kept session's: its jobs followed in one index (job_index.py)
    facts = {} if facts is None else facts
    try:
        if "ui" not in facts:
            base = ui_url(session, url)
            app = str(session.conf.get("spark.app.id")) if base is not None else None
            facts.update(ui=base, app=app)
        base, app = facts["ui"], facts["app"]
        if base is None:
            log.info(
                "the Spark Connect server's UI is off (spark.ui.enabled=false): the job's cost is not measured"
            )
            return None
    except Exception as e:  # noqa: BLE001 - a cost never fails a job
        log.warning(
            "the Spark Connect server's settings could not be read for the job's cost: %s", str(e)[:300]
        )
        return None
    suffix = f"Session_{session_id}_Tag_{tag}"
    index = facts.setdefault("jobs", JobIndex()) if kept else None
    if later:
        return lambda: read_cost(base, app, suffix, poll=LATER_POLL_S, index=index, look_again=True)
    return lambda: read_cost(base, app, suffix, index=index)


def read_cost(
    base: str,
    app: str,
    tag_suffix: str,
    settle_s: float = SETTLE_S,
    *,
    look_again: bool = False,
    poll: float = SETTLE_POLL_S,
    index: JobIndex | None = None,
) -> dict[str, Any] | None:
    """Read the jobs tagged ``…_<tag_suffix>`` of application ``app`` at the UI ``base`` and sum their
    stages; waits (at most ``settle_s``) until the server's store has none of them running. ``index``: the
    server's jobs as a kept session follows them (asked past the last one seen, not listed in full).
    ``look_again``: a job not listed at the first ask is looked for once more after ``poll``."""
    api = f"{base}/api/v1/applications/{quote(app, safe='')}"
    started = time.monotonic()
    settled, deadline = started + settle_s, started + BUDGET_S

    def get(url: str) -> Any:
        return _get(url, deadline)

    def mine(job: Any) -> bool:
        return bool(tagged_jobs([job], tag_suffix))

    try:
        while True:
            listed = index.list_requests if index is not None else 0
            listing = index.jobs(get, api, mine) if index is not None else get(f"{api}/jobs")
            jobs = tagged_jobs(listing, tag_suffix)
            if not jobs and look_again:  # not listed yet: the store may lag behind the procedure's answer
                look_again = False
                time.sleep(poll)
                continue
            if not jobs and index is not None and index.list_requests == listed:
                # none of its jobs past the last one seen: the whole list, as a read without an index makes
                jobs = tagged_jobs(index.relist(get, api), tag_suffix)
            if not unfinished(jobs) or time.monotonic() >= min(settled, deadline):
                break
            time.sleep(poll)
        if unfinished(jobs):
            log.warning(
                "jobs %s still running on the server: the job's cost may miss their last tasks",
                unfinished(jobs),
            )
        stages: list[dict[str, Any]] = []
        for stage in sorted(stage_ids(jobs)):
            stages.extend(_get(f"{api}/stages/{stage}?details=false", deadline))
    except urllib.error.HTTPError as e:
        if e.code == 404:  # not this application's UI, or a stage the store no longer keeps
            log.warning(
                "the Spark UI at %s does not know application %s (%s): no cost measured", base, app, e
            )
        else:
            log.warning("reading the job's cost from %s failed: %s", base, e)
        return None
    except (OSError, ValueError) as e:
        log.warning("reading the job's cost from %s failed: %s", base, str(e)[:300])
        return None
    return stage_cost(stages, jobs=len(jobs), scope="operations", source="connect-rest")
