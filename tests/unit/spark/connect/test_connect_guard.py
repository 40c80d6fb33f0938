"""Issue 36: a leased Connect job's deadline is held by a guard process, not by the worker
(spark/connect/guard.py), and the job sends no operation once the lease's confirmation ran out.

No server: what the guard would end is recorded instead (``end_application`` replaced); one test runs
the real guard process to see it outside the worker's process group and gone after ``done``."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from airflow_tablemgmt.spark.connect import guard as guard_mod
from airflow_tablemgmt.spark.connect import operations
from airflow_tablemgmt.spark.connect.session import ConnectRun
from airflow_tablemgmt.spark.job.lease_guard import LeaseNotConfirmed

URL = "sc://127.0.0.1:1/;token=secret"
APP = "connect:sc://127.0.0.1:1#3f0c6c8e-0000-4000-8000-000000000000/tms-p1-a1"


@pytest.fixture
def ended(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str | None, float]]:
    asked: list[tuple[str, str | None, float]] = []

    def end_application(app: str, bound_s: float, url: str | None = None) -> bool:
        asked.append((app, url, time.monotonic()))
        return True

    monkeypatch.setattr(operations, "end_application", end_application)
    return asked


def _feed(lines: list[tuple[float, str]], close: bool = True, close_after: float = 0.0) -> int:
    """A pipe whose read end the guard watches; ``lines`` written after their delays, in a thread, then
    the pipe closed ``close_after`` seconds later (the worker's end)."""
    r, w = os.pipe()

    def write() -> None:
        for delay, line in lines:
            time.sleep(delay)
            os.write(w, (line + "\n").encode())
        if close:
            time.sleep(close_after)
            os.close(w)

    threading.Thread(target=write, daemon=True).start()
    return r


def head(until: float, app: str = APP) -> str:
    return json.dumps({"url": URL, "application_id": app, "until": until})


def test_done_ends_the_guard_without_interrupting(ended: list) -> None:
    r = _feed([(0, head(time.monotonic() + 5)), (0.1, guard_mod.DONE)])
    assert guard_mod.watch(r) == "done"
    assert ended == []


def test_renewals_keep_the_job_and_the_guard_interrupts_when_they_stop(ended: list) -> None:
    start = time.monotonic()
    # first confirmation 1 s; a renewal every 0.2 s confirms 1 s from it, up to start + 1.8 s; then the
    # worker freezes
    lines = [(0, head(start + 1.0))] + [(0.2, repr(start + 0.2 * (i + 1) + 1.0)) for i in range(4)]
    r = _feed(lines, close_after=2.5)  # a frozen worker keeps its pipe open (until it is killed, later)
    assert guard_mod.watch(r) == "expired"
    [(app, url, at)] = ended
    assert (app, url) == (APP, URL)  # the server's URL with its token came through the pipe, not argv
    assert start + 1.8 <= at < start + 7  # not before the last confirmation ran out (then promptly)


def test_a_dead_worker_s_job_is_interrupted_at_once(ended: list) -> None:
    start = time.monotonic()
    r = _feed([(0, head(start + 30))], close=True)  # the worker dies: its pipe closes without "done"
    assert guard_mod.watch(r) == "worker gone"
    assert len(ended) == 1 and ended[0][2] - start < 10  # not the 30 s of its confirmation


def test_a_batch_s_jobs_are_guarded_one_after_another_each_on_its_own_deadline(ended: list) -> None:
    """One guard for a batch's jobs in turn (issue 40): a job that ended is never interrupted, the next
    one is watched on its own confirmations and interrupted alone when they stop, and a job announced
    while the guard observes an earlier one's end is still watched."""
    app = [APP.replace("tms-p1-a1", f"tms-p{i}-a1") for i in (1, 2, 3)]
    start = time.monotonic()
    lines = [
        (0, head(start + 5, app[0])),
        (0.1, guard_mod.DONE),  # job 1 ended cleanly
        (0, head(start + 0.6, app[1])),  # job 2: its confirmation runs out at +0.6 s (the worker froze)
        (1.0, repr(start + 0.7)),  # the worker wakes: a stale confirmation of job 2, then its end
        (0, guard_mod.DONE),
        (0, head(time.monotonic() + 1.5, app[2])),  # job 3, never confirmed again: runs out in 1.5 s
    ]
    r = _feed(lines, close_after=3)
    assert guard_mod.watch(r) == "expired"
    assert [a for a, _, _ in ended] == [app[1], app[2]]  # never job 1, which ended
    assert start + 0.6 <= ended[0][2] < start + 1.1  # job 2 on its own deadline


def test_a_worker_that_dies_between_a_batch_s_jobs_leaves_nothing_to_interrupt(ended: list) -> None:
    r = _feed([(0, head(time.monotonic() + 30)), (0, guard_mod.DONE)])  # the pipe closes after a "done"
    assert guard_mod.watch(r) == "done"
    assert ended == []


def test_the_job_sends_no_operation_once_the_confirmation_ran_out() -> None:
    run = ConnectRun(URL, "tms-p1-a1", lease_until=time.monotonic() + 0.2)
    run.fence()  # confirmed: the operation goes
    time.sleep(0.25)
    with pytest.raises(LeaseNotConfirmed, match="tms-p1-a1"):
        run.fence()
    run.confirm_lease(time.monotonic() + 5)  # a renewal that came through confirms it again
    run.fence()
    ConnectRun(URL, "tms-p1-a1").fence()  # no lease (a read-only job): never refused
    stopped = ConnectRun(URL, "tms-p1-a1", lease_until=time.monotonic() + 60)
    stopped.interrupt()  # killed (a cancel, the watchdog) before its next operation: that one is not sent
    with pytest.raises(LeaseNotConfirmed, match="stopped"):
        stopped.fence()


def test_the_fence_runs_before_each_operation_is_recorded_and_sent() -> None:
    class Client:
        def _execute_plan_request_with_metadata(self) -> object:
            return type("Req", (), {"operation_id": ""})()

        def config(self, op: object) -> None:
            self.configured = op

    class Session:
        client = Client()

    refused = {"now": False}

    def fence() -> None:
        if refused["now"]:
            raise LeaseNotConfirmed("not confirmed")

    operations.record_operations(Session(), "tms-p1-a1", fence=fence)
    assert Session.client._execute_plan_request_with_metadata().operation_id
    refused["now"] = True
    Session.client.configured = None
    with pytest.raises(LeaseNotConfirmed):
        Session.client._execute_plan_request_with_metadata()
    assert Session.client.configured is None  # refused before anything reached the server


def test_the_guard_process_lives_outside_the_worker_s_group_and_exits_when_done() -> None:
    g = guard_mod.ConnectLeaseGuard(URL, APP).start(time.monotonic() + 30)
    proc = g._proc
    assert proc is not None
    assert os.getpgid(proc.pid) != os.getpgid(0)  # a killpg of the worker spares it
    assert str(URL) not in " ".join(proc.args)  # the token is not on its command line
    g.confirm(time.monotonic() + 30)
    g.done()
    assert proc.wait(timeout=60) == 0  # it read "done" and exited without acting
    g.confirm(time.monotonic() + 30)  # after the end: nothing to feed, no error
    # A batch's guard process: one process for its jobs in turn, gone once the batch closes it.
    shared = guard_mod.GuardProcess()
    first = guard_mod.ConnectLeaseGuard(URL, APP, shared).start(time.monotonic() + 30)
    first.done()
    second = guard_mod.ConnectLeaseGuard(URL, APP.replace("p1", "p2"), shared).start(time.monotonic() + 30)
    assert shared.pid is not None and second._proc is first._proc  # the same process watches the next job
    proc = first._proc
    second.done()
    assert proc is not None and proc.poll() is None  # waiting for the batch's next job
    shared.close()
    assert proc.wait(timeout=60) == 0


def test_the_connect_hook_takes_the_runner_s_confirmations() -> None:
    from airflow_tablemgmt.hooks.spark_connect import SparkConnectJobHook
    from airflow_tablemgmt.lifecycle.model import ConfirmsLease

    hook = SparkConnectJobHook(url=URL)
    assert isinstance(hook, ConfirmsLease)  # the heartbeat confirms each renewal to it
    hook.confirm_lease(100.0, 2.0)  # before submit: kept for the job's run
    assert hook._lease_until == 102.0
