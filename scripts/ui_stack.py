"""The processes of one `make ui` stack, for scripts/ui.sh to stop all of them.

Each component of `make ui` leads its own process group, but not everything it starts stays in that group
(a task's supervisor, a Spark JVM, a worker that calls setsid), and once a component exits its children are
re-parented to init, where no process group or parent link finds them. Two things still do: every process
started from the stack carries the stack's marker in its environment (``TABLEMGMT_UI_STACK=<id>``, exported
by ui.sh) unless it was given an environment of its own; Airflow's processes that retitle themselves
(setproctitle: the api-server's workers, serve-logs, the LocalExecutor's workers) overwrite that memory, so
/proc/<pid>/environ no longer shows it, but they keep the working directory ui.sh gave the stack (one of its
own, ``--cwd``); and, while the components are alive, every process is a descendant of one of them.
``list`` prints the union, one pid a line, never this process, its parent (ui.sh) or ui.sh's own helpers
that merely inherited the marker (``--exclude``).

    python scripts/ui_stack.py list --marker ID [--cwd DIR] [--root PID ...] [--exclude PID ...]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

MARKER = "TABLEMGMT_UI_STACK"


def _parents() -> dict[int, int]:
    """pid -> parent pid of every live process (zombies included: they still hold their pid)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        parents[int(entry.name)] = int(fields[1])
    return parents


def _has_marker(pid: int, value: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or not ours to read
        return False
    return f"{MARKER}={value}".encode() in environ.split(b"\0")


def _in_dir(pid: int, cwd: str | None) -> bool:
    if cwd is None:
        return False
    try:
        return os.readlink(f"/proc/{pid}/cwd") == cwd
    except OSError:
        return False


def stack_pids(marker: str, roots: list[int], exclude: set[int], cwd: str | None = None) -> list[int]:
    """The stack's live processes: descendants of ``roots`` (and the roots), every marked process and every
    process working in ``cwd``."""
    parents = _parents()
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    todo = [r for r in roots if r in parents]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    found.update(pid for pid in parents if _has_marker(pid, marker) or _in_dir(pid, cwd))
    return sorted(found - exclude - {os.getpid(), os.getppid()})


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    lst = sub.add_parser("list", help="print the stack's pids, one a line")
    lst.add_argument("--marker", required=True, help=f"the value of {MARKER}")
    lst.add_argument("--root", type=int, action="append", default=[], help="a component's pid")
    lst.add_argument("--exclude", type=int, action="append", default=[], help="a pid to leave out")
    lst.add_argument("--cwd", help="the stack's own working directory")
    args = parser.parse_args()
    cwd = os.path.realpath(args.cwd) if args.cwd else None
    for pid in stack_pids(args.marker, args.root, set(args.exclude), cwd):
        print(pid)


if __name__ == "__main__":
    main()
