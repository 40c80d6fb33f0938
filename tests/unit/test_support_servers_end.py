"""A server a test starts in a session of its own (the Spark Connect server's JVM) ends with the test process,
even when that process is killed with SIGKILL (``tests/support/processes.ends_with_this_process``): a killed
pytest left its Connect server running before."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.support.processes import group_members

STARTER = """
import subprocess, sys, time
from tests.support.processes import ends_with_this_process
server = subprocess.Popen(["sleep", "600"], start_new_session=True)
ends_with_this_process(server.pid)
print(server.pid, flush=True)
time.sleep(600)
"""


def test_a_server_started_by_a_killed_test_process_is_killed_with_it() -> None:
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER], stdout=subprocess.PIPE, text=True, cwd=os.getcwd(), env=os.environ
    )
    assert starter.stdout is not None
    group = int(starter.stdout.readline())
    time.sleep(1.5)
    assert group_members(group), "the server runs while its test process lives"
    os.kill(starter.pid, signal.SIGKILL)
    starter.wait(timeout=10)
    deadline = time.monotonic() + 10
    while group_members(group) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = group_members(group)
    if left:
        os.killpg(group, signal.SIGKILL)
    assert not left, f"the server outlived its test process: {left}"
