"""A frozen worker cannot keep its Spark Connect job running past its lease (issue 36).

Worker A compacts a table of 400 small files on a real Connect server (``connect_scenario.py``); once its
row is RUNNING and its compaction's ``CALL`` is on the server, A's process alone is stopped (SIGSTOP) for
2 x its 3 s lease TTL: its operation runs on in the server's JVM. Worker B, another action on the same
table, retries all along and takes the table the moment A's lease lets it; at 2 x TTL A is continued
(SIGCONT). Before the change B started beside A's still-running compaction (nothing stopped it: the
worker's watchdog was frozen with the worker, and nothing else knew the job). Now:

* A's guard process (``spark/connect/guard.py``, not frozen with A) interrupts the job's tag when A's
  lease confirmation runs out, one heartbeat before the lease can lapse, and waits for the server to
  report its operations ended;
* B, before it takes the lapsed lease, ends A's job again and starts only once the server reports every
  recorded operation ended (``lifecycle/predecessor.py``);
* A, continued, sends no further operation (its lease confirmation ran out: the fence before each
  ``ExecutePlan``) and closes its own row.

Counted per round: overlaps (A's job writing or committing to the table after B's job started),
duplicated jobs or rows, lost records or rows, rows left non-terminal, A's commits after its lease
lapsed. On demand, SQLite and PostgreSQL stores: ``TABLEMGMT_CONNECT_FAULTS=1 TABLEMGMT_FAULT_ROUNDS=20``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.faults.conftest import ROUNDS, Figures
from tests.faults.connect_scenario import (  # noqa: F401 - the fixtures (lake and its server)
    ON_DEMAND,
    TTL_S,
    Lake,
    Watching,
    alive,
    connect_fault_server_fixture,
    count_round,
    guards_of,
    lake_fixture,
)

pytestmark = [pytest.mark.faults, ON_DEMAND]

T0 = datetime(2026, 8, 1, tzinfo=UTC)
FREEZE_S = 2 * TTL_S


@pytest.mark.timeout(400 + 150 * ROUNDS)
def test_a_frozen_worker_s_connect_job_ends_before_the_next_holder_starts(
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
        stopped = False
        resume: threading.Timer | None = None
        try:
            lake.wait_in_call(a, table, instant, log)
            time.sleep(0.5)  # into the compaction
            finished_first = a.poll() is not None
            guards = guards_of(a.pid)
            os.kill(a.pid, signal.SIGSTOP)  # the worker alone; the server runs its operation on
            stopped = True
            frozen_at = time.monotonic()
            time.sleep(0.2)
            expiry = lake.lease_expiry_ms(table)

            def cont() -> None:
                os.kill(a.pid, signal.SIGCONT)  # noqa: B023 - this round's worker

            resume = threading.Timer(max(0.0, FREEZE_S - (time.monotonic() - frozen_at)), cont)
            resume.start()
            b_job = Watching(table_dir, a_running=lambda: a.poll() is None)  # noqa: B023
            outcome = lake.take_table(table, instant, b_job, frozen_at)
            resume.join()
            stopped = False
            a.wait(120)
        finally:
            if resume is not None:
                resume.cancel()
            if stopped:
                os.kill(a.pid, signal.SIGCONT)
            if a.poll() is None:
                os.killpg(a.pid, signal.SIGKILL)
        waited = (b_job.started_ms or 0) / 1000 - (time.time() - (time.monotonic() - frozen_at))
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
        acted = "interrupting" in log.read_text()
        notes.append(
            f"round {r}: A finished first={finished_first}, B started {waited:.1f}s after the freeze, "
            f"overlap {counts.overlap}, late commits {counts.late_commits}, duplicated "
            f"{counts.duplicated}, lost {counts.lost}, stuck {stuck}, guard acted {acted} (left "
            f"running {len(left)}), A exit {a.returncode}, {detail}"
        )
        print(notes[-1], flush=True)
        bad = (counts.overlap, counts.duplicated, counts.lost, counts.stuck, counts.late_commits) != (0,) * 5
        if bad or str(outcome.process.status) != "SUCCESS":  # every round runs; the test fails at the end
            failures.append(notes[-1] + "\n" + log.read_text()[-3000:])
    figures.notes = {"rounds": notes}
    assert not failures, f"{len(failures)} of {ROUNDS} rounds failed:\n" + "\n".join(failures)
