"""Opening a session on a Spark Connect server: the client's import, the session's URL and id, the retry
policy of its gRPC calls. Used by the engine (``session.py``), by what observes and ends its operations
(``operations.py``) and by the probe; it imports none of them."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.connect.session import SparkSession as RemoteSession

#: What the job's gRPC calls retry when the server does not answer, before the job fails: ~5 s in all
#: (pyspark's default is 15 retries up to a minute apart, minutes in all). Airflow's retry does the rest.
RETRY_POLICY = {"max_retries": 3, "initial_backoff": 250, "max_backoff": 4000, "backoff_multiplier": 4.0}
#: Prefix of the ids the engine reports as the process's application id: ``connect:<url>#<session id>``.
APP_ID_PREFIX = "connect:"


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
    return time.perf_counter() - started


def open_session(url: str, session_id: str | None = None) -> RemoteSession:
    """A remote session on ``url`` (never the process's default session), with the retry policy: a new
    one, or the server-side session ``session_id`` names (created on the server when it has none)."""
    import_client()
    from pyspark.sql.connect.session import SparkSession

    session = SparkSession(connection=session_url(url, session_id or str(uuid.uuid4())))
    session.client._retry_policy.update(RETRY_POLICY)  # noqa: SLF001 - the reattach iterator shares this dict
    return session


__all__ = ["APP_ID_PREFIX", "RETRY_POLICY", "import_client", "open_session", "server_of", "session_url"]
