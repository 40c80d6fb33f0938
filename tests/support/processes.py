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
