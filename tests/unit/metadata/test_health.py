"""The health score (metadata/health.py) on real Iceberg metadata written by pyiceberg (a SQL catalog on
SQLite, no JVM) and on figures at each finding's bounds: red means an action would help, nothing else."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.metadata.files import FileStats, read_file_stats
from airflow_tablemgmt.metadata.health import score

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])


@pytest.fixture
def lake(tmp_path: Path) -> tuple[CatalogSpec, Any]:
    from pyiceberg.catalog.sql import SqlCatalog

    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    warehouse = f"file://{tmp_path / 'wh'}"
    cat = SqlCatalog("lake", uri=uri, warehouse=warehouse)
    cat.create_namespace("sales")
    return CatalogSpec(name="lake", type="jdbc", warehouse=warehouse, properties={"uri": uri}), cat


def _appends(cat: Any, name: str, n: int) -> None:
    table = cat.create_table(f"sales.{name}", schema=SCHEMA)
    for i in range(n):
        table.append(pa.table({"id": [i * 10 + j for j in range(10)], "v": ["x"] * 10}, schema=SCHEMA))


def test_many_small_appends_need_a_rewrite_measured_against_the_actions_target(
    lake: tuple[CatalogSpec, Any],
) -> None:
    catalog, cat = lake
    _appends(cat, "orders", 8)
    spec = TableSpec(
        catalog="lake",
        namespace="sales",
        name="orders",
        actions={"rewrite-files": {"target-file-size-bytes": 2 * 1024 * 1024}},
    )
    stats = read_file_stats(catalog, spec)
    assert stats.target_file_size_bytes == 2 * 1024 * 1024
    assert stats.small_file_threshold_bytes == int(0.75 * 2 * 1024 * 1024)
    assert (stats.data_files, stats.compacted_data_files, stats.excess_data_files) == (8, 1, 7)
    assert stats.manifests == 8 and stats.manifest_bytes > 0 and stats.partitions == 1
    result = score(stats)
    assert result.needs_attention and [f.action for f in result.findings] == ["rewrite-files"]
    # 60 x removable / data files x min(1, removable / 50): a few points for a few files, no cliff
    assert result.score == 100 - round(60 * 7 / 8 * 7 / 50) == score(stats).score
    assert "compaction would remove 7" in result.findings[0].reason


def test_a_small_table_in_one_file_is_healthy(lake: tuple[CatalogSpec, Any]) -> None:
    catalog, cat = lake
    _appends(cat, "tiny", 1)
    stats = read_file_stats(catalog, TableSpec(catalog="lake", namespace="sales", name="tiny"))
    # far below 75 % of 512 MiB, so "small" by Iceberg's bound, but nothing to compact it with
    assert stats.small_data_files == 1 and stats.small_file_ratio == 1.0
    assert stats.excess_data_files == 0
    assert score(stats).score == 100 and not score(stats).needs_attention


def test_fewer_small_files_than_min_input_files_are_left_alone(lake: tuple[CatalogSpec, Any]) -> None:
    catalog, cat = lake
    _appends(cat, "few", 4)  # rewrite-files' min-input-files is 5: it would not rewrite them
    stats = read_file_stats(catalog, TableSpec(catalog="lake", namespace="sales", name="few"))
    assert stats.excess_data_files == 3 and stats.min_input_files == 5
    assert not score(stats).needs_attention


def test_old_snapshots_count_against_expire_snapshots_settings(lake: tuple[CatalogSpec, Any]) -> None:
    catalog, cat = lake
    _appends(cat, "old", 3)
    spec = TableSpec(
        catalog="lake",
        namespace="sales",
        name="old",
        actions={"expire-snapshots": {"older-than": "1d", "retain-last": 1}},
    )
    now = read_file_stats(catalog, spec)
    assert now.expirable_snapshots == 0 and now.snapshot_max_age_s == 86400
    later = read_file_stats(catalog, spec, now=time.time() + 3 * 86400)
    assert later.expirable_snapshots == 2 and later.oldest_snapshot_age_s > 2 * 86400
    (finding,) = score(later).findings
    assert finding.action == "expire-snapshots" and finding.points == round(60 * math.log10(3) / 4)


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


def test_delete_files_count_by_the_rows_they_delete() -> None:
    assert not score(_figures(delete_files=1, deleted_rows=50)).needs_attention  # 5 %, one file
    (f,) = score(_figures(delete_files=1, deleted_rows=250)).findings  # 25 %
    assert f.action == "rewrite-deletes" and f.points == round(60 * 0.25 / 0.5)
    assert score(_figures(delete_files=5, deleted_rows=1)).needs_attention  # many files


def test_manifests_count_against_their_bytes() -> None:
    assert not score(_figures(manifests=9, manifest_bytes=1000)).needs_attention
    (f,) = score(_figures(manifests=30, manifest_bytes=1000)).findings
    assert f.action == "rewrite-manifests" and f.points == round(30 * (30 - 2) / 100)
    assert score(_figures(manifests=30, manifest_bytes=1000)).score == 92
