"""Incremental against FULL refresh of a dynamic table, side by side in one run (issue 41's cost proof).

Setup: a source of ``--rows`` rows (default 10,000,000: ``id``, ``k = id % 1000``, ``v = id % 97``) written
once with ``spark.range`` into a hadoop warehouse under ``--cache`` and reused by later runs (its snapshot
at the start of a run is rolled back to at the end, so the cached source stays the same size). Per query
shape, two dynamic tables over it created through the real services and refresh job (``job_main.run`` on an
in-process local[2] session, as the integration tests run it): one declared ``FULL``, one ``AUTO``.

Each round appends ``--fraction`` of the source (0.1 % by default: 10,000 rows) in one commit, then refreshes
the FULL table and the AUTO table (periodic refreshes, so the factory hands the job the last refresh's
snapshots), and records for each the refresh's wall time (the job's ``duration_seconds``) and bytes read
(the job's own cost figures, ``summary.cost.bytes_read``: its Spark stages' input bytes). The shapes:

* ``group-by``: ``SELECT k, count(*), sum(v), avg(v) FROM src GROUP BY k`` (MERGE_BY_KEY, state table);
* ``filter``: ``SELECT id, v FROM src WHERE v < 10`` (APPEND).

Prints a markdown table of medians per shape and mode and the incremental / FULL ratios, with ``uptime``
before and after (2 shared cores: the load is part of the figure).

    .venv/bin/python benchmarks/incremental_refresh.py [--rows 10000000] [--fraction 0.001] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from snapshot_check import load_demo_table  # noqa: E402

CATALOG, NAMESPACE = "bench", "db"
SHAPES = {
    "group-by": "SELECT k, count(*) AS n, sum(v) AS s, avg(v) AS a FROM {src} GROUP BY k",
    "filter": "SELECT id, v FROM {src} WHERE v < 10",
}


class Jobs:
    """Runs each refresh job on the in-process session through job_main.run (spark-submit's driver path)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark

    def submit(self, job: Any, on_started: Any = None) -> Any:
        from airflow_tablemgmt.spark.job import main as job_main
        from airflow_tablemgmt.spark.protocol import parse_result

        if on_started is not None:
            on_started(self.spark.sparkContext.applicationId)
        _, line = job_main.run(job, self.spark)
        return parse_result([line])

    def kill(self) -> None:
        pass


def source(spark: Any, rows: int) -> str:
    name = f"{CATALOG}.{NAMESPACE}.src_{rows}"
    if spark.catalog.tableExists(name):
        return name
    started = time.perf_counter()
    spark.sql(f"CREATE TABLE {name} (id bigint, k int, v int) USING iceberg")
    frame = spark.range(rows).selectExpr("id", "CAST(id % 1000 AS INT) AS k", "CAST(id % 97 AS INT) AS v")
    frame.writeTo(name).append()
    print(f"wrote {name}: {rows:,} rows in {time.perf_counter() - started:.0f} s (cached for later runs)")
    return name


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--fraction", type=float, default=0.001)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--cache", default=str(Path.home() / ".cache" / "airflow-tablemgmt" / "bench-incremental")
    )
    args = parser.parse_args(argv)

    from airflow_tablemgmt.core.identifiers import TableIdentifier
    from airflow_tablemgmt.core.tables import CatalogSpec, Owner
    from airflow_tablemgmt.services import dynamic
    from airflow_tablemgmt.spark.job.incremental_state import current
    from airflow_tablemgmt.store import Store

    warehouse = str(Path(args.cache) / "warehouse")
    Path(warehouse).mkdir(parents=True, exist_ok=True)
    print(f"before: {uptime()}")
    spark = load_demo_table().spark_session(warehouse, CATALOG)
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}")
    src = source(spark, args.rows)
    base = current(spark, TableIdentifier.parse(src))
    assert base is not None
    tmp = tempfile.mkdtemp(prefix="bench-incremental-")
    store = Store(f"sqlite:///{tmp}/store.db")
    store.catalogs.upsert(CatalogSpec(name=CATALOG, warehouse=warehouse), Owner.STORE)
    jobs = Jobs(spark)
    tag = datetime.now(UTC).strftime("%H%M%S")
    tables: dict[tuple[str, str], str] = {}
    try:
        for shape, query in SHAPES.items():
            for mode in ("FULL", "AUTO"):
                tid = f"{CATALOG}.{NAMESPACE}.dt_{shape.replace('-', '_')}_{mode.lower()}_{tag}"
                definition = {
                    "identifier": tid,
                    "query": query.format(src=src),
                    "freshness": "1 HOUR",
                    "refresh-mode": mode,
                }
                _, created = dynamic.create(store, definition, jobs)
                assert str(created.status) == "SUCCESS", created.failure_reason
                tables[(shape, mode)] = tid
        added = max(1, int(args.rows * args.fraction))
        samples: dict[tuple[str, str], list[tuple[float, int, str]]] = {k: [] for k in tables}
        next_id = args.rows
        at = datetime(2026, 1, 1, tzinfo=UTC)
        for r in range(args.rounds):
            spark.range(next_id, next_id + added).selectExpr(
                "id", "CAST(id % 1000 AS INT) AS k", "CAST(id % 97 AS INT) AS v"
            ).writeTo(src).append()
            next_id += added
            at += timedelta(hours=1)
            for key, tid in tables.items():
                process = dynamic.refresh_now(store, tid, is_periodic=True, schedule_time=at, runner=jobs)
                s = process.summary or {}
                assert str(process.status) == "SUCCESS", process.failure_reason
                cost = s.get("cost") or {}
                samples[key].append(
                    (
                        float(s.get("duration_seconds") or 0.0),
                        int(cost.get("bytes_read") or 0),
                        str(s.get("refresh_mode")),
                    )
                )
                print(
                    f"round {r + 1} {key[0]:8} {key[1]:4}: {s.get('refresh_mode')} "
                    f"{s.get('duration_seconds')} s, {cost.get('bytes_read')} bytes read"
                )
        print()
        print(
            f"source: {args.rows:,} rows; {added:,} appended per round ({args.fraction:.2%}); {args.rounds} rounds"
        )
        print()
        print("| shape | declared | ran as | wall p50 s | bytes read p50 | incremental / FULL wall | bytes |")
        print("|---|---|---|---:|---:|---:|---:|")
        for shape in SHAPES:
            full = samples[(shape, "FULL")]
            auto = samples[(shape, "AUTO")]
            fw, fb = statistics.median(x[0] for x in full), statistics.median(x[1] for x in full)
            aw, ab = statistics.median(x[0] for x in auto), statistics.median(x[1] for x in auto)
            for mode, rows, w, b in (("FULL", full, fw, fb), ("AUTO", auto, aw, ab)):
                ran = ",".join(sorted({x[2] for x in rows}))
                ratio_w = f"{aw / fw:.1%}" if mode == "AUTO" and fw else ""
                ratio_b = f"{ab / fb:.1%}" if mode == "AUTO" and fb else ""
                print(f"| {shape} | {mode} | {ran} | {w:.2f} | {b:,.0f} | {ratio_w} | {ratio_b} |")
    finally:
        for tid in tables.values():
            spark.sql(f"DROP TABLE IF EXISTS {tid} PURGE")
            spark.sql(f"DROP TABLE IF EXISTS {tid}__tms_state PURGE")
        spark.sql(
            f"CALL {CATALOG}.system.rollback_to_snapshot('{NAMESPACE}.{src.rsplit('.', 1)[1]}', {base})"
        )
        store.dispose()
        print(f"after: {uptime()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
