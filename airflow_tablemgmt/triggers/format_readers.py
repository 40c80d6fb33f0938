"""Which reader watches a table: its format's (``Format.reader`` of its descriptor, e.g. a path-based
format's :class:`~airflow_tablemgmt.metadata.path_reader.PathFormatReader`), answering what
:class:`~airflow_tablemgmt.metadata.iceberg.SnapshotReader` answers for the catalogs' own format.

The generic watcher (``snapshot.py``) and the gate do not know the formats: they take the reader
:func:`reader_for` returns for a catalog, and a catalog names its table's format in the
``tablemgmt.table-format`` property only when that format has a reader other than the catalog's own
(:func:`watched_catalog`), so the default format's triggers keep their stored form.
"""

from __future__ import annotations

from typing import Any

from airflow_tablemgmt.core.formats import DEFAULT_FORMAT, FORMATS, TABLE_FORMAT_PROPERTY, table_format_of
from airflow_tablemgmt.core.tables import CatalogSpec
from airflow_tablemgmt.metadata.iceberg import SnapshotReader


def _reader_class(table_format: str) -> Any:
    if table_format == DEFAULT_FORMAT:
        return None
    fmt = FORMATS.find(table_format)
    return None if fmt is None else fmt.load(fmt.reader)


def watched_catalog(catalog: CatalogSpec, table_format: str) -> CatalogSpec:
    """The catalog a watcher of a ``table_format`` table carries: marked with the format when the format
    has a reader of its own, else unchanged (so the default format's triggers keep their stored kwargs)."""
    if _reader_class(str(table_format)) is None:
        return catalog
    return catalog.model_copy(
        update={"properties": {**catalog.properties, TABLE_FORMAT_PROPERTY: str(table_format)}}
    )


def reader_for(catalog: CatalogSpec) -> Any:
    """The reader of the format ``catalog`` is marked with (:func:`watched_catalog`), else the catalog's own
    (:class:`SnapshotReader`)."""
    cls = _reader_class(table_format_of(catalog.properties))
    return cls(catalog) if cls is not None else SnapshotReader(catalog)


__all__ = ["reader_for", "watched_catalog"]
