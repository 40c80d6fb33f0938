"""Issue 36: an Iceberg commit made on a Spark Connect server carries no mark (Iceberg 1.10's procedures take
no snapshot properties, and its ``EnvironmentContext`` is global to the shared server's JVM), so recovery
credits it by the table's lineage: the attempt recorded the commit it started from (``connect_bases``), and
its commit is the first after that one that is not an append, the action's operation, unmarked, with no
other Connect attempt started in between (``lifecycle/table_marks.py``, ``formats/iceberg/marks.py``).

The metadata files are written as Iceberg lays them out; the real job's side is
tests/faults/test_connect_orphan.py (a worker killed on Connect after its commit, recovered)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow_tablemgmt.core.process import Process, ProcessStatus
from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.lifecycle.table_marks import CONNECT_BASES, committed_in_table, with_connect_base
from airflow_tablemgmt.spark.job.commit_mark import ACTION, ATTEMPT, PROCESS

APP = "connect:sc://127.0.0.1:1#3f0c6c8e-0000-4000-8000-000000000000/tms-p7-a1"


def _process(
    attempt: int = 2, pid: int = 7, bases: dict[str, Any] | None = None, app: str | None = APP
) -> Process:
    params: dict[str, Any] = {}
    if bases is not None:
        params[CONNECT_BASES] = bases
    if app is not None:
        params["applications"] = {"1": app}
    return Process(
        id=pid,
        table_id="lake.db.t",
        action="rewrite-files",
        instant=datetime(2026, 1, 1, tzinfo=UTC),
        status=ProcessStatus.PENDING,
        attempt=attempt,
        parameters=params,
        created_at=datetime.now(UTC) - timedelta(minutes=5),
    )


def _table(tmp_path: Path, snaps: list[tuple[int, str, dict[str, str]]]) -> tuple[TableSpec, CatalogSpec]:
    """A table whose lineage is ``snaps`` (id, operation, extra summary), oldest first, the last current."""
    now = int(time.time() * 1000)
    meta = tmp_path / "wh" / "db" / "t" / "metadata"
    meta.mkdir(parents=True, exist_ok=True)
    out, parent = [], None
    for i, (sid, op, extra) in enumerate(snaps):
        snap: dict[str, Any] = {"snapshot-id": sid, "timestamp-ms": now - 1000 * (len(snaps) - i)}
        snap["summary"] = {"operation": op, **extra}
        if parent is not None:
            snap["parent-snapshot-id"] = parent
        out.append(snap)
        parent = sid
    doc = {"format-version": 2, "table-uuid": "0e0c0a0b-0000-4000-8000-000000000000",
           "location": str(meta.parent), "current-snapshot-id": parent if parent is not None else -1,
           "snapshots": out}  # fmt: skip
    (meta / "v3.metadata.json").write_text(json.dumps(doc))
    (meta / "version-hint.text").write_text("3")
    table = TableSpec(catalog="lake", namespace="db", name="t", actions={"rewrite-files": {}})
    return table, CatalogSpec(name="lake", warehouse=str(tmp_path / "wh"))


def test_the_first_replace_after_the_attempt_s_base_is_credited_to_it(tmp_path: Path) -> None:
    # base 10; an appender wrote 11 meanwhile; the attempt's compaction committed 12; appends after it
    table, catalog = _table(tmp_path, [(10, "append", {}), (11, "append", {}), (12, "replace", {}),
                                       (13, "append", {})])  # fmt: skip
    found = committed_in_table(table, catalog, _process(bases={"1": 10}), others=[])
    assert found is not None and found["attempt"] == 1 and found["snapshot_id"] == 12
    assert found["summary"]["credited_by"] == "lineage" and found["summary"]["recorded_from_table"]


def test_nothing_is_credited_without_a_recorded_base_or_a_connect_job(tmp_path: Path) -> None:
    table, catalog = _table(tmp_path, [(10, "append", {}), (12, "replace", {})])
    assert committed_in_table(table, catalog, _process(bases=None), others=[]) is None
    # a base without a Connect application (a spark-submit attempt marks its own commits)
    assert committed_in_table(table, catalog, _process(bases={"1": 10}, app=None), others=[]) is None
    # the recovering attempt's own base is not an earlier attempt's
    assert committed_in_table(table, catalog, _process(attempt=1, bases={"1": 10}), others=[]) is None


def test_a_commit_that_is_not_the_first_change_or_not_the_action_s_is_not_credited(tmp_path: Path) -> None:
    # the first change after the base is a delete (someone else's), not the compaction's replace
    table, catalog = _table(tmp_path, [(10, "append", {}), (11, "delete", {}), (12, "replace", {})])
    assert committed_in_table(table, catalog, _process(bases={"1": 10}), others=[]) is None


def test_a_marked_commit_after_the_base_is_another_job_s(tmp_path: Path) -> None:
    other = {PROCESS: "9", ATTEMPT: "1", ACTION: "rewrite-manifests"}
    table, catalog = _table(tmp_path, [(10, "append", {}), (11, "replace", other), (12, "replace", {})])
    assert committed_in_table(table, catalog, _process(bases={"1": 10}), others=[]) is None


def test_the_base_must_be_in_the_current_lineage(tmp_path: Path) -> None:
    table, catalog = _table(tmp_path, [(10, "append", {}), (12, "replace", {})])
    assert committed_in_table(table, catalog, _process(bases={"1": 99}), others=[]) is None


def test_an_empty_table_s_base_is_none(tmp_path: Path) -> None:
    table, catalog = _table(tmp_path, [(10, "append", {}), (12, "replace", {})])
    found = committed_in_table(table, catalog, _process(bases={"1": None}), others=[])
    assert found is not None and found["snapshot_id"] == 12


def test_another_connect_attempt_started_in_between_may_have_made_it(tmp_path: Path) -> None:
    # process 9 ran on Connect from snapshot 11, after this attempt's base: 12 may be 9's
    table, catalog = _table(tmp_path, [(10, "append", {}), (11, "append", {}), (12, "replace", {})])
    other = _process(pid=9, attempt=1, bases={"1": 11})
    assert committed_in_table(table, catalog, _process(bases={"1": 10}), others=[other]) is None
    # one that started from the credited commit or later came after it: no doubt
    later = _process(pid=9, attempt=1, bases={"1": 12})
    found = committed_in_table(table, catalog, _process(bases={"1": 10}), others=[later])
    assert found is not None and found["snapshot_id"] == 12


def test_a_marked_commit_of_the_attempt_still_wins(tmp_path: Path) -> None:
    mark = {PROCESS: "7", ATTEMPT: "1", ACTION: "rewrite-files"}
    table, catalog = _table(tmp_path, [(10, "append", {}), (12, "replace", mark)])
    found = committed_in_table(table, catalog, _process(bases={"1": 10}), others=[])
    assert found is not None and found["snapshot_id"] == 12 and "credited_by" not in found["summary"]


def test_the_base_is_recorded_by_attempt_beside_the_earlier_ones(tmp_path: Path) -> None:
    table, catalog = _table(tmp_path, [(10, "append", {}), (12, "replace", {})])
    p = _process(attempt=3, bases={"1": 10})
    at = datetime(2026, 1, 2, tzinfo=UTC)
    params = with_connect_base(table, catalog, p, at)
    assert params is not None and params[CONNECT_BASES] == {
        "1": 10,
        "3": {"commit": 12, "at": at.isoformat()},
    }
    assert params["applications"] == {"1": APP}  # the rest kept


def test_another_attempt_from_the_same_base_counts_only_when_it_came_later(tmp_path: Path) -> None:
    """Measured: earlier processes on the table had started from the same snapshot and committed nothing
    (their jobs ended before this attempt took the lease); they must not keep its commit from being credited."""
    table, catalog = _table(tmp_path, [(10, "append", {}), (12, "replace", {})])
    mine = {"1": {"commit": 10, "at": "2026-01-01T10:00:00+00:00"}}
    before = _process(pid=5, attempt=1, bases={"1": {"commit": 10, "at": "2026-01-01T09:00:00+00:00"}})
    found = committed_in_table(table, catalog, _process(bases=mine), others=[before])
    assert found is not None and found["snapshot_id"] == 12
    after = _process(pid=9, attempt=1, bases={"1": {"commit": 10, "at": "2026-01-01T11:00:00+00:00"}})
    assert committed_in_table(table, catalog, _process(bases=mine), others=[before, after]) is None
