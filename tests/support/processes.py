"""Process-group helpers for tests that kill workers and check what is left of a Spark job."""

from __future__ import annotations

from pathlib import Path


def group_members(pgid: int) -> dict[int, str]:
    """Live (non-zombie) processes of a process group: pid -> command line."""
    found: dict[int, str] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            state, _ppid, pgrp = (proc / "stat").read_text().rsplit(")", 1)[1].split()[:3]
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        if int(pgrp) == pgid and state != "Z":
            found[int(proc.name)] = cmdline
    return found


_WATCH = """
import os, signal, sys, time
parent, group = int(sys.argv[1]), int(sys.argv[2])
def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
while alive(group):
    if os.getppid() != parent or not alive(parent):
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
        break
    time.sleep(1.0)
"""


def ends_with_this_process(group: int) -> None:
    """Kill the process group ``group`` (a server a test started in a session of its own) once this process
    is gone, however it ends (a ``kill -9`` of pytest, a CI timeout): a watcher process checks every second,
    and leaves on its own once the group has ended."""
    import os
    import subprocess
    import sys

    subprocess.Popen(
        [sys.executable, "-c", _WATCH, str(os.getpid()), str(group)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
