"""Delta's optimize and vacuum on a table written by Spark (one Delta JVM, in a child process), each
effect read back without Spark: the live files from the ``_delta_log`` (``formats/delta/metadata.py``), the rows
and a checksum from those files' Parquet, and the files on disk."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.formats.delta.metadata import read_delta
from tests.integration.formats.format_jobs import run_scenario

# On demand (TABLEMGMT_FORMATS_FULL=1): the Delta scenario is one JVM of ≈ 3-8 min on 2 cores, more than CI's
# 30 minutes can hold beside everything else; CI runs Hudi's (tests/integration/formats/test_hudi_actions.py).
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.environ.get("TABLEMGMT_FORMATS_FULL") != "1",
        reason="the Delta scenario runs with TABLEMGMT_FORMATS_FULL=1",
    ),
]


def on_disk(location: Path) -> set[str]:
    return {str(p.relative_to(location)) for p in location.rglob("*.parquet") if "_delta_log" not in p.parts}


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    warehouse = tmp_path_factory.mktemp("delta-warehouse")
    return warehouse / "sales" / "orders", run_scenario("tests.integration.formats.delta_scenario", warehouse)


def test_optimize_bin_packs_without_changing_rows(scenario: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    location, steps = scenario
    result = steps["optimize"]["result"]
    assert result["exit_code"] == 0, result
    summary = result["summary"]
    before, after = summary["before"], summary["after"]
    assert summary["strategy"] == "binpack"
    assert summary["files_removed"] > summary["files_added"] >= 1
    assert after["data_files"] == before["data_files"] - summary["files_removed"] + summary["files_added"]
    assert after["current_snapshot_id"] == before["current_snapshot_id"] + 1
    # read back without Spark: fewer live files in the log, the same rows and checksum
    read_before, read_after = steps["optimize"]["before"], steps["optimize"]["after"]
    assert read_after["files"] == after["data_files"] < read_before["files"] == before["data_files"]
    assert (read_after["rows"], read_after["checksum"]) == (read_before["rows"], read_before["checksum"])
    # the job ran a session of Delta alone: the job spec named the format, never an Iceberg catalog
    job = steps["optimize_job"]["job"]
    assert job["catalog"]["properties"]["tablemgmt.table-format"] == "delta"
    assert job["options"]["table-location"].endswith("/sales/orders")


def test_optimize_is_skipped_when_the_log_shows_no_new_file(scenario: tuple[Path, dict[str, Any]]) -> None:
    _, steps = scenario
    assert steps["optimize_again"]["job"] is None


def test_zorder_in_one_partition(scenario: tuple[Path, dict[str, dict[str, Any]]]) -> None:
    _, steps = scenario
    result = steps["zorder"]["result"]
    assert result["exit_code"] == 0, result
    summary = result["summary"]
    assert summary["strategy"] == "zorder" and summary["zorder_by"] == ["v"]
    assert summary["partitions_optimized"] == 1
    assert summary["files_removed"] >= 2 and summary["files_added"] == 1
    read_before, read_after = steps["zorder"]["before"], steps["zorder"]["after"]
    assert read_after["files"] == read_before["files"] - summary["files_removed"] + 1
    assert (read_after["rows"], read_after["checksum"]) == (read_before["rows"], read_before["checksum"])


def test_vacuum_dry_run_first_then_deletes_only_unreferenced_files(
    scenario: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    location, steps = scenario
    orphans = steps["vacuum_setup"]["orphans"]
    dry = steps["vacuum_dry"]["result"]
    assert dry["exit_code"] == 0, dry
    assert dry["summary"]["dry_run"] is True
    assert "first run of vacuum" in dry["summary"]["dry_run_reason"]
    # past the table's retention: the crashed writer's files only; the files OPTIMIZE removed just now
    # are still within it
    assert dry["summary"]["would_delete_files"] == len(orphans)
    assert sorted(Path(p).name for p in dry["summary"]["sample"]) == sorted(Path(o).name for o in orphans)
    real = steps["vacuum"]["result"]
    assert real["exit_code"] == 0, real
    assert real["summary"]["dry_run"] is False
    assert real["summary"]["deleted_files"] == len(orphans)
    # read back: the orphans are gone, every live file is there, and so are the retained removed files
    state = read_delta(str(location))
    present = on_disk(location)
    assert not present & set(orphans)
    assert set(state.files) <= present
    assert len(present - set(state.files)) >= steps["optimize"]["result"]["summary"]["files_removed"]
    read_before, read_after = steps["vacuum"]["before"], steps["vacuum"]["after"]
    # nothing live removed: the same files, rows and checksum (VACUUM only logs its start and end)
    assert {k: v for k, v in read_after.items() if k != "version"} == {
        k: v for k, v in read_before.items() if k != "version"
    }
    assert real["summary"]["after"]["data_files"] == real["summary"]["before"]["data_files"]
    assert read_after["rows"] == 4 * 50 - 1 + 40 + (40 if "bare_optimize" in steps else 0)


def test_vacuum_never_goes_below_deltas_retention_check(scenario: tuple[Path, dict[str, Any]]) -> None:
    _, steps = scenario
    result = steps["vacuum_below_check"]["result"]
    assert result["exit_code"] == 1
    assert "retention" in result["error"].lower()
