"""Recovery without shared storage (issue 36, item 4): a worker dies after its job committed and
before it recorded anything; the retry runs on another host -- its own ``$AIRFLOW_HOME``, so no result
file of the first worker is there -- and must record the committed result instead of running the job
again, on SQLite and on PostgreSQL.

Worker A (``worker_main.py``: real spark-submit, local[2], an 8 s lease renewed every 2 s) compacts a real table and is
killed with -9 the moment its job returns committed. Worker B, with another ``$AIRFLOW_HOME`` and
result directory, retries once A's row is stale (again while A's lease holds, as the operator defers).
The commit carries its process attempt in the snapshot summary (``spark/job/commit_mark.py``); B reads
it from the table (``lifecycle/table_marks.py``).

Counted: rounds, duplicated jobs (B ran the job instead of recording A's: a second commit, or no
record from the table), lost records (the process not SUCCESS), the table's rows (count and checksum
before and after), rows left non-terminal. Before the change B ran the job again in every round.
Every round rewrites all the table's files (``REWRITE_AGAIN``), so one table serves all rounds.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.iceberg_reads import read_state
from tests.faults.conftest import ROUNDS, Figures
from tests.faults.test_kill9 import make_tables, wait_for
from tests.faults.workers import REWRITE_AGAIN, WorkerStore, register, run_worker, worker_store

pytestmark = [
    pytest.mark.faults,
    pytest.mark.on_demand(
        reason="a real compaction per round and store, ~30-60 s a round under load; CI runs "
        "unit/lifecycle/test_table_marks.py (the marks read from Iceberg and Delta metadata)"
    ),
]

CATALOG = "kill"
ACTION = "rewrite-files"
T0 = datetime(2026, 7, 1, tzinfo=UTC)
TIMINGS = {
    "TABLEMGMT_FAULT_LEASE_TTL": "8",
    "TABLEMGMT_FAULT_HEARTBEAT": "2",
    "TABLEMGMT_FAULT_STALE_AFTER": "5",
}


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> WorkerStore:
    return worker_store(request.param, tmp_path, request)


def _home(tmp_path: Path, who: str) -> dict[str, str]:
    home = tmp_path / f"home-{who}"
    home.mkdir(exist_ok=True)
    return {"AIRFLOW_HOME": str(home), "TABLEMGMT_RESULT_DIR": str(home / "tablemgmt" / "results")}


def _snapshots(meta_dir: Path) -> int:
    from pyiceberg.table import StaticTable

    version = (meta_dir / "version-hint.text").read_text().strip()
    return len(StaticTable.from_metadata(str(meta_dir / f"v{version}.metadata.json")).metadata.snapshots)


def _round(tmp_path: Path, where: WorkerStore, tid: str, meta_dir: Path, r: int) -> dict[str, Any]:
    instant = T0 + timedelta(days=r)
    before, commits_before = read_state(meta_dir), _snapshots(meta_dir)
    a = run_worker(
        where.url,
        tid,
        ACTION,
        instant,
        env={**TIMINGS, **_home(tmp_path, "a"), "TABLEMGMT_FAULT_DIE_AFTER_COMMIT": "1"},
    )
    (tmp_path / f"round{r}-a.log").write_text(a.stderr)
    assert a.returncode == -9, (
        f"worker A should have died after its commit: {a.returncode}\n{a.stderr[-3000:]}"
    )

    def stale() -> bool:
        p = where.store.processes.find(tid, ACTION, instant)
        beat = p.heartbeat_at or p.started_at or p.created_at
        return datetime.now(UTC) - beat > timedelta(seconds=5.5)

    wait_for("A's row to go stale", stale, timeout=60)

    def lease_lapsed() -> bool:
        lease = where.store.leases.get(tid)
        return lease is None or lease.expired()

    tries = 0
    while True:  # worker B on another host: at once (A's lease still holds: it defers), then once it lapsed
        tries += 1
        b = run_worker(where.url, tid, ACTION, instant, env={**TIMINGS, **_home(tmp_path, "b")})
        (tmp_path / f"round{r}-b{tries}.log").write_text(b.stderr)
        if b.returncode != 3 or tries > 10:
            break
        wait_for("A's lease to lapse", lease_lapsed, timeout=60)
        time.sleep(0.5)
    assert b.returncode == 0, b.stderr[-3000:]
    row = where.store.processes.find(tid, ACTION, instant)
    return {
        "row": row,
        "before": before,
        "after": read_state(meta_dir),
        "tries": tries,
        "commits": _snapshots(meta_dir) - commits_before,
    }


@pytest.mark.timeout(900 + 300 * ROUNDS)  # a table first: minutes on a loaded machine
def test_recovery_on_another_host_records_the_commit_from_the_table(
    where: WorkerStore, tmp_path: Path, figures: Figures
) -> None:
    warehouse = tmp_path / "wh"
    tid = f"{CATALOG}.db.split"
    make_tables(warehouse, [tid])
    register(where.store, tid, ACTION, str(warehouse), REWRITE_AGAIN)
    meta_dir = warehouse / "db" / "split" / "metadata"
    notes: list[str] = []
    failures: list[str] = []
    for r in range(ROUNDS):
        out = _round(tmp_path, where, tid, meta_dir, r)
        row, before, after = out["row"], out["before"], out["after"]
        summary = row.summary or {}
        # the job ran again: B committed a second time instead of recording A's commit
        duplicated = max(0, out["commits"] - 1) or (0 if summary.get("recorded_from_table") else 1)
        figures.rounds += 1
        figures.concurrent_jobs += max(0, out["commits"] - 1)
        figures.rows_duplicated += duplicated
        figures.rows_lost += 0 if str(row.status) == "SUCCESS" else 1
        figures.non_terminal += 0 if row.status.is_terminal else 1
        notes.append(
            f"round {r} ({where.kind}): {row.status} attempt {row.attempt} after {out['tries']} tries, "
            f"recorded from the table {bool(summary.get('recorded_from_table'))} (attempt "
            f"{summary.get('recorded_from_attempt')}), commits {out['commits']}, files "
            f"{before.data_files}->{after.data_files}, records {before.records}->{after.records}"
        )
        print(notes[-1])
        if duplicated:
            failures.append(f"the committed job was run again: {notes[-1]}")
        elif (after.records, after.checksum) != (before.records, before.checksum):
            failures.append(f"the table's rows changed: {notes[-1]}")
        elif not (str(row.status) == "SUCCESS" and row.attempt == 2):
            failures.append(f"A's commit not recorded by B: {notes[-1]}")
        elif summary.get("recorded_from_attempt") != 1 or row.snapshot_id is None:
            failures.append(f"recorded without A's attempt or snapshot: {notes[-1]}")
    figures.notes = {"rounds": notes}
    # every round runs (the counts are the proof), then any failing round fails the test
    assert not failures, f"{len(failures)} of {figures.rounds} rounds:\n" + "\n".join(failures)
