"""Latency of the page's list and overview with N tables in the store, measured in-process.

    .venv/bin/python benchmarks/ui_latency.py [--tables 10000] [--processes-per-table 4] [--policies 4] [--repeat 40]

Builds a SQLite store in a temporary directory with N tables (two actions each, every fifth one
dynamic-free but with a disabled action) and ``--processes-per-table`` finished processes per table
over the last 10 days (summaries shaped like a real rewrite's and expiry's, each job with its cost; every
third successful rewrite a run the health gate skipped, with its summary), plus a few PENDING ones;
``--policies`` policies manage four tables in five (enrolled over the last 10 days, each change recorded),
so the overview's fleet section reads a fleet's worth of rows;
fills the health cache and the tables' stored measurements with one figure set per table (as a store
whose tables have all been measured holds them); then calls ``GET /tablemgmt/v1/tables`` and ``GET /tablemgmt/v1/overview`` through
FastAPI's TestClient on the real API app (Airflow's user check replaced by a fixed user) and prints
the median and p95 of each request in a markdown table: wall-clock time, and the process's CPU time
during the request (what the request costs, whatever else the machine is doing). The overview reuses its process aggregates
for ``FIGURES_SECONDS`` (10 s), then serves them stale while a thread recomputes them (the "stale" row);
the "cold" row drops them before every request (the first request of an api-server process), which then
reads them from the store's rollup (``store/process_rollup.py``), and drops the fleet's figures, which a thread
computes while the request waits at most ``services.fleet.WAIT_SECONDS``.

Left out: the network and Airflow's JWT check (the same for every route), Iceberg metadata reads
(the list and the overview never read it; health comes from the cache), and PostgreSQL (SQLite only).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def seed(store: Any, n: int, per_table: int, policies: int = 0) -> None:
    from sqlalchemy import insert

    from airflow_tablemgmt.core.tables import CatalogSpec, Owner, TableSpec
    from airflow_tablemgmt.store.models import ProcessRow

    for cat in ("lake", "sea"):
        store.catalogs.upsert(
            CatalogSpec(name=cat, type="hadoop", warehouse=f"file:///tmp/{cat}"), Owner.CODE
        )
    specs = [
        TableSpec(
            catalog="lake" if i % 3 else "sea",
            namespace=f"ns{i % 40}",
            name=f"t{i:05d}",
            owner=f"team_{i % 17}",
            actions={"rewrite-files": {}, "expire-snapshots": {"enabled": i % 5 != 0}},
        )
        for i in range(n)
    ]
    store.tables.upsert_many(specs, Owner.CODE)
    now = datetime.now(UTC)
    rng = random.Random(7)
    if policies:
        seed_policies(store, [s.id for s in specs], policies, now, rng)
    rows = []
    for i, spec in enumerate(specs):
        for k in range(per_table):
            action = "rewrite-files" if k % 2 == 0 else "expire-snapshots"
            instant = now - timedelta(days=10) + timedelta(minutes=(k * 10 * 24 * 60) // per_table + i % 600)
            status = rng.choice(["SUCCESS"] * 8 + ["FAILED", "KILLED"])
            before = rng.randint(10, 600)
            skipped = action == "rewrite-files" and status == "SUCCESS" and rng.random() < 1 / 3
            summary = (
                {
                    "before": {"data_files": before, "data_bytes": before * 40_000},
                    "after": {"data_files": 4, "data_bytes": 4 * 39_000},
                    "duration_seconds": 8.0,
                    "rewritten_bytes_count": before * 40_000,
                }
                if action == "rewrite-files"
                else {"deleted_files": {"data": 3, "manifests": 2}, "duration_seconds": 4.0}
            )
            if skipped:  # the health gate's summary (metadata.health.Decision.summary): no job, no cost
                summary = {
                    "skipped": True,
                    "declined": True,
                    "gate": "health",
                    "reason": f"does not pay now: {before % 5} small files, fewer than min-input-files 5",
                    "health": {"score": 96, "action": action, "figures": {"small_files": before % 5}},
                }
            measured = status == "SUCCESS" and not skipped  # a job ran: its cost (a skip has none)
            cost = {
                "core_seconds": 60.0 + before if measured else None,
                "cpu_seconds": 50.0 if measured else None,
                "bytes_read": before * 40_000 if measured else None,
                "bytes_written": 4 * 39_000 if measured else None,
            }
            rows.append(
                {
                    "table_id": spec.id,
                    "action": action,
                    "instant": instant,
                    "status": status,
                    "attempt": 1,
                    "engine": "spark",
                    "parameters": {},
                    "summary": summary if status == "SUCCESS" else None,
                    "failure_reason": None if status == "SUCCESS" else "boom",
                    "created_at": instant,
                    "started_at": instant + timedelta(seconds=30),
                    "finished_at": instant + timedelta(seconds=90),
                    **cost,
                }
            )
        if i % 500 == 0:
            rows.append(
                {
                    "table_id": spec.id,
                    "action": "rewrite-files",
                    "instant": now,
                    "status": "PENDING",
                    "attempt": 1,
                    "engine": "spark",
                    "parameters": {},
                    "summary": None,
                    "failure_reason": None,
                    "created_at": now,
                    "started_at": None,
                    "finished_at": None,
                    **dict.fromkeys(cost),
                }
            )
    from airflow_tablemgmt.store import process_rollup

    with store.engine.begin() as conn:
        for i in range(0, len(rows), 5000):
            conn.execute(insert(ProcessRow.__table__), rows[i : i + 5000])
        process_rollup.backfill(conn)  # what the store keeps as processes change, for the bulk insert


def seed_policies(store: Any, ids: list[str], policies: int, now: datetime, rng: random.Random) -> None:
    """``policies`` policies; four tables in five enrolled by one of them (``tms_table.policy``), each
    enrolment recorded at a time of the last 10 days, one in ten of those tables retired since."""
    from sqlalchemy import insert, update

    from airflow_tablemgmt.core.policies import parse_policy
    from airflow_tablemgmt.core.tables import Owner
    from airflow_tablemgmt.store.models import EnrolmentRow, TableRow
    from airflow_tablemgmt.store.policies import PolicyRepository

    repo = PolicyRepository.of(store)
    t = TableRow.__table__
    records = []
    for k in range(policies):
        name = f"fleet-{k}"
        repo.upsert(parse_policy({"name": name, "match": {"namespace": f"ns{k}*"}}), Owner.STORE)
        mine = [table for i, table in enumerate(ids) if i % 5 != 4 and i % 5 % policies == k]
        with store.engine.begin() as conn:
            for i in range(0, len(mine), 500):
                conn.execute(
                    update(t)
                    .where(t.c.table_id.in_(mine[i : i + 500]))
                    .values(managed_by="policy", policy=name)
                )
        for table in mine:
            at = now - timedelta(minutes=rng.randint(0, 10 * 24 * 60))
            records.append(
                {"at": at, "policy": name, "table_id": table, "change": "enrolled", "reason": "matches"}
            )
            if rng.random() < 0.1:
                records.append(
                    {
                        "at": at + timedelta(hours=1),
                        "policy": name,
                        "table_id": table,
                        "change": "retired",
                        "reason": "dropped",
                    }
                )
    with store.engine.begin() as conn:
        for i in range(0, len(records), 5000):
            conn.execute(insert(EnrolmentRow.__table__), records[i : i + 5000])


def fill_health(store: Any, n: int) -> None:
    from airflow_tablemgmt.metadata.files import FileStats
    from airflow_tablemgmt.services import health

    rng = random.Random(11)
    reads = {}
    for i in range(n):
        files = rng.choice([4, 4, 4, 40, 528])
        stats = FileStats(
            1,
            rng.randint(1, 50),
            files,
            files,
            384 << 20,
            rng.choice([0, 0, 0, 6]),
            files * 40_000,
            0,
            files * 100,
            compacted_data_files=4,
            partitions=4,
            deleted_rows=rng.choice([0, 30]),
            manifests=rng.choice([3, 40]),
            manifest_bytes=40_000,
        )
        table_id = f"{'lake' if i % 3 else 'sea'}.ns{i % 40}.t{i:05d}"
        reads[table_id] = stats
    health.remember_many(store, reads)  # the cache entries and the tables' rows in tms_table_health


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(round(0.95 * len(ordered))) - 1)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=10_000)
    ap.add_argument("--processes-per-table", type=int, default=4)
    ap.add_argument("--policies", type=int, default=4, help="policies managing 4 tables in 5 (0: none)")
    ap.add_argument("--repeat", type=int, default=40)
    args = ap.parse_args()

    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    from airflow_tablemgmt.api.app import create_api_app
    from airflow_tablemgmt.api.deps import get_store
    from airflow_tablemgmt.services import health
    from airflow_tablemgmt.store import Store

    health.CACHE_SECONDS = 10**9  # the benchmark's cache never goes stale
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'tablemgmt.db'}")
        t0 = time.perf_counter()
        seed(store, args.tables, args.processes_per_table, args.policies)
        fill_health(store, args.tables)
        seeded = time.perf_counter() - t0
        app = create_api_app()
        app.dependency_overrides[get_store] = lambda: store
        app.dependency_overrides[get_user] = lambda: object()
        client = TestClient(app)
        cases = [
            ("list, first page", "/tables?limit=25"),
            ("list, page 200", "/tables?limit=25&offset=5000"),
            ("list, search owner", "/tables?limit=25&q=team_3"),
            (
                "list, catalog+namespace+action",
                "/tables?limit=25&catalog=lake&namespace=ns7&action=expire-snapshots",
            ),
            ("list, last status FAILED", "/tables?limit=25&status=FAILED"),
            ("list, sort by health", "/tables?limit=25&sort=health"),
            ("list, needs attention", "/tables?limit=25&needs_attention=true"),
            ("overview", "/overview"),
            ("overview, figures stale (served; recomputed on a thread)", "/overview#stale"),
            ("overview, cold (aggregates recomputed in the request)", "/overview#cold"),
        ]
        print(
            f"{args.tables:,} tables, {args.tables * args.processes_per_table:,} processes "
            f"and {args.policies} policies (seeded in {seeded:.1f} s); {platform.python_version()}, {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.1f}; SQLite; median and p95 of {args.repeat} requests\n"
        )
        print("| request | total | median (ms) | p95 (ms) | CPU median (ms) | CPU p95 (ms) |")
        print("|---|---:|---:|---:|---:|---:|")
        from airflow_tablemgmt.services import fleet, overview

        for name, path in cases:
            cold, stale = path.endswith("#cold"), path.endswith("#stale")
            path = path.removesuffix("#cold").removesuffix("#stale")
            r = client.get(path)
            assert r.status_code == 200, r.text
            body = r.json()
            times, cpu = [], []
            for _ in range(args.repeat):
                if cold:  # and the fleet's: computed on a thread, the request waits at most WAIT_SECONDS
                    for running in list(fleet._RUNNING.values()):  # the last request's, as a new api-server
                        running.join()
                    overview._FIGURES.clear()
                    fleet._CACHE.clear()
                if stale:  # older than FIGURES_SECONDS: the page gets them and a thread recomputes them
                    for key, (at, figures) in list(overview._FIGURES.items()):
                        overview._FIGURES[key] = (at - overview.FIGURES_SECONDS - 1, figures)
                t, c = time.perf_counter(), time.process_time()
                assert client.get(path).status_code == 200
                times.append((time.perf_counter() - t) * 1000)
                cpu.append((time.process_time() - c) * 1000)
            total = body.get("total", body.get("tables"))
            print(
                f"| {name} | {total:,} | {statistics.median(times):.0f} | {_p95(times):.0f} "
                f"| {statistics.median(cpu):.0f} | {_p95(cpu):.0f} |"
            )
        store.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
