"""Event latency under a real Airflow deployment: snapshot commit -> asset-triggered run start.

For each ``--polls`` value (seconds; the documented default is 10), starts api-server, scheduler,
dag-processor and triggerer (LocalExecutor, SQLite metadata DB; the deployment of
``tests/e2e/test_real_scheduler.py``), declares ``--tables`` tables with ``rewrite-files``
(event-triggered by default) at that ``poll-interval``, lets the startup fallback runs settle, then
commits one append to each table at a random phase of the poll (one Spark session, commits spaced
by a random 0..poll delay) and reads each table's asset-triggered run's ``start_date`` from Airflow's
DB. Prints a markdown table: per poll interval, the median / min / max latency over the samples.

    .venv/bin/python benchmarks/event_latency.py [--polls 10 2] [--tables 4]

Expected shape: ≈ poll/2 of watcher wait on average plus the scheduler's pick-up of the asset event.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
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


def tables_yaml(warehouse: Path, names: list[str], poll: float) -> str:
    lines = ["version: 1", "catalogs:", f"  - {{name: {CATALOG}, type: hadoop, warehouse: {warehouse}}}"]
    lines.append("tables:")
    for n in names:
        lines += [
            f"  - {{catalog: {CATALOG}, namespace: db, name: {n}, owner: bench,",
            f"     actions: {{rewrite-files: {{poll-interval: {poll:g}s, min-input-files: 2}}}}}}",
        ]
    return "\n".join(lines) + "\n"


def deployment(home: Path) -> AirflowDeployment:
    # Airflow's own defaults for the scheduler/triggerer loops: the figure is what a deployment sees.
    return local_deployment(home)


def measure(poll: float, n_tables: int, work: Path) -> list[float]:
    names = [f"events_{i}" for i in range(n_tables)]
    ids = [f"{CATALOG}.db.{n}" for n in names]
    warehouse = work / "wh"
    dep = deployment(work / "airflow")
    try:
        res = run([sys.executable, "-c", MAKE_TABLES, str(ROOT / "scripts"), str(warehouse), CATALOG, *ids])
        assert res.returncode == 0, res.stderr[-3000:]
        (dep.home / "dags" / "tables.yaml").write_text(tables_yaml(warehouse, names, poll))
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
            time.sleep(2 * poll + 2)  # no watcher event of the startup rewrites still on its way
            return first if settled() == first else None

        last = _wait_for("the startup fallback runs to settle", settled_twice, timeout=600, every=2)
        res = run(
            [sys.executable, "-c", COMMITS, str(ROOT / "scripts"), str(warehouse), CATALOG, str(poll), *ids],
            timeout=600,
        )
        assert res.returncode == 0, res.stderr[-3000:]
        committed: dict[str, float] = json.loads(res.stdout.strip().splitlines()[-1])

        def started() -> dict[str, float] | None:
            dep.check_alive()
            found = {}
            for t, at in committed.items():
                rows = dep.query(
                    "SELECT start_date FROM dag_run WHERE dag_id = :d AND run_type = 'asset_triggered' "
                    "AND id > :last AND start_date IS NOT NULL ORDER BY id",
                    d=dag_id(t),
                    last=last,
                )
                if rows:
                    found[t] = _utc(rows[0][0]).timestamp() - at
            return found if len(found) == len(committed) else None

        latencies = _wait_for("every table's asset-triggered run to start", started, timeout=600, every=1)
        return sorted(latencies.values())
    except BaseException:
        dep.print_log_tails(30)
        raise
    finally:
        dep.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--polls", type=float, nargs="+", default=[10.0, 2.0])
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    random.seed(args.seed)
    results: dict[float, list[float]] = {}
    for poll in args.polls:
        with tempfile.TemporaryDirectory(prefix="tms-latency-") as work:
            t0 = time.monotonic()
            results[poll] = measure(poll, args.tables, Path(work))
            print(f"poll {poll:g} s: {[round(x, 1) for x in results[poll]]} ({time.monotonic() - t0:.0f} s)")
    print("\n| poll-interval | samples | median (s) | min (s) | max (s) |")
    print("|---:|---:|---:|---:|---:|")
    for poll, xs in results.items():
        default = " (default)" if poll == 10 else ""
        print(
            f"| {poll:g} s{default} | {len(xs)} | {statistics.median(xs):.1f} | {min(xs):.1f} | {max(xs):.1f} |"
        )


if __name__ == "__main__":
    main()
