"""N watched tables under a real Airflow triggerer, alone: its CPU and RSS (process tree) and commit -> asset
event stored, at a given ``poll-interval`` (default: the shipped 1 s).

No DAG parse: the watchers are registered the way Airflow's DAG processor registers an ``AssetWatcher`` (one
``asset`` row and its ``asset_active`` row, one ``trigger`` row with the trigger's classpath and kwargs, one
``asset_watcher`` row between them, per table; ``dag_factory.assets.table_watcher``'s trigger, four snapshot-driven actions), so
10,000 watchers start in minutes instead of the ≈ 20 minutes a 10,000-DAG parse takes on this machine. Then
``airflow triggerer`` runs alone (SQLite metadata DB, its in-process execution API; no scheduler, so no runs:
the figure ends when the asset event is stored, the scheduler's part is ``event_latency.py``'s). Tables are
synthetic hadoop tables on local disk (``watchers_scale.py``'s), not Spark-written ones.

Prints: time until every trigger is assigned and polling, the triggerer's CPU (process tree, % of one core)
over ``--window`` idle seconds, its RSS, how many first observations the asset state store held at the start
and the end of that window (they are written in the background, one supervisor turn each: a fresh 10,000-table
triggerer is still writing them for many minutes, and that traffic is in the CPU figure), and commit -> asset
event stored for ``--sample`` commits at random phases of the poll (p50 / p95 / max); ``uptime`` before and
after.

    .venv/bin/python benchmarks/triggerer_scale.py --tables 10000 [--poll 1] [--per-loop 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="tms-bench-home-"))
from watchers import WATCHING, tree_cpu, tree_rss_mb, uptime  # noqa: E402
from watchers_scale import CATALOG, NAMESPACE, commit, create_tables  # noqa: E402

from tests.e2e.test_real_scheduler import _utc, _wait_for, local_deployment  # noqa: E402

REGISTER = """
import json, sys
from airflow.models.asset import AssetActive, AssetModel, AssetWatcherModel
from airflow.models.trigger import Trigger
from airflow.utils.session import create_session

from airflow_tablemgmt.core.tables import CatalogSpec, parse_table
from airflow_tablemgmt.dag_factory.assets import event_plans, table_watcher
from airflow_tablemgmt.factories.discovery import load_factories

warehouse, poll, cat, ns, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
catalog = CatalogSpec(name=cat, type="hadoop", warehouse=warehouse, properties={})
factories = load_factories()
every = {} if poll == "default" else {"poll-interval": poll + "s"}
actions = {a: dict(every) for a in ("rewrite-files", "rewrite-deletes", "rewrite-manifests", "compute-stats")}
with create_session() as session:
    for i, name in enumerate(names):
        table = parse_table({"catalog": cat, "namespace": ns, "name": name, "actions": actions})
        watcher = table_watcher(table, catalog, event_plans(table, factories))
        trigger = Trigger.from_object(watcher.trigger)
        asset = AssetModel(name=f"tablemgmt.{table.id}", uri=f"tablemgmt://{cat}/{ns}/{name}", group="tablemgmt")
        session.add_all([trigger, asset])
        session.flush()
        session.add(AssetWatcherModel(name=watcher.name, asset_id=asset.id, trigger_id=trigger.id))
        # Active, as the DAG processor marks an asset a DAG uses: the asset state store (a watcher's first
        # observation, what it remembers across restarts) answers only for active assets, 404 otherwise.
        session.add(AssetActive.for_asset(asset))
        if i % 1000 == 999:
            session.commit()
print(json.dumps({"poll_interval": watcher.trigger.poll_interval}))
"""


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20, method="inclusive")[-1] if len(xs) > 1 else xs[0]


def measure(n: int, poll: str, window: float, sample: int, per_loop: int, work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"tables": n, "uptime_before": uptime()}
    warehouse = work / "wh"
    names = create_tables(warehouse, n)
    dep = local_deployment(
        work / "airflow",
        AIRFLOW__TRIGGERER__CAPACITY=str(n + 100),
        AIRFLOW__TRIGGERER__MAX_TRIGGER_TO_SELECT_PER_LOOP=str(per_loop),
    )
    try:
        assert dep.cli("db", "migrate").returncode == 0
        t0 = time.monotonic()
        res = subprocess.run(
            [sys.executable, "-c", REGISTER, str(warehouse), poll, CATALOG, NAMESPACE, *names],
            env=dep.env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert res.returncode == 0, res.stderr[-3000:]
        out["poll_interval"] = json.loads(res.stdout.strip().splitlines()[-1])["poll_interval"]
        out["register_s"] = time.monotonic() - t0

        dep.start("triggerer", "triggerer")
        pid = dep.procs["triggerer"].pid
        t1 = time.monotonic()

        def assigned() -> int | None:
            dep.check_alive()
            k = dep.query("SELECT count(*) FROM trigger WHERE triggerer_id IS NOT NULL")[0][0]
            return k if k >= n else None

        _wait_for("every trigger assigned", assigned, timeout=1200, every=2)
        out["all_assigned_s"] = time.monotonic() - t1

        # Every watcher polling (the triggerer logs its count at most every 5 s). Their first observations
        # are written to the asset state store in the background meanwhile, one call per turn of the
        # triggerer's supervisor: at 10,000 tables that goes on for many minutes, and is in the figure.
        def polling() -> int | None:
            dep.check_alive()
            found = WATCHING.findall(dep.log("triggerer").read_bytes())
            k = max((int(x) for x in found), default=0)
            return k if k >= n else None

        _wait_for("every watcher polling", polling, timeout=1200, every=2)
        out["all_polling_s"] = time.monotonic() - t1
        time.sleep(10)
        stored0 = dep.query("SELECT count(*) FROM asset_state_store")[0][0]
        c0, w0 = tree_cpu(pid), time.monotonic()
        time.sleep(window)
        out["cpu_idle_pct"] = 100 * (tree_cpu(pid) - c0) / (time.monotonic() - w0)
        out["rss_mb"] = tree_rss_mb(pid)
        out["stored"] = (stored0, dep.query("SELECT count(*) FROM asset_state_store")[0][0])

        phase = out["poll_interval"]
        chosen = random.sample(names, sample)
        committed: dict[str, float] = {}
        c1, w1 = tree_cpu(pid), time.monotonic()
        for name in chosen:
            time.sleep(random.uniform(0, phase))
            committed[name] = commit(warehouse, name)

        def stored() -> dict[str, float] | None:
            dep.check_alive()
            found = {}
            for name, at in committed.items():
                rows = dep.query(
                    "SELECT e.timestamp FROM asset_event e JOIN asset a ON a.id = e.asset_id "
                    "WHERE a.name = :name ORDER BY e.id",
                    name=f"tablemgmt.{CATALOG}.{NAMESPACE}.{name}",
                )
                if rows:
                    found[name] = _utc(rows[0][0]).timestamp() - at
            return found if len(found) == len(committed) else None

        latencies = _wait_for("every commit's asset event", stored, timeout=300, every=0.5)
        out["cpu_commits_pct"] = 100 * (tree_cpu(pid) - c1) / (time.monotonic() - w1)
        out["latencies"] = sorted(latencies.values())
        out["uptime_after"] = uptime()
        return out
    except BaseException:
        dep.print_log_tails(30)
        raise
    finally:
        dep.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, default=10_000)
    parser.add_argument("--poll", default="default", help="'default' or seconds")
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument(
        "--per-loop", type=int, default=1000, help="[triggerer] max_trigger_to_select_per_loop"
    )
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    random.seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="tms-triggerer-scale-") as work:
        r = measure(args.tables, args.poll, args.window, args.sample, args.per_loop, Path(work))
    print(json.dumps(r))
    xs = r["latencies"]
    print(
        "\n| tables | poll | all assigned | all polling | triggerer CPU idle / during commits "
        "| RSS | first observations stored (window start → end) | commit → asset event p50 / p95 / max (n) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {r['tables']:,} | {r['poll_interval']:g} s | {r['all_assigned_s']:.0f} s | {r['all_polling_s']:.0f} s "
        f"| {r['cpu_idle_pct']:.0f} % / {r['cpu_commits_pct']:.0f} % | {r['rss_mb']:.0f} MB "
        f"| {r['stored'][0]:,} → {r['stored'][1]:,} "
        f"| {statistics.median(xs):.2f} / {p95(xs):.2f} / {max(xs):.2f} s ({len(xs)}) |"
    )
    print(f"\n`{r['uptime_before']}` → `{r['uptime_after']}`")


if __name__ == "__main__":
    main()
