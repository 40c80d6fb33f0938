"""Event latency under a real Airflow deployment: snapshot commit -> asset-triggered run start.

For each ``--polls`` value (``default``: the table declares no ``poll-interval``, i.e. the shipped 1 s with
the shared per-catalog check; a number: that ``poll-interval`` in seconds), starts api-server, scheduler,
dag-processor and triggerer (LocalExecutor, SQLite metadata DB, Airflow's default scheduler and triggerer
settings; the deployment of ``tests/e2e/test_real_scheduler.py``), declares ``--tables`` tables with
``rewrite-files`` (event-triggered by default; a ``min-small-files`` threshold no table reaches, so each run
is a recorded skip and no Spark job competes with the samples), lets the startup fallback runs settle, then
commits one append to each table at a random phase of the poll (one Spark session, commits spaced by a
random 0..poll delay) and reads each table's asset-triggered run's ``start_date`` from Airflow's DB.

Prints per poll value: p50 / p95 / max of commit -> run start over the samples (one per table), and where
the median went: commit -> asset event stored (the watcher's wait and read, the triggerer's sync to its
supervisor), -> run queued (the scheduler's loop), -> run started; ``uptime`` before and after.

    .venv/bin/python benchmarks/event_latency.py [--polls default 10] [--tables 20]

Expected shape: ≈ poll/2 of watcher wait on average, plus ≈ 0.5 s of the triggerer runner's 1 s sync and
≈ 0.5 s of the scheduler's ``scheduler_idle_sleep_time`` (1 s).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The e2e test's deployment helpers; they read AIRFLOW_HOME-free settings of their own.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="tms-bench-home-"))
from tests.e2e.conftest import run  # noqa: E402
from tests.e2e.test_real_scheduler import (  # noqa: E402
    AirflowDeployment,
    _utc,
    _wait_for,
    local_deployment,
)

CATALOG = "live"
ACTION = "rewrite-files"

MAKE_TABLES = """
import sys
sys.path.insert(0, sys.argv[1])
from demo_table import create_table, spark_session
spark = spark_session(sys.argv[2], sys.argv[3])
for t in sys.argv[4:]:
    create_table(spark, t, files=8, rows=400)
spark.stop()
"""

COMMITS = """
import json, random, sys, time
sys.path.insert(0, sys.argv[1])
from demo_table import spark_session
spark = spark_session(sys.argv[2], sys.argv[3])
poll = float(sys.argv[4])
spark.sql("SELECT 1").collect()
out = {}
for t in sys.argv[5:]:
    spark.sql(f"SELECT count(*) FROM {t}").collect()  # warm this table's metadata before the clock
    time.sleep(random.uniform(0, poll))  # a random phase of the watcher's poll
    spark.sql(
        f"INSERT INTO {t} SELECT 900000 + id, current_timestamp(), current_date(), 1, 'view', 1.0 FROM range(5)"
    )
    out[t] = time.time()
print(json.dumps(out))
spark.stop()
"""


def dag_id(table: str) -> str:
    return f"tms__{table}__{ACTION}"


def tables_yaml(warehouse: Path, names: list[str], poll: float | None) -> str:
    lines = ["version: 1", "catalogs:", f"  - {{name: {CATALOG}, type: hadoop, warehouse: {warehouse}}}"]
    lines.append("tables:")
    every = "" if poll is None else f"poll-interval: {poll:g}s, "
    for n in names:
        lines += [
            f"  - {{catalog: {CATALOG}, namespace: db, name: {n}, owner: bench,",
            f"     actions: {{rewrite-files: {{{every}min-input-files: 2, thresholds: {{min-small-files: 1000000}}}}}}}}",
        ]
    return "\n".join(lines) + "\n"


def default_poll() -> float:
    from airflow_tablemgmt.core.schedule import SchedulePlan

    return SchedulePlan.__dataclass_fields__["poll_interval"].default.total_seconds()  # type: ignore[union-attr]


def deployment(home: Path) -> AirflowDeployment:
    # Airflow's own defaults for the scheduler/triggerer loops: the figure is what a deployment sees.
    return local_deployment(home)


def measure(poll: float | None, n_tables: int, work: Path) -> dict[str, dict[str, float]]:
    """Per table: commit -> ``event`` (asset event stored), ``queued``, ``started`` (seconds)."""
    names = [f"events_{i}" for i in range(n_tables)]
    ids = [f"{CATALOG}.db.{n}" for n in names]
    warehouse = work / "wh"
    dep = deployment(work / "airflow")
    try:
        res = run([sys.executable, "-c", MAKE_TABLES, str(ROOT / "scripts"), str(warehouse), CATALOG, *ids])
        assert res.returncode == 0, res.stderr[-3000:]
        (dep.home / "dags" / "tables.yaml").write_text(tables_yaml(warehouse, names, poll))
        phase = default_poll() if poll is None else poll
        (dep.home / "dags" / "tablemgmt_dags.py").write_bytes(
            (ROOT / "dags" / "tablemgmt_dags.py").read_bytes()
        )
        assert dep.cli("db", "migrate").returncode == 0
        dep.start("api-server", "api-server", "--port", str(dep.api_port), "--host", "127.0.0.1")
        dep.start("scheduler", "scheduler")
        dep.start("dag-processor", "dag-processor")
        dep.start("triggerer", "triggerer")

        def watched() -> bool:
            dep.check_alive()
            keys = {f"tablemgmt.watch.{t}" for t in ids}
            rows = dep.query("SELECT key FROM asset_state_store")
            return keys <= {r[0] for r in rows}

        _wait_for("every watcher's first observation", watched, timeout=300, every=2)

        def settled() -> int | None:
            dep.check_alive()
            runs = dep.query("SELECT id, state FROM dag_run")
            if len(runs) < n_tables or any(s not in ("success", "failed") for _, s in runs):
                return None
            if dep.query("SELECT 1 FROM asset_dag_run_queue"):
                return None
            return max(i for i, _ in runs)

        def settled_twice() -> int | None:
            first = settled()
            if first is None:
                return None
            time.sleep(2 * phase + 2)  # no watcher event of the startup runs still on its way
            return first if settled() == first else None

        last = _wait_for("the startup fallback runs to settle", settled_twice, timeout=600, every=2)
        res = run(
            [sys.executable, "-c", COMMITS, str(ROOT / "scripts"), str(warehouse), CATALOG, str(phase), *ids],
            timeout=600,
        )
        assert res.returncode == 0, res.stderr[-3000:]
        committed: dict[str, float] = json.loads(res.stdout.strip().splitlines()[-1])

        def started() -> dict[str, dict[str, float]] | None:
            dep.check_alive()
            found = {}
            for t, at in committed.items():
                rows = dep.query(
                    "SELECT queued_at, start_date FROM dag_run WHERE dag_id = :d AND run_type = 'asset_triggered' "
                    "AND id > :last AND start_date IS NOT NULL ORDER BY id",
                    d=dag_id(t),
                    last=last,
                )
                events = dep.query(
                    "SELECT e.timestamp FROM asset_event e JOIN asset a ON a.id = e.asset_id "
                    "WHERE a.name = :name ORDER BY e.id",
                    name=f"tablemgmt.{t}",
                )
                ours = [_utc(e[0]).timestamp() for e in events if _utc(e[0]).timestamp() >= at - 1.0]
                if rows and ours:
                    found[t] = {
                        "event": ours[0] - at,
                        "queued": _utc(rows[0][0]).timestamp() - at,
                        "started": _utc(rows[0][1]).timestamp() - at,
                    }
            return found if len(found) == len(committed) else None

        return _wait_for("every table's asset-triggered run to start", started, timeout=600, every=1)
    except BaseException:
        dep.print_log_tails(30)
        raise
    finally:
        dep.stop()


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20, method="inclusive")[-1] if len(xs) > 1 else xs[0]


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--polls", nargs="+", default=["default", "10"], help="'default' or seconds")
    parser.add_argument("--tables", type=int, default=20, help="one sample per table")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    random.seed(args.seed)
    results: dict[str, dict[str, dict[str, float]]] = {}
    loads: dict[str, str] = {}
    for spec in args.polls:
        poll = None if spec == "default" else float(spec)
        label = f"default ({default_poll():g} s)" if poll is None else f"{poll:g} s"
        before = uptime()
        with tempfile.TemporaryDirectory(prefix="tms-latency-") as work:
            t0 = time.monotonic()
            results[label] = measure(poll, args.tables, Path(work))
        loads[label] = f"`{before}` → `{uptime()}`"
        starts = sorted(r["started"] for r in results[label].values())
        print(f"poll {label}: {[round(x, 1) for x in starts]} ({time.monotonic() - t0:.0f} s)", flush=True)
    print(
        "\n| poll-interval | samples | commit → run start p50 / p95 / max (s) | median: → asset event / → queued / → started (s) |"
    )
    print("|---|---:|---:|---:|")
    for label, per_table in results.items():
        starts = [r["started"] for r in per_table.values()]
        ev = statistics.median(r["event"] for r in per_table.values())
        qu = statistics.median(r["queued"] - r["event"] for r in per_table.values())
        st = statistics.median(r["started"] - r["queued"] for r in per_table.values())
        print(
            f"| {label} | {len(starts)} | {statistics.median(starts):.1f} / {p95(starts):.1f} / {max(starts):.1f} "
            f"| {ev:.1f} / {qu:.1f} / {st:.1f} |"
        )
    for label, load in loads.items():
        print(f"- {label}: {load}")


if __name__ == "__main__":
    main()
