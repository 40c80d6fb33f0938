"""Spark Connect end to end through Airflow: a real scheduler (LocalExecutor, parallelism 4) compacting N
small tables with spark-submit per task against the Connect engine (issue 26, item 4).

One deployment (api-server, scheduler, dag-processor; ``tests/e2e/test_real_scheduler.py``'s
``local_deployment``, the helpers the e2e tests use) and one Spark Connect server (started before the
clock). N tables of 40 small files are written through the server, twice: ``a_*`` and ``b_*``. One DAG
per way, N ``TableMaintenanceOperator`` tasks of ``rewrite-files`` each, no dependencies between them:

- **(a)** ``bench_a``: the ``a_*`` tables on spark-submit (a driver JVM per task, ``local[2]``);
- **(b)** ``bench_b``: the ``b_*`` tables on the Connect server (``[tablemgmt] spark_connect_tables =
  lake.db.b_*``; the connection's ``slots`` = 4, the executor's parallelism).

A no-op DAG of 4 tasks runs first (under load the api-server's first task starts fail); tasks have 2
retries (counted). Each DAG is triggered once the dag-processor has parsed it, one way after the other; the figure is the
DAG run's start to end in Airflow's metadata DB (tables per minute = N / that), plus the tasks' median
duration and the store's process rows (all SUCCESS, the engine each names). Printed with the load.

Left out: the DAG file's parse (before the clock), the scheduler's loop without work, object stores, a
quiet machine; the per-task RSS (see ``connect_throughput.py``: a task here is Airflow's task runner plus,
for (a), the driver JVM).

    .venv/bin/python benchmarks/connect_airflow.py [--tables 8] [--files 40] [--ways a b]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="tms-bench-home-"))
from tests.e2e.test_real_scheduler import _utc, _wait_for, local_deployment  # noqa: E402

CATALOG = "lake"
NAMESPACE = "db"
CONN_ID = "spark_connect_bench"

DAG_FILE = '''
"""Benchmark DAGs: one per way, N independent rewrite-files tasks."""
from datetime import datetime, timedelta
from airflow.sdk import DAG, task
from airflow_tablemgmt.operators.maintenance import TableMaintenanceOperator

with DAG("bench_warmup", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as warmup:
    for i in range(4):
        task(task_id=f"noop_{{i}}")(lambda: None)()

for way, names in {ways!r}.items():
    with DAG(f"bench_{{way}}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
             max_active_tasks=4) as dag:
        for name in names:
            TableMaintenanceOperator(task_id=name, table=f"{catalog}.{namespace}.{{name}}",
                                     action="rewrite-files", retries=2, retry_delay=timedelta(seconds=2))
    globals()[f"bench_{{way}}"] = dag
'''


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _declarations(warehouse: Path, names: list[str]) -> str:
    lines = [
        "version: 1",
        "catalogs:",
        f"  - name: {CATALOG}",
        "    type: hadoop",
        f"    warehouse: {warehouse}",
        "tables:",
    ]
    for name in names:
        lines += [
            f"  - catalog: {CATALOG}",
            f"    namespace: {NAMESPACE}",
            f"    name: {name}",
            "    actions:",
            "      rewrite-files: {}",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tables", type=int, default=8, help="tables per way")
    p.add_argument("--files", type=int, default=40)
    p.add_argument("--ways", nargs="+", default=["a", "b"], choices=["a", "b"])
    p.add_argument("--timeout", type=float, default=3600, help="seconds a way's DAG run may take")
    p.add_argument(
        "--warm",
        action="store_true",
        help="airflow_local_settings.py imports airflow_tablemgmt.spark.connect.warm: the scheduler "
        "imports the Connect client and the job code once, the forked tasks inherit them",
    )
    args = p.parse_args()

    from airflow_tablemgmt.core.tables import CatalogSpec
    from airflow_tablemgmt.spark.connect.client import open_session
    from airflow_tablemgmt.spark.connect.server import free_port, server_spec, start_server, wait_for_port
    from airflow_tablemgmt.spark.connect.session import connect_conf

    work = Path(tempfile.mkdtemp(prefix="tms-connect-airflow-"))
    warehouse = work / "warehouse"
    port = free_port()
    url = f"sc://127.0.0.1:{port}"
    print(f"# connect through Airflow: {args.tables} tables x {args.files} files per way, work {work}")
    print(f"# start {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load {_load()}", flush=True)
    server = start_server(server_spec(port=port, master="local[2]"), work / "server.log")
    dep = None
    try:
        wait_for_port("127.0.0.1", port, 300, server)
        spark = open_session(url)
        for key, value in connect_conf(CatalogSpec(name=CATALOG, warehouse=str(warehouse))).items():
            spark.conf.set(key, value)
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}").collect()
        names = {w: [f"{w}_{i}" for i in range(args.tables)] for w in args.ways}
        for name in [n for w in args.ways for n in names[w]] + ["warmup_server"]:
            table = f"{CATALOG}.{NAMESPACE}.{name}"
            spark.sql(f"CREATE TABLE {table} (id bigint, v string) USING iceberg").collect()
            rows = spark.range(args.files * 100).selectExpr("id", "sha1(cast(id AS string)) AS v")
            rows.repartition(args.files).writeTo(table).append()
        spark.sql(f"CALL {CATALOG}.system.rewrite_data_files(table => '{NAMESPACE}.warmup_server')").collect()
        spark.stop()
        print(f"# tables written, load {_load()}", flush=True)

        conn = {"conn_type": "spark_connect", "host": url, "extra": {"slots": 4, "slot_wait": 600}}
        settings_dir = work / "local_settings"
        settings_dir.mkdir()
        if args.warm:
            (settings_dir / "airflow_local_settings.py").write_text(
                "import airflow_tablemgmt.spark.connect.warm\n"
            )
        dep = local_deployment(
            work / "airflow",
            **{
                f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps(conn),
                "AIRFLOW__TABLEMGMT__SPARK_CONNECT_CONN_ID": CONN_ID,
                "AIRFLOW__TABLEMGMT__SPARK_CONNECT_TABLES": f"{CATALOG}.{NAMESPACE}.b_*",
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
                "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "4",
                "PYTHONPATH": f"{settings_dir}{os.pathsep}{ROOT}",
            },
        )
        decl = work / "tables.yaml"
        decl.write_text(_declarations(warehouse, [n for w in args.ways for n in names[w]]))
        tablemgmt = str(Path(sys.executable).parent / "tablemgmt")
        subprocess.run(
            [tablemgmt, "--store-url", dep.env["TABLEMGMT_STORE_URL"], "apply", str(decl)],
            env=dep.env,
            check=True,
            capture_output=True,
        )
        (dep.home / "dags" / "bench.py").write_text(
            DAG_FILE.format(ways=names, catalog=CATALOG, namespace=NAMESPACE)
        )
        migrated = dep.cli("db", "migrate", timeout=600)
        assert migrated.returncode == 0, migrated.stderr[-3000:]
        for name, cmd in (
            ("api-server", ("api-server", "--port", str(dep.api_port))),
            ("scheduler", ("scheduler",)),
            ("dag-processor", ("dag-processor",)),
        ):
            dep.start(name, *cmd)
        for way in args.ways:
            _wait_for(
                f"bench_{way} parsed",
                lambda w=way: dep.query("SELECT 1 FROM dag WHERE dag_id = :d", d=f"bench_{w}"),
                600,
                2,
            )
        _wait_for("the api-server (the tasks' Execution API)", lambda: _healthy(dep.api_port), 600, 2)
        print(f"# Airflow up, load {_load()}", flush=True)
        results = {}
        for way in ["warmup", *args.ways]:  # a no-op run first: the api-server's first task starts are slow
            dag_id = f"bench_{way}"
            res = dep.cli("dags", "trigger", dag_id, timeout=300)
            assert res.returncode == 0, res.stderr[-3000:]

            def finished(d: str = dag_id) -> tuple | None:
                dep.check_alive()
                rows = dep.query("SELECT state, start_date, end_date FROM dag_run WHERE dag_id = :d", d=d)
                return rows[0] if rows and rows[0][0] in ("success", "failed") else None

            state, start, end = _wait_for(f"{dag_id} finished", finished, args.timeout, 2)
            if way == "warmup":
                print(f"# warm-up run {state}, load {_load()}", flush=True)
                continue
            took = (_utc(end) - _utc(start)).total_seconds()
            tasks = dep.query(
                "SELECT state, duration, try_number FROM task_instance WHERE dag_id = :d", d=dag_id
            )
            results[way] = {
                "state": state,
                "seconds": took,
                "per_min": 60 * args.tables / took,
                "ok": sum(1 for s, _, _ in tasks if s == "success"),
                "retried": sum(1 for _, _, n in tasks if (n or 1) > 1),
                "median_task": statistics.median(float(d or 0) for _, d, _ in tasks),
            }
            print(f"# ({way}) {state} in {took:.1f}s, load {_load()}", flush=True)
        engines = _engines(dep.env["TABLEMGMT_STORE_URL"])
    finally:
        if dep is not None:
            dep.stop()
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
    print("\n| way | tables | DAG run (s) | tables/min | tasks SUCCESS | tasks retried | median task (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    label = {"a": "(a) spark-submit per task", "b": "(b) Spark Connect per task"}
    for way, r in results.items():
        print(
            f"| {label[way]} | {args.tables} | {r['seconds']:.1f} | {r['per_min']:.1f} | {r['ok']} "
            f"| {r['retried']} | {r['median_task']:.1f} |"
        )
    if "a" in results and "b" in results:
        print(
            f"\n(b)/(a) throughput through Airflow: {results['a']['seconds'] / results['b']['seconds']:.1f}x"
        )
    print(f"Process rows by engine and status: {engines.pop('rows')}")
    print("Connect tasks' phases (s, median): " + ", ".join(f"{k} {v:.2f}" for k, v in engines.items()))
    print(f"warm pre-import in airflow_local_settings.py: {'yes' if args.warm else 'no'}")
    print(f"# end {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load {_load()}")


def _healthy(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=5):
            return True
    except OSError:
        return False


def _engines(store_url: str) -> dict:
    """Process rows per engine and status, and the Connect tasks' median phases from their timings."""
    from airflow_tablemgmt.store import Store

    store = Store(store_url)
    rows: dict[str, int] = {}
    phases: dict[str, list[float]] = {}
    for p in store.processes.list(limit=None):
        key = f"{p.engine} {p.status}"
        rows[key] = rows.get(key, 0) + 1
        timings = (p.summary or {}).get("timings") or {}
        if p.engine.startswith("spark-connect"):
            for name in ("process_before_submit", "connect_import", "imports", "procedure", "metrics_after"):
                phases.setdefault(name, []).append(float(timings.get(name, 0.0)))
    store.dispose()
    return {"rows": rows, **{k: statistics.median(v) for k, v in phases.items()}}


if __name__ == "__main__":
    main()
