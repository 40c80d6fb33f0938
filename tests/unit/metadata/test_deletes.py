"""v3 deletion vectors apart from v2 delete files: the manifests of a v3 table Spark wrote (Iceberg 1.10,
fixtures/iceberg_v3_dv/) read without a JVM with their v3 fields, the kinds counted apart, and the health
finding and gate that follow from them (metadata/deletes.py, metadata/files.py, metadata/health.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.metadata.deletes import (
    DATA,
    DeleteCounts,
    dv_fields,
    in_words,
    is_deletion_vector,
    live_entries,
)
from airflow_tablemgmt.metadata.files import FileStats
from airflow_tablemgmt.metadata.health import decide, score

FIXTURE = Path(__file__).parent / "fixtures" / "iceberg_v3_dv"


@dataclass
class _Manifest:
    """What live_entries needs of pyiceberg's ManifestFile (the manifest list is not in the fixture)."""

    manifest_path: str
    partition_spec_id: int = 0


def _entries() -> list[Any]:
    from pyiceberg.io.pyarrow import PyArrowFileIO

    manifests = [_Manifest(str(p)) for p in sorted(FIXTURE.glob("*.avro"))]
    assert manifests, f"no manifests in {FIXTURE}"
    return list(live_entries(PyArrowFileIO(), manifests))


def test_a_spark_written_v3_tables_deletes_read_as_deletion_vectors() -> None:
    entries = _entries()
    data = {f.file_path: f for f in entries if int(f.content) == DATA}
    vectors = [f for f in entries if is_deletion_vector(f)]
    # Two data files (partitions a and b); DELETE id < 40, id IN (150, 151), then id = 45, which replaced
    # partition a's vector by a merged one: the replaced entry is not live.
    assert len(data) == 2 and len(vectors) == 2 and len(entries) == 4
    by_rows = sorted(vectors, key=lambda f: int(f.record_count))
    assert [int(f.record_count) for f in by_rows] == [2, 41]
    for f in vectors:
        fields = dv_fields(f)
        assert fields["referenced_data_file"] in data  # the one data file it applies to
        assert fields["content_offset"] >= 4  # after Puffin's magic
        assert 0 < fields["content_size_in_bytes"] < int(f.file_size_in_bytes)
        assert f.file_path.endswith(".puffin")
    assert {data[dv_fields(f)["referenced_data_file"]].partition[0] for f in by_rows} == {"a", "b"}
    assert all(dv_fields(f) == dict.fromkeys(dv_fields(f)) for f in data.values())  # no v3 fields on data


def test_the_kinds_are_counted_apart() -> None:
    counts = DeleteCounts()
    for f in _entries():
        if int(f.content) != DATA:
            counts.add(f)
    assert (counts.deletion_vectors, counts.position_delete_files, counts.equality_delete_files) == (2, 0, 0)
    assert counts.delete_files == 2 and counts.dv_deleted_rows == counts.deleted_rows == 43
    # A Puffin file holding several vectors counts once in delete_bytes; the vectors' blobs are smaller.
    assert 0 < counts.dv_bytes <= counts.delete_bytes
    assert counts.dv_files >= 1


def test_deletes_in_words() -> None:
    assert in_words(15, 3, 0, 12) == "3 position delete files and 12 deletion vectors"
    assert in_words(1, 0, 0, 1) == "1 deletion vector"
    assert in_words(2, 1, 1, 0) == "1 position delete file and 1 equality delete file"
    assert in_words(4, 0, 0, 0) == "4 delete files"  # figures measured before the kinds were apart
    assert in_words(0, 0, 0, 0) == "no delete files"


def _figures(**kw: Any) -> FileStats:
    base: dict[str, Any] = dict(
        snapshot_id=1,
        snapshots=1,
        data_files=10,
        small_data_files=0,
        small_file_threshold_bytes=1,
        delete_files=0,
        data_bytes=100,
        delete_bytes=0,
        records=1000,
        compacted_data_files=10,
    )
    return FileStats(**{**base, **kw})


def _vectors(n: int, rows: int) -> FileStats:
    return _figures(
        delete_files=n, deletion_vectors=n, deleted_rows=rows, dv_deleted_rows=rows, format_version=3
    )


def test_deletion_vectors_are_a_finding_for_rewrite_files_not_rewrite_deletes() -> None:
    stats = _vectors(4, 300)  # 30 % of the rows deleted, all by vectors
    (finding,) = score(stats).findings
    assert finding.kind == "delete_files" and finding.action == "rewrite-files"
    assert finding.reason == "4 deletion vectors mark 300 of 1000 rows deleted (30%)"
    assert finding.points == round(60 * 0.3 / 0.5)

    deletes = decide(stats, "rewrite-deletes")
    assert not deletes.pays and "nothing for rewrite-deletes to convert" in deletes.reason
    assert deletes.figures["deletion_vectors"] == 4 and deletes.figures["position_delete_files"] == 0
    files = decide(stats, "rewrite-files")
    assert files.pays and files.reason == finding.reason


def test_deletion_vectors_count_by_their_rows_not_their_number() -> None:
    stats = _vectors(50, 20)  # one vector on each of 50 data files, 2 % of the rows
    assert not score(stats).needs_attention
    assert "vectors count by their rows" in decide(stats, "rewrite-deletes").reason
    assert not decide(stats, "rewrite-files").pays


@pytest.mark.parametrize("position", [1, 5])
def test_position_delete_files_beside_vectors_are_rewrite_deletes_work(position: int) -> None:
    # An upgraded table: v2 position delete files left beside vectors; rewrite-deletes converts them.
    stats = _figures(
        delete_files=position + 2,
        position_delete_files=position,
        deletion_vectors=2,
        deleted_rows=150,
        dv_deleted_rows=100,
        format_version=3,
    )
    (finding,) = score(stats).findings
    assert finding.action == "rewrite-deletes"
    noun = "file" if position == 1 else "files"
    assert finding.reason.startswith(f"{position} position delete {noun} and 2 deletion vectors mark 150")
    assert decide(stats, "rewrite-deletes").pays


def test_beside_position_delete_files_vectors_do_not_count_by_their_number() -> None:
    # One v2 file and 20 vectors, 2 % of the rows: the files are too few for min-delete-files (5), and the
    # vectors' number does not make up for it.
    stats = _figures(
        delete_files=21,
        position_delete_files=1,
        deletion_vectors=20,
        deleted_rows=20,
        dv_deleted_rows=19,
        format_version=3,
    )
    assert not score(stats).needs_attention
    assert "fewer than min-delete-files 5" in decide(stats, "rewrite-deletes").reason
