"""Issue 40: a planned batch's Connect jobs on the session the batch keeps (spark/connect/kept.py), and the
client-side hang that reusing sessions in one process showed (a batch stopped at its 11th table).

No server: pyspark's client is built against an address nothing listens on (building it sends nothing);
the hook's job runner is replaced where a test needs a result."""

from __future__ import annotations

import gc
import os
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.spark.connect.client import close_session, import_client, open_session
from airflow_tablemgmt.spark.connect.kept import BatchSessions, KeptSession
from airflow_tablemgmt.spark.connect.operations import record_operations
from airflow_tablemgmt.spark.connect.session import ConnectRun
from airflow_tablemgmt.spark.protocol import FAILED, JobResult

URL = "sc://127.0.0.1:1"


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _iterator_class() -> Any:
    import_client()
    from pyspark.sql.connect.client.reattach import ExecutePlanResponseReattachableIterator

    return ExecutePlanResponseReattachableIterator


def test_a_job_s_session_is_freed_when_its_run_closes_not_by_the_cycle_collector(
    no_cycle_collector: None,
) -> None:
    """The hang's cause: the operation recorder made every session a reference cycle, so pyspark's
    ``SparkSession.__del__`` ran whenever the cycle collector did, in whatever thread, once inside the
    thread pool that sends ``ReleaseExecute``, whose shutdown it then waited for forever."""
    run = ConnectRun(URL, "tms-p1-a1")
    session = open_session(URL, run.session_id)
    record_operations(session, run.tag, fence=run.fence)
    run.session = session
    freed = weakref.ref(session)
    del session
    run.close()
    assert freed() is None  # freed here, by its last reference, not later in another thread


def test_a_closed_session_never_shuts_down_the_process_s_release_pool_again() -> None:
    """pyspark's ``__del__`` closes the client again: that second close must not shut down the pool the
    process's other (or next) sessions send their releases with."""
    iterator = _iterator_class()
    run = ConnectRun(URL, "tms-p1-a1")
    run.session = open_session(URL, run.session_id)
    session = run.session
    run.close()
    iterator._initialize_pool_if_necessary()  # the next job's first operation makes a new pool
    pool = iterator._release_thread_pool
    session.__del__()  # as the collector would, in any thread
    assert iterator._release_thread_pool is pool and pool is not None


def test_any_session_closed_inside_the_release_pool_returns_and_leaves_the_pool_running() -> None:
    """Not only the engine's closes: any Connect client of the process (a raw ``stop()``, a ``__del__`` run
    by the collector in one of the pool's threads) closes its own channel only. pyspark's own close there
    waited for the pool it runs in forever, and everywhere else shut the pool other sessions' operations
    were using (``ValueError: Pool not running``)."""
    iterator = _iterator_class()
    iterator._initialize_pool_if_necessary()
    pool = iterator._release_thread_pool
    session = open_session(URL)
    pool.apply_async(session.stop).get(timeout=20)  # as the collector's __del__ would, in a pool thread
    assert session.client.is_closed
    other = open_session(URL)
    other.stop()  # on any other thread
    assert iterator._release_thread_pool is pool and pool._state == "RUN"


def test_a_task_forked_from_a_warm_parent_sends_its_releases_on_a_pool_of_its_own() -> None:
    """A pool made before the fork has no threads in the child: the child's releases would never go."""
    iterator = _iterator_class()
    iterator._initialize_pool_if_necessary()
    inherited = id(iterator._release_thread_pool)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: is the parent's threadless pool still the one pyspark would use?
        try:
            pool = iterator._release_thread_pool
            os.write(w, b"fresh" if pool is None or id(pool) != inherited else b"inherited")
        finally:
            os._exit(0)
    os.close(w)
    answer = os.read(r, 64)
    os.waitpid(pid, 0)
    os.close(r)
    assert answer == b"fresh"


class _Client:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


class _Session:
    """What the hook and the run touch of a remote session when no job really runs."""

    def __init__(self) -> None:
        self.client = _Client()
        self.tags: set[str] = set()

    def stop(self) -> None:
        self.client.close()

    def clearTags(self) -> None:  # noqa: N802 - pyspark's name
        self.tags.clear()


def test_batch_sessions_hand_one_session_to_one_job_at_a_time_and_close_all_at_the_end() -> None:
    sessions = BatchSessions()
    first = sessions.take(URL, "h1")
    assert not first.open and sessions.take(URL, "h1") is not first  # in use: a second job gets its own
    first.session = _Session()
    sessions.give_back(first)
    again = sessions.take(URL, "h1")
    assert again is first and again.open  # the next job of the same settings attaches to it
    assert sessions.take(URL, "h2") is not first  # other settings: never that session
    client = again.session.client
    sessions.give_back(again)
    sessions.close()
    assert client.closed == 1 and not again.open
    late = KeptSession(URL, "h1", session=_Session())
    sessions.give_back(late)  # after the batch ended: closed, not kept
    assert not late.open


def _job(pid: int, name: str) -> JobSpec:
    return JobSpec(
        table={"catalog": "lake", "namespace": "db", "name": name},
        catalog={"name": "lake", "type": "hadoop", "warehouse": "/tmp/wh"},
        action="rewrite-files",
        process_id=pid,
    )


def test_only_a_clean_job_hands_the_batch_s_session_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hook: a job that succeeded leaves the session open for the batch's next table (same session id,
    reused, the table it loaded remembered); a failed one closes it and the next table opens a new one."""
    import airflow_tablemgmt.hooks.spark_connect as hook_mod

    outcomes = iter([True, False, True])
    runs: list[ConnectRun] = []

    def fake_run(job: JobSpec, url: str, *, run: ConnectRun, **_: Any) -> JobResult:
        runs.append(run)
        if run.kept is not None and not run.kept.open:
            run.kept.session = _Session()
        run.kept.loaded.add(f"lake.db.{job.table['name']}")  # type: ignore[union-attr]
        if next(outcomes):
            return JobResult(status="SUCCESS", summary={})
        return JobResult(status=FAILED, error="boom", error_class="X")

    monkeypatch.setattr(hook_mod, "run_on_connect", fake_run)
    sessions = BatchSessions()
    results = []
    for i, name in enumerate(["a", "b", "c"], 1):
        hook = hook_mod.SparkConnectJobHook(url=URL)
        hook.use_batch(sessions)
        results.append(hook.submit(_job(i, name)))
    assert [r.ok for r in results] == [True, False, True]
    a, b, c = runs
    assert not a.reused and b.reused and b.session_id == a.session_id  # b attached to a's session
    assert b.kept is a.kept and b.kept is not None and b.kept.loaded == {"lake.db.a", "lake.db.b"}
    assert not c.reused and c.session_id != b.session_id  # b failed: its session was closed
    assert a.kept.session is None  # closed when b failed
    assert {r.tag for r in runs} == {"tms-p1-a1", "tms-p2-a1", "tms-p3-a1"}  # each job its own tag
    sessions.close()
    assert c.kept is not None and not c.kept.open


def test_operation_ids_are_recorded_ahead_in_the_job_s_own_config_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The operation recorder once sent a ``Config`` request before every ``ExecutePlan`` (two per procedure:
    ``spark.sql`` and ``collect``). Its ids are now chosen ahead, :data:`KEEP` at a time, the first ones in the
    request that sets the job's catalog (``ConnectRun.open``): a small job sends none of its own. Each later set
    keeps the last id sent, and every id goes out only once recorded."""
    from airflow_tablemgmt.spark.connect.operations import KEEP, OPERATIONS_CONF

    session = open_session(URL)
    requests: list[dict[str, str]] = []

    def config(op: Any) -> None:
        requests.append({p.key: p.value for p in op.set.pairs})

    monkeypatch.setattr(session.client, "config", config)
    try:
        settings = {"spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog"}
        record_operations(session, "tms-p1-a1", conf=settings)
        first = settings[OPERATIONS_CONF]
        sent = [session.client._execute_plan_request_with_metadata().operation_id for _ in range(KEEP)]
        assert requests == []  # none of the first KEEP operations asked for a Config request of its own
        assert first == "tms-p1-a1 " + ",".join(sent)
        later = session.client._execute_plan_request_with_metadata().operation_id
        (recorded,) = requests
        tag, ids = recorded[OPERATIONS_CONF].split(" ")
        assert (
            tag == "tms-p1-a1" and ids.split(",")[:2] == [sent[-1], later] and len(ids.split(",")) == KEEP + 1
        )

        # without a request of the caller's, the first operation records its ids before it is sent
        other = open_session(URL)
        monkeypatch.setattr(other.client, "config", config)
        record_operations(other, "tms-p2-a1")
        op = other.client._execute_plan_request_with_metadata().operation_id
        assert requests[-1][OPERATIONS_CONF].startswith(f"tms-p2-a1 {op},")
        close_session(other)
    finally:
        close_session(session)
