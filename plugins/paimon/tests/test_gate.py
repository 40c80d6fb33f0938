"""The health gate on Paimon's ``compact`` (its ``min-commits`` threshold, decided by the plugin's health hook
from the table's snapshot files, no JVM): too few commits since the last compaction is a skip carrying the
figures that decided it; enough commits, or a lower threshold, gets the job; a sorting compaction is not gated.
The snapshot files are written here as Paimon writes them (their JSON), as the plugin's other tests do."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.factory import JobSpec, TriggerContext
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.formats.base import HEALTH_GATE_ENV

pytest.importorskip("tablemgmt_paimon")


@pytest.fixture(autouse=True)
def gate_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HEALTH_GATE_ENV, "1")  # the suite runs with it off (tests/conftest.py)


def paimon_table(warehouse: Path, commits: int) -> None:
    table = warehouse / "db.db" / "events"
    (table / "snapshot").mkdir(parents=True)
    for i in range(1, commits + 1):  # APPEND commits, no compaction
        doc = {"id": i, "commitKind": "APPEND", "timeMillis": 1764000000000 + i, "totalRecordCount": 10 * i}
        (table / "snapshot" / f"snapshot-{i}").write_text(json.dumps(doc))
    (table / "bucket-0").mkdir()
    for i in range(commits):
        (table / "bucket-0" / f"data-{i}.parquet").write_bytes(b"x" * 1000)


def trigger(warehouse: Path, compact: dict[str, Any]) -> Any:
    from tablemgmt_paimon.factory import PaimonProcessFactory

    catalog = CatalogSpec(name="lake", type="hadoop", warehouse=str(warehouse))
    spec = TableSpec(
        catalog="lake", namespace="db", name="events", format="paimon", actions={"compact": compact}
    )
    return PaimonProcessFactory().trigger(
        spec, "compact", TriggerContext(instant=datetime.now(UTC), catalog=catalog)
    )


def test_a_compaction_that_does_not_pay_is_a_skip_with_its_figures(tmp_path: Path) -> None:
    paimon_table(tmp_path / "wh", commits=3)
    skipped = trigger(tmp_path / "wh", {})
    assert isinstance(skipped, dict) and skipped["gate"] == "health", skipped
    assert skipped["reason"].startswith("does not pay now:"), skipped
    assert "min-commits" in json.dumps(skipped), skipped


def test_enough_commits_or_a_lower_threshold_gets_the_job(tmp_path: Path) -> None:
    paimon_table(tmp_path / "many", commits=8)
    assert isinstance(trigger(tmp_path / "many", {}), JobSpec)
    paimon_table(tmp_path / "few", commits=3)
    assert isinstance(trigger(tmp_path / "few", {"thresholds": {"min-commits": 2}}), JobSpec)


def test_a_sorting_compaction_is_not_gated(tmp_path: Path) -> None:
    paimon_table(tmp_path / "wh", commits=3)
    job = trigger(tmp_path / "wh", {"order-strategy": "zorder", "order-by": ["id"]})
    assert isinstance(job, JobSpec)


def test_an_unknown_threshold_is_refused_naming_the_allowed_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="min-commits"):
        TableSpec(
            catalog="lake",
            namespace="db",
            name="events",
            format="paimon",
            actions={"compact": {"thresholds": {"min-files": 3}}},
        )
