"""The job's SparkSession, started with the catalog's settings from the spec file, in a thread of its own."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.spark.conf import session_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def build_session(catalog: CatalogSpec, app_name: str) -> SparkSession:
    """Start the session with the catalog's settings, which are not on spark-submit's command line.

    They come from the spec file (its secrets included) and are set on the builder before the session
    exists, so ``spark.sql.catalog.*`` and ``spark.hadoop.*`` take effect in client and local mode.
    The session is the table's format's (``spark.conf.session_conf``): Iceberg's extensions and catalog,
    or Delta's / Hudi's extensions, session catalog and serializer, never two formats' at once.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    for key, value in session_conf(catalog).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def activate(session: SparkSession) -> None:
    """Make ``session`` the active session of the calling thread, on both sides of py4j.

    Spark's active session is per thread (the JVM's ``SparkSession.activeThreadSession`` is an
    ``InheritableThreadLocal``) and py4j runs each Python thread's calls on a JVM thread of its own
    (pinned-thread mode). ``getOrCreate`` sets it on the thread that built the session only; on any
    other thread ``SQLConf.get`` is Spark's fallback configuration, which defines no catalog, so
    Iceberg's ``Spark3Util.loadIcebergTable`` there took ``lake.db.t`` for a ``spark_catalog`` name
    (``REQUIRES_SINGLE_PART_NAMESPACE``) and the job fell back to a load through Spark's catalog.
    """
    from pyspark.sql import SparkSession

    jvm = session._jvm  # noqa: SLF001 - pyspark 3.5 has no public setActiveSession
    if jvm is not None:
        jvm.SparkSession.setActiveSession(session._jsparkSession)  # noqa: SLF001
    SparkSession._activeSession = session  # noqa: SLF001 - what getOrCreate sets on its own thread


class BackgroundSession:
    """:func:`build_session` in a thread of its own, so the job's main thread works while the JVM
    starts the session. Whatever starting it raises is raised again by :meth:`wait`."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._session: SparkSession | None = None
        self._error: BaseException | None = None
        self.seconds: float | None = None

    def start(self, catalog: CatalogSpec, name: str) -> None:
        """Start the session on a thread of its own, after importing pyspark on the caller's.

        The import (≈ 0.4 s of Python) comes first so that the thread's first act is to ask the JVM for
        the session: imported on the thread, it shared the interpreter with the caller's own imports and
        early read (one runs at a time), and the JVM's part of the start began ≈ 0.4 s later."""
        import pyspark.sql  # noqa: F401 - imported here on purpose, see above

        self._thread = threading.Thread(
            target=self._build, args=(catalog, name), name="tablemgmt-session", daemon=True
        )
        self._thread.start()

    def _build(self, catalog: CatalogSpec, name: str) -> None:
        started = time.perf_counter()
        try:
            self._session = build_session(catalog, name)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread by wait()
            self._error = e
        finally:
            self.seconds = time.perf_counter() - started

    def wait(self) -> SparkSession:
        """The session once it is up, made the active one of the calling thread; raises what starting
        it raised."""
        session = self.join()
        if self._error is not None:
            raise self._error
        if session is None:
            raise RuntimeError("the SparkSession was never started")
        activate(session)
        return session

    def join(self) -> SparkSession | None:
        """Wait for the start to end (if one began): the session, if it came up."""
        if self._thread is not None:
            self._thread.join()
        return self._session
