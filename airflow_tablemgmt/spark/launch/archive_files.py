"""The class-data archive's files on disk (``spark/launch/class_cache.py``): atomic writes, the one
creator's lock and how a dead creator's lock is broken, dead creators' temp files, and pruning old
archives. Only the standard library; nothing here decides whether an archive is used.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from pathlib import Path

KEEP_ARCHIVES = 2
LOCK_STALE_S = 6 * 3600
_DYNAMIC_MAGIC = 0xF00BABA8
counter = itertools.count()  # makes this process's temp names unique


def unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{next(counter)}.w")
    tmp.write_text(text)
    os.replace(tmp, path)


def has_dynamic_magic(path: Path) -> bool:
    with path.open("rb") as f:
        head = f.read(4)
    return len(head) == 4 and int.from_bytes(head, "little") == _DYNAMIC_MAGIC


# --- one creator at a time ----------------------------------------------------------------------


def _proc_start(pid: int) -> str:
    """The process's start time in clock ticks since boot (Linux), so a reused pid is not mistaken for
    the lock's owner; "" where it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]


def host_tag() -> str:
    return socket.gethostname().replace(".", "_") or "host"


def _owner_alive(host: str, pid: int, start: str) -> bool:
    if host != socket.gethostname():
        return True  # another host's process: only the lock's age can tell
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not start or _proc_start(pid) in ("", start)


def _stale(content: str, mtime: float) -> bool:
    if time.time() - mtime > LOCK_STALE_S:
        return True
    try:
        host, pid, start = (content.split("\n")[0].split(" ") + ["", "", ""])[:3]
        return not _owner_alive(host, int(pid), start)
    except ValueError:
        return time.time() - mtime > 60  # unreadable: half-written, or garbage once it is old


def acquire(lock: Path) -> bool:
    """Create ``lock`` exclusively; break it once if its owner is gone. True when this process holds it."""
    me = f"{socket.gethostname()} {os.getpid()} {_proc_start(os.getpid())}\n"
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            try:
                content, mtime = lock.read_text(), lock.stat().st_mtime
            except FileNotFoundError:
                continue
            if not _stale(content, mtime):
                return False
            # Break it by renaming it away and checking that what moved is what was judged stale: a
            # creator that replaced it meanwhile gets its lock back.
            moved = lock.with_name(f"{lock.name}.{os.getpid()}.{next(counter)}.broken")
            try:
                os.rename(lock, moved)
            except FileNotFoundError:
                continue
            if moved.read_text() != content:
                try:
                    os.link(moved, lock)
                except FileExistsError:
                    pass
                unlink(moved)
                return False
            unlink(moved)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(me)
        return True
    return False


def remove_dead_temps(directory: Path) -> None:
    """Temp archives of creators that died (killed with their worker) before finishing or cleaning up."""
    host = host_tag()
    for temp in directory.glob("driver-*.tmp"):
        parts = temp.name.split(".")
        try:
            old = time.time() - temp.stat().st_mtime > LOCK_STALE_S
            dead = parts[-4] == host and not _owner_alive(socket.gethostname(), int(parts[-3]), "")
        except (OSError, ValueError, IndexError):
            continue
        if old or dead:
            unlink(temp)


def prune(directory: Path, keep: Path) -> None:
    """Keep the newest :data:`KEEP_ARCHIVES` archives (``keep`` always); a JVM that maps a removed one
    keeps it until it exits."""

    def mtime(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:  # removed meanwhile by another run's prune
            return 0.0

    archives = sorted(directory.glob("driver-*.jsa"), key=mtime, reverse=True)
    kept = 1
    for archive in archives:
        if archive == keep:
            continue
        if kept < KEEP_ARCHIVES:
            kept += 1
            continue
        unlink(archive)
