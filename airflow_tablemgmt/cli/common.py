"""What every command shares: the store it opens, logs kept off stdout, ``KEY=VALUE`` flags, and the
start-up/shutdown handling of the garbage collector (a ``tablemgmt run`` pays for its start-up on top of
the Iceberg procedure, issue 14)."""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from airflow_tablemgmt import services

if TYPE_CHECKING:
    from airflow_tablemgmt.store import Store

DEBUG_ENV = "TABLEMGMT_DEBUG"  # set to 1 to see the traceback of an unexpected error

# Whether this process's command line turned the garbage collector off for its start-up.
_COLLECTOR = {"off_for_start_up": False}


@contextlib.contextmanager
def logs_to_stderr() -> Iterator[None]:
    """Airflow configures its logging on import with handlers bound to the ``sys.stdout`` of that
    moment; importing (and running) under this context sends those logs to stderr, so the command's
    own output on stdout (``--json``) stays parseable."""
    out = sys.stdout
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        sys.stdout = out


def open_store(args: argparse.Namespace, *, create: bool = True) -> Store:
    """The store named by --store-url, else by the tablemgmt_default connection (hook rules apply).

    ``create=False`` for commands that only read or remove: they never create a store file.
    """
    from airflow_tablemgmt.store import Store

    if args.store_url:
        store = Store.for_url(args.store_url, create=create)
    else:
        with logs_to_stderr():
            from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

            store = TableMgmtHook().get_store(create=create)
    store.ping()
    start_up_done()
    return store


def pairs(values: Sequence[str] | None, flag: str, example: str) -> dict[str, str]:
    """``KEY=VALUE`` flags as a dict; a malformed one is refused naming the flag and an example."""
    out: dict[str, str] = {}
    for pair in values or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise services.InvalidInput(f"{flag}: {pair!r} must look like KEY=VALUE, e.g. {example}")
        out[key.strip()] = value
    return out


def positive_seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return seconds


def collector_off_for_start_up() -> None:
    if gc.isenabled():
        gc.disable()
        _COLLECTOR["off_for_start_up"] = True


def start_up_done() -> None:
    """The command's start-up is over (its store is open): freeze what the imports created out of the
    collector's reach and turn the collector back on for the work, which may be a long Spark job.

    The imports (SQLAlchemy, pydantic, Airflow when the store comes through its connection) allocate
    hundreds of thousands of objects that live as long as the process; with the collector on, the
    collections they trigger rescan them all again and again: measured, 30-45 ms of CPU before a
    maintenance run reaches spark-submit.
    """
    if _COLLECTOR["off_for_start_up"]:
        _COLLECTOR["off_for_start_up"] = False
        gc.freeze()
        gc.enable()


def end_of_process() -> None:
    """Close the stores the command opened, then freeze the garbage collector's generations.

    Closing them here is what the interpreter's shutdown did anyway (a SQLite store's last connection
    folds its WAL back into the file). Freezing spares that shutdown a full collection over every
    object the command created: measured, 0.1-0.15 s of each command, a maintenance run included,
    for nothing, as the process is about to end.
    """
    engine = sys.modules.get("airflow_tablemgmt.store.engine")
    if engine is not None:
        engine.Store.clear_cache()
    start_up_done()  # a command that never opened a store
    gc.freeze()
