"""The four scoring defects of issue 39, each failing on the score before the gate (metadata/health.py), on
real Iceberg metadata written by pyiceberg (a SQL catalog on SQLite, no JVM) where a few commits show it and
on the figures at the issue's own sizes where they do not (5,760 expirable snapshots, 10,000 partitions)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.metadata.files import FileStats, read_file_stats
from airflow_tablemgmt.metadata.health import decide, score

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
MB, MiB, DAY = 1000 * 1000, 1024 * 1024, 86400.0
ALERT = 50  # the default alert threshold: [tablemgmt] unhealthy below 50 (docs/notifications.md)


@pytest.fixture
def lake(tmp_path: Path) -> tuple[CatalogSpec, Any]:
    from pyiceberg.catalog.sql import SqlCatalog

    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    warehouse = f"file://{tmp_path / 'wh'}"
    cat = SqlCatalog("lake", uri=uri, warehouse=warehouse)
    cat.create_namespace("db")
    return CatalogSpec(name="lake", type="jdbc", warehouse=warehouse, properties={"uri": uri}), cat


def _figures(**kw: Any) -> FileStats:
    base: dict[str, Any] = dict(
        snapshot_id=1,
        snapshots=1,
        data_files=1,
        small_data_files=0,
        small_file_threshold_bytes=int(0.75 * 128 * MiB),
        delete_files=0,
        data_bytes=100 * MiB,
        delete_bytes=0,
        records=1000,
        target_file_size_bytes=128 * MiB,
        compacted_data_files=1,
        partitions=1,
        manifests=1,
        manifest_bytes=10_000,
    )
    return FileStats(**{**base, **kw})


# ---- 1. a snapshot finding only once the oldest snapshot is twice older-than old ----------------------


def test_snapshots_past_older_than_are_a_finding_at_once(lake: tuple[CatalogSpec, Any]) -> None:
    """Three commits, older-than 1d, read 1.5 days later: two snapshots an expiry would drop. Before: no
    finding until the oldest was 2 days old."""
    catalog, cat = lake
    table = cat.create_table("db.commits", schema=SCHEMA)
    for i in range(3):
        table.append(pa.table({"id": [i], "v": ["x"]}, schema=SCHEMA))
    spec = TableSpec(
        catalog="lake", namespace="db", name="commits", actions={"expire-snapshots": {"older-than": "1d"}}
    )
    stats = read_file_stats(catalog, spec, now=time.time() + 1.5 * DAY)
    assert stats.expirable_snapshots == 2 and stats.oldest_snapshot_age_s < 2 * stats.snapshot_max_age_s
    assert [f.action for f in score(stats).findings] == ["expire-snapshots"]
    assert decide(stats, "expire-snapshots").pays


def test_a_table_committing_every_minute_for_9_days_is_far_from_100() -> None:
    """The issue's table: a commit a minute for 9 days, older-than 5d: ≈ 5,760 expirable snapshots. Before:
    100, no finding (the oldest, 9 days, is not twice 5 days)."""
    stats = _figures(
        snapshots=9 * 1440,
        expirable_snapshots=4 * 1440,
        oldest_snapshot_age_s=9 * DAY,
        snapshot_max_age_s=5 * DAY,
    )
    result = score(stats)
    assert [f.kind for f in result.findings] == ["snapshots"]
    assert result.score < ALERT  # 2. the snapshots alone take it below the alert threshold


# ---- 2. snapshot points capped at 20; small files alone never below 50 ---------------------------------


def test_small_files_alone_take_a_table_below_the_alert_threshold(lake: tuple[CatalogSpec, Any]) -> None:
    """60 tiny files in one partition: before, 40 points at most, so 60 without the manifests finding."""
    catalog, cat = lake
    table = cat.create_table("db.tiny", schema=SCHEMA)
    for i in range(60):
        table.append(pa.table({"id": [i], "v": ["x"]}, schema=SCHEMA))
    stats = read_file_stats(catalog, TableSpec(catalog="lake", namespace="db", name="tiny"))
    assert (stats.data_files, stats.excess_data_files) == (60, 59)
    small = [f for f in score(stats).findings if f.kind == "small_files"]
    assert len(small) == 1 and 100 - small[0].points < ALERT  # (pyiceberg's appends add a manifest each)


def test_more_snapshots_cost_more_points_up_to_the_cap() -> None:
    points = [
        score(_figures(expirable_snapshots=n, snapshots=n + 1, oldest_snapshot_age_s=6 * DAY))
        .findings[0]
        .points
        for n in (1, 10, 100, 1000, 10_000, 100_000)
    ]
    assert points == sorted(points) and points[0] < 10 and points[-1] == 60


# ---- 3. compaction counted per partition: 10,000 tiny files in 10,000 partitions score 100 -------------


def test_an_over_partitioned_table_is_a_finding(lake: tuple[CatalogSpec, Any]) -> None:
    """150 one-row partitions (one commit, identity-partitioned): no compaction removes a file, and the
    table is over-partitioned. Before: 100, no finding."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    catalog, cat = lake
    iceberg_schema = cat.create_table("db.probe", schema=SCHEMA).schema()
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name="id"))
    table = cat.create_table("db.parts", schema=iceberg_schema, partition_spec=spec)
    table.append(pa.table({"id": list(range(150)), "v": ["x"] * 150}, schema=SCHEMA))
    stats = read_file_stats(catalog, TableSpec(catalog="lake", namespace="db", name="parts"))
    assert (stats.data_files, stats.partitions, stats.excess_data_files) == (150, 150, 0)
    result = score(stats)
    assert [f.kind for f in result.findings] == ["over_partitioned"] and result.score < 100
    assert "partition spec" in result.findings[0].reason
    # and compaction does not pay there: the gate skips rewrite-files, saying why
    decision = decide(stats, "rewrite-files")
    assert not decision.pays and "would remove no file" in decision.reason


def test_ten_thousand_tiny_files_in_ten_thousand_partitions() -> None:
    n = 10_000
    stats = _figures(
        data_files=n, small_data_files=n, compacted_data_files=n, partitions=n, data_bytes=n * 2000, records=n
    )
    result = score(stats)
    assert [f.kind for f in result.findings] == ["over_partitioned"]
    assert result.score <= ALERT


def test_daily_partitions_of_a_gigabyte_are_not_over_partitioned() -> None:
    stats = _figures(
        data_files=730,
        compacted_data_files=730,
        partitions=365,
        data_bytes=365 * 1000 * MiB,
        small_data_files=0,
    )
    assert not score(stats).findings


# ---- 4. a cliff at min-input-files: four 40 MB files score 100, six score 73 ---------------------------


def _forty_mb_files(n: int) -> FileStats:
    return _figures(
        data_files=n,
        small_data_files=n,
        data_bytes=n * 40 * MB,
        compacted_data_files=max(1, -(-n * 40 * MB // (128 * MiB))),
        records=n * 1000,
    )


def test_no_cliff_where_a_compaction_starts_to_pay() -> None:
    scores = {n: score(_forty_mb_files(n)).score for n in range(1, 80)}
    assert scores[4] == 100  # fewer small files than min-input-files (5): a compaction does not pay
    assert scores[5] >= 95 and scores[6] >= 95  # before: 76 and 73
    steps = [scores[n] - scores[n + 1] for n in range(1, 79)]
    assert max(steps) <= 5, steps
    assert scores[79] < ALERT + 10  # and the points still grow with what a compaction removes


def test_the_gate_decides_on_the_same_figures_as_the_score() -> None:
    for n in range(1, 30):
        stats = _forty_mb_files(n)
        assert decide(stats, "rewrite-files").pays == any(
            f.action == "rewrite-files" for f in score(stats).findings
        )
        assert decide(stats, "rewrite-files").score == score(stats).score


def test_removable_files_are_counted_per_partition_as_iceberg_plans_them(
    lake: tuple[CatalogSpec, Any],
) -> None:
    """100 partitions of 2 tiny files each: Iceberg's planner rewrites no partition (fewer files than
    min-input-files, less than a target file), so no compaction pays; the table is over-partitioned.
    Before: 100 files "removable", a small-files finding, and a compaction that would rewrite nothing."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    catalog, cat = lake
    iceberg_schema = cat.create_table("db.probe2", schema=SCHEMA).schema()
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name="id"))
    table = cat.create_table("db.pairs", schema=iceberg_schema, partition_spec=spec)
    for _ in range(2):
        table.append(pa.table({"id": list(range(100)), "v": ["x"] * 100}, schema=SCHEMA))
    stats = read_file_stats(catalog, TableSpec(catalog="lake", namespace="db", name="pairs"))
    assert (stats.data_files, stats.partitions, stats.excess_data_files, stats.removable_data_files) == (
        200,
        100,
        100,
        0,
    )
    assert [f.kind for f in score(stats).findings] == ["over_partitioned"]
    assert not decide(stats, "rewrite-files").pays
    # with min-input-files 2 Iceberg rewrites every partition: 100 files removable, and the run pays
    eager = TableSpec(
        catalog="lake", namespace="db", name="pairs", actions={"rewrite-files": {"min-input-files": 2}}
    )
    stats = read_file_stats(catalog, eager)
    assert stats.removable_data_files == 100 and decide(stats, "rewrite-files").pays
