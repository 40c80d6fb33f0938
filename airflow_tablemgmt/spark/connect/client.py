"""Opening a session on a Spark Connect server: the client's import, the session's URL and id, the retry
policy of its gRPC calls. Used by the engine (``session.py``), by what observes and ends its operations
(``operations.py``) and by the probe; it imports none of them."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from airflow_tablemgmt.core.process_age import process_age

if TYPE_CHECKING:
    from pyspark.sql.connect.session import SparkSession as RemoteSession

#: What the job's gRPC calls retry when the server does not answer, before the job fails: ~5 s in all
#: (pyspark's default is 15 retries up to a minute apart, minutes in all). Airflow's retry does the rest.
RETRY_POLICY = {"max_retries": 3, "initial_backoff": 250, "max_backoff": 4000, "backoff_multiplier": 4.0}
#: Prefix of the ids the engine reports as the process's application id: ``connect:<url>#<session id>``.
APP_ID_PREFIX = "connect:"
_AT_FORK = False  # the child's fresh release pool is registered (once per process)


def session_url(url: str, session_id: str) -> str:
    """``url`` (``sc://host:port[/;params]``) with ``session_id`` as its session."""
    base = url.rstrip("/")
    return f"{base};session_id={session_id}" if "/;" in base else f"{base}/;session_id={session_id}"


def server_of(url: str) -> str:
    """``sc://host:port`` of ``url``, without its parameters (which may hold a token)."""
    return url.split("/;", 1)[0].rstrip("/")


def import_client() -> float:
    """Import pyspark's Connect client; the seconds it took (0 when already imported).

    pyspark 3.5 imports ``distutils.version`` for a version check; setuptools' ``distutils`` shim (on by
    default in a venv) would import all of setuptools for it (~0.4-0.7 s of a task's start). The shim is
    stepped around for this import only, so the standard library's module answers."""
    import sys
    import time
    import warnings

    if "pyspark.sql.connect.session" in sys.modules:
        _fresh_release_pool_after_fork()
        _channel_only_close()
        _quiet_client_log()
        return 0.0
    started = time.perf_counter()
    hack = sys.modules.get("_distutils_hack")
    shimmed = hack is not None and "distutils" not in sys.modules and hasattr(hack, "remove_shim")
    if shimmed:
        hack.remove_shim()  # type: ignore[union-attr]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import pyspark.sql.connect.session  # noqa: F401
    finally:
        if shimmed:
            hack.add_shim()  # type: ignore[union-attr]
    _fresh_release_pool_after_fork()
    _channel_only_close()
    _quiet_client_log()
    return time.perf_counter() - started


#: pyspark's own switch for its Connect client's log (its level name); when set, the log is left as it says.
CLIENT_LOG_ENV = "SPARK_CONNECT_LOG_LEVEL"


def _quiet_client_log() -> None:
    """Keep pyspark's Connect client log at warnings, as pyspark means it to be unless
    ``SPARK_CONNECT_LOG_LEVEL`` asks for more.

    pyspark 3.5 gives that logger a handler of its own and disables it at import. Airflow's logging set-up
    (``dictConfig`` with ``disable_existing_loggers: False``) enables every logger imported before it, so
    in a task each gRPC call was logged at INFO, twice (pyspark's handler and the task's): every job's SQL
    and three lines per operation, in the task log and on the thread that runs the batch's jobs. A level
    survives that set-up; warnings and errors still reach the task log. A level set on the logger by a
    deployment's own logging configuration is left as it is."""
    import logging
    import os

    if CLIENT_LOG_ENV in os.environ:
        return
    client_log = logging.getLogger("pyspark.sql.connect.client.core")
    if client_log.level == logging.NOTSET:  # a level someone chose (a logging config's) is theirs
        client_log.setLevel(logging.WARNING)


def _fresh_release_pool_after_fork() -> None:
    """pyspark 3.5 creates the thread pool that sends ``ReleaseExecute`` (``reattach.py``) when it is
    imported, threads included. A process forked after the import (a task forked from a warm parent:
    ``warm.py``) inherits the pool without its threads: the releases it queues are never sent (the server
    keeps those operations' results until it abandons them). In the child the pool is dropped, so pyspark
    makes one with live threads on its first operation."""
    global _AT_FORK
    if _AT_FORK:
        return
    _AT_FORK = True
    import os
    from threading import RLock

    def in_child() -> None:
        from pyspark.sql.connect.client.reattach import ExecutePlanResponseReattachableIterator as Iterator

        Iterator._release_thread_pool = None  # noqa: SLF001 - pyspark makes a new one when it is None
        Iterator._lock = RLock()  # noqa: SLF001 - never one a parent's thread held at the fork

    os.register_at_fork(after_in_child=in_child)


def open_session(url: str, session_id: str | None = None) -> RemoteSession:
    """A remote session on ``url`` (never the process's default session), with the retry policy: a new
    one, or the server-side session ``session_id`` names (created on the server when it has none)."""
    import_client()
    from pyspark.sql.connect.session import SparkSession

    session = SparkSession(connection=session_url(url, session_id or str(uuid.uuid4())))
    session.client._retry_policy.update(RETRY_POLICY)  # noqa: SLF001 - the reattach iterator shares this dict
    return session


def close_session(session: RemoteSession) -> None:
    """Close ``session``'s channel (the server-side session stays); see :func:`_channel_only_close`."""
    session.stop()


#: How long a client's close waits for the releases queued before it (each one gRPC call, milliseconds).
RELEASE_WAIT_S = 5.0


def _channel_only_close() -> None:
    """Make every Connect client of this process close its own channel only (once per process).

    pyspark 3.5's ``SparkConnectClient.close`` first shuts down the process-wide pool that sends
    ``ReleaseExecute`` (``ExecutePlanResponseReattachableIterator.shutdown``) and waits for its threads:

    - an operation of another session streaming its results meanwhile failed with ``ValueError: Pool not
      running`` (a batch's lane closing its table's session beside another lane's query; a test's observer
      session closed beside the job's);
    - ``SparkSession.__del__`` closes the client again whenever the object is collected; collected by
      Python's cycle collector inside one of the pool's own threads, the close waited for itself forever,
      holding the lock every later ``ExecutePlan`` of the process takes (a batch of Connect jobs hung).

    So the pool stays for the process, and a close waits (up to :data:`RELEASE_WAIT_S`) for the releases
    queued before it, those of its own session's operations among them, then closes its channel."""
    from pyspark.sql.connect.client.core import SparkConnectClient

    if getattr(SparkConnectClient.close, "_channel_only", False):
        return

    def close(self: SparkConnectClient) -> None:
        if not self._closed:  # noqa: SLF001
            _wait_for_queued_releases(RELEASE_WAIT_S)
        self._channel.close()  # noqa: SLF001
        self._closed = True  # noqa: SLF001

    close._channel_only = True  # type: ignore[attr-defined]
    SparkConnectClient.close = close  # type: ignore[method-assign]


def _wait_for_queued_releases(timeout: float) -> None:
    """Wait up to ``timeout`` s for the ``ReleaseExecute`` calls queued in pyspark's pool so far; not in
    one of the pool's own threads (a session collected there would wait for the call it is part of)."""
    import threading
    import time

    from pyspark.sql.connect.client.reattach import ExecutePlanResponseReattachableIterator as Iterator

    pool = Iterator._release_thread_pool  # noqa: SLF001 - pyspark keeps no other handle on it
    if pool is None or threading.current_thread() in getattr(pool, "_pool", ()):
        return
    queued = list(getattr(pool, "_cache", {}).values())  # multiprocessing.pool's calls not yet done
    deadline = time.monotonic() + timeout
    for call in queued:
        call.wait(max(0.0, deadline - time.monotonic()))


__all__ = [
    "APP_ID_PREFIX",
    "RETRY_POLICY",
    "close_session",
    "import_client",
    "open_session",
    "process_age",
    "server_of",
    "session_url",
]
