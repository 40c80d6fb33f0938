"""Freezing a worker (SIGSTOP) at an instant it holds no write lock on a SQLite store.

A process stopped inside a write transaction keeps SQLite's lock until it is thawed: no other process can
write the store, so no next holder could take the frozen worker's lease however long it waits (SQLite's
own limit for a frozen writer, not the lease's; the scenarios test the lease). Under load the worker's
1-second heartbeat is often mid-write when the signal lands, so the freeze is retried: stop, check the
store's lock, thaw at once if it is held, and stop again."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path


def freeze_outside_a_write(pid: int, database: Path | None, *, tries: int = 100) -> None:
    """SIGSTOP ``pid`` while it holds no lock on ``database`` (a SQLite file; ``None``: any instant)."""
    for _ in range(tries):
        os.kill(pid, signal.SIGSTOP)
        if database is None or not _locked(database):
            return
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.02)
    raise AssertionError(f"the worker {pid} held the lock on {database} at each of {tries} freezes")


def _locked(database: Path) -> bool:
    """Whether another process holds a lock that keeps a writer out (EXCLUSIVE waits for every reader's
    SHARED lock in rollback-journal mode and for the write lock in WAL mode)."""
    con = sqlite3.connect(database, timeout=0.3, isolation_level=None)
    try:
        con.execute("BEGIN EXCLUSIVE")
        con.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        con.close()
