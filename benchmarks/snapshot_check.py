"""Per-table cost of "does this table have a new snapshot?": pyiceberg (no JVM) vs a Spark session.

Creates ``--tables`` small Iceberg tables (``--commits`` commits each) in a temporary hadoop warehouse
with an in-process Spark session (``scripts/demo_table.py``'s ``spark_session()``), then measures, on the
same tables in the same run:

* pyiceberg, warm — ``SnapshotReader.current_snapshot_id`` with the pointer cached: reads
  ``version-hint.text`` (plus the read-ahead stat) and compares; what a long-lived trigger pays per poll;
* pyiceberg, cold — the same call with nothing cached: pointer read + ``StaticTable.from_metadata``;
  what a check pays right after a commit, or in a fresh process;
* pyiceberg, pointer only — ``metadata_pointer``, the cheap part on its own;
* Spark SQL — ``SELECT snapshot_id FROM <t>.snapshots ORDER BY committed_at DESC LIMIT 1`` in the
  already running session (catalog cache off, as our jobs run), after a warm-up round.

Prints a markdown table: mean / p50 / p95 ms per table, and how many times faster than Spark.

    .venv/bin/python benchmarks/snapshot_check.py [--tables 50] [--commits 3]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CATALOG = "bench"
NAMESPACE = "db"


def load_demo_table() -> ModuleType:
    """``scripts/demo_table.py`` as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("demo_table", ROOT / "scripts" / "demo_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["demo_table"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def start_spark(warehouse: str) -> tuple[Any, float]:
    """The demo's in-process session (local[2], hadoop catalog ``bench``) and its start-up seconds."""
    t0 = time.perf_counter()
    spark = load_demo_table().spark_session(warehouse, CATALOG)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS `{CATALOG}`.`{NAMESPACE}`")
    return spark, time.perf_counter() - t0


def create_tables(spark: Any, count: int, commits: int = 3, prefix: str = "t", threads: int = 4) -> list[str]:
    """``count`` tables ``bench.db.<prefix>_<i>`` with ``commits`` small appends each.

    Spark runs jobs from several threads at once; commits to different hadoop tables are independent.
    """

    def create(i: int) -> str:
        name = f"{CATALOG}.{NAMESPACE}.{prefix}_{i}"
        quoted = ".".join(f"`{p}`" for p in name.split("."))
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS {quoted} (id BIGINT, kind STRING, amount DOUBLE) USING iceberg"
        )
        for c in range(commits):
            spark.sql(f"INSERT INTO {quoted} VALUES ({c}, 'k{c}', {c}.5), ({c + 1000}, 'k', 1.0)")
        return name

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(create, range(count)))


@dataclass
class Timing:
    """Wall-clock samples, and the calling thread's CPU time for the same calls (robust to a busy
    machine; meaningless for Spark, whose work happens in the JVM)."""

    label: str
    samples_ms: list[float]
    cpu_ms: list[float] | None = None

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples_ms)

    @property
    def p50(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def p95(self) -> float:
        return percentile(self.samples_ms, 0.95)

    @property
    def cpu_p95(self) -> str:
        return "n/a" if self.cpu_ms is None else f"{percentile(self.cpu_ms, 0.95):.3f}"


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def time_calls(calls: Sequence[Callable[[], object]], cpu: list[float] | None = None) -> list[float]:
    """Wall ms per call; the thread CPU ms of each call go to ``cpu`` when given."""
    out = []
    for call in calls:
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        call()
        out.append((time.perf_counter_ns() - t0) / 1e6)
        if cpu is not None:
            cpu.append((time.thread_time_ns() - c0) / 1e6)
    return out


def markdown(rows: Sequence[Timing], baseline: Timing) -> str:
    lines = [
        "| check (per table) | mean ms | p50 ms | p95 ms | CPU p95 ms | samples | Spark ÷ this (mean) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.label} | {r.mean:.3f} | {r.p50:.3f} | {r.p95:.3f} | {r.cpu_p95} | {len(r.samples_ms)} | "
            f"{baseline.mean / r.mean:,.0f}× |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tables", type=int, default=50, help="tables to create and check (default 50)")
    p.add_argument("--commits", type=int, default=3, help="commits (snapshots) per table (default 3)")
    p.add_argument(
        "--rounds", type=int, default=20, help="warm pyiceberg rounds over all tables (default 20)"
    )
    p.add_argument("--spark-rounds", type=int, default=2, help="timed Spark rounds after warm-up (default 2)")
    args = p.parse_args(argv)

    from airflow_tablemgmt.core.identifiers import TableIdentifier
    from airflow_tablemgmt.core.tables import CatalogSpec
    from airflow_tablemgmt.metadata.iceberg import SnapshotReader

    with tempfile.TemporaryDirectory(prefix="tms-bench-") as warehouse:
        spark, startup = start_spark(warehouse)
        t0 = time.perf_counter()
        names = create_tables(spark, args.tables, args.commits)
        print(
            f"created {len(names)} tables x {args.commits} commits in {time.perf_counter() - t0:.1f}s "
            f"(Spark session start {startup:.1f}s)",
            file=sys.stderr,
        )
        tables = [TableIdentifier.parse(n) for n in names]
        catalog = CatalogSpec(name=CATALOG, warehouse=warehouse)

        # Spark: the query a Spark-based gate would run, in a warm session.
        def spark_check(name: str) -> int:
            row = spark.sql(
                f"SELECT snapshot_id FROM {name}.snapshots ORDER BY committed_at DESC LIMIT 1"
            ).first()
            return int(row.snapshot_id)

        expected = {n: spark_check(n) for n in names}  # also the warm-up round
        spark_ms: list[float] = []
        for _ in range(args.spark_rounds):
            spark_ms += time_calls([partial(spark_check, n) for n in names])

        # pyiceberg, cold: a new reader per check, so every call parses the metadata file.
        def cold_check(table: TableIdentifier) -> int | None:
            return SnapshotReader(catalog).current_snapshot_id(table)

        # One untimed cold check: pyiceberg's and pyarrow's imports and first FileIO are not per-check costs.
        SnapshotReader(catalog).current_snapshot_id(tables[0])
        cold_ms: list[float] = []
        cold_cpu: list[float] = []
        for _ in range(3):
            cold_ms += time_calls([partial(cold_check, t) for t in tables], cold_cpu)

        reader = SnapshotReader(catalog)
        got = {str(t): reader.current_snapshot_id(t) for t in tables}  # warm-up: one load per table
        mismatches = [n for n in names if got[n] != expected[n]]
        warm_ms: list[float] = []
        pointer_ms: list[float] = []
        warm_cpu: list[float] = []
        pointer_cpu: list[float] = []
        for _ in range(args.rounds):
            warm_ms += time_calls([partial(reader.current_snapshot_id, t) for t in tables], warm_cpu)
            pointer_ms += time_calls([partial(reader.metadata_pointer, t) for t in tables], pointer_cpu)
        assert reader.metadata_loads == len(tables), "warm checks must not reload metadata"
        spark.stop()

    spark_t = Timing("Spark SQL `<t>.snapshots` query (warm session)", spark_ms)
    rows = [
        Timing("pyiceberg, warm (pointer compare, cached)", warm_ms, warm_cpu),
        Timing("pyiceberg, pointer read only (`version-hint.text`)", pointer_ms, pointer_cpu),
        Timing("pyiceberg, cold (pointer + `StaticTable.from_metadata`)", cold_ms, cold_cpu),
        spark_t,
    ]
    print(
        f"\n{args.tables} tables, {args.commits} snapshots each, hadoop catalog on local disk; "
        f"load avg {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n"
    )
    print(markdown(rows, spark_t))
    print(f"\nSpark session start-up (once per process): {startup * 1000:,.0f} ms")
    cold = rows[2]
    verdict = "met" if cold.mean <= 2.0 else "NOT met"
    print(
        f"Target <= 2 ms per table with pyiceberg: {verdict} (cold: mean {cold.mean:.3f} ms, "
        f"p95 {cold.p95:.3f} ms wall, p95 {cold.cpu_p95} ms CPU)"
    )
    print(f"Snapshot ids equal to Spark's: {len(names) - len(mismatches)}/{len(names)}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
