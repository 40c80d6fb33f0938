"""The Paimon plugin's own logic without a JVM: the CALL statements, the settings' rules, the snapshot reader
(on a directory laid out as Paimon's filesystem catalog writes it)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError
from tablemgmt_paimon.actions import CompactSettings, ExpireSnapshotsSettings, RemoveOrphansSettings
from tablemgmt_paimon.procedures import (
    compact_sql,
    cutoff,
    expire_snapshots_sql,
    paimon_duration,
    remove_orphans_sql,
    utc_timestamp,
)
from tablemgmt_paimon.snapshots import NotReadable, read_table


def test_compact_calls_paimons_procedure_with_its_order_strategy() -> None:
    options = CompactSettings(
        order_strategy="zorder", order_by=["id", "v"], partition_filter={"dt": "2026-11-25"}
    ).options()
    assert compact_sql("lake", "sales.orders", options) == (
        "CALL `lake`.sys.compact(table => 'sales.orders', partitions => 'dt=2026-11-25', "
        "order_strategy => 'zorder', order_by => 'id,v')"
    )
    assert (
        compact_sql("lake", "s.t", CompactSettings().options()) == "CALL `lake`.sys.compact(table => 's.t')"
    )


def test_compact_settings_refuse_what_paimon_09_cannot_do() -> None:
    with pytest.raises(ValidationError, match="compact_strategy argument of Paimon 1.x"):
        CompactSettings(mode="minor")
    with pytest.raises(ValidationError, match="needs the columns to order by"):
        CompactSettings(order_strategy="hilbert")
    with pytest.raises(ValidationError, match="contains a quote"):
        CompactSettings(partition_filter={"dt": "x'; DROP"})


def test_expire_snapshots_floors_and_cutoff() -> None:
    with pytest.raises(ValidationError, match="below the 1-hour floor"):
        ExpireSnapshotsSettings(older_than="10m")
    with pytest.raises(ValidationError, match="retain-max: 1 is less than retain-min"):
        ExpireSnapshotsSettings(retain_max=1, retain_min=2)
    sql = expire_snapshots_sql(
        "lake", "s.t", ExpireSnapshotsSettings(retain_max=5).options(), timedelta(days=1)
    )
    assert sql.startswith(
        "CALL `lake`.sys.expire_snapshots(table => 's.t', retain_max => 5, retain_min => 1, "
    )
    assert "older_than => TIMESTAMP '" in sql and "+00:00'" in sql
    assert cutoff(timedelta(hours=2), datetime(2026, 11, 25, 12, 0, 0)) == "2026-11-25 10:00:00"
    noon = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)
    assert utc_timestamp(timedelta(hours=2), noon).text == "TIMESTAMP '2026-11-25 10:00:00+00:00'"
    assert (
        paimon_duration(timedelta(days=30)) == "30 d" and paimon_duration(timedelta(minutes=90)) == "90 min"
    )


def test_remove_orphans_floor_and_dry_run() -> None:
    with pytest.raises(ValidationError, match="below the 1-day floor"):
        RemoveOrphansSettings(older_than="2h")
    assert RemoveOrphansSettings(older_than="2h", allow_below_floor=True).below_floor()
    assert remove_orphans_sql("lake", "s.t", timedelta(days=3), True).endswith("dry_run => true)")


def _snapshot(root: Path, sid: int, kind: str, records: int, user: str = "") -> None:
    doc = {
        "version": 3,
        "id": sid,
        "schemaId": 0,
        "commitUser": user or "5bd5cd8d-6b0c-4f2b-9e7e-8b8d1d6d3c11",
        "commitKind": kind,
        "timeMillis": 1_795_648_853_296 + sid,
        "totalRecordCount": records,
    }
    (root / "snapshot" / f"snapshot-{sid}").write_text(json.dumps(doc, indent=2))


def test_the_reader_counts_commits_since_the_last_compaction_and_files(tmp_path: Path) -> None:
    table = tmp_path / "sales.db" / "orders"
    (table / "snapshot").mkdir(parents=True)
    (table / "snapshot" / "LATEST").write_text("4")
    bucket = table / "dt=2026-11-25" / "bucket-0"
    bucket.mkdir(parents=True)
    for i in range(3):
        (bucket / f"data-{i}.parquet").write_bytes(b"x" * 10)
    for sid, kind in ((1, "APPEND"), (2, "COMPACT"), (3, "APPEND"), (4, "APPEND")):
        _snapshot(table, sid, kind, sid * 10)
    state = read_table(str(table))
    assert [s.id for s in state.snapshots] == [1, 2, 3, 4]
    assert state.commits_since_compaction() == 2
    assert state.figures() == {
        "snapshots": 4,
        "latest_snapshot": 4,
        "records": 40,
        "data_files_on_disk": 3,
        "data_bytes_on_disk": 30,
        "commits_since_compaction": 2,
    }
    _snapshot(table, 5, "OVERWRITE", 40)  # a sort compaction commits an OVERWRITE
    assert read_table(str(table)).commits_since_compaction() == 0
    with pytest.raises(NotReadable, match="not on a local filesystem"):
        read_table("s3://bucket/wh/sales.db/orders")
    with pytest.raises(NotReadable, match="no snapshot directory"):
        read_table(str(tmp_path))


def test_compact_s_commit_names_the_process_attempt_and_recovery_reads_it(tmp_path: Path) -> None:
    """Issue 36: ``compact`` passes the job's attempt as Paimon's ``commit.user-prefix`` (Paimon 0.9's
    ``sys.compact`` sets its ``options`` on the table for that call, and its commit user is
    ``<prefix>_<uuid>``); the factory's ``commit_marks`` gives recovery the snapshots' commit users."""
    from tablemgmt_paimon.factory import PaimonProcessFactory

    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
    from airflow_tablemgmt.spark.job.commit_mark import (
        ACTION,
        ATTEMPT,
        PROCESS,
        commit_user_prefix,
        parse_text,
    )

    mark = {PROCESS: "12", ATTEMPT: "1", ACTION: "compact"}
    prefix = commit_user_prefix(mark)
    assert compact_sql("lake", "s.t", CompactSettings().options(), prefix) == (
        "CALL `lake`.sys.compact(table => 's.t', options => 'commit.user-prefix=tablemgmt.12.1.compact')"
    )
    table = tmp_path / "sales.db" / "orders"
    (table / "snapshot").mkdir(parents=True)
    _snapshot(table, 1, "APPEND", 10)
    _snapshot(table, 2, "COMPACT", 10, user=f"{prefix}_0f8fad5b-d9cb-469f-a165-70867728950e")
    spec = TableSpec(
        catalog="lake", namespace="sales", name="orders", format="paimon", actions={"compact": {}}
    )
    marks = PaimonProcessFactory().commit_marks(spec, CatalogSpec(name="lake", warehouse=str(tmp_path)))
    assert [(m[1], parse_text(m[0])) for m in marks] == [(2, mark), (1, None)]
