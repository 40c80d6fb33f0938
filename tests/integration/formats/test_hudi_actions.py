"""Hudi's compaction (RFC-43's two phases), clean, clustering and archive on a merge-on-read table written
by Spark (one Hudi JVM, in a child process). Each effect is read back independently: the timeline from
``.hoodie`` without a JVM (``formats/hudi/metadata.py``), the rows and a checksum by a snapshot query of the table.

CI runs the representative part: compaction scheduled and executed by one job, and the retry of an attempt
that died between the phases (one JVM, ≈ 60-90 s on 2 cores). Clean, clustering and archive run on demand
(``TABLEMGMT_FORMATS_FULL=1``), in the same JVM after those two."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.formats.hudi.metadata import read_timeline
from tests.integration.formats.format_jobs import run_scenario

pytestmark = pytest.mark.integration
Steps = dict[str, dict[str, Any]]
FULL = os.environ.get("TABLEMGMT_FORMATS_FULL") == "1"
full_only = pytest.mark.skipif(
    not FULL, reason="clean, clustering and archive run with TABLEMGMT_FORMATS_FULL=1"
)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Steps]:
    warehouse = tmp_path_factory.mktemp("hudi-warehouse")
    mode = ("full",) if FULL else ()
    return warehouse / "app" / "events", run_scenario(
        "tests.integration.formats.hudi_scenario", warehouse, *mode
    )


def unchanged_rows(step: dict[str, Any]) -> None:
    before, after = step["before"], step["after"]
    assert (
        (after["rows"], after["checksum"]) == (before["rows"], before["checksum"]) == (40, before["checksum"])
    )


def test_compaction_schedules_then_executes_one_instant(scenario: tuple[Path, Steps]) -> None:
    location, steps = scenario
    # written with Hudi's default metadata table (files and column-stats indexes), as users' tables are
    assert {"files", "column_stats"} <= {p.name for p in (location / ".hoodie" / "metadata").iterdir()}
    step = steps["compaction"]
    result = step["result"]
    assert result["exit_code"] == 0, result
    summary = result["summary"]
    assert summary["scheduled_instant"] == summary["executed_instant"] is not None
    assert not summary["adopted_pending"]
    assert summary["after"]["base_files"] > summary["before"]["base_files"]
    assert step["before"]["delta_commits_since_compaction"] == (3 if FULL else 2)
    assert step["after"]["delta_commits_since_compaction"] == 0 and step["after"]["pending_compactions"] == []
    assert step["after"]["current_snapshot_id"] == int(summary["executed_instant"])
    unchanged_rows(step)
    # nothing written since: the timeline says so and the factory skips without a JVM
    assert steps["compaction_again"]["job"] is None


def test_a_retry_executes_the_instant_the_dead_attempt_scheduled(scenario: tuple[Path, Steps]) -> None:
    _, steps = scenario
    step = steps["compaction_retry"]
    (died,) = step["died"]
    assert step["job"]["options"]["compaction-instant"] == died
    summary = step["result"]["summary"]
    assert step["result"]["exit_code"] == 0, step["result"]
    assert summary["executed_instant"] == died and summary["scheduled_instant"] is None
    assert summary["adopted_pending"]
    # no duplicate instant: exactly two compactions ever completed, none pending
    assert len(step["completed_compactions"]) == 2 and died in step["completed_compactions"]
    assert step["after"]["pending_compactions"] == []
    unchanged_rows(step)


@full_only
def test_clustering_rewrites_file_groups_along_a_z_order(scenario: tuple[Path, Steps]) -> None:
    _, steps = scenario
    step = steps["clustering"]
    summary = step["result"]["summary"]
    assert step["result"]["exit_code"] == 0, step["result"]
    assert summary["layout"] == "z-order" and summary["sort_columns"] == ["v", "id"]
    assert summary["states"] == ["COMPLETED"] and summary["file_groups_rewritten"] >= 1
    (instant,) = summary["instants"]
    assert step["replacecommits"] == 1
    assert step["after"]["current_snapshot_id"] == int(instant)
    unchanged_rows(step)
    assert steps["clustering_again"]["job"] is None  # nothing committed since: skipped without a JVM


@full_only
def test_clean_deletes_old_file_slices_only(scenario: tuple[Path, Steps]) -> None:
    _, steps = scenario
    step = steps["clean"]
    summary = step["result"]["summary"]
    assert step["result"]["exit_code"] == 0, step["result"]
    assert summary["deleted_files"] > 0
    assert summary["after"]["log_files"] + summary["after"]["base_files"] == (
        summary["before"]["log_files"] + summary["before"]["base_files"] - summary["deleted_files"]
    )
    assert step["after"]["commits_since_clean"] == 0
    assert step["cleans"] == 1
    unchanged_rows(step)  # nothing live removed: every row and value still read back


@full_only
def test_archive_moves_old_instants_off_the_active_timeline(scenario: tuple[Path, Steps]) -> None:
    location, steps = scenario
    step = steps["archive"]
    result = step["result"]
    assert result["exit_code"] == 0, result
    summary = result["summary"]
    before, after = step["before"], step["after"]
    # the active timeline had more than max-commits commits; Hudi trimmed it, never below min-commits
    assert before["active_commits"] > 4
    assert summary["min_commits"] <= after["active_commits"] < before["active_commits"]
    assert summary["archived_instants"] == before["completed_instants"] - after["completed_instants"] > 0
    assert step["history"], "archived instants are written to .hoodie/timeline/history/"
    # the newest instants stay active, the table reads the same, and archive deleted no data file
    assert after["current_snapshot_id"] == before["current_snapshot_id"]
    assert after["data_files"] == before["data_files"]
    unchanged_rows(step)
    assert read_timeline(str(location)).active_commits() == after["active_commits"]
    assert steps["archive_again"]["job"] is None  # at or below max-commits now: skipped without a JVM
