"""The table page's Details, Files and Snapshots views, per format: each format's descriptor names how its
tables are read for them (``Format.views``), and the REST API, the services and the page call that reader
(``factories/views.py``) without knowing the format.

A view reader is ``(catalog with its secret references resolved, table) -> dict``; it reads the table's
own metadata without a JVM and raises ``HealthUnavailable`` when the table cannot be read where it runs.
Every format answers in one shape (the first format's, which the page was built on), keys it cannot fill
being ``null``:

* **details**: ``location``, ``format_version``, ``last_updated`` (ISO 8601), ``current_snapshot_id`` (the
  format's current version / instant / snapshot, a string), ``schema_id``, ``columns`` (``[{id, name,
  type, required, doc}]`` or null when not cheap to read), ``partition_spec`` (``{spec_id, fields:
  [{name, source, transform}]}``), ``sort_order`` (``{order_id, fields}``), ``properties`` and ``figures``
  (the format's own counts: files, commits, ... by its own names);
* **files**: the live files per partition against a target file size, built by :func:`files_view`;
* **snapshots**: ``current_snapshot_id``, ``entry_label`` (what one entry is: snapshots, log versions,
  instants) and ``snapshots`` oldest first, each ``{snapshot_id, parent_id, committed_at, operation,
  current}`` plus the added/removed file, record and byte counts the format records (null otherwise);
  ``pending`` (optional) lists started and not completed entries ``{snapshot_id, operation, state}``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.formats import VIEW_TABS
from airflow_tablemgmt.metadata.errors import HealthUnavailable

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec

#: The views a format may declare, as the page's tabs and the REST endpoints name them.
TABS = VIEW_TABS

#: A format's reader of one view.
ViewHook = Callable[["CatalogSpec", "TableSpec"], dict[str, Any]]

#: Upper bounds of the Files view's size buckets, as fractions of the target file size (the last bucket is
#: open). Under 0.75 is a *small file* (what a compaction rewrites).
SIZE_BUCKETS = (0.125, 0.25, 0.5, 0.75, 1.0, 1.5)
#: Partitions listed at most (the most files first); the totals count all of them.
MAX_PARTITIONS = 500
#: Files listed at most by :func:`files_view` (the largest partitions' first); ``files_total`` counts all.
MAX_FILES = 200


@dataclass(frozen=True)
class LiveFile:
    """One live file of a table as a format's Files view reports it."""

    path: str
    partition: str = ""  # "" when the table is not partitioned
    size: int = 0
    records: int | None = None  # None when the format does not record it where the view reads
    delete: bool = False  # a merge-on-read delete or log file, not a data file


def _bucket(size: int, target: int) -> int:
    for i, bound in enumerate(SIZE_BUCKETS):
        if size < bound * target:
            return i
    return len(SIZE_BUCKETS)


def _sum(values: Iterable[int | None]) -> int | None:
    values = list(values)
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def files_view(
    files: Iterable[LiveFile], target: int, *, snapshot_id: Any = None, compaction_action: str | None = None
) -> dict[str, Any]:
    """The Files view of ``files`` (the table's live files) against ``target`` bytes, in the shared
    shape: per partition (the most files first, at most :data:`MAX_PARTITIONS`) data and delete files,
    bytes, records (null when a file's count is not recorded) and a histogram of data file sizes in
    :data:`SIZE_BUCKETS` of the target; the totals; and the first :data:`MAX_FILES` files themselves
    (``files``: path, partition, size_bytes, records, delete). ``compaction_action`` names the action that
    rewrites small files (the page says so)."""
    files = list(files)
    parts: dict[str, dict[str, Any]] = {}
    records: dict[str, list[int | None]] = {}
    for f in files:
        p = parts.setdefault(
            f.partition,
            {
                "partition": f.partition,
                "spec_id": None,
                "data_files": 0,
                "data_bytes": 0,
                "records": 0,
                "delete_files": 0,
                "delete_bytes": 0,
                "small_files": 0,
                "histogram": [0] * (len(SIZE_BUCKETS) + 1),
            },
        )
        if f.delete:
            p["delete_files"] += 1
            p["delete_bytes"] += f.size
            continue
        p["data_files"] += 1
        p["data_bytes"] += f.size
        records.setdefault(f.partition, []).append(f.records)
        b = _bucket(f.size, target)
        p["histogram"][b] += 1
        p["small_files"] += b < SIZE_BUCKETS.index(0.75) + 1
    for name, p in parts.items():
        p["records"] = _sum(records.get(name, []))
    rows = sorted(parts.values(), key=lambda p: (-p["data_files"], p["partition"]))
    totals: dict[str, Any] = {
        k: sum(p[k] for p in rows)
        for k in ("data_files", "data_bytes", "delete_files", "delete_bytes", "small_files")
    }
    totals["records"] = _sum(p["records"] for p in rows)
    totals["histogram"] = [sum(p["histogram"][i] for p in rows) for i in range(len(SIZE_BUCKETS) + 1)]
    order = {p["partition"]: i for i, p in enumerate(rows)}
    listed = sorted(files, key=lambda f: (order[f.partition], f.delete, f.path))[:MAX_FILES]
    return {
        "snapshot_id": str(snapshot_id) if snapshot_id is not None else None,
        "target_file_size_bytes": target,
        "buckets": [round(b * target) for b in SIZE_BUCKETS],
        "bucket_fractions": list(SIZE_BUCKETS),
        "compaction_action": compaction_action,
        "partitions_total": len(rows),
        "totals": totals,
        "partitions": rows[:MAX_PARTITIONS],
        "files_total": len(files),
        "files": [
            {
                "path": f.path,
                "partition": f.partition,
                "size_bytes": f.size,
                "records": f.records,
                "delete": f.delete,
            }
            for f in listed
        ],
    }


def details_view(
    *,
    location: str,
    properties: dict[str, str],
    figures: dict[str, Any],
    current: Any = None,
    last_updated: str | None = None,
    format_version: Any = None,
    columns: list[dict[str, Any]] | None = None,
    partition_columns: Iterable[str] = (),
    schema_id: Any = None,
) -> dict[str, Any]:
    """The Details view in the shared shape; ``partition_columns`` become identity partition fields and
    ``columns`` (name, type, required, doc) get their 1-based position as ``id`` when they have none."""
    cols = None
    if columns is not None:
        cols = [
            {
                "id": c.get("id", i),
                "name": c["name"],
                "type": str(c.get("type")),
                "required": bool(c.get("required", False)),
                "doc": c.get("doc"),
            }
            for i, c in enumerate(columns, start=1)
        ]
    return {
        "location": location,
        "format_version": format_version,
        "table_uuid": None,
        "last_updated": last_updated,
        "current_snapshot_id": str(current) if current is not None else None,
        "schema_id": schema_id,
        "columns": cols,
        "partition_spec": {
            "spec_id": None,
            "fields": [{"name": c, "source": c, "transform": "identity"} for c in partition_columns],
        },
        "sort_order": {"order_id": None, "fields": []},
        "properties": dict(sorted((str(k), str(v)) for k, v in properties.items())),
        "figures": figures,
    }


def naming_the_table(read: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """An unreadable table's error names the table (as the health hook's do)."""

    @functools.wraps(read)
    def wrapped(catalog: Any, table: Any) -> dict[str, Any]:
        try:
            return read(catalog, table)
        except HealthUnavailable as e:
            raise type(e)(f"{table.id}: {e}") from None

    return wrapped
