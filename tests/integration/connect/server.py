"""A real Spark Connect server for tests: ``spark-submit`` of the server class with the resolved
jars (Iceberg runtime, ``spark-connect_2.12``), on a free loopback port."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from airflow_tablemgmt.spark.errors import ArtifactError
from tests.integration.iceberg_session import skip_unless_ci
from tests.support.processes import ends_with_this_process


@dataclass
class ConnectServer:
    url: str
    port: int
    process: subprocess.Popen
    log: Path
    spec: object

    def kill9(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)


def start_connect_server(log: Path, port: int | None = None) -> ConnectServer:
    from airflow_tablemgmt.spark.connect.server import free_port, server_spec, start_server, wait_for_port

    port = port or free_port()
    try:
        # Its web UI on a free port: its REST status API is where a job's cost is read (spark/connect/cost.py).
        spec = server_spec(port=port, master="local[2]", ui_port=free_port())
    except ArtifactError as e:
        skip_unless_ci(f"Spark Connect jars not available: {e}")
    process = start_server(spec, log)
    ends_with_this_process(process.pid)  # a killed pytest leaves no server behind
    try:
        wait_for_port("127.0.0.1", port, 180, process)
    except (TimeoutError, RuntimeError) as e:
        os.killpg(process.pid, signal.SIGKILL)
        raise AssertionError(f"{e}\n{log.read_text(errors='replace')[-3000:]}") from None
    return ConnectServer(f"sc://127.0.0.1:{port}", port, process, log, spec)
