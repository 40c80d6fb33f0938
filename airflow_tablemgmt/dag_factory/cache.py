"""A per-host cache of built DAGs, per table, for the DAG file's full parse.

(Just over 400 lines: the cache's key and its build are read together so a key that misses an input
cannot go unnoticed; the next split is the key building (table, policies, code) into a module of its own.)

Building a DAG is mostly Airflow's own constructors (``DAG``, the operators, the asset and its
watcher): at 10,000 tables that is most of a full parse, and a dag-processor parses the file again
and again with nothing changed. Unpickling the same DAGs costs a small fraction of building them,
so a full parse keeps every table's DAGs (pickled together, so they keep sharing the table's asset;
tables are grouped in shards, see :data:`SHARDS`) in one file per DAG file under
``$AIRFLOW_HOME/tablemgmt/dag-cache/`` (``[tablemgmt] dag_cache_dir``; ``off`` disables it), and
builds only the tables whose entry is missing or stale.

* An entry's key is a digest of what the table's DAGs are built from: its spec, its catalog's spec,
  the policies that match it (a policy's change rebuilds its tables; only those built are merged,
  ``store/effective.py``) and, for a dynamic table scheduled after its upstreams, how they resolve.
* The file's key is a digest of everything else that feeds a built DAG (:func:`global_key`): this
  package's code and location, the Python, Airflow and pickle versions, the process-factory
  plugins, the DAG file, the Airflow configuration (every ``AIRFLOW__*`` variable, the bytes of
  ``airflow.cfg``, the settings the DAG factory reads). A mismatch discards every entry unread.
* Tables whose build failed and the broken-declarations DAG are never cached: their errors come
  from a build every parse.
* Pickle runs code on load, so the directory is made 0700, files are written 0600 and a file that
  is not the current user's, or is group- or world-writable, is ignored (WARNING) and replaced. A
  file that cannot be read or unpickled is a WARNING and a full build: the cache never fails a
  parse. The file is replaced atomically (a temporary file and ``os.replace``), so two
  dag-processors writing at once leave one whole file.

The single-DAG parse of a task start does not use the cache: it builds its one DAG.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import stat
import sys
import tempfile
import time
import zlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_tablemgmt.core.formats import ENTRY_POINT_GROUP
from airflow_tablemgmt.core.naming import BROKEN_DAG_ID, table_of
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.dag_factory.assets import REFRESH, watchers_of
from airflow_tablemgmt.dag_factory.build import (  # a full parse freezes as build_dags does: FREEZE_AT_DAGS
    FREEZE_AT_DAGS,
    BuildResult,
    DagConfigDefaults,
    build_dags,
    cyclic_gc_paused,
    dynamic_table_ids,
    triggerer_slots,
)
from airflow_tablemgmt.factories.discovery import FactoryRegistry
from airflow_tablemgmt.store.effective import PolicyMerge

log = logging.getLogger(__name__)

# Bumped when the file's layout changes.
FORMAT = 2
OFF = "off"


@dataclass
class CacheStats:
    """What the last full parse did with the cache (``last_stats``; the benchmark prints it)."""

    path: str | None = None
    hits: int = 0
    built: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    wrote: bool = False
    discarded: str | None = None  # why the whole file was not used, if it was not
    read_s: float = 0.0  # CPU seconds: the keys, reading the file, unpickling the hits
    write_s: float = 0.0  # CPU seconds: pickling the changed shards, writing the file


last_stats = CacheStats()


def cache_dir() -> Path | None:
    """``[tablemgmt] dag_cache_dir``, else ``$AIRFLOW_HOME/tablemgmt/dag-cache``; None when ``off``."""
    from airflow.sdk.configuration import conf

    value = (conf.get("tablemgmt", "dag_cache_dir", fallback="") or "").strip()
    if value.lower() == OFF:
        return None
    if value:
        return Path(value).expanduser()
    home = os.environ.get("AIRFLOW_HOME") or os.path.expanduser("~/airflow")
    return Path(home) / "tablemgmt" / "dag-cache"


def cache_file(directory: Path, tables_yaml: str | Path | None) -> Path:
    """One file per DAG file (its declarations file names it), so two DAG files never evict each other."""
    name = str(Path(tables_yaml).resolve()) if tables_yaml is not None else "-"
    return directory / f"dags-{hashlib.sha256(name.encode()).hexdigest()[:16]}.pickle"


def code_fingerprint(root: Path | None = None) -> str:
    """A digest of every ``.py`` file of the ``airflow_tablemgmt`` package (or under ``root``), by
    path (≈ 100 files, a few ms of CPU)."""
    root = root or Path(__file__).resolve().parent.parent
    h = hashlib.sha256(str(root).encode())
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                h.update(b"\0" + path.encode() + b"\0")
                try:
                    with open(path, "rb") as fh:
                        h.update(fh.read())
                except OSError:
                    h.update(b"?")
    return h.hexdigest()


def _plugins(factories: FactoryRegistry) -> list[Any]:
    from importlib.metadata import entry_points

    eps = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        eps.append([ep.name, ep.value, getattr(dist, "name", None), getattr(dist, "version", None)])
    return [sorted(eps), sorted(factories.factories), sorted(factories.errors)]


def _airflow_config_bytes() -> str:
    from airflow.configuration import AIRFLOW_CONFIG

    try:
        return hashlib.sha256(Path(AIRFLOW_CONFIG).read_bytes()).hexdigest()
    except OSError as e:
        return f"{AIRFLOW_CONFIG}: {type(e).__name__}"


def global_key(tables_yaml: str | Path | None, factories: FactoryRegistry) -> str:
    """Everything a built DAG depends on besides its table (see the module docstring)."""
    import airflow

    env = sorted(
        (k, v)
        for k, v in os.environ.items()
        if k.startswith("AIRFLOW__") or k in ("AIRFLOW_HOME", "AIRFLOW_CONFIG")
    )
    parts = {
        "format": FORMAT,
        "python": sys.version,
        "airflow": airflow.__version__,
        "pickle": pickle.HIGHEST_PROTOCOL,
        "code": code_fingerprint(),
        "plugins": _plugins(factories),
        "tables_yaml": str(Path(tables_yaml).resolve()) if tables_yaml is not None else None,
        "env": env,
        "airflow_cfg": _airflow_config_bytes(),
        "dag_config": repr(DagConfigDefaults.from_airflow_config()),
        "triggerer_slots": list(triggerer_slots()),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def table_keys(
    tables: Iterable[TableSpec],
    catalogs: Mapping[str, CatalogSpec],
    dynamic_ids: Mapping[str, str] | None,
    merge: PolicyMerge | None = None,
    enrolled: Collection[str] = (),
) -> dict[str, str]:
    """Table id -> a digest of what its DAGs are built from: its spec (as validated, in order), its
    catalog's spec, the policies merged into it (``merge``; none for the ``enrolled`` tables) and, when it
    is refreshed after upstream dynamic tables, how their ids resolve."""
    catalog_json = {name: c.model_dump_json() for name, c in catalogs.items()}
    keys: dict[str, str] = {}
    for t in tables:
        text = t.model_dump_json() + "\0" + catalog_json.get(t.catalog, "-")
        if merge is not None and t.id not in enrolled:
            text += "\0" + merge.key(t)
        refresh = t.actions.get(REFRESH)
        if dynamic_ids is not None and refresh is not None and refresh.get("trigger") == "upstream":
            upstream = getattr(t.action_settings(REFRESH), "upstream", ()) or ()
            text += "\0" + json.dumps([[u, dynamic_ids.get(u.lower())] for u in sorted(set(upstream))])
        keys[t.id] = hashlib.sha256(text.encode()).hexdigest()
    return keys


def _read(path: Path) -> dict[str, Any] | None:
    """The file's content, or None (missing, or ignored with a WARNING)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as e:
        log.warning("tablemgmt DAG cache %s cannot be opened (%s); building every DAG", path, e)
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            log.warning("tablemgmt DAG cache %s is not a regular file; ignored, building every DAG", path)
            return None
        if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            log.warning(
                "tablemgmt DAG cache %s is ignored and replaced: it must belong to uid %d and be writable "
                "by it alone (it belongs to uid %d, mode %o); a cache file is unpickled, which runs code",
                path,
                os.getuid(),
                st.st_uid,
                stat.S_IMODE(st.st_mode),
            )
            return None
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            data = fh.read()
        content = pickle.loads(data)
        if not isinstance(content, dict) or content.get("format") != FORMAT:
            raise ValueError(f"not a format-{FORMAT} cache file")
        if not isinstance(content.get("shards"), dict):
            raise ValueError("no shards")
        return content
    except Exception as e:  # noqa: BLE001 - a bad cache file is rebuilt, never fatal
        log.warning(
            "tablemgmt DAG cache %s is unreadable (%s: %s); building every DAG and rewriting it",
            path,
            type(e).__name__,
            e,
        )
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def _write(path: Path, content: dict[str, Any]) -> bool:
    """Replace the file atomically (0600, in a 0700 directory); a failure is a WARNING."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), 0o600)
                pickle.dump(content, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return True
    except Exception as e:  # noqa: BLE001 - the next parse builds again
        log.warning("tablemgmt DAG cache %s could not be written (%s: %s)", path, type(e).__name__, e)
        return False


# Tables are pickled in this many shards (by a hash of their id, so adding a table moves no other):
# one pickle stream per shard shares its memo (attribute names, classes) across the shard's tables
# (a pickle per table was ~1.7x the bytes and ~2x the CPU to load), and an edit re-pickles one shard.
SHARDS = 64

# pickled {table id: {dag id: DAG}}, {table id: (key, watchers)}
Shard = tuple[bytes, dict[str, tuple[str, int]]]


def shard_of(table_id: str) -> int:
    return zlib.crc32(table_id.encode()) % SHARDS


def build_with_cache(
    tables: list[TableSpec],
    factories: FactoryRegistry,
    *,
    declaration_errors: Iterable[str],
    catalogs: dict[str, CatalogSpec],
    tables_yaml: str | Path | None,
    merge: PolicyMerge | None = None,
    enrolled: Collection[str] = (),
) -> BuildResult:
    """What ``build_dags`` returns for a full parse, taking unchanged tables' DAGs from the cache;
    ``merge``'s policies merged into the declared (not ``enrolled``) tables it builds (a failed merge: never
    cached)."""
    global last_stats
    stats = last_stats = CacheStats()
    declaration_errors = list(declaration_errors)
    unmerged: set[str] = set()  # never cached: their errors come from a merge on every parse

    def merged(specs: list[TableSpec], skip: Collection[str] = ()) -> list[TableSpec]:
        out, errors = merge.apply_all(specs, {*enrolled, *skip}) if merge else (specs, {})
        declaration_errors.extend(errors.values())
        unmerged.update(errors)
        return out

    directory = cache_dir()
    if directory is None:
        stats.discarded = "off"
        return build_dags(merged(tables), factories, declaration_errors=declaration_errors, catalogs=catalogs)
    path = cache_file(directory, tables_yaml)
    stats.path = str(path)
    total = {"dags": 0}
    with cyclic_gc_paused(freeze_if=lambda: total["dags"] >= FREEZE_AT_DAGS):
        t0 = time.process_time()
        try:
            gkey = global_key(tables_yaml, factories)
            keys = table_keys(tables, catalogs, dynamic_table_ids(tables), merge, enrolled)
        except Exception as e:  # noqa: BLE001 - the cache must never fail a parse
            log.warning(
                "tablemgmt DAG cache: keys not computed (%s: %s); building every DAG", type(e).__name__, e
            )
            stats.discarded = "keys not computed"
            tables = merged(tables)
            return build_dags(tables, factories, declaration_errors=declaration_errors, catalogs=catalogs)
        content = _read(path)
        old: dict[int, Shard] = {}
        if content is not None:
            if content.get("key") == gkey:
                old = content["shards"]
            else:
                stats.discarded = "the code, Airflow, the configuration or the DAG file changed"
        shards = {tid: shard_of(tid) for tid in keys}
        prebuilt: dict[str, int] = {}
        for tid, key in keys.items():
            meta = old.get(shards[tid], (b"", {}))[1].get(tid)
            if meta is not None and meta[0] == key:
                prebuilt[tid] = meta[1]
        cached: dict[str, dict[str, Any]] = {}
        try:
            for n in sorted({shards[tid] for tid in prebuilt}):
                unpickled = pickle.loads(old[n][0])
                cached.update((tid, unpickled[tid]) for tid in old[n][1] if tid in prebuilt)
            if cached.keys() != prebuilt.keys():
                raise ValueError("a shard lacks a table it lists")
        except Exception as e:  # noqa: BLE001 - rebuild everything rather than fail the parse
            log.warning(
                "tablemgmt DAG cache %s: a shard could not be unpickled (%s: %s); building every DAG",
                path,
                type(e).__name__,
                e,
            )
            cached, prebuilt, old = {}, {}, {}
            stats.discarded = "a shard could not be unpickled"
        stats.read_s = time.process_time() - t0
        stats.hits = len(cached)
        tables = merged(tables, skip=prebuilt)  # a cached table's DAGs need no merge
        built = build_dags(
            tables, factories, declaration_errors=declaration_errors, catalogs=catalogs, prebuilt=prebuilt
        )
        t1 = time.process_time()
        by_table: dict[str, dict[str, Any]] = {}
        for dag_id, dag in built.dags.items():
            if dag_id != BROKEN_DAG_ID:
                by_table.setdefault(table_of(dag_id), {})[dag_id] = dag
        result = BuildResult(errors=built.errors)
        members: dict[int, dict[str, dict[str, Any]]] = {}
        metas: dict[int, dict[str, tuple[str, int]]] = {}
        for t in tables:
            tid = t.id
            if tid in cached:
                dags = cached[tid]
                meta = (keys[tid], prebuilt[tid])
            else:
                dags = by_table.get(tid, {})
                stats.built.append(tid)
                if tid in unmerged or _failed(built.errors, tid):
                    result.dags.update(dags)
                    continue  # never cached: its errors come from a build on every parse
                meta = (keys[tid], watchers_of(dags.values()))
            result.dags.update(dags)
            members.setdefault(shards[tid], {})[tid] = dags
            metas.setdefault(shards[tid], {})[tid] = meta
        if BROKEN_DAG_ID in built.dags:
            result.dags[BROKEN_DAG_ID] = built.dags[BROKEN_DAG_ID]
        total["dags"] = len(result.dags)
        stats.removed = sorted({tid for _, meta in old.values() for tid in meta} - keys.keys())
        new: dict[int, Shard] = {}
        for n, shard_meta in metas.items():
            if n in old and old[n][1] == shard_meta:
                new[n] = old[n]  # unchanged: its bytes as read
            else:
                try:
                    new[n] = (pickle.dumps(members[n], protocol=pickle.HIGHEST_PROTOCOL), shard_meta)
                except Exception as e:  # noqa: BLE001 - left out of the cache: built again next parse
                    log.warning(
                        "tablemgmt DAG cache %s: DAGs of %s could not be pickled (%s: %s); not cached",
                        path,
                        ", ".join(sorted(shard_meta)),
                        type(e).__name__,
                        e,
                    )
        unchanged = (
            content is not None
            and content.get("key") == gkey
            and new.keys() == old.keys()
            and all(new[n] is old[n] for n in new)
        )
        if not unchanged:
            stats.wrote = _write(path, {"format": FORMAT, "key": gkey, "shards": new})
        stats.write_s = time.process_time() - t1
    log.info(
        "tablemgmt DAG cache %s: %d table(s) from the cache, %d built, %d removed%s",
        path,
        stats.hits,
        len(stats.built),
        len(stats.removed),
        f" (file not used: {stats.discarded})" if stats.discarded else "",
    )
    return result


def _failed(errors: list[str], table_id: str) -> bool:
    prefix = f"table {table_id}, action "
    return any(e.startswith(prefix) for e in errors)
