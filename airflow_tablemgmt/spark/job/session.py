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


class BackgroundSession:
    """:func:`build_session` in a thread of its own, so the job's main thread works while the JVM
    starts the session. Whatever starting it raises is raised again by :meth:`wait`."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._session: SparkSession | None = None
        self._error: BaseException | None = None
        self.seconds: float | None = None

    def start(self, catalog: CatalogSpec, name: str) -> None:
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
        """The session once it is up; raises what starting it raised."""
        session = self.join()
        if self._error is not None:
            raise self._error
        if session is None:
            raise RuntimeError("the SparkSession was never started")
        return session

    def join(self) -> SparkSession | None:
        """Wait for the start to end (if one began): the session, if it came up."""
        if self._thread is not None:
            self._thread.join()
        return self._session
