"""The last few metadata files this process walked: a table's metadata and its current snapshot's live
entries, kept for a short while by the metadata file's location.

Why: a worker reads one table several times at the same metadata file within a second. A planned batch's
table is read by its health gate and by its job's figures before the job (both at the table's metadata
before the job), then by its job's figures after and by its health measured after (both at the file the
job committed); on Spark Connect the job runs in the worker's own process, so each of those walked the same
manifests with pyiceberg (reading the metadata JSON, the manifest list and every manifest), on the cores
the server's procedure needs. Now the second read at a location takes the first one's walk.

Why it is safe: an Iceberg metadata file is never rewritten once committed (each commit writes a new one),
and it names the manifest list and the manifests its snapshots read, which are never rewritten either. Two
things could still put different content at one location, and neither is served: a hadoop table dropped
and created again (its ``v1.metadata.json`` is written anew): a local file's size and modification time are
part of the key, and no walk is kept longer than :data:`TTL_S`; and a read made with other FileIO settings
(another catalog's credentials): the walk is the same files' content, whoever read them. Bounded:
:data:`SIZE` locations and :data:`MAX_ENTRIES` live entries in all (a larger table is not kept).

Like the rest of ``metadata/`` this imports neither Airflow nor pyspark.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_tablemgmt.metadata.iceberg import local_warehouse_path

#: Locations kept (a batch reads at most two of one table's in a row, the next table's beside them).
SIZE = 8
#: Live entries kept in all: a walk with more is not kept (a table that large pays its reads anyway).
MAX_ENTRIES = 5_000
#: No walk is served older than this (seconds).
TTL_S = 60.0


@dataclass(frozen=True)
class Walk:
    """What one read found at a metadata file: the parsed metadata, its current snapshot's manifests and
    their live entries (data and delete files, ``deletes.live_entries``)."""

    metadata: Any
    manifests: tuple[Any, ...]
    entries: tuple[Any, ...]


class RecentWalks:
    """The last :data:`SIZE` walks by location (thread-safe; ``hits``/``misses`` for tests and benchmarks)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._walks: OrderedDict[tuple[str, Any], tuple[float, Walk]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def walk(self, location: str, load: Callable[[], Walk]) -> Walk:
        """The walk of the metadata file at ``location``: a recent one, else ``load()`` (kept when small)."""
        key = _key(location)
        now = self._clock()
        with self._lock:
            kept = self._walks.get(key)
            if kept is not None and now - kept[0] < TTL_S:
                self._walks.move_to_end(key)
                self.hits += 1
                return kept[1]
            self.misses += 1
        walk = load()
        if len(walk.entries) > MAX_ENTRIES:
            return walk
        with self._lock:
            self._walks[key] = (now, walk)
            self._walks.move_to_end(key)
            while (
                len(self._walks) > SIZE or sum(len(w.entries) for _, w in self._walks.values()) > MAX_ENTRIES
            ):
                self._walks.popitem(last=False)
        return walk

    def clear(self) -> None:
        with self._lock:
            self._walks.clear()


def _key(location: str) -> tuple[str, Any]:
    """A local metadata file by its path (``file:/p`` and ``/p`` alike), its size and modification time (a
    table created again at the same path writes its ``v1.metadata.json`` anew); another store's by its
    location alone, bounded by :data:`TTL_S`."""
    path = local_warehouse_path(location)
    if path is None:
        return location, None
    try:
        st = os.stat(path)
    except OSError:
        return path, None
    return path, (st.st_size, st.st_mtime_ns)


#: The process's recent walks (``files.py`` reads through :func:`walk_at`).
RECENT = RecentWalks()


def walk_at(location: str, load: Callable[[], tuple[Any, Any]]) -> Walk:
    """The metadata file at ``location`` and its current snapshot's live entries: a recent walk of it, else
    ``load()`` (its metadata and a FileIO) and its manifests read (``deletes.live_entries``)."""
    from airflow_tablemgmt.metadata.deletes import live_entries

    def walk() -> Walk:
        metadata, io = load()
        snapshot = metadata.current_snapshot()
        manifests = tuple(snapshot.manifests(io)) if snapshot is not None else ()
        return Walk(metadata, manifests, tuple(live_entries(io, manifests)))

    return RECENT.walk(location, walk)


__all__ = ["MAX_ENTRIES", "RECENT", "SIZE", "TTL_S", "RecentWalks", "Walk", "walk_at"]
