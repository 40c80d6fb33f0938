"""The watchers' reader of Delta tables: the ``_delta_log``, read without a JVM. The snapshot id is the table
version; a commit that adds or removes no file with ``dataChange`` (OPTIMIZE, VACUUM, a property change)
is a rewrite."""

from __future__ import annotations

from airflow_tablemgmt.metadata.iceberg import ANCESTRY_DEPTH
from airflow_tablemgmt.metadata.path_reader import PathFormatReader


class DeltaLogReader(PathFormatReader):
    format = "delta"

    def _pointer(self, location: str) -> object:
        from airflow_tablemgmt.formats.delta.metadata import latest_version

        return latest_version(location, self.catalog.properties)

    def _ancestry(self, location: str) -> list[tuple[int, bool]]:
        from airflow_tablemgmt.formats.delta.metadata import ancestry

        return ancestry(location, ANCESTRY_DEPTH, self.catalog.properties)
