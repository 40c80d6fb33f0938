"""A Connect job's own deadline on the table's lease, held by a process that is not the worker.

Under spark-submit the driver holds the job's deadline (``spark/job/lease_guard.py``): the worker
confirms every lease renewal to it and it kills itself when the confirmations stop. A Connect job has no
process of its own on the worker's host -- its operations run in the server's JVM -- so a worker that is
killed with -9 or *frozen* (SIGSTOP, a stalled VM) leaves its current operation running, and committing,
with nobody to stop it until the table's next holder comes along.

So each leased Connect job starts a small *guard* process (``python -m
airflow_tablemgmt.spark.connect.guard``, in a session of its own, so a kill of the worker's process
group or a stop of the worker alone does not reach it). The worker feeds it through a pipe:

* one JSON line first: the server's URL (with its token and user, never on a command line), the job's
  application id (``connect:<server>#<session>/<tag>``) and the first confirmation;
* then one line per successful renewal: the monotonic time until which the lease is confirmed (the
  renewal's send time + ``lease_ttl - heartbeat_every``, as for the driver's guard);
* ``done`` when the job ended: nothing of it is touched. A planned batch's next table's job then sends its
  own first line to the same guard (:class:`GuardProcess`, one per batch: a Python process started per
  table cost a small table ≈ 0.07 s of CPU); a single task's guard sees its pipe close and exits.

When a job's confirmation runs out (the worker froze, or its store hangs) or the pipe closes in the middle
of a job (the worker died), the guard interrupts that job's tag on its session and waits, bounded, until
the server reports every operation ended (``operations.stop_and_observe``), in a thread of its own, so a
later job of the batch is watched meanwhile; it exits once the pipe is closed and every such end is
observed. That is at least one heartbeat before the lease can lapse, by this host's ``CLOCK_MONOTONIC``
(shared by its processes). Each job has its own deadline and is the only one interrupted when its own
confirmation stops. The next holder still observes the end itself before it starts
(``lifecycle/predecessor.py``): the guard narrows the window, the observation is the guarantee.

Importing this module imports neither pyspark nor the lifecycle; the guard imports pyspark only to act.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time

log = logging.getLogger(__name__)

#: The line that tells the guard the job ended and it should exit without interrupting anything.
DONE = "done"
#: How long the guard, once it acted, waits for the server to report the job's operations ended.
END_BOUND_S = 60.0


class GuardProcess:
    """The guard process and the worker's end of its pipe: one per job, or one for a batch's jobs in turn."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def send(self, line: str, *, first: bool = False) -> None:
        """Write ``line``; ``first`` (a job's first line) starts the process when none runs (or it ended:
        it acted on an earlier job and exited, or was killed)."""
        with self._lock:
            if first and (self._proc is None or self._proc.poll() is not None):
                self._proc = subprocess.Popen(  # noqa: S603 - this interpreter, this module
                    [sys.executable, "-m", __name__],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    text=True,
                    start_new_session=True,  # not in the worker's process group: a killpg of the worker spares it
                )
            proc = self._proc
            if proc is None or proc.stdin is None:
                return
            try:
                proc.stdin.write(line + "\n")
                proc.stdin.flush()
            except (OSError, ValueError):  # the guard is gone (it acted, or was killed): nothing to feed
                log.debug("the Connect lease guard's pipe is closed", exc_info=True)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def close(self) -> None:
        """No job follows: close the pipe (the guard exits once it has nothing to observe). Never raises."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(Exception):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(timeout=1)
        except subprocess.TimeoutExpired:  # it is acting (it interrupted a job and waits for its end)
            log.info("the Connect lease guard %s is still observing a job's end; left to finish", proc.pid)


class ConnectLeaseGuard:
    """One job's guard: :meth:`start`, :meth:`confirm`, :meth:`done`. With ``process`` (a batch's), the job
    is watched by that process, which stays for the batch's next job; without, by a process of its own."""

    def __init__(self, url: str, application_id: str, process: GuardProcess | None = None) -> None:
        self.url = url
        self.application_id = application_id
        self._own = process is None
        self.process = GuardProcess() if process is None else process
        self._done = False

    @property
    def _proc(self) -> subprocess.Popen[str] | None:
        return self.process._proc  # noqa: SLF001 - the same module

    def start(self, until_monotonic: float) -> ConnectLeaseGuard:
        """Start watching the job with its first confirmation (before the job's first operation)."""
        head = {"url": self.url, "application_id": self.application_id, "until": until_monotonic}
        self.process.send(json.dumps(head), first=True)
        return self

    def confirm(self, until_monotonic: float) -> None:
        """The lease is confirmed until ``until_monotonic`` (this host's monotonic clock)."""
        if not self._done:
            self.process.send(repr(until_monotonic))

    def done(self) -> None:
        """The job ended: nothing of it is interrupted. Never raises."""
        if self._done:
            return
        self._done = True
        self.process.send(DONE)
        if self._own:
            self.process.close()


class _Lines:
    """Lines from a pipe's file descriptor, with a timeout (unbuffered: ``select`` sees every byte)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buf = b""
        self._eof = False

    def next(self, timeout: float | None) -> str | None:
        """The next line; '' at EOF; None when ``timeout`` (seconds, None: none) passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buf:
            if self._eof:
                return ""
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.fd, 4096)
            if not chunk:
                self._eof = True
                continue
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode("utf-8", "replace").strip() or " "


def watch(fd: int) -> str:
    """Watch the jobs the worker announces on ``fd``, one after another, until the pipe closes; act on a
    job whose confirmation ran out ('expired') or that was running when the pipe closed ('worker gone').
    Returns what happened to the last job ('done' when it ended without the guard acting; 'no job')."""
    lines = _Lines(fd)
    acting: list[threading.Thread] = []
    what = "no job"
    line = lines.next(None)
    while line:
        if not line.startswith("{"):  # a confirmation or "done" of a job already ended or acted on
            line = lines.next(None)
            continue
        try:
            head = json.loads(line)
        except ValueError:
            break
        url, app, until = head.get("url"), head.get("application_id"), float(head.get("until", 0.0))
        if not url or not app:
            break
        what, line = _watch_job(lines, url, app, until, acting)
    for thread in acting:
        thread.join()
    return what


def _watch_job(
    lines: _Lines, url: str, app: str, until: float, acting: list[threading.Thread]
) -> tuple[str, str]:
    """One job, from its first line: ``(what happened, the next line to read: '' at EOF)``."""
    while True:
        line = lines.next(until - time.monotonic())
        if line is None:
            why = "the lease confirmation ran out (the worker froze, or its store hangs)"
            _act(url, app, why, acting)
            return "expired", lines.next(None) or ""
        if line == "":
            _act(url, app, "the worker is gone (its pipe closed before the job ended)", acting)
            return "worker gone", ""
        if line == DONE:
            return "done", lines.next(None) or ""
        if line.startswith("{"):  # the next job's first line without this one's "done": ended too
            return "done", line
        with contextlib.suppress(ValueError):
            until = max(until, float(line))


def _act(url: str, app: str, why: str, acting: list[threading.Thread]) -> None:
    """Interrupt the job ``app`` and observe its end (bounded), in a thread: the pipe is watched meanwhile."""

    def end() -> None:
        from airflow_tablemgmt.spark.connect.operations import end_application

        job = app.split("#")[-1]
        _say(f"{why}: interrupting {job}")
        ended = end_application(app, END_BOUND_S, url)
        _say(f"{job} " + ("reported ended" if ended else f"not reported ended within {END_BOUND_S:g}s"))

    thread = threading.Thread(target=end, name="tablemgmt-guard-end")
    thread.start()
    acting.append(thread)


def _say(message: str) -> None:
    """A line on the worker's stderr (the task's log), which may be gone with the worker: never raises."""
    with contextlib.suppress(Exception):
        sys.stderr.write(f"tablemgmt: Connect lease guard: {message}\n")
        sys.stderr.flush()


def main() -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    watch(sys.stdin.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
