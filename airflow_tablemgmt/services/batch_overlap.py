"""A planned batch's tables with their bookkeeping overlapped (issue 40: batched execution, its throughput).

Run strictly one after another, a small table's job on a warm Spark Connect session (a 0.3-0.4 s procedure)
waited for ≈ 0.2 s of its own and its neighbours' bookkeeping: its process row and lease before the job, its
result and release after it, its health measured and stored, the next table's policy, gate and time-limit
reads. Here each table's lifecycle (``ProcessRunner.run``, then :data:`~.batches.AfterTable`) runs in a thread
of its own, and only its **job** (the submitter's ``submit``) runs on the calling thread, one job at a time and
in the batch's order. So while table *k*'s job runs, table *k-1* records its result and its health, and table
*k+1* opens its process, takes its lease and passes its gates; its job starts the moment *k*'s ends.

What does not change (``batches.py``): every table its own process row, lease, heartbeat, gates, result and
alert; the server runs one of the batch's jobs at a time, as before; a failure, a lost lease or a time limit
ends one table. The jobs stay on the calling thread because Airflow's time limit is a ``SIGALRM`` timer, which
only the main thread receives: each job runs inside its table's limit there (``limit_for``), and the wait for
a table that never hands its job over (a store read that hangs before it) is bounded by the same limit. At
most :data:`IN_FLIGHT` tables are between their first check and their health's write at once, and the tables'
after-steps run in the batch's order, one at a time.

A kill of the batch's task (``on_kill``: ``ProcessRunner.kill`` on whichever runner the operator holds, which
may be the next table's, waiting) kills the running job (its process KILLED) and starts no further job (the
tables in flight end FAILED naming the kill before their jobs); a kill of one table's job (its lease lost, its
cancel) reaches that table's submitter only.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core import first_operation
from airflow_tablemgmt.core.errors import JobFailed
from airflow_tablemgmt.services.batch_finish import finished

if TYPE_CHECKING:
    from airflow_tablemgmt.core.factory import JobSpec
    from airflow_tablemgmt.lifecycle import ProcessRunner
    from airflow_tablemgmt.spark.protocol import JobResult

log = logging.getLogger(__name__)

#: Tables at once between their first check and their after-steps' end: the one whose job runs, the one
#: recording what it did, the next one preparing.
IN_FLIGHT = 3
#: How long the end of a batch waits for a table it gave up on (past its time limit before its job) to end.
ABANDONED_JOIN_S = 60.0
#: How long a table whose job ended waits before completing and recording its result: the next job's start
#: (its ``Config`` request, its RUNNING row, its own reads) is on the jobs' thread, and a neighbour's store
#: writes and reads beside it held it back (10.5 ms a table against 3.7, 2026-11-29). Over once the next job
#: sent its first operation (an engine that tells: ``core/first_operation.py``; else once it reports started),
#: or the jobs' thread has none to start.
QUIET_START_S = 0.25
#: Python's thread switch interval while a batch overlaps (the default is 5 ms): the jobs' thread, woken by
#: each gRPC answer, waits at most this long for the interpreter's lock while a table's bookkeeping thread
#: holds it, instead of up to 5 ms per answer (a procedure reads several).
SWITCH_INTERVAL_S = 0.001


class BatchKilled(JobFailed):
    """The batch's task was killed before this table's job started: it did not run."""


class _Job:
    """One table's job, handed from its thread to the calling thread."""

    def __init__(self, call: Callable[[], JobResult], handoff: Handoff) -> None:
        self.call = call
        self.handoff = handoff
        self.done = threading.Event()
        self.result: JobResult | None = None
        self.error: BaseException | None = None


class Handoff:
    """The submitter a table's runner sees in an overlapped batch: ``submit`` hands the job to the lane and
    waits for its result, which it completes here (``batch_finish.finished``) while the lane runs the next job;
    everything else (the protocols the lifecycle checks) is the table's own submitter's."""

    def __init__(self, inner: Any, lane: JobLane, index: int) -> None:
        self._inner = inner
        self._lane = lane
        self._index = index
        self.stopped = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def submit(self, job: JobSpec, on_started: Callable[[str], None] | None = None) -> JobResult:
        inner, lane, index = self._inner, self._lane, self._index

        def started(application_id: str) -> None:
            try:
                if on_started is not None:
                    on_started(application_id)
            finally:
                lane.mark_started(index)

        result = lane.post(index, lambda: inner.submit(job, on_started=started), self)
        lane.wait_next_started(index, QUIET_START_S)
        return finished(result)

    def kill(self) -> None:
        """This table's job only (its lease lost, its cancel, its limit): a job not started yet never starts."""
        self.stopped = True
        self._inner.kill()


class JobLane:
    """The batch's jobs, run one at a time on the thread that calls :meth:`run_job` (the task's main thread),
    in the batch's order; each table's thread posts its job (:meth:`post`) and waits for its result."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._posted: dict[int, _Job] = {}
        self._handed: set[int] = set()  # posted a job, or ended without one
        # given up on: its job, if it comes, is refused with this
        self._refused: dict[int, BaseException] = {}
        self._ran: set[int] = set()  # tables whose job this lane ran
        self.killed = False
        self._live: dict[int, ProcessRunner] = {}  # runs in flight (their run() has not returned)
        self._running: int | None = None  # the table whose job runs now
        self._started_upto = -1  # the last table whose job reported started (or ended)
        self._sent_upto = -1  # the last table whose job sent its first operation (or ended)
        self._signals: set[int] = set()  # tables whose engine tells its first operation
        self._waiting_for = -1  # the table this thread waits for with no job to run (n: the batch ended)
        #: Seconds this thread spent running jobs, and waiting for a table to hand its job over (or end).
        self.busy = 0.0
        self.idle = 0.0

    # -- the tables' threads ---------------------------------------------------------------------------

    def post(self, index: int, call: Callable[[], JobResult], handoff: Handoff) -> JobResult:
        job = _Job(call, handoff)
        with self._cond:
            again = index in self._ran
        if again:  # a second job of one table's run (the lifecycle submits once; never seen): run it here
            log.warning(
                "tablemgmt: batch table %d submitted a second job; it runs in the table's thread", index
            )
            return call()
        with self._cond:
            refused = self._refused.get(index)
            if refused is None and self.killed:
                refused = BatchKilled("the batch's task was killed before this table's job started")
            if refused is None:
                self._posted[index] = job
                if getattr(handoff, first_operation.SIGNALS, False):
                    self._signals.add(index)
                self._handed.add(index)
                self._cond.notify_all()
        if refused is not None:
            raise refused
        job.done.wait()
        if job.error is not None:
            raise job.error
        assert job.result is not None
        return job.result

    def mark_started(self, index: int) -> None:
        """Table ``index``'s job reported started (its application), or ended without it."""
        with self._cond:
            self._started_upto = max(self._started_upto, index)
            self._cond.notify_all()

    def mark_sent(self, index: int) -> None:
        """Table ``index``'s job sent its first operation to its engine."""
        with self._cond:
            self._sent_upto = max(self._sent_upto, index)
            self._cond.notify_all()

    def _next_under_way(self, index: int) -> bool:
        """The job after ``index``'s started (and sent its first operation, when its engine tells)."""
        if self._started_upto <= index:
            return False
        return self._sent_upto > index or index + 1 not in self._signals

    def wait_next_started(self, index: int, bound_s: float) -> None:
        """Wait (at most ``bound_s``) until the job after ``index``'s is under way, or none is to start."""
        deadline = time.monotonic() + bound_s
        with self._cond:
            while not self._next_under_way(index) and self._waiting_for <= index and not self.killed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)

    def finish(self, n: int) -> None:
        """No job follows: tables waiting for the next job's start stop waiting."""
        with self._cond:
            self._waiting_for = max(self._waiting_for, n)
            self._cond.notify_all()

    def ended(self, index: int) -> None:
        """Table ``index``'s run returned: it posts no job (any more)."""
        with self._cond:
            self._handed.add(index)
            self._live.pop(index, None)
            self._cond.notify_all()

    def handed(self, index: int) -> bool:
        with self._cond:
            return index in self._handed

    def wait_handed(self, index: int) -> None:
        with self._cond:
            while index not in self._handed and not self.killed:
                self._cond.wait()

    def track(self, index: int, runner: ProcessRunner) -> None:
        """``runner`` runs table ``index``; its ``kill`` (the task's ``on_kill``) kills the whole batch."""
        runner.submitter = Handoff(runner.submitter, self, index)
        with self._cond:
            self._live[index] = runner
        setattr(runner, "kill", self.kill_all)  # noqa: B010 - the instance's, not the class's

    # -- the calling (main) thread ---------------------------------------------------------------------

    def run_job(self, index: int, limit: AbstractContextManager[Any]) -> None:
        """Wait (within ``limit``) for table ``index`` to hand its job over or end without one; run the job
        inside ``limit`` and hand its result (or error) back. A wait that ``limit`` ends gives the table up:
        its job, if it comes, is refused with the limit's error."""
        job: _Job | None = None
        began = time.perf_counter()
        try:
            with limit:
                with self._cond:
                    if index not in self._handed:  # no job to start: nobody need wait for one
                        self._waiting_for = max(self._waiting_for, index)
                        self._cond.notify_all()
                    while index not in self._handed and not self.killed:
                        self._cond.wait()
                    job = self._posted.pop(index, None)
                ready = time.perf_counter()
                self.idle += ready - began
                began = ready
                if job is None:
                    return
                if job.handoff.stopped or self.killed:
                    raise BatchKilled(
                        "the batch's task was killed before this table's job started"
                        if self.killed
                        else "this table's job was stopped before it started (its lease lost or canceled)"
                    )
                with self._cond:
                    self._running = index
                    self._ran.add(index)
                with first_operation.watching(lambda: self.mark_sent(index)):
                    job.result = job.call()
        except BaseException as e:
            if job is None:  # gave up waiting for it (its time limit, the task's end)
                with self._cond:
                    self._refused[index] = e
                log.error("tablemgmt: batch table %d: no job handed over within its limit: %s", index, e)
            else:
                job.error = e
            if not isinstance(
                e, Exception
            ):  # the task itself ends (terminated, interrupted): so does the batch
                with self._cond:
                    self.killed = True
                    self._cond.notify_all()
                raise
        finally:
            with self._cond:
                self._running = None
                self._started_upto = max(self._started_upto, index)
                self._sent_upto = max(self._sent_upto, index)
                self._cond.notify_all()
            if job is not None:
                self.busy += time.perf_counter() - began
                job.done.set()

    def kill_all(self) -> None:
        """The batch's task was killed: the running job is killed and its process recorded KILLED (the
        runner's own ``kill``, as for a task of one table); no further job starts, so every other table in
        flight ends FAILED naming the kill (:class:`BatchKilled`) before its job, or has finished already."""
        from airflow_tablemgmt.lifecycle import ProcessRunner

        with self._cond:
            self.killed = True
            running = self._live.get(self._running) if self._running is not None else None
            for job in self._posted.values():  # handed over, not started: never started
                job.handoff.stopped = True
            self._cond.notify_all()
        if running is not None:
            ProcessRunner.kill(running)


def run_overlapped(
    tables: Sequence[str],
    run_one: Callable[[int, str, JobLane], Any],
    after_one: Callable[[int, Any], None],
    limit_of: Callable[[str], AbstractContextManager[Any]],
    missing: Callable[[str, str, bool], Any],
) -> list[Any]:
    """Run ``run_one(index, table, lane)`` for each table in a thread of its own (at most :data:`IN_FLIGHT` at
    once, started in order, each once the one before handed its job over), then ``after_one(index, outcome)``
    in the batch's order; the jobs on this thread, in order, within ``limit_of(table)``. ``missing(table, why,
    failed)`` is the outcome of a table never started (the batch was killed) or given up on (its limit passed
    before it handed its job over, and it did not end after). The outcomes in the batch's order."""
    lane = JobLane()
    n = len(tables)
    outcomes: list[Any] = [None] * n
    after_done = [threading.Event() for _ in range(n)]
    started = [threading.Event() for _ in range(n)]
    threads: list[threading.Thread | None] = [None] * n
    room = threading.Semaphore(IN_FLIGHT)

    def work(k: int) -> None:
        try:
            try:
                outcomes[k] = run_one(k, tables[k], lane)
            finally:
                lane.ended(k)
            if k > 0:
                after_done[k - 1].wait()
            after_one(k, outcomes[k])
        except BaseException:  # noqa: BLE001 - run_one records its own failures; this is a bug: logged
            log.exception("tablemgmt: batch table %s", tables[k])
        finally:
            after_done[k].set()
            room.release()

    def launch() -> None:
        for k in range(n):
            room.acquire()
            if k > 0:
                lane.wait_handed(k - 1)
            if lane.killed:
                room.release()
                break
            t = threading.Thread(target=work, args=(k,), name=f"tablemgmt-batch-{k}", daemon=True)
            threads[k] = t
            t.start()
            started[k].set()
        for e in started:  # the tables never started: the main loop below records them
            e.set()

    launcher = threading.Thread(target=launch, name="tablemgmt-batch-launcher", daemon=True)
    given_up: set[int] = set()
    switch = sys.getswitchinterval()
    sys.setswitchinterval(min(switch, SWITCH_INTERVAL_S))
    try:
        launcher.start()
        for k in range(n):
            started[k].wait()
            if threads[k] is None:
                continue
            lane.run_job(k, limit_of(tables[k]))
            if not lane.handed(k):
                given_up.add(k)
        launcher.join()
    finally:
        lane.finish(n)
        sys.setswitchinterval(switch)
    log.info(
        "tablemgmt: batch of %d table(s): %.2f s in their jobs, %.2f s waiting for a table to be ready",
        n,
        lane.busy,
        lane.idle,
    )
    for k, t in enumerate(threads):
        if t is None:
            outcomes[k] = missing(tables[k], "not run: the batch's task was killed before it started", False)
            continue
        t.join(ABANDONED_JOIN_S if k in given_up else None)
        if outcomes[k] is None:
            outcomes[k] = missing(tables[k], "its run did not end within its time limit", True)
    return outcomes


__all__ = ["IN_FLIGHT", "QUIET_START_S", "BatchKilled", "Handoff", "JobLane", "run_overlapped"]
