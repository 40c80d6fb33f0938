"""Scale-out: N tables of small files compacted through the distributed set-up, with one vs two celery
workers and one vs two Spark executors per application.

One deployment (tests/distributed/cluster.py: PostgreSQL metadata DB and store, Redis broker, api-server,
scheduler, dag-processor, triggerer, celery workers, a Spark standalone master and worker, settings from
docker/airflow.env) serves every configuration: between configurations the celery workers are
restarted (1 or 2, ``--concurrency`` task slots each) and the executors per application are set in the
workers' ``spark-defaults.conf`` (``spark.executor.cores 1``, ``spark.cores.max`` = executors). Each
configuration runs rewrite-files (``rewrite-all``) once on every table through the REST API's run-now,
all at once, and waits for every process to end.

Where the time goes, per task (medians; the job's phases from the process summary's ``timings``):
  queue        TI queued -> TI started (waiting for a worker slot, Celery pickup)
  task         the rest of the task's run time: task process start-up, DAG parse, store, lease, XCom
  spark start  hook set-up, spark-submit -> driver JVM -> Python, imports, SparkSession (executors granted)
  procedure    the Iceberg procedure (rewrite_data_files)
  job other    table load, metrics before/after, session stop, result

    .venv/bin/python benchmarks/scale_out.py                 # 40 tables, 1/2 workers x 1/2 executors
    .venv/bin/python benchmarks/scale_out.py --tables 8 --configs 1x1,2x2
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.distributed.cluster import CeleryDeployment, PgDatabases, SparkStandalone, wait_for  # noqa: E402
from tests.e2e.conftest import BIN  # noqa: E402

CATALOG = "bench"
# The job's timings (process summary) up to a ready SparkSession: hook set-up, spark-submit to the
# driver JVM, the JVM to Python, Python start-up, imports, the session (executors granted by the master).
SPARK_START = {
    "hook_setup",
    "spark_submit",
    "driver_jvm",
    "python_startup",
    "imports",
    "session",
}

MAKE_TABLES = """
import sys
sys.path.insert(0, sys.argv[1])
from demo_table import create_table, spark_session
spark = spark_session(sys.argv[2], "bench")
for i in range(int(sys.argv[3])):
    create_table(spark, f"bench.db.t{i:03d}", files=int(sys.argv[4]), rows=int(sys.argv[5]), days=2, appends=2)
spark.stop()
"""

TABLE_ENTRY = """  - catalog: bench
    namespace: db
    name: t{i:03d}
    owner: bench
    queue: maintenance
    actions:
      rewrite-files: {{trigger: schedule, interval: "0 0 1 1 *", on-new-snapshot: false, min-input-files: 2,
                      rewrite-all: true, retries: 1, retry-delay: 5s}}
"""


def _ts(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    return datetime.fromisoformat(str(value)).timestamp()


def _make_tables(warehouse: Path, tables: int, files: int, rows: int) -> None:
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            MAKE_TABLES,
            str(ROOT / "scripts"),
            str(warehouse),
            str(tables),
            str(files),
            str(rows),
        ],
        capture_output=True,
        text=True,
        timeout=3600,
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": str(ROOT)},
    )
    if res.returncode != 0:
        raise SystemExit(f"making the tables failed:\n{res.stderr[-3000:]}")


def _set_executors(conf_dir: Path, executors: int) -> None:
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "spark-defaults.conf").write_text(
        f"spark.executor.cores 1\nspark.cores.max {executors}\nspark.executor.memory 768m\n"
    )


def _run_config(
    airflow: CeleryDeployment, tables: list[str], workers: int, concurrency: int, executors: int, n: int
) -> dict[str, Any]:
    from airflow_tablemgmt.store import Store

    for name in list(airflow.workers):
        airflow.stop_worker(name)
    for i in range(workers):
        airflow.start_worker(f"w{n}{chr(ord('a') + i)}", concurrency)

    def ready() -> bool:
        airflow.dep.check_alive()
        return all(" ready." in airflow.dep.log(w).read_text(errors="replace") for w in airflow.workers)

    wait_for("celery workers ready", ready, 300)
    store = Store.for_url(airflow.store_url)
    instant = f"2026-03-{n + 1:02d}T00:00:00+00:00"
    started = time.time()
    runs = {t: airflow.run_now(t, "rewrite-files", instant)["run_id"] for t in tables}
    trigger_s = time.time() - started

    def all_done() -> list[Any] | None:
        airflow.dep.check_alive()
        procs = [
            p for p in store.processes.list(action="rewrite-files", limit=10_000) if p.run_id in runs.values()
        ]
        if len(procs) == len(tables) and all(p.status.is_terminal for p in procs):
            return procs
        return None

    procs = wait_for(f"{len(tables)} compactions", all_done, timeout=7200, every=2)
    wall = time.time() - started
    tis = {
        r[0]: r[1:]
        for r in airflow.dep.query(
            "SELECT run_id, queued_dttm, start_date, end_date FROM task_instance WHERE task_id = 'maintain' "
            "AND run_id IN :runs",
            runs=tuple(runs.values()),
        )
    }
    phases: dict[str, list[float]] = {
        "queue": [],
        "task": [],
        "spark_start": [],
        "procedure": [],
        "job_other": [],
    }
    for p in procs:
        queued, start, end = (_ts(v) for v in tis[p.run_id])
        timings = {k: float(v) for k, v in (p.summary or {}).get("timings", {}).items() if k != "total"}
        spark_start = sum(v for k, v in timings.items() if k in SPARK_START)
        procedure = timings.get("procedure", 0.0)
        job_other = sum(timings.values()) - spark_start - procedure
        phases["queue"].append(start - queued)
        phases["task"].append(max(0.0, end - start - sum(timings.values())))
        phases["spark_start"].append(spark_start)
        phases["procedure"].append(procedure)
        phases["job_other"].append(job_other)
    failed = [p.id for p in procs if str(p.status) != "SUCCESS"]
    return {
        "workers": workers,
        "slots": workers * concurrency,
        "executors": executors,
        "tables": len(tables),
        "wall_s": round(wall, 1),
        "tables_per_min": round(len(tables) / wall * 60, 2),
        "trigger_s": round(trigger_s, 1),
        "failed": failed,
        "failures": {p.id: (p.failure_reason or "")[:300] for p in procs if p.id in failed},
        **{f"{k}_median_s": round(statistics.median(v), 1) for k, v in phases.items()},
        "load_avg": round(os.getloadavg()[0], 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=40)
    ap.add_argument("--files", type=int, default=8, help="data files per table (at least)")
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=1, help="task slots per celery worker")
    ap.add_argument("--configs", default="1x1,1x2,2x1,2x2", help="WORKERSxEXECUTORS, comma-separated")
    ap.add_argument("--json", help="append each configuration's figures to this file as JSON lines")
    args = ap.parse_args()
    configs = [tuple(int(x) for x in c.split("x")) for c in args.configs.split(",")]

    # SIGTERM (timeout, a CI runner) stops the deployment through the finally below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tmp = Path(tempfile.mkdtemp(prefix="tms-scale-out-"))
    conf_dir = tmp / "spark-conf"
    _set_executors(conf_dir, 1)
    pg = PgDatabases.create("airflow", "store")
    spark = SparkStandalone(tmp / "spark")
    overrides = {
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",  # only the benchmark's own runs
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
        "AIRFLOW__CORE__PARALLELISM": "32",
        "SPARK_CONF_DIR": str(conf_dir),
    }
    airflow = CeleryDeployment.create(tmp / "airflow", pg, spark.url, overrides=overrides)
    rows: list[dict[str, Any]] = []
    try:
        t0 = time.time()
        spark.start_master()
        spark.start_worker(cores=4, memory="6g")
        migrate = airflow.dep.cli("db", "migrate", timeout=900)
        assert migrate.returncode == 0, migrate.stderr[-3000:]
        store = subprocess.run(
            [str(BIN / "tablemgmt"), "db", "upgrade"],
            env=airflow.dep.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert store.returncode == 0, store.stderr[-3000:]
        assert airflow.dep.cli("pools", "set", "maintenance", "64", "bench").returncode == 0
        _make_tables(tmp / "wh", args.tables, args.files, args.rows)
        tables = [f"{CATALOG}.db.t{i:03d}" for i in range(args.tables)]
        (airflow.dep.home / "dags" / "tables.yaml").write_text(
            f"version: 1\ncatalogs:\n  - {{name: bench, type: hadoop, warehouse: {tmp / 'wh'}}}\ntables:\n"
            + "".join(TABLE_ENTRY.format(i=i) for i in range(args.tables))
        )
        (airflow.dep.home / "dags" / "tablemgmt_dags.py").write_bytes(
            (ROOT / "dags" / "tablemgmt_dags.py").read_bytes()
        )
        airflow.start_services(workers=0)
        spark.wait_for_workers(1)
        airflow.wait_ready()
        for t in tables:
            airflow.wait_dag(f"tms__{t}__rewrite-files", timeout=600)
        print(f"set-up: {time.time() - t0:.0f} s", flush=True)
        for n, (workers, executors) in enumerate(configs):
            _set_executors(conf_dir, executors)
            row = _run_config(airflow, tables, workers, args.concurrency, executors, n)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.json:
                with open(args.json, "a") as out:
                    out.write(json.dumps(row) + "\n")
    finally:
        airflow.stop()
        spark.stop()
        pg.drop()
    print()
    print(table(rows))


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| celery workers (slots) | executors / app | tables | wall | tables/min | queue | task | spark start "
        "| procedure | job other | failed | load avg |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workers']} ({r['slots']}) | {r['executors']} | {r['tables']} | {r['wall_s']} s | {r['tables_per_min']} "
            f"| {r['queue_median_s']} s | {r['task_median_s']} s | {r['spark_start_median_s']} s "
            f"| {r['procedure_median_s']} s | {r['job_other_median_s']} s | {len(r['failed'])} | {r['load_avg']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
