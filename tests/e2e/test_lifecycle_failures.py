"""How the process lifecycle behaves when things go wrong, driven through the real `tablemgmt` CLI.

Duplicate triggers, a worker killed with SIGKILL mid-job, leases held by dead and live workers, a
Spark job that fails, and options rejected before anything runs. Real spark-submit (local[2]),
real Iceberg tables, the real SQLite store. Spark runs: one to create the tables, five jobs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import BIN, ROOT, IcebergTable, run
from tests.e2e.iceberg_reads import read_state
from tests.support.processes import group_members

pytestmark = pytest.mark.e2e

STORE_URL = os.environ["TABLEMGMT_STORE_URL"]
CATALOG = "lcf"
ACTION = "rewrite-files"
SPARK_SUBMITTED = "Spark-Submit cmd"
# A test's timeout includes fixture set-up: the module's tables (one Spark run, up to 600 s) may be
# created inside whichever test runs first, so every timeout below adds it to the test's own waits.
TABLES_SETUP = 600  # SparkSubmitHook logs this line once per spark-submit


def store():  # type: ignore[no-untyped-def]
    from airflow_tablemgmt.store import Store

    return Store.for_url(STORE_URL)


def cli_env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONUNBUFFERED": "1"}


def tablemgmt(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return run([str(BIN / "tablemgmt"), *args], timeout=timeout)


def run_cmd(table_id: str, instant: str, *extra: str) -> list[str]:
    return [str(BIN / "tablemgmt"), "run", table_id, ACTION, "--instant", instant, "--json", *extra]


def ok(res: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert res.returncode == 0, (
        f"exit {res.returncode}\nstdout:\n{res.stdout[-3000:]}\nstderr:\n{res.stderr[-3000:]}"
    )
    return res


def make_tables(warehouse: Path, names: list[str], files: int, rows: int) -> dict[str, IcebergTable]:
    """Like conftest.make_table, but every table in one Spark session (one JVM start, not one per table)."""
    code = (
        "import sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from demo_table import create_table, spark_session\n"
        "spark = spark_session(sys.argv[2], sys.argv[3])\n"
        "for t in sys.argv[6:]:\n"
        "    create_table(spark, t, files=int(sys.argv[4]), rows=int(sys.argv[5]))\n"
        "spark.stop()\n"
    )
    ids = [f"{CATALOG}.db.{n}" for n in names]
    res = run(
        [
            sys.executable,
            "-c",
            code,
            str(ROOT / "scripts"),
            str(warehouse),
            CATALOG,
            str(files),
            str(rows),
            *ids,
        ],
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return {n: IcebergTable(warehouse, tid) for n, tid in zip(names, ids, strict=True)}


def register(table_id: str, warehouse: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return tablemgmt(
        "register",
        table_id,
        "--catalog-type",
        "hadoop",
        "--warehouse",
        str(warehouse),
        "--action",
        ACTION,
        "--set",
        f"{ACTION}.min-input-files=2",
        *extra,
    )


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, IcebergTable]:
    warehouse = tmp_path_factory.mktemp("lifecycle-wh")
    made = make_tables(warehouse, ["dup", "killed", "leased"], files=30, rows=3000)
    for name in (*made, "missing"):  # "missing" is registered but never created
        ok(register(f"{CATALOG}.db.{name}", warehouse))
    return made


def snapshot_count(table: IcebergTable) -> int:
    from pyiceberg.table import StaticTable

    version = (table.metadata_dir / "version-hint.text").read_text().strip()
    return len(
        StaticTable.from_metadata(str(table.metadata_dir / f"v{version}.metadata.json")).metadata.snapshots
    )


def wait_for(what: str, check: Callable[[], Any], timeout: float = 300, every: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.mark.timeout(TABLES_SETUP + 2 * 600 + 60)  # two runs, each waited for up to 600 s
def test_duplicate_trigger_runs_one_spark_job(tables: dict[str, IcebergTable], tmp_path: Path) -> None:
    from airflow_tablemgmt.core.process import ProcessStatus

    table = tables["dup"]
    instant = "2026-01-01T00:00:00+00:00"
    before, snapshots_before = read_state(table.metadata_dir), snapshot_count(table)

    logs = [(tmp_path / f"out{i}.json", tmp_path / f"err{i}.log") for i in range(2)]
    procs = []
    for out, err in logs:  # both started before either has opened the process row
        with out.open("w") as o, err.open("w") as e:
            procs.append(
                subprocess.Popen(run_cmd(table.table_id, instant), stdout=o, stderr=e, env=cli_env())
            )
    codes = [p.wait(timeout=600) for p in procs]
    errs = [err.read_text() for _, err in logs]
    assert codes == [0, 0], "\n\n".join(e[-3000:] for e in errs)
    results = [json.loads(out.read_text()) for out, _ in logs]

    assert results[0]["process"] == results[1]["process"]
    assert all(r["status"] == "SUCCESS" and r["attempt"] == 1 for r in results)
    assert sorted(r["reused"] for r in results) == [False, True]  # one ran it, one waited for it
    assert results[0]["summary"] == results[1]["summary"]
    assert sum(e.count(SPARK_SUBMITTED) for e in errs) == 1  # exactly one spark-submit

    [row] = store().processes.list(table_id=table.table_id, action=ACTION)
    assert row.id == results[0]["process"] and row.instant == datetime(2026, 1, 1, tzinfo=UTC)
    assert (row.status, row.attempt) == (ProcessStatus.SUCCESS, 1)
    assert snapshot_count(table) == snapshots_before + 1  # one rewrite commit, not two
    after = read_state(table.metadata_dir)
    assert after.data_files < before.data_files
    assert (after.records, after.checksum) == (before.records, before.checksum)
    assert row.snapshot_id == after.snapshot_id


@pytest.mark.on_demand(
    reason="tests/faults/test_kill9.py kills the worker, its group or the driver mid-job and recovers; "
    "tests/e2e/test_operator_worker_death.py kills a task's worker"
)
@pytest.mark.timeout(TABLES_SETUP + 30 + 300 + 60 + 60 + 2 * 600 + 60)  # covers every wait below
def test_worker_killed_with_sigkill_is_recovered_by_the_next_run(
    tables: dict[str, IcebergTable], tmp_path: Path
) -> None:
    """SIGKILL of the worker (the CLI) alone, at a point chosen by an event, not by timing.

    The kill happens once the row is RUNNING with the Spark application id (Spark started the
    job), with the whole process group frozen (SIGSTOP) first so the job cannot finish between
    that check and the kill. Only the worker is killed: spark-submit and its driver JVM must die
    with it (parent-death signal), or a takeover could run a second job on the table.
    """
    from airflow_tablemgmt.core.process import ProcessStatus

    S = ProcessStatus
    table, tid = tables["killed"], tables["killed"].table_id
    instant = "2026-01-02T00:00:00+00:00"
    before = read_state(table.metadata_dir)
    repo = store().processes

    log = tmp_path / "killed.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            run_cmd(tid, instant),
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=cli_env(),
            start_new_session=True,
        )
    pgid = proc.pid

    def job_running() -> Any:
        assert proc.poll() is None, (
            f"the run ended (exit {proc.returncode}) before it could be killed:\n" + (log.read_text()[-3000:])
        )
        p = repo.find(tid, ACTION, datetime.fromisoformat(instant))
        return p if p is not None and p.status == S.RUNNING and p.external_id else None

    try:
        wait_for("the process RUNNING with its Spark application id", job_running, timeout=300, every=0.05)
        os.killpg(pgid, signal.SIGSTOP)  # freeze the CLI, spark-submit's JVM and the PySpark driver
        frozen = repo.find(tid, ACTION, datetime.fromisoformat(instant))
        assert frozen is not None and frozen.status == S.RUNNING, frozen
        members = group_members(pgid)
        assert any("SparkSubmit" in cmd for cmd in members.values()), members  # the driver JVM
        os.kill(proc.pid, signal.SIGKILL)  # the worker only
        proc.wait(timeout=30)
        os.killpg(pgid, signal.SIGCONT)  # let the orphans react to their parent's death
        wait_for(
            "spark-submit and its driver to die with the worker", lambda: not group_members(pgid), timeout=60
        )
    finally:
        if group_members(pgid):
            os.killpg(pgid, signal.SIGKILL)

    stuck = repo.find(tid, ACTION, datetime.fromisoformat(instant))
    assert stuck is not None and stuck.status == S.RUNNING, stuck
    assert stuck.attempt == 1 and stuck.finished_at is None and stuck.failure_reason is None
    lease = store().leases.get(tid)
    assert lease is not None and lease.holder.startswith(f"process:{stuck.id}:attempt:1:")  # and its lease

    # Recovery: attempt 1 is closed and attempt 2 opened, but no job starts while attempt 1's
    # lease is live (nothing outside this test knows that job is gone).
    def beat_age() -> timedelta:
        return repo.now() - (repo.get(stuck.id).heartbeat_at or stuck.created_at)

    # The lost worker promised a heartbeat every 20 s (recorded on its row): its row counts as lost
    # after two of them, whatever --stale-after says, and --stale-after itself must be >= 40 s.
    wait_for(
        "attempt 1's heartbeat to be older than 40 s (database time)",
        lambda: beat_age() > timedelta(seconds=41),
        timeout=120,
    )
    blocked = run(run_cmd(tid, instant, "--stale-after", "40"), timeout=600)
    assert blocked.returncode == 2, blocked.stdout[-2000:] + blocked.stderr[-3000:]
    # `tablemgmt run` reaps first (a CLI-only deployment has no operator start to do it), so the reaper
    # closes attempt 1 before the run looks at it.
    assert "reaped: worker lost; attempt 1 was RUNNING" in blocked.stderr, blocked.stderr[-3000:]
    assert f"table {tid} is leased by {lease.holder}" in blocked.stderr and "stays PENDING" in blocked.stderr
    assert SPARK_SUBMITTED not in blocked.stderr
    assert (repo.get(stuck.id).status, repo.get(stuck.id).attempt) == (S.PENDING, 2)

    # This test has proved the old job dead (its whole process group is gone): it can release the
    # lease instead of waiting out its TTL, as an operator who checked would.
    assert store().leases.release(tid, lease.holder)
    recovered = ok(run(run_cmd(tid, instant), timeout=600))
    out = json.loads(recovered.stdout)
    assert out["process"] == stuck.id and out["status"] == "SUCCESS" and out["attempt"] == 2
    assert out["reused"] is False
    assert recovered.stderr.count(SPARK_SUBMITTED) == 1

    final = repo.get(stuck.id)
    assert (final.status, final.attempt) == (S.SUCCESS, 2)
    assert final.failure_reason is None and final.finished_at is not None
    assert len(repo.list(table_id=tid)) == 1  # a retry is an attempt, never a second process
    after = read_state(table.metadata_dir)
    assert (after.records, after.checksum) == (before.records, before.checksum)  # data intact
    assert after.data_files < before.data_files and final.snapshot_id == after.snapshot_id
    assert repo.active(tid) == []  # nothing left SUBMITTED / RUNNING
    assert store().leases.get(tid) is None  # and no lease left behind


@pytest.mark.timeout(TABLES_SETUP + 2 * 600 + 30 + 60)
def test_expired_lease_is_taken_over_and_a_live_one_blocks(tables: dict[str, IcebergTable]) -> None:
    from airflow_tablemgmt.core.process import ProcessStatus

    tid = tables["leased"].table_id
    instant = "2026-01-03T00:00:00+00:00"
    leases, repo = store().leases, store().processes

    assert leases.acquire(tid, "live-worker", timedelta(hours=1))
    blocked = run(run_cmd(tid, instant), timeout=600)
    assert blocked.returncode == 2, blocked.stderr[-3000:]
    assert f"table {tid} is leased by live-worker until" in blocked.stderr
    assert SPARK_SUBMITTED not in blocked.stderr
    pending = repo.find(tid, ACTION, datetime.fromisoformat(instant))
    assert pending is not None and (pending.status, pending.attempt) == (ProcessStatus.PENDING, 1)
    assert pending.failure_reason is None
    assert leases.get(tid).holder == "live-worker"  # untouched

    assert leases.release(tid, "live-worker")
    assert leases.acquire(tid, "dead-worker", timedelta(seconds=1))
    wait_for(
        "the dead lease to lapse (database time)", lambda: leases.get(tid).expired(leases.now()), timeout=30
    )
    taken_over = ok(run(run_cmd(tid, instant), timeout=600))
    out = json.loads(taken_over.stdout)
    assert out["process"] == pending.id and out["status"] == "SUCCESS" and out["attempt"] == 1
    assert repo.get(pending.id).status == ProcessStatus.SUCCESS
    assert leases.get(tid) is None  # released after the run, not left to the dead holder


@pytest.mark.timeout(TABLES_SETUP + 600 + 60)
def test_a_missing_table_is_declined_before_any_spark_job(tables: dict[str, IcebergTable]) -> None:
    """A hadoop table whose directory is missing (its warehouse readable) costs no spark-submit: the run is
    a recorded, declined process naming the location, and the lease is released (issue 37, item 8)."""
    from airflow_tablemgmt.core.process import ProcessStatus

    tid = f"{CATALOG}.db.missing"
    res = run(run_cmd(tid, "2026-01-04T00:00:00+00:00"), timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert SPARK_SUBMITTED not in res.stderr  # it never reached Spark
    summary = json.loads(res.stdout)["summary"]
    assert summary["declined"] is True and "db/missing does not exist" in summary["reason"], summary
    [p] = store().processes.list(table_id=tid)
    assert (p.status, p.attempt) == (ProcessStatus.SUCCESS, 1)
    assert "does not exist" in (p.summary or {}).get("reason", ""), p.summary
    assert store().leases.get(tid) is None


@pytest.mark.timeout(TABLES_SETUP + 4 * 600 + 60)
def test_bad_options_are_rejected_before_any_spark_run(
    tables: dict[str, IcebergTable], tmp_path: Path
) -> None:
    tid = tables["dup"].table_id
    spec_before = store().tables.get(tid)
    processes_before = store().processes.list(table_id=tid)

    res = register(tid, tables["dup"].warehouse, "--set", "delete-orphans.older-than=2h")
    assert res.returncode == 2
    for text in ("actions.delete-orphans", "older-than", "24-hour floor", "allow-below-floor"):
        assert text in res.stderr, res.stderr
    assert store().tables.get(tid) == spec_before  # the table's spec was not touched

    unknown = tablemgmt("run", tid, "purge")
    assert unknown.returncode == 2 and "unknown action 'purge'; known actions: " in unknown.stderr
    unregistered = tablemgmt("run", f"{CATALOG}.db.nope", ACTION)
    assert (
        unregistered.returncode == 2 and f"table {CATALOG}.db.nope is not registered" in unregistered.stderr
    )
    bad_stale = tablemgmt("run", tid, ACTION, "--stale-after", "0")
    assert bad_stale.returncode == 2 and "expected a positive number of seconds, got '0'" in bad_stale.stderr
    for r in (res, unknown, unregistered, bad_stale):
        assert SPARK_SUBMITTED not in r.stderr
    assert store().processes.list(table_id=tid) == processes_before  # no process was opened
    assert store().processes.list(table_id=f"{CATALOG}.db.nope") == []
