"""FLIP-435 REST refresh -> jobId latency through a real ``airflow api-server``.

Starts an api-server (the simple auth manager, a fresh SQLite metadata DB and SQLite store: the
embedded default; the deployment of ``tests/e2e/test_api_dynamic.py``) on a fresh Airflow home whose
store holds ``--tables`` ACTIVE dynamic tables, parsed into refresh DAGs, logs an admin in, then times
``POST /tablemgmt/v1/dynamic-tables/{id}/refresh`` from the request to the parsed answer:

- **new schedule time** — ``{"isPeriodic": true, "scheduleTime": <a new time>}``: the table is read,
  the DAG permission checked, the PENDING process opened, Airflow's DAG run created with the conf;
- **same schedule time** — the same body again: the existing job is answered, no new run;
- **manual** — ``{"staticPartitions": {"day": ...}}`` (instant = now; calls are spaced ≥ 1 s apart
  so each is a new run).

Each call is a new HTTP connection with a Bearer token, round-robin over the tables. Prints a markdown
table (p50 / p95 / max / mean per case) and the load average; target p95 ≤ 1 s.

Left out: the api-server's start-up and the first (warm-up) calls, logging in, and everything after
the answer — the scheduler picking the run up, the task's start, Spark and the refresh itself.

    .venv/bin/python benchmarks/dt_refresh.py [--calls 50] [--tables 4] [--warmup 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="tms-bench-home-"))

from tests.e2e.test_api_dynamic import CATALOG, DynamicApi, dynamic_api_server  # noqa: E402


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def _timed(api: DynamicApi, table: str, body: dict[str, object]) -> tuple[float, int]:
    started = time.perf_counter()
    r = api.call("POST", f"/dynamic-tables/{table}/refresh", "admin", body)
    elapsed = time.perf_counter() - started
    if r.status != 200:
        raise SystemExit(f"refresh of {table} answered {r.status}: {r.body}")
    return elapsed, int(r.body["jobId"])


def measure(api: DynamicApi, tables: list[str], calls: int, warmup: int) -> dict[str, list[float]]:
    start = datetime(2030, 1, 1, tzinfo=UTC)
    fmt = "%Y-%m-%d %H:%M:%S"
    for i in range(warmup):  # not counted: first imports, first connections to both databases
        _timed(
            api,
            tables[i % len(tables)],
            {"isPeriodic": True, "scheduleTime": (start - timedelta(days=i + 1)).strftime(fmt)},
        )
    results: dict[str, list[float]] = {"new schedule time": [], "same schedule time": [], "manual": []}
    jobs: dict[tuple[str, str], int] = {}
    for i in range(calls):
        table = tables[i % len(tables)]
        when = (start + timedelta(days=i)).strftime(fmt)
        elapsed, job = _timed(api, table, {"isPeriodic": True, "scheduleTime": when})
        results["new schedule time"].append(elapsed)
        jobs[(table, when)] = job
    for (table, when), job in list(jobs.items()):
        elapsed, again = _timed(api, table, {"isPeriodic": True, "scheduleTime": when})
        if again != job:
            raise SystemExit(f"the same schedule time answered job {again}, not {job}")
        results["same schedule time"].append(elapsed)
    manual_calls = max(1, calls // 5)
    for i in range(manual_calls):
        table = tables[i % len(tables)]
        if i >= len(tables):
            time.sleep(1.05)  # instant = now to the second: one new run per table per second
        elapsed, _ = _timed(api, table, {"staticPartitions": {"day": f"2030-02-{1 + i % 28:02d}"}})
        results["manual"].append(elapsed)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=50, help="new-schedule-time calls (and as many repeats)")
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    tables = [f"{CATALOG}.agg.t{i}" for i in range(1, args.tables + 1)]
    with tempfile.TemporaryDirectory(prefix="tms-dt-refresh-") as tmp:
        t0 = time.monotonic()
        api = dynamic_api_server(Path(tmp) / "airflow", tables)
        print(f"api-server up with {len(tables)} dynamic tables in {time.monotonic() - t0:.0f} s")
        try:
            results = measure(api, tables, args.calls, args.warmup)
        finally:
            api.dep.stop()
    load = os.getloadavg()
    print(
        f"\nREST refresh -> jobId through a real api-server (embedded default); load average {load[0]:.1f} / {load[1]:.1f} (1 / 5 min)\n"
    )
    print("| case | calls | p50 (ms) | p95 (ms) | max (ms) | mean (ms) |")
    print("|---|---:|---:|---:|---:|---:|")
    for case, values in results.items():
        ms = [v * 1000 for v in values]
        print(
            f"| {case} | {len(ms)} | {_percentile(ms, 0.5):.0f} | {_percentile(ms, 0.95):.0f} | "
            f"{max(ms):.0f} | {statistics.fmean(ms):.0f} |"
        )
    p95 = _percentile([v for vs in results.values() for v in vs], 0.95)
    print(
        f"\ntarget p95 <= 1000 ms: {'met' if p95 <= 1.0 else 'NOT met'} (all calls: p95 {p95 * 1000:.0f} ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
