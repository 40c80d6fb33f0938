"""The planning step at fleet scale (issue 40, ADR 0004): one (policy, action) planned over N enrolled tables
from their stored health, without a JVM and without a catalog call.

**Synthetic metadata**: the ``tms_table`` rows (enrolled by one policy, ``managed_by`` policy) and their
``tms_table_health`` rows are written directly into a fresh store (bulk inserts, not discovery and not a
health read); the health figures are ``FileStats`` documents as the health read stores them. The mix
(``rewrite-files``, an Iceberg table's defaults unless said):

* 20 % small files (60 in one partition: rewrite-files pays), 65 % compact (it does not pay);
* 5 % never measured, 5 % measured 2 days ago (older than the 1-day bound): to be measured first;
* 5 % with their own thresholds (``min-small-files: 100``, as a more specific policy gives them) over
  small-file figures: they do not pay.

Of the tables to be measured first, the ones the planning task measures in its run (the first
``--budget``, default ``[tablemgmt] plan_measure_budget``'s 200, in the plan's order) are **real** Iceberg
tables, written by pyiceberg in a SQL catalog on SQLite (``lake``, the store's catalog row), 6 small data files
each: the planning task reads their metadata as it would in a deployment (no JVM).

Then, in a fresh process per backend (so its memory is the planner's alone):

* **the planning task** — ``services.plan_runs.plan_run`` for (policy, rewrite-files), exactly what the DAG's
  ``plan`` task calls: the plan from stored health (``services.planning.plan_action``: the one read and the
  gate's ``decide`` per table), the first ``--budget`` tables to measure measured from their metadata and
  stored (``services.health.table_health``), those planned again (a second read of the policy's rows),
  and the batches cut at ``[core] max_map_length``; plus its XCom summary (``to_dict``);
* **the plan alone** (``plan_action``) and **the read alone** (the one query, rows fetched), for the split.

Each: wall and CPU seconds; the process's peak RSS (and after its imports). Prints a markdown table and
``uptime`` before and after.

    .venv/bin/python benchmarks/plan_scale.py [--tables 100000] [--postgres] [--budget 200]

Left out: Airflow around the task (its start, the XCom push of the batches and the summary, the scheduler's
expansion of the mapped task); the tables' metadata beyond the measured ones (synthetic store rows); object
stores and remote catalogs (the measured tables are on local disk, a SQLite SQL catalog); other policies'
rows in the store.

``--postgres``: also on the PostgreSQL of ``TABLEMGMT_TEST_POSTGRES_URL`` (default
``postgresql+psycopg2://postgres@127.0.0.1:5432/test``, as the tests; ``bash scripts/services.sh``), in a
schema of its own dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

POLICY = "fleet"
ACTION = "rewrite-files"


def _fill(
    url: str, n: int, engine_kwargs: dict[str, Any] | None = None, catalog: Any = None
) -> dict[str, int]:
    """Write ``n`` enrolled tables and their stored health directly; returns the mix's counts."""
    from dataclasses import asdict, replace
    from datetime import timedelta

    from airflow_tablemgmt.core.tables import TableSpec
    from airflow_tablemgmt.metadata.files import FileStats
    from airflow_tablemgmt.metadata.health import score
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.clock import utcnow
    from airflow_tablemgmt.store.models import TableRow
    from airflow_tablemgmt.store.table_health import HealthRecord, TableHealthRepository

    mib = 1024 * 1024
    small = FileStats(
        snapshot_id=1,
        snapshots=3,
        data_files=60,
        small_data_files=60,
        small_file_threshold_bytes=384 * mib,
        delete_files=0,
        data_bytes=60 * mib,
        delete_bytes=0,
        records=6000,
        compacted_data_files=1,
        partitions=1,
        removable_data_files=59,
        thresholds={"rewrite-files": {"min-small-files": 5, "small-file-fraction": 0.75}},
    )
    compact = replace(
        small, data_files=4, small_data_files=4, compacted_data_files=4, partitions=4, removable_data_files=0
    )
    store = Store(url, engine_kwargs=engine_kwargs or {})
    store._ensure_schema()
    if catalog is not None:
        from airflow_tablemgmt.core.tables import Owner

        store.catalogs.upsert(catalog, Owner.STORE)
    now = utcnow()
    kinds = {"small": 0, "compact": 0, "unmeasured": 0, "stale": 0, "own-thresholds": 0}
    plain = {"rewrite-files": {}}
    strict = {"rewrite-files": {"thresholds": {"min-small-files": 100}}}
    templates = {
        False: TableSpec(catalog="lake", namespace="sales", name="t", actions=plain).model_dump(
            mode="json", by_alias=True
        ),
        True: TableSpec(catalog="lake", namespace="sales", name="t", actions=strict).model_dump(
            mode="json", by_alias=True
        ),
    }
    records = {
        "small": (small, score(small)),
        "compact": (compact, score(compact)),
    }
    table = TableRow.__table__
    rows: list[dict[str, Any]] = []
    health: dict[str, HealthRecord] = {}
    for i in range(n):
        name = f"t{i:06d}"
        table_id = f"lake.sales.{name}"
        kind = _kind(i)
        kinds[kind] += 1
        own = kind == "own-thresholds"
        spec = dict(templates[own], name=name)
        rows.append(
            {
                "table_id": table_id,
                "catalog": "lake",
                "namespace": "sales",
                "name": name,
                "format": "iceberg",
                "owner_team": "data",
                "managed_by": "policy",
                "queue": spec["queue"],
                "priority": spec["priority"],
                "actions": spec["actions"],
                "spec": spec,
                "policy": POLICY,
                "created_at": now,
                "updated_at": now,
            }
        )
        if kind == "unmeasured":
            continue
        stats, scored = records["compact" if kind == "compact" else "small"]
        at = now - timedelta(days=2) if kind == "stale" else now - timedelta(minutes=10)
        health[table_id] = HealthRecord(
            scored.score,
            tuple((f.kind, f.action) for f in scored.findings),
            stats.data_files,
            stats.data_bytes,
            stats.removable_data_files or 0,
            asdict(stats),
            at,
        )
    with store.engine.begin() as conn:
        for i in range(0, len(rows), 5000):
            conn.execute(table.insert(), rows[i : i + 5000])
    TableHealthRepository.of(store).put_many(health)
    store.dispose()
    return kinds


def _kind(i: int) -> str:
    bucket = i % 20
    return {4: "unmeasured", 5: "stale", 6: "own-thresholds"}.get(
        bucket, "small" if bucket < 4 else "compact"
    )


def real_tables(work: Path, n: int, budget: int) -> Any:
    """The first ``budget`` tables to be measured (unmeasured or stale, in table-id order, the plan's order)
    written as real Iceberg tables (pyiceberg, a SQL catalog on SQLite, 6 appends each: 6 small files);
    returns the store's catalog for them."""
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType

    db, warehouse = work / "catalog.db", work / "warehouse"
    warehouse.mkdir(exist_ok=True)
    client = SqlCatalog("lake", uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    client.create_namespace("sales")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
    names = [f"t{i:06d}" for i in range(n) if _kind(i) in ("unmeasured", "stale")][:budget]
    for name in names:
        table = client.create_table(f"sales.{name}", schema=schema)
        for k in range(6):
            table.append(pa.table({"id": list(range(k * 10, k * 10 + 10)), "v": ["x"] * 10}, schema=schema))
    client.engine.dispose()
    return CatalogSpec(
        name="lake",
        type=CatalogType.JDBC,
        warehouse=f"file://{warehouse}",
        properties={"uri": f"jdbc:sqlite:{db}"},
    )


def _hwm_kb() -> int:
    """This process's peak resident set (``VmHWM``; ``ru_maxrss`` would carry the parent's over ``exec``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _measure(url: str, engine_kwargs: dict[str, Any], budget: int) -> None:
    """The child: import, then time the planning task, the plan alone and the read alone; print one JSON line."""
    t0 = time.perf_counter()
    from datetime import timedelta

    import airflow_tablemgmt.services.health  # noqa: F401 - the measuring path's imports, outside the timing
    from airflow_tablemgmt.services import plan_runs
    from airflow_tablemgmt.services.plan_runs import plan_run
    from airflow_tablemgmt.services.planning import plan_action, plan_settings
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.planning import PlanningRepository

    store = Store(url, engine_kwargs=engine_kwargs)
    store.processes.now()  # connect and check the schema outside the timing
    # Airflow's configuration, which a task has loaded before it runs: the settings read once outside the timing
    plan_runs.measure_budget(), plan_runs.max_map_length(), plan_settings()
    imported = time.perf_counter() - t0
    base_rss = _hwm_kb()
    w, c = time.perf_counter(), time.process_time()
    spent = [0.0, 0.0]  # the measuring calls' wall and CPU, inside the task's figure

    def measure(store: Any, table_id: str) -> None:
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            plan_runs._measure(store, table_id)  # the planning task's own measure (services.health)
        finally:
            spent[0] += time.perf_counter() - w0
            spent[1] += time.process_time() - c0

    run = plan_run(store, POLICY, ACTION, budget=budget, measure=measure)
    summary = run.to_dict()
    task_wall, task_cpu = time.perf_counter() - w, time.process_time() - c
    task_rss = _hwm_kb()
    task_counts = summary["counts"]
    unmeasured = dict(list(run.unmeasured.items())[:3])
    del run, summary
    w, c = time.perf_counter(), time.process_time()
    p = plan_action(store, POLICY, ACTION, batch_size=50, max_age=timedelta(days=1))
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    peak_rss = _hwm_kb()
    counts = p.counts()
    del p
    w, c = time.perf_counter(), time.process_time()
    read = sum(1 for _ in PlanningRepository.of(store).rows(POLICY))
    read_wall, read_cpu = time.perf_counter() - w, time.process_time() - c
    print(
        json.dumps(
            {
                "imported_s": imported,
                "task_wall_s": task_wall,
                "task_cpu_s": task_cpu,
                "task_rss_mb": task_rss / 1024,
                "measure_wall_s": spent[0],
                "measure_cpu_s": spent[1],
                "task_counts": task_counts,
                "unmeasured": unmeasured,
                "wall_s": wall,
                "cpu_s": cpu,
                "read_wall_s": read_wall,
                "read_cpu_s": read_cpu,
                "rows": read,
                "rss_base_mb": base_rss / 1024,
                "rss_peak_mb": peak_rss / 1024,
                "counts": counts,
            }
        )
    )


def _child(url: str, engine_kwargs: dict[str, Any], budget: int, home: Path) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--measure",
        url,
        "--engine-kwargs",
        json.dumps(engine_kwargs),
        "--budget",
        str(budget),
    ]
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        raise SystemExit(f"the measuring process failed:\n{res.stderr[-3000:]}")
    out = res.stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=100_000)
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument(
        "--budget",
        type=int,
        default=200,
        help="tables the planning task measures ([tablemgmt] plan_measure_budget)",
    )
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--engine-kwargs", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        _measure(args.measure, json.loads(args.engine_kwargs), args.budget)
        return

    started = _uptime()
    results: list[tuple[str, dict[str, int], float, dict[str, Any]]] = []
    tmp = Path(tempfile.mkdtemp(prefix="plan-bench-"))
    try:
        t = time.perf_counter()
        catalog = real_tables(tmp, args.tables, args.budget)
        tables_s = time.perf_counter() - t
        url = f"sqlite:///{tmp / 'tablemgmt.db'}"
        t = time.perf_counter()
        kinds = _fill(url, args.tables, catalog=catalog)
        results.append(("sqlite", kinds, time.perf_counter() - t, _child(url, {}, args.budget, tmp)))
        if args.postgres:
            results.append(_postgres(args.tables, catalog, args.budget, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(
        f"\n{args.tables:,} enrolled tables, one policy, action {ACTION} (synthetic store rows and stored health; "
        f"the {args.budget} measured by the planning task real pyiceberg tables, written in {tables_s:.0f} s)"
    )
    print(f"mix: {results[0][1]}\n")
    print(
        "| store | tables | planning task wall / CPU (s) | of which measuring wall / CPU (s) "
        "| its peak RSS (MB; after imports) | measured (real reads) "
        "| pays | measure first | idle | batches of 50 | plan alone wall / CPU (s) | read alone wall / CPU (s) "
        "| fill (s, not timed) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, _, fill, r in results:
        c = r["task_counts"]
        print(
            f"| {name} | {r['rows']:,} | {r['task_wall_s']:.2f} / {r['task_cpu_s']:.2f} "
            f"| {r['measure_wall_s']:.2f} / {r['measure_cpu_s']:.2f} "
            f"| {r['task_rss_mb']:.0f} ({r['rss_base_mb']:.0f}) | {c['measured']:,} | {c['pays']:,} "
            f"| {c['measure']:,} | {c['idle']:,} | {c['batches']:,} | {r['wall_s']:.2f} / {r['cpu_s']:.2f} "
            f"| {r['read_wall_s']:.2f} / {r['read_cpu_s']:.2f} | {fill:.1f} |"
        )
        if r["unmeasured"]:
            print(f"\n{name}: tables the planning task could not measure (first 3): {r['unmeasured']}")
    target = max(r["task_wall_s"] for *_, r in results)
    print(
        f"\nissue 40: 100,000 tables' health decided in <= 5 minutes on 2 cores without a JVM: "
        f"{'met' if target <= 300 else 'NOT met'} (slowest planning task {target:.1f} s wall)"
    )
    print(f"\nuptime at the start: {started}\nuptime at the end:   {_uptime()} ({os.cpu_count()} CPUs)")


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _postgres(
    n: int, catalog: Any, budget: int, home: Path
) -> tuple[str, dict[str, int], float, dict[str, Any]]:
    """The same on PostgreSQL, in a schema of its own (dropped at the end)."""
    from sqlalchemy import create_engine, text

    url = os.environ.get("TABLEMGMT_TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")
    schema = f"plan_bench_{os.getpid()}"
    admin = create_engine(url)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    kwargs = {"connect_args": {"options": f"-csearch_path={schema}"}}
    try:
        t = time.perf_counter()
        kinds = _fill(url, n, kwargs, catalog=catalog)
        with admin.begin() as conn:
            conn.execute(text(f"ANALYZE {schema}.tms_table"))
            conn.execute(text(f"ANALYZE {schema}.tms_table_health"))
        fill = time.perf_counter() - t
        return ("postgresql", kinds, fill, _child(url, kwargs, budget, home))
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


if __name__ == "__main__":
    main()
