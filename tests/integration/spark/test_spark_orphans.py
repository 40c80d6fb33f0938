"""delete-orphans: only unreferenced files older than the cutoff go; the 24-hour floor holds."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from airflow_tablemgmt.core.identifiers import TableIdentifier
from airflow_tablemgmt.formats.iceberg.job.orphans import delete_orphans
from airflow_tablemgmt.spark.errors import InvalidJobSpec
from tests.integration.spark.spark_tables import TableFactory, Tables

pytestmark = pytest.mark.integration
DAY = 86400


def _plant(directory: Path, name: str, age_seconds: float) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not referenced by any snapshot")
    then = time.time() - age_seconds
    os.utime(path, (then, then))
    return path


def _table_with_data(make_table: TableFactory, tables: Tables) -> TableIdentifier:
    table = make_table("id bigint, p string, v string", partitioned_by="p")
    tables.small_files(table, files=1, commits=3)
    return table


def _local(uri: str) -> Path:
    return Path(uri.removeprefix("file:"))


def test_deletes_old_orphans_only(make_table: TableFactory, tables: Tables) -> None:
    table = _table_with_data(make_table, tables)
    data = tables.dir(table) / "data"
    old = [_plant(data, f"orphan-old-{i}.parquet", 5 * DAY) for i in range(3)]
    old.append(_plant(data / "p=a", "orphan-old-nested.parquet", 5 * DAY))
    young = [_plant(data, f"orphan-young-{i}.parquet", 60) for i in range(2)]
    referenced = [_local(p) for p in tables.data_files(table)]
    # A referenced file that is old is still referenced: age alone never makes a file an orphan.
    then = time.time() - 5 * DAY
    os.utime(referenced[0], (then, then))
    before = tables.content(table)

    summary = delete_orphans(tables.spark, table, {"older-than": "3d"})

    assert summary["deleted"] == 4
    assert sorted(_local(p) for p in summary["sample"]) == sorted(old)
    assert not any(p.exists() for p in old)
    assert all(p.exists() for p in young)
    assert all(p.exists() for p in referenced)
    assert all(_local(p).exists() for p in tables.data_files(table))
    assert tables.content(table) == before


def test_dry_run_reports_and_deletes_nothing(make_table: TableFactory, tables: Tables) -> None:
    table = _table_with_data(make_table, tables)
    data = tables.dir(table) / "data"
    old = [_plant(data, f"orphan-{i}.parquet", 5 * DAY) for i in range(5)]

    summary = delete_orphans(tables.spark, table, {"older-than": "3d", "dry-run": True, "sample-size": 2})

    assert summary["dry_run"] is True
    assert summary["would_delete"] == 5
    assert "deleted" not in summary
    assert len(summary["sample"]) == 2
    assert all(p.exists() for p in old)


def test_floor_is_enforced(make_table: TableFactory, tables: Tables) -> None:
    table = _table_with_data(make_table, tables)
    orphan = _plant(tables.dir(table) / "data", "orphan.parquet", 2 * 3600)

    with pytest.raises(InvalidJobSpec, match="24-hour floor"):
        delete_orphans(tables.spark, table, {"older-than": "1h"})
    assert orphan.exists()


def test_allow_below_floor_is_an_explicit_override(
    make_table: TableFactory, tables: Tables, caplog: pytest.LogCaptureFixture
) -> None:
    table = _table_with_data(make_table, tables)
    data = tables.dir(table) / "data"
    two_hours = _plant(data, "orphan-2h.parquet", 2 * 3600)
    fresh = _plant(data, "orphan-fresh.parquet", 60)
    dry = delete_orphans(
        tables.spark, table, {"older-than": "1h", "allow-below-floor": True, "dry-run": True}
    )
    assert dry["would_delete"] == 1 and two_hours.exists()

    with caplog.at_level("WARNING", logger="airflow_tablemgmt"):
        summary = delete_orphans(tables.spark, table, {"older-than": "1h", "allow-below-floor": True})

    assert summary["below_floor"] is True
    assert summary["deleted"] == 1
    assert not two_hours.exists()
    assert fresh.exists()
    assert any("below the 24-hour floor" in r.getMessage() for r in caplog.records)
