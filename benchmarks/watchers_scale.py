"""The triggerer-side cost of watching many tables: CPU and memory of N snapshot watchers, and commit ->
event latency, with the shared per-catalog poll (today's default) beside one poll loop per table (before).

Each watcher is what ``dag_factory.assets.table_asset`` builds for a table with the four snapshot-driven
actions (``TableSnapshotTrigger`` with ``actions=``, ``data_changes_only``), run the way Airflow's triggerer
runs a trigger (one asyncio task per trigger iterating ``run()``, with greenback's portal as
``TriggerRunner.run_trigger`` sets up), in one process per mode, without Airflow's triggerer around it and
without an asset state store (memory only). Tables are synthetic hadoop tables on local disk (one metadata
JSON per version and ``version-hint.text``, moved by a rename the way Iceberg's HadoopTableOperations
commits; what a watcher reads), not Spark-written ones.

Modes (``--modes``, ``<mode>:<poll seconds>``):

* ``shared:<s>``: the watchers as shipped (``triggers/change_poller.py``): one check of every table per
  tick (one ``stat`` each), a full read only when a table's check moves.
* ``per-table:<s>``: each watcher sleeps its poll and reads its table itself, every poll (the loop before
  the shared poll; reproduced by replacing the poller with a plain sleep).

Per mode it prints: time until every watcher has read its table once, process CPU (user+system, % of one
core) and full reads per second over ``--window`` idle seconds, RSS, and the latency from a commit on each of
``--sample`` tables (at random phases of the poll) to the watcher's event, p50 / p95 / max. Left out:
Airflow's own triggerer loop over its triggers, its supervisor (events, state-store calls, logs), the
scheduler; ``benchmarks/event_latency.py`` measures commit -> run start through a real deployment.

    .venv/bin/python benchmarks/watchers_scale.py --tables 10000 --modes shared:1 per-table:10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CATALOG = "scale"
NAMESPACE = "db"
ACTIONS = {
    "compute-stats": 21600.0,
    "rewrite-deletes": 3600.0,
    "rewrite-files": 3600.0,
    "rewrite-manifests": 86400.0,
}


# -- synthetic hadoop tables ------------------------------------------------------------------------


def commit(warehouse: Path, name: str) -> float:
    """One ``append`` commit: the next ``v<N>.metadata.json``, then ``version-hint.text`` by rename.
    Returns the time the hint moved (what makes the commit visible)."""
    meta = warehouse / NAMESPACE / name / "metadata"
    hint = meta / "version-hint.text"
    version = int(hint.read_text()) if hint.exists() else 0
    previous = json.loads((meta / f"v{version}.metadata.json").read_text()) if version else {"snapshots": []}
    sid = int.from_bytes(os.urandom(8), "big") >> 2  # never the seeded sequence: ids must not repeat
    snap: dict[str, Any] = {"snapshot-id": sid, "summary": {"operation": "append"}}
    if previous.get("current-snapshot-id"):
        snap["parent-snapshot-id"] = previous["current-snapshot-id"]
    doc = {"current-snapshot-id": sid, "snapshots": [*previous["snapshots"][-4:], snap]}
    (meta / f"v{version + 1}.metadata.json").write_text(json.dumps(doc))
    tmp = meta / "version-hint.text.tmp"
    tmp.write_text(str(version + 1))
    tmp.replace(hint)
    return time.time()


def create_tables(warehouse: Path, n: int) -> list[str]:
    names = [f"t{i:05d}" for i in range(n)]
    for name in names:
        (warehouse / NAMESPACE / name / "metadata").mkdir(parents=True)
        commit(warehouse, name)
    return names


# -- one mode, in its own process -------------------------------------------------------------------


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s() -> float:
    t = os.times()
    return t.user + t.system


async def child(
    mode: str, poll: float, warehouse: Path, n: int, window: float, sample: int
) -> dict[str, Any]:
    import airflow_tablemgmt.triggers.snapshot as snapshot_module
    from airflow_tablemgmt.core.identifiers import TableIdentifier
    from airflow_tablemgmt.core.tables import CatalogSpec
    from airflow_tablemgmt.metadata.iceberg import SnapshotReader, SnapshotState
    from airflow_tablemgmt.triggers.change_poller import running_pollers

    try:
        import greenback
    except ImportError:  # pragma: no cover - an Airflow install has it
        greenback = None

    rss_imported = rss_mb()
    spec = CatalogSpec(name=CATALOG, type="hadoop", warehouse=str(warehouse), properties={})
    catalog = spec.model_dump(mode="json", by_alias=True)
    reads = [0]
    lock = threading.Lock()

    class CountingReader(SnapshotReader):
        def current_state(self, table: TableIdentifier) -> SnapshotState:
            with lock:  # called from the worker threads
                reads[0] += 1
            return super().current_state(table)

    reader = CountingReader(spec)
    if mode == "per-table":

        class NoSubscription:
            generation = 0
            closed = False

            def close(self) -> None:
                pass

        class NoPoller:
            def subscribe(self, table: TableIdentifier) -> NoSubscription:
                return NoSubscription()

        async def own_sleep(subscription: Any, seen: int, sleep: float | None, every: float) -> None:
            await asyncio.sleep(poll if sleep is None else sleep)

        snapshot_module.poller_for = lambda *a, **k: NoPoller()  # type: ignore[assignment]
        snapshot_module.next_poll = own_sleep  # type: ignore[assignment]

    names = [f"t{i:05d}" for i in range(n)]
    events: dict[str, float] = {}
    triggers = []
    for name in names:
        trigger = snapshot_module.TableSnapshotTrigger(
            table_id=f"{CATALOG}.{NAMESPACE}.{name}",
            catalog=catalog,
            poll_interval=poll,
            actions=ACTIONS,
            data_changes_only=True,
        )
        trigger._reader = reader
        triggers.append(trigger)

    async def run_trigger(name: str, trigger: Any) -> None:
        if greenback is not None:
            await greenback.ensure_portal()
        async for _ in trigger.run():
            events.setdefault(name, time.time())

    started = time.monotonic()
    tasks = [asyncio.create_task(run_trigger(n_, t)) for n_, t in zip(names, triggers, strict=True)]
    while reads[0] < n:
        await asyncio.sleep(0.1)
    all_read = time.monotonic() - started
    if mode == "shared":
        while not running_pollers() or running_pollers()[0].ticks < 2:
            await asyncio.sleep(0.1)
    await asyncio.sleep(2 * poll)  # past every watcher's start-up reads

    reads0, cpu0, t0 = reads[0], cpu_s(), time.monotonic()
    ticks0 = sum(p.ticks for p in running_pollers())
    await asyncio.sleep(window)
    elapsed = time.monotonic() - t0
    idle = {
        "cpu_pct": 100 * (cpu_s() - cpu0) / elapsed,
        "reads_per_s": (reads[0] - reads0) / elapsed,
        "ticks_per_s": (sum(p.ticks for p in running_pollers()) - ticks0) / elapsed,
        "rss_mb": rss_mb(),
    }

    chosen = random.sample(names, sample)
    committed: dict[str, float] = {}

    async def commit_later(name: str) -> None:
        await asyncio.sleep(random.uniform(0, 2 * poll))
        committed[name] = await asyncio.to_thread(commit, warehouse, name)

    cpu1, t1 = cpu_s(), time.monotonic()
    await asyncio.gather(*(commit_later(name) for name in chosen))
    deadline = time.monotonic() + 3 * poll + 30
    while not all(name in events for name in chosen) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    busy_cpu = 100 * (cpu_s() - cpu1) / (time.monotonic() - t1)
    latencies = sorted(events[name] - committed[name] for name in chosen if name in events)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {
        "mode": mode,
        "poll": poll,
        "tables": n,
        "all_read_s": all_read,
        "rss_imported_mb": rss_imported,
        **idle,
        "cpu_commits_pct": busy_cpu,
        "latencies": latencies,
        "missed": sample - len(latencies),
    }


# -- the parent: tables once, one process per mode ---------------------------------------------------


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20, method="inclusive")[-1] if len(xs) > 1 else xs[0]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, default=10_000)
    parser.add_argument("--modes", nargs="+", default=["shared:1", "per-table:10"])
    parser.add_argument("--window", type=float, default=30.0, help="idle seconds measured")
    parser.add_argument("--sample", type=int, default=20, help="tables committed to, for the latency")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--child", nargs=2, metavar=("MODE", "POLL"), help=argparse.SUPPRESS)
    parser.add_argument("--warehouse", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    random.seed(args.seed)
    if args.child:
        mode, poll = args.child
        out = asyncio.run(child(mode, float(poll), args.warehouse, args.tables, args.window, args.sample))
        print(json.dumps(out))
        return

    with tempfile.TemporaryDirectory(prefix="tms-watchers-scale-") as work:
        warehouse = Path(work) / "wh"
        t0 = time.monotonic()
        create_tables(warehouse, args.tables)
        print(f"{args.tables} synthetic tables written in {time.monotonic() - t0:.0f} s", flush=True)
        results = []
        for spec in args.modes:
            mode, _, poll = spec.partition(":")
            load = os.getloadavg()
            res = subprocess.run(
                [sys.executable, __file__, "--child", mode, poll, "--warehouse", str(warehouse)]
                + ["--tables", str(args.tables), "--window", str(args.window), "--sample", str(args.sample)]
                + ([] if args.seed is None else ["--seed", str(args.seed)]),
                capture_output=True,
                text=True,
                check=False,
            )
            if res.returncode != 0:
                sys.exit(f"{spec} failed:\n{res.stderr[-3000:]}")
            out = json.loads(res.stdout.strip().splitlines()[-1])
            out["load"] = f"{load[0]:.2f} -> {os.getloadavg()[0]:.2f}"
            results.append(out)
            print(json.dumps(out), flush=True)

    print(f"\n`uptime`: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}\n")
    print(
        "| mode | poll | tables | every table read once after | CPU idle (% of a core) | full reads/s "
        "| checks/s | RSS (after imports) | CPU during commits | commit → event p50 / p95 / max (n) | load (1 min) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        xs = r["latencies"]
        lat = f"{statistics.median(xs):.2f} / {p95(xs):.2f} / {max(xs):.2f} s ({len(xs)})" if xs else "—"
        checks = r["ticks_per_s"] * r["tables"] if r["mode"] == "shared" else r["reads_per_s"]
        print(
            f"| {r['mode']} | {r['poll']:g} s | {r['tables']:,} | {r['all_read_s']:.1f} s | {r['cpu_pct']:.1f} % "
            f"| {r['reads_per_s']:.1f} | {checks:,.0f} | {r['rss_mb']:.0f} MB ({r['rss_imported_mb']:.0f}) "
            f"| {r['cpu_commits_pct']:.1f} % | {lat} | {r['load']} |"
        )


if __name__ == "__main__":
    main()
