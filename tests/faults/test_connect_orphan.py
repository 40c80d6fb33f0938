"""A worker killed while its job runs on a Spark Connect server: the job is ended by someone other than
that worker, and the table's next holder starts only once the server reports it ended (issue 36).

Worker A compacts a table of 400 small files on a real Connect server (``connect_scenario.py``); once its
row is RUNNING and its compaction's ``CALL`` is on the server, A's process group is killed with -9 (the
operation runs on in the server's JVM). Worker B, another action on the same table (rewrite-manifests, as
another DAG would run it), retries all along. Before the change the lease lapsed after its TTL, B started,
and A's compaction went on writing and committed beside it: nothing interrupted it, nothing waited for it
to end. Now A's guard process (``spark/connect/guard.py``, outside A's process group) interrupts the job
as soon as A's pipe closes, and B ends it again and observes its end before it starts
(``lifecycle/predecessor.py``).

Counted per round (``connect_scenario.py``): overlaps, duplicated jobs or rows, lost records or rows, rows
left non-terminal, commits after A's lease lapsed. On demand, SQLite and PostgreSQL stores:
``TABLEMGMT_CONNECT_FAULTS=1 TABLEMGMT_FAULT_ROUNDS=20``.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.faults.conftest import ROUNDS, Figures
from tests.faults.connect_scenario import (  # noqa: F401 - the fixtures (lake and its server)
    ON_DEMAND,
    Lake,
    Watching,
    alive,
    connect_fault_server_fixture,
    count_round,
    guards_of,
    lake_fixture,
)
from tests.integration.connect.test_connect_engine import table_state

pytestmark = [pytest.mark.faults, ON_DEMAND]

T0 = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.mark.timeout(400 + 150 * ROUNDS)
def test_a_killed_worker_s_connect_job_ends_before_the_next_holder_starts(
    lake: Lake, tmp_path: Path, figures: Figures
) -> None:
    notes: list[str] = []
    failures: list[str] = []
    for r in range(ROUNDS):
        table, table_dir, before = lake.table()
        instant = T0 + timedelta(days=r)
        log = tmp_path / f"a{r}.log"
        a = lake.start_a(table, instant, log)
        guards: list[int] = []
        try:
            lake.wait_in_call(a, table, instant, log)
            time.sleep(0.5)  # into the compaction
            finished_first = a.poll() is not None
            guards = guards_of(a.pid)
            os.killpg(a.pid, signal.SIGKILL)  # the worker's whole group; its guard has a session of its own
            a.wait(30)
            killed_at = time.monotonic()
            expiry = lake.lease_expiry_ms(table)
            b_job = Watching(table_dir, a_running=lambda: False)
            outcome = lake.take_table(table, instant, b_job, killed_at)
        finally:
            if a.poll() is None:
                os.killpg(a.pid, signal.SIGKILL)
        waited = (b_job.started_ms or 0) / 1000 - (time.time() - (time.monotonic() - killed_at))
        stuck = lake.stuck_rows(table, [instant, instant])
        a_row = lake.store.processes.find(table, "rewrite-files", instant)
        # A's task retried on another host: a committed job is recorded from the table, never run again
        retried = (
            None if a_row is not None and str(a_row.status) == "SUCCESS" else lake.retry_a(table, instant)
        )
        counts, detail = count_round(lake, table, table_dir, before, b_job, a_row, expiry, retried)
        counts.stuck = stuck
        counts.add_to(figures)
        left = [g for g in guards if alive(g)]
        for g in left:
            os.kill(g, signal.SIGKILL)
        notes.append(
            f"round {r}: A finished first={finished_first}, B started {waited:.1f}s after the kill, "
            f"overlap {counts.overlap}, late commits {counts.late_commits}, duplicated "
            f"{counts.duplicated}, lost {counts.lost}, stuck {stuck}, guards {len(guards)} "
            f"(left running {len(left)}), {detail}"
        )
        print(notes[-1], flush=True)
        bad = (counts.overlap, counts.duplicated, counts.lost, counts.stuck, counts.late_commits) != (0,) * 5
        if bad or str(outcome.process.status) != "SUCCESS":  # every round runs; the test fails at the end
            failures.append(notes[-1] + "\n" + log.read_text()[-3000:])
    figures.notes = {"rounds": notes}
    assert not failures, f"{len(failures)} of {ROUNDS} rounds failed:\n" + "\n".join(failures)


T1 = datetime(2026, 9, 1, tzinfo=UTC)


@pytest.mark.timeout(600)
def test_a_worker_killed_just_after_its_connect_commit_is_recorded_by_its_retry(
    lake: Lake, tmp_path: Path
) -> None:
    """The lost record: A's compaction commits on the Connect server and A is killed with -9 the moment its
    job returns, before it records anything. A's retry, on another host (no result file), must record A's
    commit from the table -- an Iceberg commit on Connect carries no mark, so the lineage credits it: the
    first non-append snapshot after the one A recorded it started from (lifecycle/table_marks.py). Before
    the change the retry ran the job again (a second compaction; on this table's 400 files, a second
    commit or a skipped run recorded as if nothing had been done)."""
    from tests.faults.test_kill9 import env, wait_for

    table, table_dir, before = lake.table()
    log = tmp_path / "a.log"
    with log.open("w") as err:
        import subprocess
        import sys

        from tests.faults.connect_scenario import TIMINGS, snapshots
        from tests.faults.test_kill9 import WORKER

        a = subprocess.Popen(
            [sys.executable, str(WORKER), lake.url, table, "rewrite-files", T1.isoformat()],
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
            env={
                **env(),
                **TIMINGS,
                "TABLEMGMT_FAULT_CONNECT_URL": lake.server.url,
                "TABLEMGMT_FAULT_DIE_AFTER_COMMIT": "1",
            },  # fmt: skip
        )
    try:
        a.wait(300)
    finally:
        if a.poll() is None:
            os.killpg(a.pid, signal.SIGKILL)
    assert a.returncode == -9, (
        f"A should have died after its commit: {a.returncode}\n{log.read_text()[-3000:]}"
    )
    replaces = [ts for ts, op in snapshots(table_dir / "metadata") if op == "replace"]
    assert len(replaces) == 1, replaces
    row = lake.store.processes.find(table, "rewrite-files", T1)
    assert row is not None and str(row.status) == "RUNNING"
    wait_for("A's row to go stale", lambda: lake.store.processes.now() - (row.heartbeat_at or row.started_at) > timedelta(seconds=2.5), timeout=30)  # fmt: skip
    outcome, starts = lake.retry_a(table, T1)
    summary = outcome.process.summary or {}
    assert starts == 0, f"the retry ran A's committed job again: {summary}"
    assert str(outcome.process.status) == "SUCCESS" and summary.get("recorded_from_table"), summary
    assert summary.get("credited_by") == "lineage" and summary.get("recorded_from_attempt") == 1, summary
    assert [ts for ts, op in snapshots(table_dir / "metadata") if op == "replace"] == replaces
    assert table_state(lake.server.url, lake.catalog, table)["rows"] == before["rows"]
