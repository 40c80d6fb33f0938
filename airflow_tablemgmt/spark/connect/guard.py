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
* ``done`` when the job ended: the guard exits without touching anything.

When the confirmation runs out (the worker froze, or its store hangs) or the pipe closes without ``done``
(the worker died), the guard interrupts the job's tag on its session and waits, bounded, until the server
reports every operation ended (``operations.stop_and_observe``), then exits. That is at least one
heartbeat before the lease can lapse, by this host's ``CLOCK_MONOTONIC`` (shared by its processes).
The next holder still observes the end itself before it starts (``lifecycle/predecessor.py``): the guard
narrows the window, the observation is the guarantee.

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


class ConnectLeaseGuard:
    """The worker's end of one job's guard process: :meth:`start`, :meth:`confirm`, :meth:`done`."""

    def __init__(self, url: str, application_id: str) -> None:
        self.url = url
        self.application_id = application_id
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def start(self, until_monotonic: float) -> ConnectLeaseGuard:
        """Start the guard with the job's first confirmation (before the job's first operation)."""
        proc = subprocess.Popen(  # noqa: S603 - this interpreter, this module
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # not in the worker's process group: a killpg of the worker spares it
        )
        self._proc = proc
        head = {"url": self.url, "application_id": self.application_id, "until": until_monotonic}
        self._send(json.dumps(head))
        return self

    def confirm(self, until_monotonic: float) -> None:
        """The lease is confirmed until ``until_monotonic`` (this host's monotonic clock)."""
        self._send(repr(until_monotonic))

    def done(self) -> None:
        """The job ended: the guard exits without interrupting anything. Never raises."""
        self._send(DONE)
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(Exception):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(timeout=1)
        except subprocess.TimeoutExpired:  # it is acting (it interrupted the job and waits for its end)
            log.info("the Connect lease guard %s is still observing the job's end; left to finish", proc.pid)

    def _send(self, line: str) -> None:
        with self._lock:
            proc = self._proc
            if proc is None or proc.stdin is None:
                return
            try:
                proc.stdin.write(line + "\n")
                proc.stdin.flush()
            except (OSError, ValueError):  # the guard is gone (it acted, or was killed): nothing to feed
                log.debug("the Connect lease guard's pipe is closed", exc_info=True)


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
    """Read the worker's confirmations from ``fd`` until the job is done ('done'), the confirmation ran
    out ('expired') or the worker is gone ('worker gone'); act on the last two. Returns what happened."""
    lines = _Lines(fd)
    first = lines.next(None)
    try:
        head = json.loads(first or "{}")
    except ValueError:
        return "no job"
    url, app, until = head.get("url"), head.get("application_id"), float(head.get("until", 0.0))
    if not url or not app:
        return "no job"
    while True:
        line = lines.next(until - time.monotonic())
        if line is None:
            what, why = "expired", "the lease confirmation ran out (the worker froze, or its store hangs)"
            break
        if line == "":
            what, why = "worker gone", "the worker is gone (its pipe closed before the job ended)"
            break
        if line == DONE:
            return "done"
        with contextlib.suppress(ValueError):
            until = max(until, float(line))
    from airflow_tablemgmt.spark.connect.operations import end_application

    job = app.split("#")[-1]
    _say(f"{why}: interrupting {job}")
    ended = end_application(app, END_BOUND_S, url)
    _say(f"{job} " + ("reported ended" if ended else f"not reported ended within {END_BOUND_S:g}s"))
    return what


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
