"""A frozen worker cannot keep its driver running past the lease (issue 36, item 2), SQLite and
PostgreSQL.

The worker (``worker_main.py``: what `tablemgmt run` does, real spark-submit, local[2], an 8 s lease
renewed every 2 s: shorter ones starve on a loaded 2-core machine, where the guard then stops the job
before it starts) runs a real compaction; once its process row is RUNNING (and a random 0-1 s more,
so the freeze lands anywhere in the job's start, planning or rewrite) it is frozen for 2 x the lease
TTL, two ways:

* ``worker``: the worker process alone (SIGSTOP): its spark-submit driver is not stopped;
* ``group``: the worker's whole process group, driver included, as a paused container.

The next holder takes the table's lease the moment it lapses (by the database's clock), as another
action on the table would. The driver must not outlive the lease: the worker's renewals confirm it to
the driver (``lease.json`` beside the job's spec) and its guard (``spark/job/lease_guard.py``) kills
the driver JVM when the confirmation runs out. Then SIGCONT: the worker's own watchdog closes its row.

Counted per round: jobs overlapping, rows lost or duplicated in the table (count and checksum before
and after), late commits (snapshots committed after the next holder took the lease), rows left
non-terminal. For a frozen worker a job overlaps when its driver is alive when the lease is taken or at
the end of the freeze. A frozen group's driver cannot run until SIGCONT and nothing on its host can stop
it before: there a job overlaps when it committed after the lease was taken, and the notes give each
round's time from SIGCONT to the driver's end (``thaw_to_gone_ms``: a measurement, not a pass mark; it
includes the kernel's tear-down of the killed JVM). Before the change a frozen worker's driver ran on
until SIGCONT let the worker's watchdog act.

Every round rewrites all the table's files (``REWRITE_AGAIN``), so one table serves all rounds.
"""

from __future__ import annotations

import os
import random
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from subprocess import Popen

import pytest

from tests.e2e.iceberg_reads import read_state
from tests.faults.conftest import ROUNDS, Figures
from tests.faults.freeze import freeze_outside_a_write
from tests.faults.test_kill9 import drivers, make_tables, wait_for
from tests.faults.workers import REWRITE_AGAIN, WorkerStore, register, start_worker, worker_store

pytestmark = [
    pytest.mark.faults,
    pytest.mark.on_demand(
        reason="a real compaction per round, ~30-60 s a round under load; CI runs "
        "unit/lifecycle/test_lease_guard.py (a real driver process stopping itself, the "
        "heartbeat's confirmations)"
    ),
]

CATALOG = "kill"
ACTION = "rewrite-files"
T0 = datetime(2026, 5, 1, tzinfo=UTC)
TTL_S = 8.0
TIMINGS = {
    "TABLEMGMT_FAULT_LEASE_TTL": str(TTL_S),
    "TABLEMGMT_FAULT_HEARTBEAT": "2",
    "TABLEMGMT_FAULT_STALE_AFTER": "5",
}


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> WorkerStore:
    return worker_store(request.param, tmp_path, request)


def _snapshots_after(meta_dir: Path, moment_ms: int) -> int:
    from pyiceberg.table import StaticTable

    version = (meta_dir / "version-hint.text").read_text().strip()
    meta = StaticTable.from_metadata(str(meta_dir / f"v{version}.metadata.json")).metadata
    return sum(1 for s in meta.snapshots if s.timestamp_ms > moment_ms)


def _signal(proc: Popen[bytes], freeze: str, sig: int) -> None:
    if freeze == "group":
        os.killpg(proc.pid, sig)
    else:
        os.kill(proc.pid, sig)


def _alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running or stopped (not a zombie): read directly, a scan of all of /proc
    takes about a second on a loaded machine."""
    out = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            out.append(pid)
    return out


def _gone_after(pids: list[int], since: float, limit: float = 30.0) -> float:
    """Seconds from monotonic ``since`` until none of ``pids`` is left (polled every 2 ms)."""
    while _alive(pids) and time.monotonic() - since < limit:
        time.sleep(0.002)
    return time.monotonic() - since


@pytest.mark.parametrize("freeze", ["worker", "group"])
@pytest.mark.timeout(900 + 240 * ROUNDS)  # a table first: minutes on a loaded machine
def test_a_frozen_worker_s_driver_stops_before_its_lease_lapses(
    freeze: str, where: WorkerStore, tmp_path: Path, figures: Figures
) -> None:
    from airflow_tablemgmt.core.process import ProcessStatus

    S = ProcessStatus
    store = where.store
    rng = random.Random(os.environ.get("TABLEMGMT_FAULT_SEED"))
    warehouse = tmp_path / "wh"
    tid = f"{CATALOG}.db.frozen"
    make_tables(warehouse, [tid])
    register(store, tid, ACTION, str(warehouse), REWRITE_AGAIN)
    meta_dir = warehouse / "db" / "frozen" / "metadata"
    notes: list[str] = []
    failures: list[str] = []
    not_frozen: list[str] = []
    thaw_ms: list[int] = []
    for r in range(ROUNDS):
        instant = T0 + timedelta(days=r)
        before = read_state(meta_dir)
        log = tmp_path / f"round{r}.log"
        proc = start_worker(where.url, tid, ACTION, instant, log=log, env=TIMINGS)
        pgid = proc.pid
        overlapping = late = 0
        frozen = False
        jvms: list[int] = []
        alive: list[int] = []
        thawed_in = 0.0
        try:

            def running(instant: datetime = instant, proc: Popen[bytes] = proc) -> bool:
                p = store.processes.find(tid, ACTION, instant)
                return proc.poll() is not None or (p is not None and p.status == S.RUNNING)

            wait_for(f"round {r} RUNNING", running)
            time.sleep(rng.uniform(0.0, 1.0))
            jvms = drivers(pgid)
            if proc.poll() is not None or not jvms:  # nothing to freeze: the job ended first
                not_frozen.append(f"round {r}: the job ended before the freeze: " + log.read_text()[-300:])
                continue
            if (
                freeze == "worker" and where.kind == "sqlite"
            ):  # not inside a write: see tests/faults/freeze.py
                freeze_outside_a_write(proc.pid, tmp_path / "tablemgmt.db")
            else:
                _signal(proc, freeze, signal.SIGSTOP)
            frozen = True
            frozen_at = time.monotonic()

            def lease_taken() -> bool:  # the next holder, the moment the frozen worker's lease lapses
                return store.leases.acquire(tid, "next-holder", timedelta(seconds=60))

            wait_for("the frozen worker's lease to lapse", lease_taken, timeout=60)
            taken_ms = int(time.time() * 1000)
            alive = _alive(jvms)
            if freeze == "worker":
                overlapping = int(bool(alive))
            time.sleep(max(0.0, 2 * TTL_S - (time.monotonic() - frozen_at)))
            if freeze == "worker":
                overlapping = overlapping or int(bool(_alive(jvms)))
            _signal(proc, freeze, signal.SIGCONT)
            frozen = False
            thawed_in = _gone_after(jvms, time.monotonic())
            if freeze == "group":
                thaw_ms.append(round(thawed_in * 1000))
            proc.wait(timeout=120)
            late = _snapshots_after(meta_dir, taken_ms)
            store.leases.release(tid, "next-holder")
        finally:
            if frozen:
                _signal(proc, freeze, signal.SIGCONT)
            for pid in drivers(pgid):
                os.kill(pid, signal.SIGKILL)
            if proc.poll() is None:
                os.killpg(pgid, signal.SIGKILL)
        after = read_state(meta_dir)
        row = store.processes.find(tid, ACTION, instant)
        figures.rounds += 1
        figures.concurrent_jobs += overlapping + late
        figures.late_writes_applied += late
        figures.rows_lost += max(0, before.records - after.records)
        figures.rows_duplicated += max(0, after.records - before.records) + int(
            before.records == after.records and before.checksum != after.checksum
        )
        figures.non_terminal += 0 if row is not None and row.status.is_terminal else 1
        notes.append(
            f"round {r} ({freeze} frozen, {where.kind}): drivers at freeze {len(jvms)}, alive when the lease "
            f"was taken {len(alive)}, gone {thawed_in * 1000:.0f} ms after SIGCONT, commits after the lease was taken {late}, records {before.records}->"
            f"{after.records}, row {row.status if row else None}, worker exit {proc.returncode}"
        )
        print(notes[-1])
        if overlapping or late or (after.records, after.checksum) != (before.records, before.checksum):
            failures.append(f"the frozen job outlived its lease: {notes[-1]}")
        elif row is None or not row.status.is_terminal:
            failures.append(f"row left non-terminal: {notes[-1]}")
    figures.notes = {
        "rounds": notes,
        "not_frozen": not_frozen,
        **({"thaw_to_gone_ms": thaw_ms} if thaw_ms else {}),
    }
    # every round runs (the counts are the proof), then any failing round fails the test
    assert len(not_frozen) <= ROUNDS // 2, "too many rounds ended before the freeze:\n" + "\n".join(
        not_frozen
    )
    assert not failures, f"{len(failures)} of {figures.rounds} rounds:\n" + "\n".join(failures)
