"""A planned batch with its bookkeeping overlapped (``services/batch_overlap.py``, issue 40 item 4), on the real
lifecycle and store over pyiceberg tables (``test_batches.py``'s fixture): while one table's job runs, the next
table's process is opened and its lease taken, and the table before records its health; the jobs still run one
at a time, in the batch's order, on the calling thread; a kill of the batch's task through the runner the
operator holds (the next table's, waiting) kills the running job and starts no other. Each test fails on the
code before (one table from its first check to its health's write before the next one started)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from airflow_tablemgmt.core.factory import JobSpec
from airflow_tablemgmt.core.process import ProcessStatus
from airflow_tablemgmt.factories.discovery import default_factories
from airflow_tablemgmt.lifecycle import ProcessRunner
from airflow_tablemgmt.services.batches import BatchRun, Outcome, TableRun, run_batch
from airflow_tablemgmt.spark.protocol import JobResult
from airflow_tablemgmt.store import Store
from tests.unit.services import test_batches as base
from tests.unit.services.test_batches import ACTION, AT, _run

# test_batches.py's fixtures: pyiceberg tables enrolled by a policy, the store, the health gate on
store = base.store
gate_on = base.gate_on

WAIT_S = 10.0


def _until(check: Callable[[], bool], within: float = WAIT_S) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


def test_the_next_tables_process_and_lease_and_the_last_ones_health_happen_while_a_job_runs(
    store: Store,
) -> None:
    tables = ["lake.db.a_small", "lake.db.e_small", "lake.db.d_fails"]
    jobs: list[tuple[str, str]] = []
    running = threading.Lock()
    seen: dict[str, Any] = {}
    after: list[str] = []

    def opened(name: str) -> bool:
        p = store.processes.find(f"lake.db.{name}", ACTION, AT)
        return p is not None and store.leases.get(f"lake.db.{name}") is not None

    class Engine:
        def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
            name = job.table["name"]
            assert running.acquire(blocking=False), "two of the batch's jobs ran at once"
            try:
                jobs.append((name, threading.current_thread().name))
                if on_started is not None:
                    on_started(f"local-{name}")
                if name == "a_small":  # the next table is opened and leased while this job runs
                    seen["next opened during the job"] = _until(lambda: opened("e_small"))
                if name == "e_small":  # the table before records its health while this job runs
                    seen["last after-step during the job"] = _until(lambda: "lake.db.a_small" in after)
                return JobResult(status="SUCCESS", summary={"rewritten_data_files_count": 8})
            finally:
                running.release()

        def kill(self) -> None:
            pass

    def after_table(s: Store, run: BatchRun, done: TableRun, error: BaseException | None) -> None:
        after.append(done.table_id)

    result = run_batch(
        store,
        _run(),
        tables,
        runner_for=lambda t: ProcessRunner(store, default_factories(), Engine()),
        after_table=after_table,
        overlap=True,
    )
    assert [t.outcome for t in result.tables] == [Outcome.SUCCESS] * 3
    assert seen == {"next opened during the job": True, "last after-step during the job": True}
    # one job at a time, in the batch's order, every one on the calling thread (Airflow's SIGALRM limit)
    assert jobs == [(n, threading.current_thread().name) for n in ("a_small", "e_small", "d_fails")]
    assert after == tables  # the after-steps in the batch's order
    for t in result.tables:
        assert store.processes.get(t.process_id).status == ProcessStatus.SUCCESS  # type: ignore[arg-type]
        assert store.leases.get(t.table_id) is None


def test_killing_the_batch_through_the_waiting_tables_runner_kills_the_running_job(store: Store) -> None:
    """``RunBatchOperator.on_kill`` kills the runner it made last: with the bookkeeping overlapped that is the
    next table's, made while the running table's job runs. The running job is killed, the next one never starts."""
    tables = ["lake.db.a_small", "lake.db.e_small"]
    made: list[ProcessRunner] = []
    killed: list[str] = []
    jobs: list[str] = []
    kills: list[threading.Thread] = []

    class Engine:
        def __init__(self, name: str) -> None:
            self.name = name
            self.stop = threading.Event()

        def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
            jobs.append(self.name)
            if on_started is not None:
                on_started(f"local-{self.name}")
            assert _until(lambda: len(made) == 2 and opened_e()), "the next table was not opened meanwhile"
            on_kill = threading.Thread(target=made[-1].kill)  # the operator's on_kill, on the runner it holds
            on_kill.start()
            kills.append(on_kill)
            assert self.stop.wait(WAIT_S), "the running job was not killed"
            return JobResult(status="FAILED", error="killed")

        def kill(self) -> None:
            killed.append(self.name)
            self.stop.set()

    def opened_e() -> bool:
        return store.leases.get("lake.db.e_small") is not None

    def runner_for(table_id: str) -> ProcessRunner:
        runner = ProcessRunner(store, default_factories(), Engine(table_id.rpartition(".")[2]))
        made.append(runner)
        return runner

    result = run_batch(store, _run(), tables, runner_for=runner_for, overlap=True)
    # on_kill stops the job first and records KILLED after: Airflow ends the task once on_kill has returned
    # (the batch's run may return in between: CI saw this test fail that way once)
    for on_kill in kills:
        on_kill.join(WAIT_S)
    assert jobs == ["a_small"]  # the waiting table's job never started
    assert killed == ["a_small"]  # the running job's own submitter, once
    a, e = (store.processes.get(t.process_id) for t in result.tables)  # type: ignore[arg-type]
    assert a.status == ProcessStatus.KILLED  # as the task of one table records its on_kill
    assert e.status == ProcessStatus.FAILED and "killed before this table's job started" in (
        e.failure_reason or ""
    )
    assert [t.outcome for t in result.tables] == [Outcome.FAILED, Outcome.FAILED]
    assert all(store.leases.get(t) is None for t in tables)  # every lease the batch took is given back


@pytest.mark.parametrize("overlap", [False, True])
def test_the_same_outcomes_either_way(store: Store, overlap: bool) -> None:
    """``overlap`` changes when the bookkeeping runs, not what it records (``test_batches.py`` runs overlapped)."""
    from tests.unit.services.test_batches import Engine

    engine = Engine(failing={"d_fails"})
    tables = ["lake.db.a_small", "lake.db.b_healthy", "lake.db.d_fails", "lake.db.e_small"]
    result = run_batch(
        store,
        _run(),
        tables,
        runner_for=lambda t: ProcessRunner(store, default_factories(), engine.submitter()),
        overlap=overlap,
    )
    assert [t.outcome for t in result.tables] == [
        Outcome.SUCCESS,
        Outcome.SKIPPED,
        Outcome.FAILED,
        Outcome.SUCCESS,
    ]
    assert engine.jobs == ["a_small", "d_fails", "e_small"]


@pytest.mark.parametrize("overlap", [False, True])
def test_what_a_job_leaves_to_finish_later_is_recorded_with_its_process(store: Store, overlap: bool) -> None:
    """A Connect job on a batch's kept session leaves its cost read for later (``protocol.FINISH_LATER``): the
    batch completes the result in the table's own thread (overlapped: not the thread the jobs run on) before the
    lifecycle records it."""
    threads: list[str] = []

    class Engine:
        def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
            result = JobResult(status="SUCCESS", summary={"rewritten_data_files_count": 8})

            def finish() -> None:
                threads.append(threading.current_thread().name)
                result.summary["read_after_the_job"] = job.table["name"]

            result.finish_later = finish  # type: ignore[attr-defined]
            return result

        def kill(self) -> None:
            pass

    tables = ["lake.db.a_small", "lake.db.e_small"]
    result = run_batch(
        store,
        _run(),
        tables,
        runner_for=lambda t: ProcessRunner(store, default_factories(), Engine()),
        overlap=overlap,
    )
    for t in result.tables:
        summary = store.processes.get(t.process_id).summary or {}  # type: ignore[arg-type]
        assert summary["read_after_the_job"] == t.table_id.rpartition(".")[2]
    main = threading.current_thread().name
    assert len(threads) == 2 and all((name != main) == overlap for name in threads)


def _three_tables(store: Store, monkeypatch: pytest.MonkeyPatch, engine: type) -> list[tuple[str, str]]:
    """Three tables overlapped with ``engine`` (a class whose ``submit`` takes the ``events`` list it is
    made with), each table's completion after its job logged as ``("finished", name)``; the batch must end
    long before ``QUIET_START_S`` (a wait that ran to its bound would show)."""
    from airflow_tablemgmt.services import batch_overlap

    monkeypatch.setattr(batch_overlap, "QUIET_START_S", 30.0)
    events: list[tuple[str, str]] = []
    tables = ["lake.db.a_small", "lake.db.d_fails", "lake.db.e_small"]
    began = time.monotonic()
    result = run_batch(
        store,
        _run(),
        tables,
        runner_for=lambda t: ProcessRunner(store, default_factories(), engine(events)),
        overlap=True,
    )
    assert time.monotonic() - began < 10.0
    assert [t.outcome for t in result.tables] == [Outcome.SUCCESS] * 3
    assert {e for e in events if e[0] == "finished"} == {
        ("finished", n) for n in ("a_small", "d_fails", "e_small")
    }
    return events


def _finished_later(events: list[tuple[str, str]], name: str) -> JobResult:
    result = JobResult(status="SUCCESS", summary={"rewritten_data_files_count": 8})
    result.finish_later = lambda: events.append(("finished", name))  # type: ignore[attr-defined]
    return result


def test_a_table_completes_its_result_once_the_next_job_started_never_waiting_at_the_end(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table's completion and recording after its job (``QUIET_START_S``) waits until the next table's job
    reported started, so they do not compete with that start on the jobs' thread; it never waits for its
    bound: not at the batch's end, nor for a next job that ends without reporting a start."""

    class Engine:
        def __init__(self, events: list[tuple[str, str]]) -> None:
            self.events = events

        def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
            name = job.table["name"]
            if on_started is not None and name != "e_small":  # e_small's job never reports its start
                on_started(f"local-{name}")
                self.events.append(("started", name))
            time.sleep(0.05)
            return _finished_later(self.events, name)

        def kill(self) -> None:
            pass

    events = _three_tables(store, monkeypatch, Engine)
    assert events.index(("finished", "a_small")) > events.index(("started", "d_fails"))


def test_a_table_completes_its_result_once_the_next_job_sent_its_first_operation_when_its_engine_tells(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine that tells its first operation (``core/first_operation.py``: the Connect engine, before each
    operation it sends) is waited for past its start: the table before completes its result only once the
    next job's first operation is under way, not while that job still prepares after reporting its start.
    A job that never sends one (it fails before) ends the wait when it ends."""
    from airflow_tablemgmt.core import first_operation

    class Engine:
        signals_first_operation = True

        def __init__(self, events: list[tuple[str, str]]) -> None:
            self.events = events

        def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
            name = job.table["name"]
            if on_started is not None:
                on_started(f"connect-{name}")
                self.events.append(("started", name))
            time.sleep(0.1)  # the job's own reads after its start, before its first operation
            if name != "e_small":  # e_small's job never sends one
                self.events.append(("sent", name))
                first_operation.sent()
                first_operation.sent()  # each operation tells; the first one counts
            time.sleep(0.05)
            return _finished_later(self.events, name)

        def kill(self) -> None:
            pass

    events = _three_tables(store, monkeypatch, Engine)
    assert events.index(("finished", "a_small")) > events.index(("sent", "d_fails"))
    assert events.index(("finished", "d_fails")) > events.index(("started", "e_small"))
