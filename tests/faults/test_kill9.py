"""kill -9 at random points of a real compaction, then a recovery run (issue 9, "Proof").

Each round compacts its own table (``scripts/demo_table.py``: 20+ small files in 4 day partitions)
with a worker process (``worker_main.py``: what `tablemgmt run` does, with a 6 s lease; real
spark-submit, local[2], a SQLite store), kills at a random point
once the process row is SUBMITTED or RUNNING, and runs the same instant again as the next try. The
kill rotates through:

* ``worker-group`` — the worker host dies: SIGKILL to the CLI's whole process group (CLI,
  spark-submit, the driver JVM and the PySpark job);
* ``driver`` — SIGKILL to the Spark driver JVM only: the worker lives on and must record the failure;
* ``worker-only`` — SIGKILL to the CLI process only: its Spark children are orphaned.

Figures per round: rows lost and duplicated (row count and checksum of every row, before/after),
processes left non-terminal, and concurrent jobs (an orphaned driver still alive when the recovery
run's job starts, or more ``replace`` commits in the table's snapshot log than the one compaction).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.iceberg_reads import read_state
from tests.faults.conftest import ROUNDS, Figures
from tests.support.processes import group_members
from tests.support.table_writer import writer_url

pytestmark = pytest.mark.faults

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
WORKER = Path(__file__).with_name("worker_main.py")
CATALOG = "kill"
ACTION = "rewrite-files"
MODES = ["worker-group", "driver", "worker-only"]
T0 = datetime(2026, 2, 1, tzinfo=UTC)


def env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONUNBUFFERED": "1"}


def cli(url: str, *args: str) -> int:
    from airflow_tablemgmt import cli as tablemgmt_cli

    return tablemgmt_cli.main(["--store-url", url, *args])


def make_tables(warehouse: Path, ids: list[str]) -> None:
    code = (
        "import sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from demo_table import create_table, spark_session\n"
        "spark = spark_session(sys.argv[2], sys.argv[3], sys.argv[4] or None)\n"
        "for t in sys.argv[5:]:\n"
        "    create_table(spark, t, files=20, rows=2000)\n"
        "spark.stop()\n"
    )
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            str(ROOT / "scripts"),
            str(warehouse),
            CATALOG,
            writer_url() or "",
            *ids,
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=env(),
    )
    assert res.returncode == 0, res.stderr[-3000:]


def drivers(pgid: int) -> list[int]:
    return [pid for pid, cmd in group_members(pgid).items() if "SparkSubmit" in cmd]


def wait_for(what: str, check: Any, timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def _lease_free(store: Any, table_id: str) -> bool:
    lease = store.leases.get(table_id)
    return lease is None or lease.expired()


def last_json(out: str) -> dict[str, Any]:
    """The worker's result: the last JSON line of its stdout (spark-submit may print before it)."""
    lines = [line for line in out.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def result_ok(out: str) -> bool:
    return last_json(out).get("status") == "SUCCESS"


def replace_commits(metadata_dir: Path) -> int:
    from pyiceberg.table import StaticTable

    version = (metadata_dir / "version-hint.text").read_text().strip()
    meta = StaticTable.from_metadata(str(metadata_dir / f"v{version}.metadata.json")).metadata
    return sum(1 for s in meta.snapshots if s.summary is not None and s.summary.operation.value == "replace")


@pytest.mark.timeout(300 + 240 * ROUNDS)
def test_kill_9_of_worker_or_driver_loses_nothing_and_recovers(tmp_path: Path, figures: Figures) -> None:
    from airflow_tablemgmt.core.process import ProcessStatus
    from airflow_tablemgmt.store import Store

    S = ProcessStatus
    rng = random.Random(os.environ.get("TABLEMGMT_FAULT_SEED"))
    warehouse = tmp_path / "wh"
    url = f"sqlite:///{tmp_path / 'tablemgmt.db'}"
    ids = [f"{CATALOG}.db.t{r}" for r in range(ROUNDS)]
    make_tables(warehouse, ids)
    for tid in ids:
        assert (
            cli(
                url,
                "register",
                tid,
                "--catalog-type",
                "hadoop",
                "--warehouse",
                str(warehouse),
                "--action",
                ACTION,
                "--set",
                f"{ACTION}.min-input-files=2",
            )
            == 0
        )
    store = Store(url)
    log_rows: list[str] = []

    def one_round(r: int, tid: str) -> None:
        mode = MODES[r % len(MODES)]
        meta_dir = warehouse / "db" / tid.split(".")[-1] / "metadata"
        instant = (T0 + timedelta(days=r)).isoformat()
        before = read_state(meta_dir)
        run_cmd = [sys.executable, str(WORKER), url, tid, ACTION, instant]
        log = tmp_path / f"round{r}.log"
        with log.open("w") as err:
            proc = subprocess.Popen(
                run_cmd, stdout=subprocess.DEVNULL, stderr=err, env=env(), start_new_session=True
            )
        pgid = proc.pid
        kill_at = rng.choice([S.SUBMITTED, S.RUNNING])
        delay = rng.uniform(0, 4)  # a random point after that: start-up, planning, rewriting or committing
        row: Any = None
        try:

            def reached() -> bool:
                nonlocal row
                row = store.processes.find(tid, ACTION, datetime.fromisoformat(instant))
                order = [S.PENDING, S.SUBMITTED, S.RUNNING]
                ended = proc.poll() is not None
                return ended or (row is not None and row.status not in order[: order.index(kill_at)])

            wait_for(f"{tid} to reach {kill_at}", reached)
            time.sleep(delay)
            finished_first = proc.poll() is not None
            if not finished_first:
                if mode == "worker-group":
                    os.killpg(pgid, signal.SIGKILL)
                elif mode == "worker-only":
                    os.kill(proc.pid, signal.SIGKILL)
                else:
                    jvms = drivers(pgid)
                    if not jvms:  # spark-submit not started yet: wait for the driver to exist
                        jvms = wait_for("the driver JVM", lambda: drivers(pgid) or proc.poll() is not None)
                    if isinstance(jvms, list):
                        for pid in jvms:
                            try:
                                os.kill(pid, signal.SIGKILL)
                            except ProcessLookupError:
                                pass  # the driver ended on its own since it was listed: the job finished first
            proc.wait(timeout=120)
            orphans_at_kill = drivers(pgid)

            # The next try: once the lost attempt's heartbeat is stale (or at once if the worker closed it).
            def stale() -> bool:
                p = store.processes.find(tid, ACTION, datetime.fromisoformat(instant))
                if p is None or p.status.is_terminal:
                    return True
                beat = p.heartbeat_at or p.started_at or p.created_at
                return beat is not None and datetime.now(UTC) - beat > timedelta(seconds=3.5)

            wait_for("the lost attempt's heartbeat to go stale", stale, timeout=60)
            overlapping = False
            tries = 0
            while True:  # the next try; again (as the operator defers) while the lost attempt's lease holds
                tries += 1
                recovery = subprocess.Popen(
                    run_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env()
                )

                def recovery_job_started(recovery: subprocess.Popen[str] = recovery) -> bool:
                    p = store.processes.find(tid, ACTION, datetime.fromisoformat(instant))
                    running = p is not None and p.attempt >= 2 and p.status == S.RUNNING
                    return recovery.poll() is not None or running

                wait_for("the recovery's job to start", recovery_job_started)
                overlapping = overlapping or bool(drivers(pgid))  # the killed attempt's driver runs beside it
                out, err_text = recovery.communicate(timeout=600)
                if recovery.returncode != 3 or tries > 20:
                    break
                wait_for("the lost attempt's lease to lapse", lambda: _lease_free(store, tid), timeout=60)
        finally:
            for pid in drivers(pgid):
                os.kill(pid, signal.SIGKILL)
            if proc.poll() is None:
                os.killpg(pgid, signal.SIGKILL)
        assert recovery.returncode == 0, f"recovery exit {recovery.returncode}\n{err_text[-3000:]}"
        assert result_ok(out)
        result = last_json(out)

        after = read_state(meta_dir)
        processes = store.processes.list(table_id=tid)
        non_terminal = [p for p in processes if not p.status.is_terminal]
        replaces = replace_commits(meta_dir)
        lost = max(0, before.records - after.records)
        duplicated = max(0, after.records - before.records)
        concurrent = int(overlapping) + max(0, replaces - 1)
        figures.rounds += 1
        figures.rows_lost += lost
        figures.rows_duplicated += duplicated + int(
            lost == duplicated == 0 and after.checksum != before.checksum
        )
        figures.non_terminal += len(non_terminal)
        figures.concurrent_jobs += concurrent
        log_rows.append(
            f"round {r} {mode} at {kill_at}+{delay:.1f}s: finished_first={finished_first} "
            f"orphans_at_kill={len(orphans_at_kill)} tries={tries} recovery attempt {result.get('attempt')} "
            f"{result.get('status')} reused={result.get('reused')}; files {before.data_files}->{after.data_files}, "
            f"replace commits {replaces}"
        )
        print(log_rows[-1])
        assert (after.records, after.checksum) == (before.records, before.checksum), log_rows[-1]
        assert not non_terminal, non_terminal
        assert len(processes) == 1 and processes[0].status == S.SUCCESS, processes
        assert after.data_files < before.data_files, log_rows[-1]
        assert concurrent == 0, f"two jobs on {tid} at once: {log_rows[-1]}"

    for r, tid in enumerate(ids):
        one_round(r, tid)
    figures.notes = {"rounds": log_rows}
