"""A path-based Hudi table in the job's session: the ``path =>`` argument its procedures take, a
session-catalog name for the procedures that read a table name only, its timeline figures, and its log files.

Hudi 1.0.2's ``run_compaction``, ``show_compaction``, ``run_clustering``, ``show_clustering`` and
``archive_commits`` take ``path``. ``run_clean`` has no ``path``; ``run_rollback_inflight_tableservice`` lists
one but reads ``table`` (clustering.py). Registering a name (``CREATE TABLE ... USING hudi LOCATION``) makes
Hudi read the table to resolve it: 4.5-8.1 s in a fresh session at load 4-7, up to 93 s under heavy load
(docs/formats.md, *Wall time against the bare procedure*), so it is done only for those two, once per
session."""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow_tablemgmt.core.identifiers import TableIdentifier, quote
from airflow_tablemgmt.formats.hudi.metadata import read_timeline
from airflow_tablemgmt.metadata.errors import HealthUnavailable
from airflow_tablemgmt.metadata.table_paths import local_path
from airflow_tablemgmt.spark.job import literals

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


#: session -> (name, location) it registered: the registration reads the table, so it is done once.
_REGISTERED: weakref.WeakKeyDictionary[Any, set[tuple[str, str]]] = weakref.WeakKeyDictionary()


def path_arg(location: str) -> str:
    """The ``path => '<location>'`` argument of the procedures that take the table by its path."""
    return f"path => {literals.string(location)}"


def register_sql(name: str, location: str) -> str:
    """The statement that registers ``location`` as ``name`` in the session catalog."""
    return f"CREATE TABLE IF NOT EXISTS {quote(name)} USING hudi LOCATION {literals.string(location)}"


def register(spark: SparkSession, table: TableIdentifier, location: str) -> str:
    """The table as ``tms_hudi_<namespace>_<name>`` in the session catalog (this session's only, on a
    session without a metastore), for the procedures that take a table name and no path (``run_clean``);
    registered on the first call per session, the name alone after."""
    name = f"tms_hudi_{'_'.join(table.namespace_parts)}_{table.name}"
    done = _REGISTERED.setdefault(spark, set())
    if (name, location) not in done:
        spark.sql(register_sql(name, location))
        done.add((name, location))
    return name


def has_metadata_table(spark: SparkSession, location: str) -> bool:
    """Whether the table's metadata table is available (``hoodie.table.metadata.partitions`` in
    ``.hoodie/hoodie.properties`` names a partition), read through Spark's file system so it holds on S3
    too. Hudi's own procedures take it as a flag; guessing False for a table that has one would skip the
    gates Hudi keeps for it (archiving waits for the metadata table's first compaction)."""
    path = f"{location.rstrip('/')}/.hoodie/hoodie.properties"
    root = local_path(location)
    if root is not None:
        try:
            with open(os.path.join(root, ".hoodie", "hoodie.properties")) as f:
                lines = f.read().splitlines()
        except OSError:
            return False
    else:
        lines = [r[0] for r in spark.read.text(path).collect()]
    for line in lines:
        if line.startswith("hoodie.table.metadata.partitions="):
            return bool(line.split("=", 1)[1].strip())
    return False


METADATA_ENABLE = "hoodie.metadata.enable"


@contextmanager
def metadata_as_on_table(spark: SparkSession, location: str) -> Iterator[bool]:
    """Hudi's procedures under ``hoodie.metadata.enable`` set as the table has it (the session's ``hoodie.*``
    settings reach every procedure's write client), restored afterwards; yields the value.

    Hudi's default is true: ``run_compaction`` then creates a metadata table on a table whose writers keep
    it off, the writers commit without updating it, and a clustering planned from its stale file listing
    replaces file groups without their newest committed slices (a writer's rows lost, docs/formats.md,
    *Faults*)."""
    enabled = has_metadata_table(spark, location)
    had = spark.conf.get(METADATA_ENABLE, None)
    spark.conf.set(METADATA_ENABLE, "true" if enabled else "false")
    try:
        yield enabled
    finally:
        if had is None:
            spark.conf.unset(METADATA_ENABLE)
        else:
            spark.conf.set(METADATA_ENABLE, had)


def timeline_figures(location: str) -> dict[str, Any]:
    """The timeline's figures and the table's log files, read without Spark where the table is local."""
    try:
        figures = read_timeline(location).summary()
    except HealthUnavailable:
        return {}
    root = local_path(location)
    if root is not None:
        logs = base = 0
        for _dirpath, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d != ".hoodie"]
            logs += sum(1 for n in names if ".log." in n and not n.endswith(".crc"))
            base += sum(1 for n in names if n.endswith(".parquet"))
        figures.update(log_files=logs, base_files=base)
    return figures
