"""How long this process has lived: one figure for the interpreter's start, the imports and the work before a
job (the job's own timings and a Connect job's client report it). Standard library only, so that the job's
entry point can read it before its other imports."""

from __future__ import annotations

import os
from pathlib import Path


def process_age() -> float | None:
    """Seconds since this process started (Linux ``/proc``, 10 ms resolution), else None."""
    try:
        stat = Path("/proc/self/stat").read_text()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        started_ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, starttime
        return max(uptime - started_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return None
