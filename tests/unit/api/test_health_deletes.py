"""GET /tables/{id}/health's document keeps a v3 table's deletion vectors apart from its v2 delete files
(FileStatsOut carries the figures metadata/files.py measures)."""

from __future__ import annotations

from datetime import UTC, datetime

from airflow_tablemgmt.api.schemas import HealthOut
from airflow_tablemgmt.metadata.files import FileStats
from airflow_tablemgmt.services.health import TableHealth


def test_the_health_document_carries_the_delete_kinds_apart() -> None:
    stats = FileStats(
        snapshot_id=7,
        snapshots=4,
        data_files=2,
        small_data_files=0,
        small_file_threshold_bytes=1,
        delete_files=3,
        data_bytes=2299,
        delete_bytes=1320,
        records=200,
        compacted_data_files=2,
        deleted_rows=44,
        position_delete_files=1,
        deletion_vectors=2,
        dv_deleted_rows=43,
        dv_bytes=87,
        dv_files=2,
        format_version=3,
    )
    doc = TableHealth("lake.db.t", stats, datetime(2026, 11, 28, tzinfo=UTC)).to_dict()
    doc["files"]["snapshot_id"] = "7"
    files = HealthOut(**doc).model_dump()["files"]
    assert (files["delete_files"], files["position_delete_files"], files["deletion_vectors"]) == (3, 1, 2)
    assert (files["deleted_rows"], files["dv_deleted_rows"], files["dv_files"]) == (44, 43, 2)
    assert (files["equality_delete_files"], files["dv_bytes"], files["format_version"]) == (0, 87, 3)
