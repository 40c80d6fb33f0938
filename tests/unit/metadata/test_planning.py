"""The planning step (ADR 0004, ``metadata/planning.py``): which enrolled tables an action pays on, from stored
health and the table's thresholds as its settings say now, decided by the gate's own ``decide``; which must be
measured first (no health, stale health, figures measured with other settings); and the batches."""

from __future__ import annotations

from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_tablemgmt.metadata.files import FileStats
from airflow_tablemgmt.metadata.health import Finding, FormatHealth, decide
from airflow_tablemgmt.metadata.planning import PlanRow, batches, plan

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
MIB = 1024 * 1024
TARGET = 512 * MIB


def _stats(**kw: Any) -> FileStats:
    """Figures as the health read stores them for an Iceberg table with rewrite-files at its defaults."""
    base = FileStats(
        snapshot_id=1,
        snapshots=3,
        data_files=60,
        small_data_files=60,
        small_file_threshold_bytes=int(TARGET * 0.75),
        delete_files=0,
        data_bytes=60 * MIB,
        delete_bytes=0,
        records=6000,
        target_file_size_bytes=TARGET,
        compacted_data_files=1,
        min_input_files=5,
        partitions=1,
        removable_data_files=59,
        thresholds={"rewrite-files": {"min-small-files": 5, "small-file-fraction": 0.75}},
    )
    return replace(base, **kw)


SMALL = _stats()  # 60 small files in one partition: a compaction removes 59
COMPACT = _stats(
    data_files=4, small_data_files=4, compacted_data_files=4, partitions=4, removable_data_files=0
)


def _row(
    table: str, stats: FileStats | None, *, actions: Any = None, age: timedelta = timedelta(minutes=5)
) -> PlanRow:
    return PlanRow(
        table,
        "iceberg",
        {"rewrite-files": {}} if actions is None else actions,
        None if stats is None else asdict(stats),
        None if stats is None else NOW - age,
    )


def test_selects_the_tables_that_pay_and_measures_the_missing_and_stale() -> None:
    rows = [
        _row("lake.s.pays", SMALL),
        _row("lake.s.compact", COMPACT),
        _row("lake.s.unmeasured", None),
        _row("lake.s.stale", SMALL, age=timedelta(days=2)),
    ]
    p = plan(rows, "rewrite-files", now=NOW, max_age=timedelta(days=1))
    assert [t.table_id for t in p.pays] == ["lake.s.pays"]
    assert "compaction would remove 59" in p.pays[0].reason
    assert list(p.idle) == ["lake.s.compact"]
    assert p.idle["lake.s.compact"].startswith("a compaction would remove no file")
    assert p.measure == {
        "lake.s.unmeasured": "no health measured",
        "lake.s.stale": "health measured 48.0 h ago (bound 24 h)",
    }
    assert p.batches == [["lake.s.pays"]]


def test_the_decision_is_the_gates() -> None:
    """Every table's answer is ``decide`` on its stored figures: the same pays, reason and score."""
    for stats in (SMALL, COMPACT, _stats(small_data_files=4)):
        p = plan([_row("lake.s.t", stats)], "rewrite-files", now=NOW)
        gate = decide(stats, "rewrite-files")
        if gate.pays:
            assert [(t.score, t.reason) for t in p.pays] == [(gate.score, gate.reason)]
        else:
            assert p.idle == {"lake.s.t": gate.reason} and not p.pays


def test_a_tables_own_thresholds_differ_from_its_policys() -> None:
    """Same figures, two tables: one on the policy's defaults (min-small-files 5), one whose settings raise
    min-small-files to 100 (a more specific policy's): only the first pays."""
    rows = [
        _row("lake.s.default", SMALL),
        _row("lake.s.strict", SMALL, actions={"rewrite-files": {"thresholds": {"min-small-files": 100}}}),
    ]
    p = plan(rows, "rewrite-files", now=NOW)
    assert [t.table_id for t in p.pays] == ["lake.s.default"]
    assert "fewer than min-small-files 100" in p.idle["lake.s.strict"]


def test_a_threshold_changed_since_the_measurement_applies_without_a_new_read() -> None:
    """Measured while the table's min-small-files was 100 (stored in the figures), now 5: it pays."""
    measured_strict = replace(
        SMALL, thresholds={"rewrite-files": {"min-small-files": 100, "small-file-fraction": 0.75}}
    )
    assert not decide(measured_strict, "rewrite-files").pays
    p = plan([_row("lake.s.t", measured_strict)], "rewrite-files", now=NOW)
    assert [t.table_id for t in p.pays] == ["lake.s.t"]


def test_figures_measured_with_other_settings_are_measured_again() -> None:
    """The small-file count depends on the target size: figures measured at 128 MiB do not say what a
    512 MiB target would do, so the table is measured first."""
    at_128 = replace(SMALL, target_file_size_bytes=128 * MIB, small_file_threshold_bytes=96 * MIB)
    p = plan([_row("lake.s.t", at_128)], "rewrite-files", now=NOW)
    assert not p.pays and not p.idle
    assert p.measure["lake.s.t"].startswith("measured with other settings: target_file_size_bytes 134217728")
    same = {"rewrite-files": {"target-file-size-bytes": 128 * MIB}}
    assert [
        t.table_id for t in plan([_row("lake.s.t", at_128, actions=same)], "rewrite-files", now=NOW).pays
    ] == ["lake.s.t"]


def test_tables_without_the_action_enabled_are_left_out() -> None:
    rows = [
        _row("lake.s.off", SMALL, actions={"rewrite-files": {"enabled": False}}),
        _row("lake.s.other", SMALL, actions={"expire-snapshots": {}}),
    ]
    p = plan(rows, "rewrite-files", now=NOW)
    assert not p.pays and not p.measure
    assert p.not_enabled == {
        "lake.s.off": "rewrite-files is not enabled",
        "lake.s.other": "its settings do not name rewrite-files",
    }


def test_an_action_without_thresholds_runs_whatever_the_health() -> None:
    p = plan([_row("lake.s.t", None, actions={"delete-orphans": {}})], "delete-orphans", now=NOW)
    assert [t.table_id for t in p.pays] == ["lake.s.t"] and not p.measure


def test_a_formats_own_health_is_decided_by_its_findings() -> None:
    finding = Finding("small_files", 40, "optimize", "40 small files")
    own = {"format_health": FormatHealth("delta", {"data_files": 40}, (finding,)).to_dict()}
    rows = [
        PlanRow("lake.s.d", "delta", {"optimize": {}}, own, NOW),
        PlanRow(
            "lake.s.e", "delta", {"optimize": {}}, {"format_health": FormatHealth("delta").to_dict()}, NOW
        ),
    ]
    p = plan(rows, "optimize", now=NOW)
    assert [(t.table_id, t.score, t.reason) for t in p.pays] == [("lake.s.d", 60, "40 small files")]
    assert list(p.idle) == ["lake.s.e"]


def test_batches_worst_first_in_batch_size() -> None:
    rows = [_row(f"lake.s.t{i:03d}", SMALL) for i in range(120)]
    rows.append(
        _row("lake.s.worst", replace(SMALL, expirable_snapshots=5000))
    )  # another finding: lower score
    p = plan(rows, "rewrite-files", now=NOW, batch_size=50)
    assert [len(b) for b in p.batches] == [50, 50, 21]
    assert p.batches[0][0] == "lake.s.worst"
    assert p.batches[0][1:3] == ["lake.s.t000", "lake.s.t001"]
    assert p.counts() == {"pays": 121, "measure": 0, "idle": 0, "not_enabled": 0, "batches": 3}
    assert batches(["a", "b", "c"], 2) == [["a", "b"], ["c"]]


@pytest.mark.parametrize("size", [0, -1, 2.5, True])
def test_a_bad_batch_size_names_the_setting_and_what_is_allowed(size: Any) -> None:
    with pytest.raises(ValueError, match=r"plan_batch_size: .* allowed: a whole number >= 1"):
        plan([], "rewrite-files", now=NOW, batch_size=size)


def test_expire_snapshots_decided_on_its_figures_and_measured_again_for_another_older_than() -> None:
    old = replace(COMPACT, snapshots=40, expirable_snapshots=30, snapshot_max_age_s=5 * 86400.0)
    none = replace(COMPACT, snapshots=2, expirable_snapshots=0, snapshot_max_age_s=5 * 86400.0)
    other_age = replace(old, snapshot_max_age_s=86400.0)  # measured while older-than was 1d
    rows = [
        _row("lake.s.old", old, actions={"expire-snapshots": {}}),
        _row("lake.s.none", none, actions={"expire-snapshots": {}}),
        _row(
            "lake.s.strict",
            old,
            actions={"expire-snapshots": {"thresholds": {"min-expirable-snapshots": 50}}},
        ),
        _row("lake.s.other_age", other_age, actions={"expire-snapshots": {}}),
    ]
    p = plan(rows, "expire-snapshots", now=NOW)
    assert [t.table_id for t in p.pays] == ["lake.s.old"]
    assert set(p.idle) == {"lake.s.none", "lake.s.strict"}
    assert p.measure == {
        "lake.s.other_age": "measured with other settings: snapshot_max_age_s 86400 (now 432000)"
    }


def test_a_row_whose_settings_no_longer_validate_is_left_out_with_why() -> None:
    bad = _row("lake.s.bad", SMALL, actions={"rewrite-files": {"thresholds": {"min-files": 3}}})
    p = plan([bad, _row("lake.s.ok", SMALL)], "rewrite-files", now=NOW)
    assert [t.table_id for t in p.pays] == ["lake.s.ok"]
    assert "unknown threshold 'min-files'" in p.not_enabled["lake.s.bad"]
