"""A worker killed with SIGKILL takes its job's process with it (the hook's parent-death signal).

The child here is ``sleep`` started exactly as SparkJobHook starts spark-submit (``Popen`` with
:func:`die_with_parent` as ``preexec_fn``): the point is the process relationship, not Spark. The
Spark-level proof (spark-submit's JVM and the PySpark driver dying with a SIGKILLed CLI) is
``tests/e2e/test_lifecycle_failures.py::test_worker_killed_with_sigkill_is_recovered_by_the_next_run``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

WORKER = """
import subprocess, sys
from airflow_tablemgmt.hooks.spark_submit_direct import die_with_parent
child = subprocess.Popen(["sleep", "300"], preexec_fn=die_with_parent())
print(child.pid, flush=True)
child.wait()
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux-only")
def test_the_job_process_dies_when_its_worker_is_killed() -> None:
    worker = subprocess.Popen([sys.executable, "-c", WORKER], stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout is not None
        child = int(worker.stdout.readline())  # the event: the child exists
        assert alive(child)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
        deadline = time.monotonic() + 30
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(child), f"job process {child} outlived its SIGKILLed worker"
    finally:
        if worker.poll() is None:
            worker.kill()
