"""The job's first read of its table, made before its SparkSession exists.

A hadoop catalog (the embedded default) keeps a table's state in files under
``<warehouse>/<namespace>/<table>/metadata/``, and which one is current follows from a rule, not from
a service. So the job can apply the rule itself with pyiceberg's FileIO and measure the table (the
figures before the action) while the JVM starts the session, instead of loading the table through
Spark once the session is up. Nothing here decides that a table does not exist: wherever the files do
not make the answer plain, :func:`read_early` returns None and the job loads the table through Spark
as it always did, which then gives Iceberg's own answer (a missing table, a missing version file).

The rule is Iceberg 1.10's ``HadoopTableOperations.refresh()``:

1. the version is the number on the first line of ``metadata/version-hint.text`` (``findVersion``);
2. its file is the first that exists of ``v<N>.metadata.json``, ``v<N>.gz.metadata.json`` and
   ``v<N>.metadata.json.gz`` (``getMetadataFile``);
3. while the next version has a file, that one is current (a writer creates ``v<N+1>`` before it
   rewrites the hint, so the hint may lag).

Left to Spark: a hint that is missing or not a plain number (Iceberg then lists the directory), a
version without its file (Iceberg: no table for version 0, "Metadata file for version N is missing"
otherwise), the old gzip name ``.metadata.json.gz`` (pyiceberg reads only ``.gz.metadata.json``),
metadata pyiceberg cannot read, catalogs of other types, warehouses that are not local paths (an object
store's credentials and retries stay with Spark), and a session whose catalog settings turn out to
differ from the spec's (:meth:`EarlyRead.agrees_with`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.metadata.files import TableShape, read_shape
from airflow_tablemgmt.metadata.iceberg import VERSION_HINT, local_warehouse_path
from airflow_tablemgmt.spark.conf import catalog_conf, catalog_settings, io_settings

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

_LINE_END = re.compile(r"\r\n|\r|\n")  # what Java's BufferedReader.readLine() ends a line at
_DIGITS = re.compile(r"[0-9]+")
_MAX_VERSION = 2**31 - 1  # Integer.parseInt's bound
_OLD_GZIP = ".metadata.json.gz"


@dataclass(frozen=True)
class EarlyRead:
    """The table's current metadata file and its shape, read without Spark."""

    table: TableIdentifier
    settings: dict[str, str]  # the catalog's Spark settings the read assumed
    location: str
    shape: TableShape
    io: FileIO
    meta_dir: str

    def current_location(self) -> str | None:
        """The table's current metadata file now (None: not plain without Spark)."""
        return current_metadata_file(self.io, self.meta_dir)

    def agrees_with(self, spark: SparkSession) -> bool:
        """Whether the session's catalog has exactly the settings the read assumed.

        The session's own (SQL) configuration is what its catalogs are made from: the settings it started
        with plus any set on it since, so not the SparkContext's start-up configuration. ``SET`` lists
        it (a command, no Spark job); a sensitive value comes back redacted and so never agrees. On Spark
        Connect one ``Config`` request reads the catalog's settings instead (values as set, a SQL
        command's planning spared)."""
        from airflow_tablemgmt.spark.connect.policy import is_remote

        name = self.table.catalog
        if is_remote(spark):
            from airflow_tablemgmt.spark.connect.config import conf_with_prefix

            # the job's own session (its catalog's settings set by the engine): read once per session
            actual = catalog_settings(conf_with_prefix(spark, f"spark.sql.catalog.{name}", reuse=True), name)
        else:
            rows = spark.sql("SET").collect()
            actual = catalog_settings(((str(r[0]), str(r[1])) for r in rows), name)
        if actual != self.settings:
            differ = sorted(
                k for k in actual.keys() | self.settings.keys() if actual.get(k) != self.settings.get(k)
            )
            log.info(
                "the session's catalog %s differs from the job spec's (%s): loading through Spark",
                name,
                ", ".join(differ),
            )
            return False
        return True


def read_early(catalog: CatalogSpec, table: TableIdentifier) -> EarlyRead | None:
    """The table read as Iceberg's hadoop catalog would find it, or None where Spark must be asked."""
    settings = catalog_settings(catalog_conf(catalog).items(), catalog.name)
    properties = io_settings(settings, catalog.name)
    warehouse = properties.get("warehouse")
    if properties.get("type") != "hadoop" or "catalog-impl" in properties or not warehouse:
        return None
    if local_warehouse_path(warehouse) is None:
        return None
    try:
        from pyiceberg.io import load_file_io

        io = load_file_io(properties, warehouse)
        meta_dir = metadata_dir(warehouse, table)
        location = current_metadata_file(io, meta_dir)
        if location is None:
            log.info("%s: no plain current metadata file under %s; loading through Spark", table, meta_dir)
            return None
        shape = read_shape(location, properties)
    except Exception as e:  # noqa: BLE001 - any doubt: Spark loads the table as before
        log.info("%s: read without Spark failed (%s); loading through Spark", table, str(e)[:300])
        return None
    log.info("%s: current metadata %s (read while the session starts)", table, location)
    return EarlyRead(table, settings, location, shape, io, meta_dir)


def metadata_dir(warehouse: str, table: TableIdentifier) -> str:
    """``<warehouse>/<namespace>/<table>/metadata``: where Iceberg's HadoopCatalog keeps a table."""
    return f"{warehouse.rstrip('/')}/{table.namespace_path}/{table.name}/metadata"


def current_metadata_file(io: FileIO, meta_dir: str) -> str | None:
    """The current metadata file under ``meta_dir`` by Iceberg's rule, or None where it is not plain."""
    try:
        version = _hinted_version(io, meta_dir)
        if version is None:
            return None
        current = _version_file(io, meta_dir, version)
        if current is None:
            return None
        while (following := _version_file(io, meta_dir, version + 1)) is not None:
            version, current = version + 1, following
    except Exception as e:  # noqa: BLE001 - a file system error: Spark will say what it is
        log.info("reading %s failed: %s", meta_dir, str(e)[:300])
        return None
    return None if current.endswith(_OLD_GZIP) else current


def _hinted_version(io: FileIO, meta_dir: str) -> int | None:
    try:
        with io.new_input(f"{meta_dir}/{VERSION_HINT}").open() as stream:
            text = stream.read().decode("utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    first = _LINE_END.split(text, maxsplit=1)[0]
    if not _DIGITS.fullmatch(first) or int(first) > _MAX_VERSION:
        return None
    return int(first)


def _version_file(io: FileIO, meta_dir: str, version: int) -> str | None:
    for suffix in (".metadata.json", ".gz.metadata.json", _OLD_GZIP):  # getMetadataFile's order
        path = f"{meta_dir}/v{version}{suffix}"
        if io.new_input(path).exists():
            return path
    return None
