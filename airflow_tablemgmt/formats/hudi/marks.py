"""Which process attempt made a commit, read back from the ``.hoodie`` timeline (recovery,
``lifecycle/table_marks.py``): a compaction commit's extra metadata, which the job wrote
(``formats/hudi/job/compaction.py``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.metadata.errors import PathNotFound

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec

#: How many of the newest commits are looked at; on an object store, where each is a request, fewer.
NEWEST = 200
NEWEST_REMOTE = 50
#: A completed Hudi commit (a compaction completes as a ``commit``): ``<instant>[_<completion>].commit``.
_HUDI_COMMIT = re.compile(r"^(\d{14,17})(?:_(\d{14,17}))?\.commit$")


def commits(table: TableSpec, catalog: CatalogSpec) -> Iterator[tuple[dict[str, Any], int, int]]:
    """``(extra metadata, instant, completion ms)`` of a Hudi table's newest completed commits, newest
    first: a compaction's commit carries the job's mark in its extra metadata (``spark/job/commit_mark.py``). Hudi 1.x
    writes the commit metadata as Avro, 0.x as JSON; the completion time (``<instant>_<completion>``) is
    read as this host's local time, Hudi's default timeline zone."""
    from airflow_tablemgmt.formats.hudi.metadata import HOODIE
    from airflow_tablemgmt.metadata.avro_file import is_avro, records
    from airflow_tablemgmt.metadata.table_dir import open_table_dir
    from airflow_tablemgmt.metadata.table_paths import table_location

    ident = TableIdentifier(table.catalog, table.namespace, table.name)
    root = open_table_dir(table_location(catalog, ident), catalog.properties, "Hudi timeline")
    where = f"{HOODIE}/timeline"
    try:
        entries = root.list(where)
    except PathNotFound:  # Hudi 0.x: the timeline is .hoodie/ itself
        where, entries = HOODIE, root.list(HOODIE)
    done = sorted((m.group(2) or m.group(1), e.name) for e in entries if (m := _HUDI_COMMIT.match(e.name)))
    for completed, name in reversed(done[-(NEWEST_REMOTE if root.access is not None else NEWEST) :]):
        data = root.read_bytes(f"{where}/{name}")
        if is_avro(data):
            extra = (records(data) or [{}])[0].get("extraMetadata")
        else:
            extra = json.loads(data.decode("utf-8") or "{}").get("extraMetadata")
        if isinstance(extra, dict) and extra:
            yield extra, int(name.split("_")[0].split(".")[0]), _hudi_ms(completed)


def _hudi_ms(instant: str) -> int:
    from datetime import datetime

    fmt = "%Y%m%d%H%M%S%f" if len(instant) > 14 else "%Y%m%d%H%M%S"
    value = instant if len(instant) == 14 else instant[:14] + instant[14:].ljust(6, "0")
    return int(datetime.strptime(value, fmt).timestamp() * 1000)
