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

Then, in a fresh process per backend (so its memory is the planner's alone), ``services.planning.plan_action``
for (policy, rewrite-files): wall and CPU seconds, the process's peak RSS (and after its imports), and the read
alone (the one query, rows fetched) for the split. Prints a markdown table and the load average.

    .venv/bin/python benchmarks/plan_scale.py [--tables 100000] [--postgres]

``--postgres``: also on the PostgreSQL of ``TABLEMGMT_TEST_POSTGRES_URL`` (default
``postgresql+psycopg2://postgres@127.0.0.1:5432/test``, as the tests; ``bash scripts/services.sh``), in a
schema of its own dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

POLICY = "fleet"
ACTION = "rewrite-files"


def _fill(url: str, n: int, engine_kwargs: dict[str, Any] | None = None) -> dict[str, int]:
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
        bucket = i % 20
        kind = (
            "small"
            if bucket < 4
            else "unmeasured"
            if bucket == 4
            else "stale"
            if bucket == 5
            else "own-thresholds"
            if bucket == 6
            else "compact"
        )
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


def _hwm_kb() -> int:
    """This process's peak resident set (``VmHWM``; ``ru_maxrss`` would carry the parent's over ``exec``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _measure(url: str, engine_kwargs: dict[str, Any]) -> None:
    """The child: import, then time the plan and the read alone; print one JSON line."""
    t0 = time.perf_counter()
    from datetime import timedelta

    from airflow_tablemgmt.services.planning import plan_action
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.planning import PlanningRepository

    store = Store(url, engine_kwargs=engine_kwargs)
    store.processes.now()  # connect and check the schema outside the timing
    imported = time.perf_counter() - t0
    base_rss = _hwm_kb()
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


def _child(url: str, engine_kwargs: dict[str, Any]) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--measure", url, "--engine-kwargs", json.dumps(engine_kwargs)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=100_000)
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--engine-kwargs", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        _measure(args.measure, json.loads(args.engine_kwargs))
        return

    results: list[tuple[str, dict[str, int], float, dict[str, Any]]] = []
    tmp = Path(tempfile.mkdtemp(prefix="plan-bench-"))
    url = f"sqlite:///{tmp / 'tablemgmt.db'}"
    t = time.perf_counter()
    kinds = _fill(url, args.tables)
    results.append(("sqlite", kinds, time.perf_counter() - t, _child(url, {})))
    if args.postgres:
        results.append(_postgres(args.tables))

    load = os.getloadavg()
    print(
        f"\n{args.tables:,} enrolled tables, one policy, action {ACTION} (synthetic store rows and stored health)"
    )
    print(f"mix: {results[0][1]}\n")
    print(
        "| store | tables | plan wall (s) | plan CPU (s) | read alone wall / CPU (s) | peak RSS (MB; after imports) "
        "| pays | measure first | idle | batches of 50 | fill (s, not timed) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, _, fill, r in results:
        c = r["counts"]
        print(
            f"| {name} | {r['rows']:,} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['read_wall_s']:.2f} / "
            f"{r['read_cpu_s']:.2f} | {r['rss_peak_mb']:.0f} ({r['rss_base_mb']:.0f}) | {c['pays']:,} | "
            f"{c['measure']:,} | {c['idle']:,} | {c['batches']:,} | {fill:.1f} |"
        )
    print(f"\nload average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores (at the end)")


def _postgres(n: int) -> tuple[str, dict[str, int], float, dict[str, Any]]:
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
        kinds = _fill(url, n, kwargs)
        with admin.begin() as conn:
            conn.execute(text(f"ANALYZE {schema}.tms_table"))
            conn.execute(text(f"ANALYZE {schema}.tms_table_health"))
        fill = time.perf_counter() - t
        return ("postgresql", kinds, fill, _child(url, kwargs))
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


if __name__ == "__main__":
    main()
