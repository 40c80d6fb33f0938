"""Which process attempt made a commit, read back from the ``_delta_log`` (recovery, ``lifecycle/table_marks.py``):
the commit's ``userMetadata``, which the job set (``formats/delta/job``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.spark.job.commit_mark import parse_text

if TYPE_CHECKING:
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec

#: How many of the newest commits are looked at; on an object store, where each is a request, fewer.
NEWEST = 200
NEWEST_REMOTE = 50
_DELTA_COMMIT = re.compile(r"^\d{20}\.json$")


def commits(table: TableSpec, catalog: CatalogSpec) -> Iterator[tuple[dict[str, Any], int, int]]:
    """``(userMetadata as a dict, version, timestamp ms)`` of a Delta table's newest commits, newest
    first, from its ``_delta_log`` on local disk or on S3 (the catalog's ``spark.hadoop.fs.s3a.*``)."""
    from airflow_tablemgmt.metadata.table_dir import open_table_dir
    from airflow_tablemgmt.metadata.table_paths import table_location

    ident = TableIdentifier(table.catalog, table.namespace, table.name)
    log_dir = open_table_dir(table_location(catalog, ident), catalog.properties, "Delta log")
    names = sorted(e.name for e in log_dir.list("_delta_log") if _DELTA_COMMIT.match(e.name))
    for name in reversed(names[-(NEWEST if log_dir.access is None else NEWEST_REMOTE) :]):
        for line in log_dir.read_text(f"_delta_log/{name}").splitlines():
            info = json.loads(line).get("commitInfo") if line.strip() else None
            if not isinstance(info, dict):
                continue
            mark = parse_text(info.get("userMetadata"))
            if mark is not None:
                yield mark, int(name.split(".")[0]), int(info.get("timestamp") or 0)
            break  # one commitInfo per commit
