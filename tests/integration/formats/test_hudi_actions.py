"""Hudi's compaction (RFC-43's two phases) and clean on a merge-on-read table written by Spark (one Hudi
JVM, in a child process). Each effect is read back independently: the timeline from ``.hoodie`` without a
JVM (``metadata/hudi.py``), the rows and a checksum by a snapshot query of the table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.metadata.hudi import read_timeline
from tests.integration.formats.format_jobs import run_scenario

pytestmark = pytest.mark.integration
Steps = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Steps]:
    warehouse = tmp_path_factory.mktemp("hudi-warehouse")
    return warehouse / "app" / "events", run_scenario("tests.integration.formats.hudi_scenario", warehouse)


def unchanged_rows(step: dict[str, Any]) -> None:
    before, after = step["before"], step["after"]
    assert (
        (after["rows"], after["checksum"]) == (before["rows"], before["checksum"]) == (40, before["checksum"])
    )


def test_compaction_schedules_then_executes_one_instant(scenario: tuple[Path, Steps]) -> None:
    _, steps = scenario
    step = steps["compaction"]
    result = step["result"]
    assert result["exit_code"] == 0, result
    summary = result["summary"]
    assert summary["scheduled_instant"] == summary["executed_instant"] is not None
    assert not summary["adopted_pending"]
    assert summary["after"]["base_files"] > summary["before"]["base_files"]
    assert step["before"]["delta_commits_since_compaction"] == 3
    assert step["after"]["delta_commits_since_compaction"] == 0 and step["after"]["pending_compactions"] == []
    assert step["after"]["current_snapshot_id"] == int(summary["executed_instant"])
    unchanged_rows(step)
    # nothing written since: the timeline says so and the factory skips without a JVM
    assert steps["compaction_again"]["job"] is None


def test_a_retry_executes_the_instant_the_dead_attempt_scheduled(scenario: tuple[Path, Steps]) -> None:
    location, steps = scenario
    step = steps["compaction_retry"]
    (died,) = step["died"]
    assert step["job"]["options"]["compaction-instant"] == died
    summary = step["result"]["summary"]
    assert step["result"]["exit_code"] == 0, step["result"]
    assert summary["executed_instant"] == died and summary["scheduled_instant"] is None
    assert summary["adopted_pending"]
    # no duplicate instant: exactly two compactions ever completed, none pending
    timeline = read_timeline(str(location))
    assert len(timeline.completed_compactions()) == 2 and died in timeline.completed_compactions()
    assert timeline.pending_compactions() == []
    unchanged_rows(step)


def test_clustering_rewrites_file_groups_along_a_z_order(scenario: tuple[Path, Steps]) -> None:
    location, steps = scenario
    step = steps["clustering"]
    summary = step["result"]["summary"]
    assert step["result"]["exit_code"] == 0, step["result"]
    assert summary["layout"] == "z-order" and summary["sort_columns"] == ["v", "id"]
    assert summary["states"] == ["COMPLETED"] and summary["file_groups_rewritten"] >= 1
    (instant,) = summary["instants"]
    assert read_timeline(str(location)).count("replacecommit") == 1
    assert step["after"]["current_snapshot_id"] == int(instant)
    unchanged_rows(step)
    assert steps["clustering_again"]["job"] is None  # nothing committed since: skipped without a JVM


def test_clean_deletes_old_file_slices_only(scenario: tuple[Path, Steps]) -> None:
    location, steps = scenario
    step = steps["clean"]
    summary = step["result"]["summary"]
    assert step["result"]["exit_code"] == 0, step["result"]
    assert summary["deleted_files"] > 0
    assert summary["after"]["log_files"] + summary["after"]["base_files"] == (
        summary["before"]["log_files"] + summary["before"]["base_files"] - summary["deleted_files"]
    )
    assert step["after"]["commits_since_clean"] == 0
    assert read_timeline(str(location)).count("clean") == 1
    unchanged_rows(step)  # nothing live removed: every row and value still read back
