"""One warm Spark per test process for writing the e2e and fault tests' Iceberg tables.

Every such table used to be written by ``scripts/demo_table.py`` in a fresh local Spark (a driver JVM
started, Iceberg loaded, the JVM stopped: 20-40 s a table on the 2-core CI machine). The tables are
still written by Spark, through the same ``create_table``, but on one Spark Connect server per pytest
process (started on the first table, stopped when the session ends): a new Connect session per table,
its catalog set as session settings, as a maintenance job's is. ``TABLEMGMT_TEST_TABLES_LOCAL=1``
writes them in a local Spark again.
"""

from __future__ import annotations

import atexit
import os
import tempfile
import threading
from pathlib import Path

from tests.support.servers import stop_group

_lock = threading.Lock()
_server: tuple[object, str] | None = None


def writer_url() -> str | None:
    """The ``sc://`` URL of this process's table-writing server (started on the first call), or None
    when tables are to be written in a local Spark."""
    global _server
    if os.environ.get("TABLEMGMT_TEST_TABLES_LOCAL") == "1":
        return None
    with _lock:
        if _server is None:
            from airflow_tablemgmt.spark.connect.server import (
                free_port,
                server_spec,
                start_server,
                wait_for_port,
            )

            port = free_port()
            log = Path(tempfile.gettempdir()) / f"tms-table-writer-{os.getpid()}.log"
            proc = start_server(server_spec(port=port, master="local[2]"), log)
            try:
                wait_for_port("127.0.0.1", port, 300, proc)
            except BaseException:
                stop_group(proc)
                raise
            _server = (proc, f"sc://127.0.0.1:{port}")
            atexit.register(stop)
        return _server[1]


def stop() -> None:
    """Stop this process's server (the session's end; also at exit)."""
    global _server
    with _lock:
        if _server is not None:
            stop_group(_server[0])  # type: ignore[arg-type]
            _server = None
