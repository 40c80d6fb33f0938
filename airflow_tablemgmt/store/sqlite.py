"""The embedded SQLite store's file: created private (0600) before SQLite opens it, in WAL mode."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL

from airflow_tablemgmt.store.errors import StoreNotFound, StoreUnavailable
from airflow_tablemgmt.store.timeouts import SQLITE_BUSY_TIMEOUT_MS


def is_memory_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def prepare_sqlite_file(path: Path, *, create: bool) -> None:
    """Create the store file 0600 (its missing directories 0700) before SQLite opens it.

    SQLite would create it with the process umask (usually world-readable); its WAL and shm
    files take the database file's mode, so they are private too. Without ``create`` a
    missing file is an error and nothing is created.
    """
    if path.exists():
        return
    if not create:
        raise StoreNotFound(
            f"no store at {path}; run `tablemgmt db upgrade` to create it, or point --store-url / "
            "the tablemgmt_default connection at an existing store"
        )
    try:
        missing = []
        parent = path.parent
        while not parent.exists():
            missing.append(parent)
            parent = parent.parent
        for directory in reversed(missing):
            try:
                os.mkdir(directory, 0o700)
            except FileExistsError:
                if not directory.is_dir():
                    raise
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            pass  # another process created it first
    except OSError as e:
        raise StoreUnavailable(
            f"cannot create the SQLite store at {path}: {e.strerror or e}"
            f"{f' ({e.filename})' if e.filename and str(e.filename) != str(path) else ''}; "
            "choose a writable path in --store-url / the tablemgmt_default connection"
        ) from None


def enable_wal(cursor: Any) -> None:
    """Switch the file to WAL (a persistent setting) unless it already is.

    The switch needs an exclusive lock, and SQLite answers "database is locked" at once,
    without its busy handler, while another process holds one (e.g. while it migrates a fresh
    file): retry until the busy timeout.
    """
    if cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
        return
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
