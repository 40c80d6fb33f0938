"""The driver's own deadline on the table's lease: a dead man's switch fed by the worker's renewals.

The worker renews the table's lease every ``heartbeat_every``; its lease watchdog kills the job when
no renewal succeeded in time. Both live in the worker's process: a worker that *freezes* (SIGSTOP, a
paused container, a stalled VM) cannot stop the driver it started, and the driver would commit after
the lease lapsed and another worker took the table. So the worker also *confirms* each renewal to the
driver: beside the job's spec it rewrites a small file, ``lease.json`` (atomic rename), saying until
when the lease is confirmed (:func:`confirm`): the renewal's send time plus the watchdog's deadline
(``lease_ttl - heartbeat_every``), i.e. at least one heartbeat before the lease can lapse.

In the driver, :class:`LeaseGuard` (started by ``spark/job/main.py`` when that file exists) reads it
every :data:`TICK_S`; once the confirmation has run out it SIGKILLs the driver JVM (where the Spark
jobs and every Iceberg/Delta/Hudi/Paimon commit run: nothing commits after that) and hard-exits the
Python driver (``os._exit``). :func:`fence` is the same test made synchronously right before a commit
step (the maintainer's call, a dynamic refresh's final write): it raises :class:`LeaseNotConfirmed`
instead of letting the step start.

The deadline is compared on this host's ``CLOCK_MONOTONIC`` (shared by all processes of one boot;
a wall-clock step changes nothing) when the file was written on the same boot, else by the wall clock.
No file, no guard: a job without a lease (a read-only action, ``tablemgmt`` run by hand) or a driver
that cannot see the worker's directory (cluster mode on another host: docs/adr/0002).
No pyspark import: the worker writes the file with this module too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

#: The file beside the job's spec (``job.json``) that the worker rewrites on every renewal.
LEASE_FILE = "lease.json"
#: The file beside the confirmation where a guard that stopped the driver says why (the worker reads it: the
#: driver's stderr dies with the JVM it killed).
STOP_FILE = "lease-stop.txt"
#: How often the driver looks at the confirmation.
TICK_S = 0.1
#: The driver's exit code when the guard stopped it (EX_TEMPFAIL).
EXIT_CODE = 75


class LeaseNotConfirmed(RuntimeError):
    """The worker has not confirmed the table's lease in time: the job must not commit."""


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


@dataclass(frozen=True)
class Confirmation:
    """The lease is confirmed until ``until_monotonic`` (this boot's monotonic clock) / ``until_epoch``."""

    until_monotonic: float
    until_epoch: float
    boot: str | None = None

    def remaining(self) -> float:
        """Seconds left; the monotonic clock when written on this boot, else the wall clock."""
        if self.boot is not None and self.boot == boot_id():
            return self.until_monotonic - time.monotonic()
        return self.until_epoch - time.time()


def confirm(path: Path, *, sent_monotonic: float, valid_for: float) -> None:
    """Write (atomically) that the lease renewed by a call sent at ``sent_monotonic`` is confirmed for
    ``valid_for`` seconds from then. Raises OSError when the file cannot be written."""
    until = sent_monotonic + valid_for
    record = {
        "until_monotonic": until,
        "until_epoch": time.time() + (until - time.monotonic()),
        "boot_id": boot_id(),
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(record, out)
    os.replace(tmp, path)


def read(path: Path) -> Confirmation | None:
    """The confirmation in ``path``; None when there is none (or it cannot be read)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return Confirmation(float(raw["until_monotonic"]), float(raw["until_epoch"]), raw.get("boot_id"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


class LeaseGuard:
    """Watches ``path``; when the confirmation runs out, stops the driver for good (:meth:`lapse`)."""

    def __init__(self, path: Path, first: Confirmation, *, tick: float = TICK_S) -> None:
        self.path = path
        self._last = first
        self._tick = tick
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="tablemgmt-lease-guard", daemon=True)

    def start(self) -> LeaseGuard:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def remaining(self) -> float:
        """Seconds of confirmed lease left (the newest readable confirmation; a torn read keeps the last)."""
        newest = read(self.path)
        if newest is not None:
            self._last = newest
        return self._last.remaining()

    def fence(self, where: str) -> None:
        """Raise :class:`LeaseNotConfirmed` unless the lease is confirmed now (right before ``where``)."""
        left = self.remaining()
        if left <= 0:
            raise LeaseNotConfirmed(
                f"the table's lease was not confirmed by the worker in time ({-left:.1f}s overdue) before "
                f"{where}: the worker froze or lost its lease, so the job stops before committing"
            )

    def _watch(self) -> None:
        while not self._stop.wait(self._tick):
            left = self.remaining()
            if left <= 0:
                self.lapse(f"{-left:.2f}s past the lease confirmation in {self.path}")
                return

    def lapse(self, why: str) -> None:
        """Stop the driver now: SIGKILL to the driver JVM (its Spark jobs and commits), then exit. Why is
        written beside the confirmation first (:data:`STOP_FILE`), for the worker's failure reason."""
        said = (
            f"the lease guard stopped the Spark driver: {why}; the worker had not confirmed the table's "
            "lease (frozen or gone), so the job was killed before the lease could lapse"
        )
        with contextlib.suppress(Exception):
            self.path.with_name(STOP_FILE).write_text(said + "\n")
        with contextlib.suppress(Exception):
            sys.stderr.write(f"tablemgmt: {said}\n")
            sys.stderr.flush()
        for pid in driver_jvms():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        os._exit(EXIT_CODE)


def driver_jvms() -> list[int]:
    """The JVM(s) running this driver's Spark: the parent when a JVM launched this Python process
    (spark-submit's PythonRunner, a cluster's DriverWrapper), else JVM children pyspark started."""

    def is_java(pid: int) -> bool:
        try:
            return os.path.basename(os.readlink(f"/proc/{pid}/exe")).startswith("java")
        except OSError:
            return False

    parent = os.getppid()
    if os.environ.get("PYSPARK_GATEWAY_PORT") and is_java(parent):
        return [parent]
    children: list[int] = []
    me = str(os.getpid())
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == me and is_java(int(entry)):
                children.append(int(entry))
    return children


_ACTIVE: LeaseGuard | None = None


def start_beside(spec_path: Path) -> LeaseGuard | None:
    """Start the guard for the job whose spec is ``spec_path`` when the worker left a confirmation
    beside it; None (no guard) otherwise. A confirmation that has already run out stops the driver."""
    global _ACTIVE
    path = Path(spec_path).with_name(LEASE_FILE)
    first = read(path)
    if first is None:
        return None
    guard = LeaseGuard(path, first)
    if first.remaining() <= 0:
        guard.lapse("the lease confirmation had run out before the driver started")
    _ACTIVE = guard.start()
    log.info("lease guard on: %.1fs of confirmed lease left", first.remaining())
    return guard


def stop_active() -> None:
    """Stop this driver's guard (a batch's driver, ``batch.py``, when a table's job has ended: the next
    table runs under its own lease and guard)."""
    global _ACTIVE
    if _ACTIVE is not None:
        _ACTIVE.stop()
        _ACTIVE = None


def fence(where: str) -> None:
    """:meth:`LeaseGuard.fence` of this driver's guard; nothing without one (no lease, Spark Connect)."""
    if _ACTIVE is not None:
        _ACTIVE.fence(where)
