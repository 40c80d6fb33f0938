"""The watchers' reader of Hudi tables: the ``.hoodie`` timeline, read without a JVM. The snapshot id is the
newest completed commit (``deltacommit``, ``commit``, ``replacecommit``); a compaction or clustering
(requested as such on the timeline) is a rewrite, so ``data_changes_only`` watchers are not woken by the
maintenance they triggered. RFC-43's threshold ("delta commits since the last compaction") is applied where
the run starts: the factory skips a compaction below ``min-delta-commits`` without a JVM."""

from __future__ import annotations

from airflow_tablemgmt.metadata.iceberg import ANCESTRY_DEPTH
from airflow_tablemgmt.metadata.path_reader import PathFormatReader


class HudiTimelineReader(PathFormatReader):
    format = "hudi"

    def _pointer(self, location: str) -> object:
        from airflow_tablemgmt.formats.hudi.metadata import timeline_listing

        return timeline_listing(location, self.catalog.properties)

    def _ancestry(self, location: str) -> list[tuple[int, bool]]:
        from airflow_tablemgmt.formats.hudi.metadata import read_timeline

        return read_timeline(location, self.catalog.properties).ancestry(ANCESTRY_DEPTH)
