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

pytestmark = [pytest.mark.faults, ON_DEMAND]

T0 = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.mark.timeout(400 + 150 * ROUNDS)
def test_a_killed_worker_s_connect_job_ends_before_the_next_holder_starts(
    lake: Lake, tmp_path: Path, figures: Figures
) -> None:
    notes: list[str] = []
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
        counts, detail = count_round(lake, table, table_dir, before, b_job, a_row, expiry)
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
        print(notes[-1])
        assert counts.overlap == 0, notes[-1] + "\n" + log.read_text()[-3000:]
        assert (counts.duplicated, counts.lost, counts.stuck, counts.late_commits) == (0, 0, 0, 0), notes[-1]
        assert str(outcome.process.status) == "SUCCESS", notes[-1]
    figures.notes = {"rounds": notes}
