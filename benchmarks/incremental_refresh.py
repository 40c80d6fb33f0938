"""Incremental against FULL refresh of a dynamic table, side by side in one run (issue 41's cost proof).

**The source** is an events table as users have them: ``--rows`` rows (default 10,000,000) over ``--days``
days (default 100, so 100,000 rows a day), partitioned by ``day``, of eight columns::

    id BIGINT, ts TIMESTAMP, day DATE, customer STRING ('c000000' .. 'c099999': --keys, 100,000 customers,
    spread by a hash of id), kind STRING (8 values), v INT (id % 97), amount DECIMAL(12,2) (0.00 .. 999.99,
    by a hash), payload STRING (≈ 150 bytes of JSON with two hex digests: a session id and a referrer)

≈ 200 bytes a row before compression. It is written once with ``spark.range`` into a hadoop warehouse under
``--cache`` and reused by later runs; its snapshot at the start of a run is rolled back to at the end, so the
cached source stays the same size. Each round appends ``--fraction`` of it (0.1 % by default: 10,000 rows)
in one commit, to the newest day ("today"), with customers spread as before (each round touches ≈ 9,500 of
the 100,000 customers).

**The dynamic tables**, per shape one declared ``FULL`` and one ``AUTO`` (created through the real services
and refresh job, ``job_main.run`` on an in-process local[2] session, as the integration tests run it):

* ``filter`` (APPEND), partitioned by day: ``SELECT id, ts, day, customer, kind, amount, payload FROM src
  WHERE v < 10`` (≈ 10 % of the rows, with the payload);
* ``group-by`` (MERGE_BY_KEY, state table behind the avg): ``SELECT customer, count(*) AS n, sum(amount) AS
  total, avg(amount) AS mean FROM src GROUP BY customer`` (100,000 groups, not partitioned);
* ``group-by-day`` (MERGE_BY_KEY, partitioned by day: a change rewrites today's partition only): the same
  aggregates ``GROUP BY day, customer`` (≈ 6.3 M groups).

Each round refreshes every table (periodic refreshes, so the factory hands the job the last refresh's
snapshots) and records the refresh's wall time (the job's ``duration_seconds``: the refresh job's own work,
not the session's start) and bytes read (the job's cost figures, ``summary.cost.bytes_read``: its Spark
stages' input bytes), with the incremental refresh's phases (the job's timings). Prints a markdown table of
medians per shape and mode and the incremental / FULL ratios, with ``uptime`` before and after and the
commit (2 shared cores: the load is part of the figure). Last (not timed), each AUTO table is checked equal
to its FULL twin, ``EXCEPT ALL`` both ways.

    .venv/bin/python benchmarks/incremental_refresh.py [--rows 10000000] [--fraction 0.001] [--rounds 3]
        [--shapes filter group-by group-by-day] [--write-variants]

``--write-variants`` measures the unpartitioned ``GROUP BY``'s ways of writing against each other on the same
tables (round *r* the *r*-th of ``WRITE_VARIANTS``, cycling): the state's append and the table's write side by
side or in order, each read in one Spark task or shuffled, and a compaction of the state.
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
#: The most rows the source is written with in one append.
WRITE_CHUNK_ROWS = 10_000_000
AGGREGATES = "count(*) AS n, sum(amount) AS total, avg(amount) AS mean"
SHAPES: dict[str, tuple[str, list[str]]] = {
    "filter": ("SELECT id, ts, day, customer, kind, amount, payload FROM {src} WHERE v < 10", ["day"]),
    "group-by": (f"SELECT customer, {AGGREGATES} FROM {{src}} GROUP BY customer", []),
    "group-by-day": (f"SELECT day, customer, {AGGREGATES} FROM {{src}} GROUP BY day, customer", ["day"]),
}
PHASES = (
    "refresh_analyse",
    "refresh_snapshots",
    "incremental_decide",
    "incremental_plan",
    "incremental_read",
    "incremental_state_write",
    "incremental_table_write",
    "incremental_writes",
)
FIRST_DAY = "2026-01-01"
# --write-variants: how the unpartitioned GROUP BY's incremental refresh writes (incremental_write's and
# incremental_merge's settings); the first is the default.
WRITE_VARIANTS: dict[str, dict[str, Any]] = {
    "side by side, one task": {},
    "side by side, shuffled": {"SINGLE_TASK_ROWS": 0},
    "in order, one task": {"SIDE_BY_SIDE": False},
    "compaction": {"COMPACT_ROWS_PER_GROUP": 1.0},
}


def write_variant(name: str) -> None:
    from airflow_tablemgmt.spark.job import incremental_merge, incremental_write

    settings = {
        "SIDE_BY_SIDE": True,
        "SINGLE_TASK_ROWS": 500_000,
        "COMPACT_ROWS_PER_GROUP": 2.0,
        **WRITE_VARIANTS[name],
    }
    incremental_write.SIDE_BY_SIDE = settings["SIDE_BY_SIDE"]
    incremental_write.SINGLE_TASK_ROWS = settings["SINGLE_TASK_ROWS"]
    incremental_merge.COMPACT_ROWS_PER_GROUP = settings["COMPACT_ROWS_PER_GROUP"]


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


def rows_frame(spark: Any, start: int, end: int, per_day: int, days: int, keys: int) -> Any:
    """Rows ``start`` .. ``end - 1`` of the events source (ids past the first load land on the newest day)."""
    return (
        spark.range(start, end)
        .selectExpr(
            "id",
            f"least(CAST(id DIV {per_day} AS INT), {days - 1}) AS d",
        )
        .selectExpr(
            "id",
            f"timestamp_seconds(CAST(unix_date(date_add(DATE '{FIRST_DAY}', d)) AS BIGINT) * 86400 + id % 86400) AS ts",
            f"date_add(DATE '{FIRST_DAY}', d) AS day",
            f"concat('c', lpad(CAST(pmod(xxhash64(id), {keys}) AS STRING), 6, '0')) AS customer",
            "element_at(array('view', 'click', 'cart', 'order', 'refund', 'login', 'search', 'share'), "
            "CAST(id % 8 AS INT) + 1) AS kind",
            "CAST(id % 97 AS INT) AS v",
            "CAST(pmod(xxhash64(id, 7), 100000) / 100 AS DECIMAL(12, 2)) AS amount",
            'concat(\'{"session":"\', md5(CAST(id AS STRING)), \'","agent":"Mozilla/5.0 (X11; Linux x86_64)",'
            '"referrer":"\', sha1(CAST(id * 31 AS STRING)), \'"}\') AS payload',
        )
    )


def source(spark: Any, rows: int, days: int, keys: int) -> str:
    name = f"{CATALOG}.{NAMESPACE}.events_{rows}_{days}d_{keys}k"
    if spark.catalog.tableExists(name):
        return name
    started = time.perf_counter()
    spark.sql(
        f"CREATE TABLE {name} (id bigint, ts timestamp, day date, customer string, kind string, v int, "
        "amount decimal(12,2), payload string) USING iceberg PARTITIONED BY (day) "
        # ids are in day order within each Spark task: written without a shuffle by day
        "TBLPROPERTIES ('write.distribution-mode' = 'none')"
    )
    # At most WRITE_CHUNK_ROWS rows an append, in whole days (a 50 M-row source in one write ran the local
    # session's executors out of memory): still one data file a day and task
    per_day = rows // days
    step = max(1, WRITE_CHUNK_ROWS // max(per_day, 1)) * per_day
    for start in range(0, rows, step):
        rows_frame(spark, start, min(start + step, rows), per_day, days, keys).writeTo(name).append()
    spark.sql(f"ALTER TABLE {name} UNSET TBLPROPERTIES ('write.distribution-mode')")
    print(f"wrote {name}: {rows:,} rows in {time.perf_counter() - started:.0f} s (cached for later runs)")
    return name


def spark_jobs(spark: Any, after: int) -> list[dict[str, Any]]:
    """The Spark jobs after job id ``after`` (Spark's status store, as the job's cost reads it): id, name
    (the call site: ``append``, ``overwrite`` …), seconds from submission to completion, tasks."""
    from airflow_tablemgmt.spark.job.cost import _read_store  # noqa: PLC2701 - the store's one reader

    _, jobs = _read_store(spark)
    out = []
    for job in sorted(jobs, key=lambda j: int(j["jobId"])):
        if int(job["jobId"]) <= after:
            continue
        start, end = job.get("submissionTime"), job.get("completionTime")
        seconds = (float(end) - float(start)) / 1000 if isinstance(start, int | float) and end else None
        out.append(
            {
                "id": int(job["jobId"]),
                "name": str(job.get("name", "")),
                "seconds": seconds,
                "tasks": job.get("numTasks"),
            }
        )
    return out


def last_job(spark: Any) -> int:
    jobs = spark_jobs(spark, -1)
    return max((j["id"] for j in jobs), default=-1)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "airflow_tablemgmt", "benchmarks/incremental_refresh.py"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return out.stdout.strip() + (" (+ uncommitted changes)" if dirty else "")


def describe(spark: Any, name: str) -> str:
    from airflow_tablemgmt.core.identifiers import TableIdentifier
    from airflow_tablemgmt.spark.job.metrics import _iceberg_table  # noqa: PLC2701

    loaded = _iceberg_table(spark, TableIdentifier.parse(name))
    loaded.refresh()
    snapshot = loaded.currentSnapshot()
    summary = dict(snapshot.summary()) if snapshot is not None else {}
    size = int(summary.get("total-files-size", 0))
    return (
        f"{int(summary.get('total-records', 0)):,} rows, {int(summary.get('total-data-files', 0)):,} data "
        f"files, {size / 1e6:,.1f} MB on disk"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--days", type=int, default=100)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--fraction", type=float, default=0.001)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--no-check", dest="check", action="store_false", help="skip the EXCEPT ALL check")
    parser.add_argument(
        "--write-variants",
        action="store_true",
        help="round r writes the unpartitioned GROUP BY's state and table the r-th way of WRITE_VARIANTS "
        "(cycling; the same state layout, so they can alternate on one table): medians per way",
    )
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
    print(f"commit: {commit()}")
    spark = load_demo_table().spark_session(warehouse, CATALOG)
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}")
    src = source(spark, args.rows, args.days, args.keys)
    base = current(spark, TableIdentifier.parse(src))
    assert base is not None
    print(f"source {src}: {describe(spark, src)}")
    tmp = tempfile.mkdtemp(prefix="bench-incremental-")
    store = Store(f"sqlite:///{tmp}/store.db")
    store.catalogs.upsert(CatalogSpec(name=CATALOG, warehouse=warehouse), Owner.STORE)
    jobs = Jobs(spark)
    tag = datetime.now(UTC).strftime("%H%M%S")
    tables: dict[tuple[str, str], str] = {}
    try:
        for shape in args.shapes:
            query, partitioned = SHAPES[shape]
            for mode in ("FULL", "AUTO"):
                tid = f"{CATALOG}.{NAMESPACE}.dt_{shape.replace('-', '_')}_{mode.lower()}_{tag}"
                definition: dict[str, Any] = {
                    "identifier": tid,
                    "query": query.format(src=src),
                    "freshness": "1 HOUR",
                    "refresh-mode": mode,
                }
                if partitioned:
                    definition["partitioned-by"] = partitioned
                started = time.perf_counter()
                _, created = dynamic.create(store, definition, jobs)
                assert str(created.status) == "SUCCESS", created.failure_reason
                tables[(shape, mode)] = tid
                print(f"created {tid} in {time.perf_counter() - started:.1f} s: {describe(spark, tid)}")
        added = max(1, int(args.rows * args.fraction))
        samples: dict[tuple[str, str], list[tuple[float, int, str]]] = {k: [] for k in tables}
        phases: dict[str, list[dict[str, float]]] = {shape: [] for shape in args.shapes}
        per_day = args.rows // args.days
        next_id = args.rows
        at = datetime(2026, 1, 1, tzinfo=UTC)
        variants: dict[str, list[tuple[float, dict[str, float]]]] = {v: [] for v in WRITE_VARIANTS}
        for r in range(args.rounds):
            variant = list(WRITE_VARIANTS)[r % len(WRITE_VARIANTS)] if args.write_variants else ""
            if variant:
                write_variant(variant)
                print(f"round {r + 1}: the unpartitioned GROUP BY writes {variant}")
            rows_frame(spark, next_id, next_id + added, per_day, args.days, args.keys).writeTo(src).append()
            next_id += added
            at += timedelta(hours=1)
            for key, tid in tables.items():
                first_job = last_job(spark)
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
                timings = {p: float(v) for p, v in (s.get("timings") or {}).items() if p in PHASES}
                ran = spark_jobs(spark, first_job)
                if key[1] == "AUTO":
                    phases[key[0]].append(timings)
                    if variant and key[0] == "group-by":
                        variants[variant].append((float(s.get("duration_seconds") or 0.0), timings))
                    in_jobs = sum(j["seconds"] or 0.0 for j in ran)
                    print(
                        f"  Spark jobs of round {r + 1} {key[0]} AUTO: {in_jobs:.2f} job-s (side by side jobs "
                        f"overlap) in a {s.get('duration_seconds')} s refresh: "
                        + ", ".join(
                            f"{j['name'].split(' at ')[0]} {j['seconds'] or 0:.2f}s/{j['tasks']}t"
                            for j in ran
                        )
                    )
                print(
                    f"round {r + 1} {key[0]:12} {key[1]:4}: {s.get('refresh_mode')} "
                    f"{s.get('duration_seconds')} s, {cost.get('bytes_read')} bytes read, "
                    f"{cost.get('bytes_written')} bytes written, {s.get('rows_written')} rows written, "
                    f"{cost.get('jobs')} jobs / {cost.get('stages')} stages / {cost.get('tasks')} tasks, "
                    f"{cost.get('core_seconds')} core-s" + (f"; phases {timings}" if timings else "")
                )
        print()
        print(
            f"source: {describe(spark, src)}; {added:,} rows appended per round ({args.fraction:.2%}); "
            f"{args.rounds} rounds"
        )
        print()
        print("| shape | declared | ran as | wall p50 s | bytes read p50 | incremental / FULL wall | bytes |")
        print("|---|---|---|---:|---:|---:|---:|")
        for shape in args.shapes:
            full = samples[(shape, "FULL")]
            auto = samples[(shape, "AUTO")]
            fw, fb = statistics.median(x[0] for x in full), statistics.median(x[1] for x in full)
            aw, ab = statistics.median(x[0] for x in auto), statistics.median(x[1] for x in auto)
            for mode, rows, w, b in (("FULL", full, fw, fb), ("AUTO", auto, aw, ab)):
                ran = ",".join(sorted({x[2] for x in rows}))
                ratio_w = f"{aw / fw:.1%}" if mode == "AUTO" and fw else ""
                ratio_b = f"{ab / fb:.1%}" if mode == "AUTO" and fb else ""
                print(f"| {shape} | {mode} | {ran} | {w:.2f} | {b:,.0f} | {ratio_w} | {ratio_b} |")
        print()
        print(
            "incremental phases, median s: "
            + "; ".join(
                f"{shape}: "
                + ", ".join(
                    f"{p.removeprefix('incremental_')} {statistics.median(t.get(p, 0.0) for t in phases[shape]):.2f}"
                    for p in PHASES
                )
                for shape in args.shapes
                if phases[shape]
            )
        )
        for name, runs in variants.items():
            if runs:
                print(
                    f"group-by AUTO written {name}: wall p50 {statistics.median(w for w, _ in runs):.2f} s "
                    f"over {len(runs)} rounds ({', '.join(f'{w:.2f}' for w, _ in runs)}); phases "
                    + ", ".join(
                        f"{p.removeprefix('incremental_')} {statistics.median(t.get(p, 0.0) for _, t in runs):.2f}"
                        for p in PHASES
                    )
                )
        if args.write_variants:
            write_variant(list(WRITE_VARIANTS)[0])
        if (
            args.check
        ):  # after the measurements: the AUTO tables equal the FULL ones, refreshed at one snapshot
            for shape in args.shapes:
                auto, full = tables[(shape, "AUTO")], tables[(shape, "FULL")]
                started = time.perf_counter()
                differ = sum(
                    spark.sql(f"SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b}").count()
                    for a, b in ((auto, full), (full, auto))
                )
                print(
                    f"check {shape}: the incremental table and the FULL one differ in {differ} rows "
                    f"(EXCEPT ALL both ways, {time.perf_counter() - started:.0f} s)"
                )
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
