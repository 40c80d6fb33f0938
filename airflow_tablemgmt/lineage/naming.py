"""OpenLineage dataset names of lakehouse tables (https://openlineage.io/docs/spec/naming).

A table is named as Spark's OpenLineage integration names an Iceberg, Hudi or Delta table, so the events
of this provider and those of Spark's listener meet on the same dataset: its *location* (namespace
``file`` for a local path, ``<scheme>://<authority>`` for object stores and HDFS; name the path), with
a ``symlinks`` entry of type TABLE for the catalog name (``<namespace>.<table>`` in the catalog's
namespace). Where the location is not known without asking the catalog (REST, Hive, Glue, JDBC), the
dataset is the catalog's table name in the catalog service's namespace.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType

_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "abfss": "abfs", "wasbs": "wasb"}


@dataclass(frozen=True)
class DatasetName:
    namespace: str
    name: str
    table_namespace: str  # the symlink: the table as the catalog names it
    table_name: str


def location_name(location: str) -> tuple[str, str]:
    """(namespace, name) of a storage location, as OpenLineage names files and directories."""
    text = location.rstrip("/")
    parts = urlsplit(text)
    if not parts.scheme or parts.scheme == "file":
        return "file", parts.path if parts.scheme else text
    scheme = _SCHEME_ALIASES.get(parts.scheme.lower(), parts.scheme.lower())
    return f"{scheme}://{parts.netloc}", parts.path or "/"


def warehouse_namespace(warehouse: str) -> str:
    """The namespace Spark's OpenLineage integration gives a hadoop catalog's table names (its
    ``HadoopCatalogTypeHandler``, through the Java client's ``FilesystemDatasetUtils``): ``file:<path>``
    for a local warehouse (``file:///p`` as ``file:/p``), the location with the object store's scheme
    (``s3a`` as ``s3``) otherwise; no trailing slash."""
    text = warehouse.strip().rstrip("/")
    parts = urlsplit(text)
    if not parts.scheme:
        return f"file:{parts.path}" if parts.path else "file"
    if parts.scheme == "file":
        if parts.netloc:  # file://host/path: a remote file, as is
            return text
        return f"file:{parts.path}" if parts.path else "file"
    scheme = parts.scheme.lower()
    for store in ("s3", "gs", "wasbs"):
        if scheme.startswith(store):
            return f"{store}://{parts.netloc}{parts.path}"
    return text


def catalog_namespace(catalog: CatalogSpec) -> str:
    """The namespace of the catalog's table names: its service (REST, Hive, JDBC), its warehouse otherwise."""
    uri = catalog.properties.get("uri", "").strip()
    if catalog.type == CatalogType.HIVE and uri:
        return uri.replace("thrift://", "hive://", 1)
    if catalog.type in (CatalogType.REST, CatalogType.JDBC) and uri:
        return uri
    if catalog.warehouse:
        return warehouse_namespace(catalog.warehouse)
    return (uri or catalog.name).rstrip("/")


def table_dataset(catalog: CatalogSpec, namespace: str, table: str) -> DatasetName:
    symlink_ns, symlink_name = catalog_namespace(catalog), f"{namespace}.{table}"
    if catalog.type == CatalogType.HADOOP and catalog.warehouse:
        ns, name = location_name(f"{catalog.warehouse.rstrip('/')}/{namespace.replace('.', '/')}/{table}")
        return DatasetName(ns, name, symlink_ns, symlink_name)
    return DatasetName(symlink_ns, symlink_name, symlink_ns, symlink_name)
