"""A frozen worker cannot keep its driver running past the lease (issue 36, item 2).

The worker (``worker_main.py``: what `tablemgmt run` does, real spark-submit, local[2], a SQLite
store, a 3 s lease renewed every 1 s) runs a real compaction; once its process row is RUNNING the
worker process alone is stopped (SIGSTOP: its spark-submit driver is not) for 2 x the lease TTL.
The next holder takes the table's lease the moment it lapses (by the database's clock), as another
action on the table would. The driver must have stopped itself before then: the worker's renewals
confirm the lease to it (``lease.json`` beside the job's spec) and its guard
(``spark/job/lease_guard.py``) kills the driver JVM when the confirmation runs out. Then SIGCONT: the
worker's own watchdog closes its row.

Counted per round: jobs overlapping (a driver of the frozen worker alive when the next holder took
the lease, or a snapshot it committed after that), rows left non-terminal. Before the change every
round overlapped: the driver ran on (and committed) until SIGCONT let the worker's watchdog act.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.faults.conftest import ROUNDS, Figures
from tests.faults.test_kill9 import WORKER, cli, drivers, env, make_tables, wait_for

pytestmark = [
    pytest.mark.faults,
    pytest.mark.on_demand(
        reason="a real table and compaction per round, ~2 min a round under load; CI runs "
        "unit/lifecycle/test_lease_guard.py (a real driver process stopping itself, the "
        "heartbeat's confirmations)"
    ),
]

CATALOG = "kill"
ACTION = "rewrite-files"
T0 = datetime(2026, 5, 1, tzinfo=UTC)
TTL_S = 3.0
TIMINGS = {"TABLEMGMT_FAULT_LEASE_TTL": str(TTL_S), "TABLEMGMT_FAULT_HEARTBEAT": "1",
           "TABLEMGMT_FAULT_STALE_AFTER": "2"}  # fmt: skip


def _commits_after(meta_dir: Path, moment_ms: int) -> int:
    from pyiceberg.table import StaticTable

    version = (meta_dir / "version-hint.text").read_text().strip()
    meta = StaticTable.from_metadata(str(meta_dir / f"v{version}.metadata.json")).metadata
    return sum(1 for s in meta.snapshots if s.timestamp_ms > moment_ms)


@pytest.mark.timeout(300 + 180 * ROUNDS)
def test_a_frozen_worker_s_driver_stops_before_its_lease_lapses(tmp_path: Path, figures: Figures) -> None:
    from airflow_tablemgmt.core.process import ProcessStatus
    from airflow_tablemgmt.store import Store

    S = ProcessStatus
    warehouse = tmp_path / "wh"
    url = f"sqlite:///{tmp_path / 'tablemgmt.db'}"
    ids = [f"{CATALOG}.db.f{r}" for r in range(ROUNDS)]
    make_tables(warehouse, ids)
    for tid in ids:
        assert cli(url, "register", tid, "--catalog-type", "hadoop", "--warehouse", str(warehouse),
                   "--action", ACTION, "--set", f"{ACTION}.min-input-files=2") == 0  # fmt: skip
    store = Store(url)
    notes: list[str] = []
    for r, tid in enumerate(ids):
        instant = T0 + timedelta(days=r)
        meta_dir = warehouse / "db" / tid.split(".")[-1] / "metadata"
        log = tmp_path / f"round{r}.log"
        with log.open("w") as err:
            proc = subprocess.Popen([sys.executable, str(WORKER), url, tid, ACTION, instant.isoformat()],
                                    stdout=subprocess.DEVNULL, stderr=err, env={**env(), **TIMINGS},
                                    start_new_session=True)  # fmt: skip
        pgid = proc.pid
        overlapping = late = 0
        stopped = False
        try:

            def running(tid: str = tid, instant: datetime = instant, proc: subprocess.Popen = proc) -> bool:
                p = store.processes.find(tid, ACTION, instant)
                return proc.poll() is not None or (p is not None and p.status == S.RUNNING)

            wait_for(f"{tid} RUNNING", running)
            jvms = drivers(pgid)
            os.kill(proc.pid, signal.SIGSTOP)  # the worker alone: its driver runs on
            stopped = True
            frozen_at = time.monotonic()

            def lease_taken(
                tid: str = tid,
            ) -> bool:  # the next holder, the moment the frozen worker's lease lapses
                return store.leases.acquire(tid, "next-holder", timedelta(seconds=60))

            wait_for("the frozen worker's lease to lapse", lease_taken, timeout=60)
            taken_ms = int(time.time() * 1000)
            alive = drivers(pgid)
            overlapping = int(bool(alive))
            time.sleep(max(0.0, 2 * TTL_S - (time.monotonic() - frozen_at)))
            overlapping = overlapping or int(bool(drivers(pgid)))
            os.kill(proc.pid, signal.SIGCONT)
            stopped = False
            proc.wait(timeout=120)
            late = _commits_after(meta_dir, taken_ms)
            store.leases.release(tid, "next-holder")
        finally:
            if stopped:
                os.kill(proc.pid, signal.SIGCONT)
            for pid in drivers(pgid):
                os.kill(pid, signal.SIGKILL)
            if proc.poll() is None:
                os.killpg(pgid, signal.SIGKILL)
        row = store.processes.find(tid, ACTION, instant)
        figures.rounds += 1
        figures.concurrent_jobs += overlapping + late
        figures.late_writes_applied += late
        figures.non_terminal += 0 if row is not None and row.status.is_terminal else 1
        notes.append(f"round {r}: drivers at freeze {len(jvms)}, alive when the lease was taken "
                     f"{len(alive)}, commits after it {late}, row {row.status if row else None}, worker exit "
                     f"{proc.returncode}")  # fmt: skip
        print(notes[-1])
        assert overlapping == 0, (
            f"the frozen worker's driver outlived its lease: {notes[-1]}\n" + log.read_text()[-3000:]
        )
        assert late == 0, notes[-1]
        assert row is not None and row.status.is_terminal, notes[-1]
    figures.notes = {"rounds": notes}
