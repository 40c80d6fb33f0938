"""Every format's commit path under the lease (issue 36, items 1 and 4), on Iceberg, Delta, Hudi and Paimon.

The worker (``worker_main.py``: what `tablemgmt run` does, real spark-submit, local[2], a SQLite store)
runs the format's committing action on a real table: Iceberg ``rewrite-files``, Delta ``optimize``, Hudi
``compaction`` (merge-on-read, delta commits waiting), Paimon ``compact`` (the plugin). Two scenarios:

* **fencing**: once the process row is RUNNING (and 0-1 s more, so the stop lands in the job's set-up,
  planning or procedure) the worker alone is frozen (SIGSTOP) for 2 x the lease TTL: it confirms no
  renewal to its driver, whose lease guard (``spark/job/lease_guard.py``) must stop the JVM before the
  format commits. The next holder takes the lease the moment it lapses. Then SIGCONT: the worker records
  its row. Counted: commits after the fence (the table's commits/version/instants/snapshots changed, or
  a driver alive once the lease was taken), rows changed, rows left non-terminal or recorded SUCCESS.
* **split home**: worker A, with its own ``$AIRFLOW_HOME``, commits and is killed (-9) before it records
  anything; worker B, another ``$AIRFLOW_HOME`` (another host), retries. B must find A's mark in the
  table's own commit metadata (``spark/job/commit_mark.py``, ``lifecycle/table_marks.py``) and record
  SUCCESS without a second job. Counted: duplicated jobs (B ran the job), lost records (not SUCCESS),
  commits B added, rows left non-terminal.

Hudi rows are not compared (a merge-on-read table's rows need Hudi to read); its completed instants are.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from subprocess import Popen
from typing import Any

import pytest

from tests.faults.conftest import ROUNDS, Figures
from tests.faults.freeze import freeze_outside_a_write
from tests.faults.test_kill9 import WORKER, drivers, env, make_tables, wait_for

pytestmark = [pytest.mark.faults]

ROOT = Path(__file__).resolve().parents[2]
TTL_S = 3.0
TIMINGS = {
    "TABLEMGMT_FAULT_LEASE_TTL": str(TTL_S),
    "TABLEMGMT_FAULT_HEARTBEAT": "1",
    "TABLEMGMT_FAULT_STALE_AFTER": "2",
}
SPLIT_TIMINGS = {
    "TABLEMGMT_FAULT_LEASE_TTL": "6",
    "TABLEMGMT_FAULT_HEARTBEAT": "1",
    "TABLEMGMT_FAULT_STALE_AFTER": "3",
}
T0 = datetime(2026, 8, 1, tzinfo=UTC)
#: rewrite-files options under which every round has work on the same Iceberg table.
REWRITE_AGAIN = {"min-input-files": 2, "rewrite-all": True, "on-new-snapshot": False}


def _worker(url: str, tid: str, action: str, instant: datetime) -> list[str]:
    return [sys.executable, str(WORKER), url, tid, action, instant.isoformat()]


def start_worker(
    url: str, tid: str, action: str, instant: datetime, *, log: Path, extra: dict[str, str]
) -> Popen[bytes]:
    """A worker in a session of its own (its group: the worker, spark-submit, the driver JVM and Python)."""
    with log.open("w") as err:
        return subprocess.Popen(
            _worker(url, tid, action, instant),
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**env(), **extra},
            start_new_session=True,
        )


def run_worker(
    url: str, tid: str, action: str, instant: datetime, extra: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _worker(url, tid, action, instant),
        capture_output=True,
        text=True,
        timeout=900,
        env={**env(), **extra},
    )


@dataclass(frozen=True)
class Fmt:
    name: str
    action: str
    options: dict[str, Any] = field(default_factory=dict)
    catalog: str = "lake"


FORMATS = {
    "iceberg": Fmt("iceberg", "rewrite-files", REWRITE_AGAIN, catalog="kill"),
    "delta": Fmt("delta", "optimize", {"min-new-files": 0}),
    "hudi": Fmt("hudi", "compaction", {"min-delta-commits": 1}),
    "paimon": Fmt("paimon", "compact", {}),
}
#: CI runs one round of one format's fencing (the cheapest, Iceberg's); everything else on demand.
ON_DEMAND = pytest.mark.on_demand(
    reason="a real table and job per round and format, 1-3 min each under load; CI runs "
    "faults/test_format_fencing.py::test_a_driver_without_a_confirmed_lease_does_not_commit[iceberg] (one "
    "round) and unit/lifecycle/test_table_marks.py (every format's mark read back from its metadata)"
)

# Writes the path formats' tables in one Spark session of the format (as a job builds it).
SETUP = r"""
import sys
from airflow_tablemgmt.core.tables import CatalogSpec
from tests.integration.formats.format_jobs import start_session
fmt, warehouse, *names = sys.argv[1:]
if fmt == "paimon":
    import tablemgmt_paimon.job  # noqa: F401 - the format's session, as the job imports it
catalog = CatalogSpec(name="lake", type="hadoop", warehouse=warehouse, properties={"tablemgmt.table-format": fmt})
spark = start_session(fmt, catalog)
HUDI = {"hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.partitionpath.field": "part",
        "hoodie.compact.inline": "false", "hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false",
        "hoodie.insert.shuffle.parallelism": "2", "hoodie.upsert.shuffle.parallelism": "2"}
if fmt == "paimon":
    spark.sql("CREATE DATABASE IF NOT EXISTS lake.db")
for name in names:
    where = f"{warehouse}/db/{name}"
    if fmt == "paimon":
        spark.sql(f"CREATE TABLE lake.db.{name} (id BIGINT, v STRING, part INT) PARTITIONED BY (part) "
                  "TBLPROPERTIES ('bucket' = '-1', 'compaction.max.file-num' = '5')")
    for i in range(6):
        first = 0 if (fmt == "hudi" and i > 0) else i * 100
        df = spark.range(first, first + (50 if fmt == "hudi" and i > 0 else 100)).selectExpr(
            "id", "CAST(id % 2 AS INT) AS part", f"CAST({i} AS BIGINT) AS ts", f"concat('v{i}-', id) AS v")
        if fmt == "delta":
            df.repartition(2).write.format("delta").partitionBy("part").mode("append").save(where)
        elif fmt == "hudi":
            df.write.format("hudi").options(**HUDI).option("hoodie.table.name", name).option(
                "hoodie.datasource.write.operation", "insert" if i == 0 else "upsert").mode("append").save(where)
        else:
            df.createOrReplaceTempView("batch")
            spark.sql(f"INSERT INTO lake.db.{name} SELECT id, v, part FROM batch")
spark.stop()
"""


def _make(fmt: Fmt, warehouse: Path, names: list[str]) -> None:
    if fmt.name == "iceberg":
        make_tables(warehouse, [f"{fmt.catalog}.db.{n}" for n in names])
        return
    res = subprocess.run(
        [sys.executable, "-c", SETUP, fmt.name, str(warehouse), *names],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        env=env(),
    )
    assert res.returncode == 0, res.stderr[-4000:]


def _register(store: Any, fmt: Fmt, warehouse: Path, name: str) -> str:
    from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec

    store.catalogs.upsert(CatalogSpec(name=fmt.catalog, warehouse=str(warehouse)), Owner.STORE)
    spec = {
        "catalog": fmt.catalog,
        "namespace": "db",
        "name": name,
        "actions": {fmt.action: dict(fmt.options)},
    }
    if fmt.name != "iceberg":
        spec["format"] = fmt.name
    store.tables.upsert(TableSpec.model_validate(spec), Owner.STORE)
    return f"{fmt.catalog}.db.{name}"


def state(fmt: Fmt, warehouse: Path, name: str) -> dict[str, Any]:
    """What the table committed, read without Spark: its commits (snapshots, versions, completed instants)
    and, but for Hudi, its rows (count and a checksum)."""
    if fmt.name == "iceberg":
        from tests.e2e.iceberg_reads import read_state

        s = read_state(warehouse / "db" / name / "metadata")
        return {"commit": s.snapshot_id, "rows": (s.records, s.checksum)}
    if fmt.name == "delta":
        return _delta_state(warehouse / "db" / name)
    if fmt.name == "hudi":
        from airflow_tablemgmt.formats.hudi.metadata import read_timeline

        return {"commit": tuple(read_timeline(str(warehouse / "db" / name)).completed), "rows": None}
    from tablemgmt_paimon.snapshots import read_table

    latest = read_table(str(warehouse / "db.db" / name)).latest
    return {"commit": latest.id if latest else None, "rows": latest.total_record_count if latest else None}


def _delta_state(root: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    live: set[str] = set()
    commits = sorted((root / "_delta_log").glob("*.json"))
    for path in commits:
        for line in path.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            if "add" in action:
                live.add(action["add"]["path"])
            if "remove" in action:
                live.discard(action["remove"]["path"])
    ids = sorted(i for p in live for i in pq.read_table(root / p, columns=["id"]).column("id").to_pylist())
    return {"commit": int(commits[-1].stem), "rows": (len(ids), hash(tuple(ids)))}


def _row(store: Any, tid: str, fmt: Fmt, instant: datetime) -> Any:
    return store.processes.find(tid, fmt.action, instant)


@pytest.mark.parametrize(
    "fmt_name", ["iceberg", *[pytest.param(f, marks=ON_DEMAND) for f in ("delta", "hudi", "paimon")]]
)
@pytest.mark.timeout(1800 + 300 * ROUNDS)  # the tables' set-up alone took 10+ min at load 60
def test_a_driver_without_a_confirmed_lease_does_not_commit(
    fmt_name: str, tmp_path: Path, figures: Figures
) -> None:
    from airflow_tablemgmt.store import Store

    fmt = FORMATS[fmt_name]
    rounds = 1 if fmt_name == "iceberg" and not os.environ.get("TABLEMGMT_FULL") else ROUNDS
    rng = random.Random(os.environ.get("TABLEMGMT_FAULT_SEED"))
    url = f"sqlite:///{tmp_path / 'tablemgmt.db'}"
    store = Store(url)
    warehouse = tmp_path / "wh"
    _make(fmt, warehouse, ["fenced"])
    tid = _register(store, fmt, warehouse, "fenced")
    notes: list[str] = []
    failures: list[str] = []
    for r in range(rounds):
        instant = T0 + timedelta(days=r)
        before = state(fmt, warehouse, "fenced")
        log = tmp_path / f"{fmt_name}-{r}.log"
        proc: Popen[bytes] = start_worker(url, tid, fmt.action, instant, log=log, extra=TIMINGS)
        alive: list[int] = []
        frozen = False
        try:

            def running(proc: Popen[bytes] = proc, instant: datetime = instant) -> bool:
                row = _row(store, tid, fmt, instant)
                return proc.poll() is not None or (row is not None and str(row.status) == "RUNNING")

            wait_for(f"round {r} RUNNING", running, timeout=600)
            time.sleep(rng.uniform(0.0, 1.0))
            assert proc.poll() is None and drivers(proc.pid), (
                f"round {r}: the job ended before the freeze\n" + log.read_text()[-3000:]
            )
            freeze_outside_a_write(proc.pid, tmp_path / "tablemgmt.db")
            frozen, frozen_at = True, time.monotonic()
            wait_for("the frozen worker's lease to lapse", lambda: _take(store, tid), timeout=60)
            alive = drivers(proc.pid)
            time.sleep(max(0.0, 2 * TTL_S - (time.monotonic() - frozen_at)))
            alive = alive or drivers(proc.pid)
            os.kill(proc.pid, signal.SIGCONT)
            frozen = False
            proc.wait(timeout=300)
        finally:
            if frozen:
                os.kill(proc.pid, signal.SIGCONT)
            for pid in drivers(proc.pid):
                os.kill(pid, signal.SIGKILL)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        after = state(fmt, warehouse, "fenced")
        store.leases.release(tid, "next-holder")
        row = _row(store, tid, fmt, instant)
        committed = int(after["commit"] != before["commit"])
        overlapping = int(bool(alive))
        figures.rounds += 1
        figures.late_writes_applied += committed
        figures.concurrent_jobs += overlapping
        figures.rows_lost += int(after["rows"] != before["rows"])
        figures.non_terminal += 0 if row is not None and row.status.is_terminal else 1
        notes.append(
            f"{fmt_name} round {r}: commits after the fence {committed} ({before['commit']} -> "
            f"{after['commit']}), driver alive once the lease was taken {len(alive)}, rows "
            f"{'same' if after['rows'] == before['rows'] else 'CHANGED'}, row "
            f"{row.status if row else None} ({(row.failure_reason or '')[:120] if row else ''}), worker "
            f"exit {proc.returncode}"
        )
        print(notes[-1])
        if committed or overlapping or after["rows"] != before["rows"]:
            failures.append(f"a driver without a confirmed lease committed or ran on: {notes[-1]}")
        elif row is None or not row.status.is_terminal or str(row.status) == "SUCCESS":
            failures.append(f"row not recorded as stopped: {notes[-1]}")
    figures.notes = {"rounds": notes}
    assert not failures, f"{len(failures)} of {figures.rounds} rounds:\n" + "\n".join(failures)


def _take(store: Any, tid: str) -> bool:
    """The next holder's try: as a worker's, a store that answers "locked" (SQLite's 30 s busy timeout ran out
    while another process held its write lock) is a try that did not take the lease, and the next one follows."""
    from sqlalchemy.exc import OperationalError

    try:
        return bool(store.leases.acquire(tid, "next-holder", timedelta(seconds=120)))
    except OperationalError as e:
        print(f"next holder: the store answered {str(e.orig)[:80]!r}; trying again")
        return False


def _home(tmp_path: Path, who: str) -> dict[str, str]:
    home = tmp_path / f"home-{who}"
    home.mkdir(exist_ok=True)
    return {"AIRFLOW_HOME": str(home), "TABLEMGMT_RESULT_DIR": str(home / "tablemgmt" / "results")}


@ON_DEMAND
@pytest.mark.parametrize("fmt_name", list(FORMATS))
@pytest.mark.timeout(1800 + 600 * ROUNDS)
def test_recovery_on_another_host_records_the_committed_job(
    fmt_name: str, tmp_path: Path, figures: Figures
) -> None:
    from airflow_tablemgmt.store import Store

    fmt = FORMATS[fmt_name]
    url = f"sqlite:///{tmp_path / 'tablemgmt.db'}"
    store = Store(url)
    warehouse = tmp_path / "wh"
    names = [f"s{r}" for r in range(ROUNDS)]
    _make(fmt, warehouse, names)
    notes: list[str] = []
    failures: list[str] = []
    for r, name in enumerate(names):
        tid = _register(store, fmt, warehouse, name)
        instant = T0 + timedelta(days=r)
        before = state(fmt, warehouse, name)
        a = run_worker(
            url,
            tid,
            fmt.action,
            instant,
            {**SPLIT_TIMINGS, **_home(tmp_path, "a"), "TABLEMGMT_FAULT_DIE_AFTER_COMMIT": "1"},
        )
        assert a.returncode == -9, (
            f"worker A should have died after its commit: {a.returncode}\n{a.stderr[-3000:]}"
        )
        after_a = state(fmt, warehouse, name)

        def stale(instant: datetime = instant, tid: str = tid) -> bool:
            p = _row(store, tid, fmt, instant)
            beat = p.heartbeat_at or p.started_at or p.created_at
            return datetime.now(UTC) - beat > timedelta(seconds=3.5)

        wait_for("A's row to go stale", stale, timeout=60)
        tries = 0
        for tries in range(  # noqa: B007 - reported
            1, 40
        ):  # worker B on another host: again while A's lease holds, as the operator defers
            b = run_worker(url, tid, fmt.action, instant, {**SPLIT_TIMINGS, **_home(tmp_path, "b")})
            if b.returncode != 3:
                break
            time.sleep(1.0)
        row = _row(store, tid, fmt, instant)
        after_b = state(fmt, warehouse, name)
        summary = row.summary or {}
        duplicated = 0 if summary.get("recorded_from_table") else 1
        figures.rounds += 1
        figures.rows_duplicated += duplicated
        figures.late_writes_applied += int(after_b["commit"] != after_a["commit"])
        figures.rows_lost += 0 if str(row.status) == "SUCCESS" else 1
        figures.non_terminal += 0 if row.status.is_terminal else 1
        notes.append(
            f"{fmt_name} {name}: A committed {after_a['commit'] != before['commit']}; B exit {b.returncode} "
            f"after {tries} tries: {row.status} attempt {row.attempt}, recorded from the table "
            f"{bool(summary.get('recorded_from_table'))} (attempt {summary.get('recorded_from_attempt')}), "
            f"commits B added {int(after_b['commit'] != after_a['commit'])}"
        )
        print(notes[-1])
        if duplicated or str(row.status) != "SUCCESS" or after_b["commit"] != after_a["commit"]:
            failures.append(f"{notes[-1]}\n{b.stderr[-1500:]}")
        elif after_a["commit"] == before["commit"]:
            failures.append(f"worker A committed nothing: {notes[-1]}")
    figures.notes = {"rounds": notes}
    assert not failures, f"{len(failures)} of {figures.rounds} rounds:\n" + "\n".join(failures)
