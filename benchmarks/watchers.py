"""Snapshot watchers at scale under a real triggerer: how many one triggerer carries, its CPU, and
commit -> run start latency.

Each table enables the four snapshot-driven actions (rewrite-files, rewrite-deletes,
rewrite-manifests, compute-stats); ``dag_factory.assets.table_asset`` gives it ONE asset whose one watcher
(``TableSnapshotTrigger`` with ``actions=``) serves all four. Tables are tiny metadata-only Iceberg
tables in a hadoop warehouse on local disk (metadata written with pyiceberg's model, one ``append``
snapshot each); a "commit" writes the next ``v<N>.metadata.json`` with a new ``append`` snapshot and
moves ``version-hint.text``, which is all a snapshot watcher reads.

Deployment: api-server, scheduler, dag-processor and triggerer (LocalExecutor, SQLite metadata DB —
``tests/e2e/test_real_scheduler.py``'s helpers), ``[triggerer] capacity`` = tables + 100. The DAG file
gives ``--sample`` tables their four action DAGs (one ``EmptyOperator`` each, so a run start costs
the scheduler only, no Spark) and every other table one DAG on its asset: the trigger row Airflow
stores is the same whatever the number of DAGs on the asset (one per distinct classpath+kwargs), so
this registers exactly the production watchers while keeping the parse small.

Prints, per ``--tables`` value: watchers (trigger rows, assigned to the triggerer, first observation
in the asset state store), time until all watch, triggerer CPU (process tree, % of one core) while
idle-polling and during the commits, and the latency from a commit on each sample table to the start
of each of its four asset-triggered runs. ``uptime`` is printed beside the figures.

    .venv/bin/python benchmarks/watchers.py [--tables 1000 10000] [--sample 20] [--poll 10]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="tms-bench-home-"))
from tests.e2e.test_real_scheduler import (  # noqa: E402
    AirflowDeployment,
    _utc,
    _wait_for,
    local_deployment,
)

CATALOG = "wlake"
NAMESPACE = "db"
WATCHING = re.compile(rb"(\d+) snapshot watchers have started polling")
ACTIONS = ("rewrite-files", "rewrite-deletes", "rewrite-manifests", "compute-stats")

DAG_FILE = '''
"""Benchmark DAGs: every table's one watched asset, from airflow_tablemgmt.dag_factory."""
import json, os
from airflow.sdk import DAG, get_parsing_context
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow_tablemgmt.core.tables import CatalogSpec, parse_table
from airflow_tablemgmt.dag_factory.assets import event_plans, table_asset
from airflow_tablemgmt.dag_factory.build import START_DATE
from airflow_tablemgmt.factories.discovery import load_factories

cfg = json.load(open(os.path.join(os.path.dirname(__file__), "watchers.json")))
catalog = CatalogSpec(name=cfg["catalog"], warehouse=cfg["warehouse"])
factories = load_factories()
sample = set(cfg["sample"])
wanted = get_parsing_context().dag_id
actions = {a: {"poll-interval": cfg["poll"]} for a in cfg["actions"]}
for name in cfg["tables"]:
    ids = [f"bench__{name}__{a}" for a in cfg["actions"]] if name in sample else [f"bench__{name}"]
    if wanted and wanted not in ids:
        continue
    spec = parse_table({"catalog": cfg["catalog"], "namespace": cfg["namespace"], "name": name,
                        "actions": actions})
    asset = table_asset(spec, catalog, event_plans(spec, factories))
    for dag_id in ids:
        with DAG(dag_id=dag_id, schedule=asset, start_date=START_DATE, catchup=False,
                 is_paused_upon_creation=False, max_active_runs=1) as dag:
            EmptyOperator(task_id="start")
        globals()[dag_id] = dag
'''


# -- tiny hadoop-layout Iceberg tables ---------------------------------------------------------------


def _template() -> dict[str, Any]:
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import SortOrder
    from pyiceberg.types import LongType, NestedField

    schema = Schema(NestedField(1, "id", LongType(), required=False))
    meta = new_table_metadata(schema, PartitionSpec(), SortOrder(), "file:///placeholder", {})
    return json.loads(meta.model_dump_json(by_alias=True, exclude_none=True))


def _with_append(meta: dict[str, Any], location: str) -> dict[str, Any]:
    parent = meta.get("current-snapshot-id")
    parent = None if parent in (None, -1) else parent
    seq = int(meta.get("last-sequence-number", 0)) + 1
    now_ms = int(time.time() * 1000)
    sid = random.getrandbits(62)
    snap = {
        "snapshot-id": sid,
        "sequence-number": seq,
        "timestamp-ms": now_ms,
        "manifest-list": f"{location}/metadata/snap-{sid}.avro",  # never read by a watcher
        "summary": {"operation": "append"},
        "schema-id": 0,
    }
    if parent is not None:
        snap["parent-snapshot-id"] = parent
    meta = dict(meta)
    meta["snapshots"] = [*meta.get("snapshots", []), snap][-5:]
    meta["current-snapshot-id"] = sid
    meta["last-sequence-number"] = seq
    meta["last-updated-ms"] = now_ms
    meta["refs"] = {"main": {"snapshot-id": sid, "type": "branch"}}
    meta["snapshot-log"] = [*meta.get("snapshot-log", []), {"snapshot-id": sid, "timestamp-ms": now_ms}][-5:]
    return meta


def create_tables(warehouse: Path, names: list[str]) -> None:
    template = _template()
    for name in names:
        table_dir = warehouse / NAMESPACE / name
        (table_dir / "metadata").mkdir(parents=True)
        meta = {**template, "location": f"file://{table_dir}", "table-uuid": str(uuid.uuid4())}
        meta = _with_append(meta, meta["location"])
        (table_dir / "metadata" / "v1.metadata.json").write_text(json.dumps(meta))
        (table_dir / "metadata" / "version-hint.text").write_text("1")


def commit(warehouse: Path, name: str) -> int:
    """One ``append`` commit the way a hadoop catalog makes it: new metadata file, then the hint."""
    meta_dir = warehouse / NAMESPACE / name / "metadata"
    version = int((meta_dir / "version-hint.text").read_text().strip())
    meta = _with_append(json.loads((meta_dir / f"v{version}.metadata.json").read_text()), "")
    (meta_dir / f"v{version + 1}.metadata.json").write_text(json.dumps(meta))
    hint = meta_dir / "version-hint.text.tmp"
    hint.write_text(str(version + 1))
    hint.replace(meta_dir / "version-hint.text")
    return int(meta["current-snapshot-id"])


# -- the deployment ----------------------------------------------------------------------------------


def deployment(home: Path, capacity: int, per_loop: int) -> AirflowDeployment:
    return local_deployment(
        home,
        AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT="600",
        AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT="600",
        AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL="30",
        AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL="3600",  # parse once: watchers, not parsing
        AIRFLOW__TRIGGERER__CAPACITY=str(capacity),
        AIRFLOW__TRIGGERER__MAX_TRIGGER_TO_SELECT_PER_LOOP=str(per_loop),
    )


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of ``pid`` and its live children."""
    import psutil

    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def measure(
    n_tables: int,
    n_sample: int,
    poll: float,
    idle_window: float,
    per_loop: int,
    ready_timeout: float,
    work: Path,
    restart: bool = False,
    reuse: Path | None = None,
) -> dict:
    if reuse is not None:
        return measure_reused(n_tables, poll, idle_window, per_loop, ready_timeout, reuse, restart)
    names = [f"t{i:05d}" for i in range(n_tables)]
    # A second sample for the restart phase: an action reports a table at most once per its
    # min interval (rewrite-manifests: a day), so the same tables cannot be committed on again.
    picked = random.sample(names, 2 * n_sample if restart else n_sample)
    sample, sample_after = sorted(picked[:n_sample]), sorted(picked[n_sample:])
    warehouse = work / "wh"
    t0 = time.monotonic()
    create_tables(warehouse, names)
    made = time.monotonic() - t0
    dep = deployment(work / "airflow", capacity=n_tables + 100, per_loop=per_loop)
    out: dict[str, Any] = {"tables": n_tables, "tables_created_s": made}
    try:
        cfg = {
            "catalog": CATALOG,
            "namespace": NAMESPACE,
            "warehouse": str(warehouse),
            "tables": names,
            "sample": sample + sample_after,
            "actions": list(ACTIONS),
            "poll": f"{poll:g}s",
        }
        (dep.home / "dags" / "watchers.json").write_text(json.dumps(cfg))
        (dep.home / "dags" / "watchers_dags.py").write_text(DAG_FILE)
        assert dep.cli("db", "migrate").returncode == 0
        dep.start("api-server", "api-server", "--port", str(dep.api_port), "--host", "127.0.0.1")
        # The scheduler starts once the DAGs are in: on SQLite the first write of thousands of DAGs
        # holds the database long enough for a scheduler's heartbeat to fail ("database is locked").
        dep.start("dag-processor", "dag-processor")
        n_four = len(sample) + len(sample_after)
        expected_dags = n_tables - n_four + n_four * len(ACTIONS)

        def parsed() -> int | None:
            dep.check_alive()
            rows = dep.query("SELECT count(*) FROM dag WHERE NOT is_stale")
            return rows[0][0] if rows[0][0] >= expected_dags else None

        t_parse = time.monotonic()
        _wait_for(f"{expected_dags} DAGs in Airflow's DB", parsed, timeout=1800, every=3)
        out["dags"] = expected_dags
        out["parsed_s"] = time.monotonic() - t_parse

        def triggers_registered() -> int | None:
            rows = dep.query("SELECT count(DISTINCT trigger_id) FROM asset_watcher")
            return rows[0][0] if rows[0][0] >= n_tables else None

        out["trigger_rows"] = _wait_for("watcher triggers", triggers_registered, timeout=600, every=2)
        return run_phases(
            dep, out, warehouse, sample, sample_after, n_tables, poll, idle_window, ready_timeout, restart
        )
    except BaseException:
        dep.print_log_tails(30)
        raise
    finally:
        dep.stop()


def _execute(dep: AirflowDeployment, sql: str) -> None:
    """Run one statement that returns no rows on the deployment's metadata DB, committed."""
    import sqlalchemy as sa

    engine = sa.create_engine(dep.db_url, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(sql))
    finally:
        engine.dispose()


def measure_reused(
    n_tables: int,
    poll: float,
    idle_window: float,
    per_loop: int,
    ready_timeout: float,
    old: Path,
    restart: bool,
) -> dict:
    """Measure on the tables and parsed DAGs that an earlier run left in ``old`` (its ``--keep``
    directory): a copy of its metadata DB, no dag-processor, the state store emptied."""
    import shutil

    cfg = json.loads((old / "airflow" / "dags" / "watchers.json").read_text())
    assert len(cfg["tables"]) == n_tables, f"{old} holds {len(cfg['tables'])} tables, not {n_tables}"
    half = len(cfg["sample"]) // 2 if restart else len(cfg["sample"])
    sample, sample_after = cfg["sample"][:half], cfg["sample"][half:]
    home = old / f"airflow-{int(time.time())}"
    dep = deployment(home, capacity=n_tables + 100, per_loop=per_loop)
    shutil.copy(old / "airflow" / "airflow.db", home / "airflow.db")
    out: dict[str, Any] = {"tables": n_tables, "reused": str(old)}
    try:
        _execute(dep, "DELETE FROM asset_state_store")
        _execute(dep, "UPDATE trigger SET triggerer_id = NULL")
        dep.start("api-server", "api-server", "--port", str(dep.api_port), "--host", "127.0.0.1")
        return run_phases(
            dep,
            out,
            Path(cfg["warehouse"]),
            sample,
            sample_after,
            n_tables,
            poll,
            idle_window,
            ready_timeout,
            restart,
        )
    except BaseException:
        dep.print_log_tails(30)
        raise
    finally:
        dep.stop()


def run_phases(
    dep: AirflowDeployment,
    out: dict[str, Any],
    warehouse: Path,
    sample: list[str],
    sample_after: list[str],
    n_tables: int,
    poll: float,
    idle_window: float,
    ready_timeout: float,
    restart: bool,
) -> dict[str, Any]:
    """Scheduler and triggerer on the registered watchers: start-up, idle CPU, commit latency, restart."""
    out["trigger_rows_total"] = dep.query("SELECT count(*) FROM trigger")[0][0]
    out["asset_watchers"] = dep.query("SELECT count(*) FROM asset_watcher")[0][0]
    dep.start("scheduler", "scheduler")

    pid = start_triggerer(dep, n_tables, ready_timeout, out, "")
    out["state_recorded_at_ready"] = state_recorded(dep)
    out["rss_mb"] = tree_rss_mb(pid)

    time.sleep(10.0)  # the last watchers' first polls
    cpu0, w0 = tree_cpu(pid), time.monotonic()
    time.sleep(idle_window)  # the measurement window itself, not a wait for an outcome
    out["idle_cpu_pct"] = 100 * (tree_cpu(pid) - cpu0) / (time.monotonic() - w0)
    out["uptime_idle"] = uptime()

    out.update(commit_latency(dep, warehouse, sample, poll, pid, ""))
    out["state_recorded_after_commits"] = state_recorded(dep)
    if restart:
        # A restarted triggerer: every watcher reads its remembered state once (in the background).
        dep.procs["triggerer"].send_signal(signal.SIGTERM)
        dep.procs["triggerer"].wait(timeout=120)
        pid = start_triggerer(dep, n_tables, ready_timeout, out, "restart_")
        out.update(commit_latency(dep, warehouse, sample_after, poll, pid, "restart_"))
    out["state_recorded_end"] = state_recorded(dep)
    out["uptime_end"] = uptime()
    return out


def watching(dep: AirflowDeployment, since: int) -> int:
    """Watchers that have polled their table, as the triggerer started at byte ``since`` of its log
    counts them (``<n> snapshot watchers have started polling``, at most every 5 s)."""
    with dep.log("triggerer").open("rb") as f:
        f.seek(since)
        return max((int(n) for n in WATCHING.findall(f.read())), default=0)


def state_recorded(dep: AirflowDeployment) -> int:
    return dep.query("SELECT count(*) FROM asset_state_store WHERE key LIKE 'tablemgmt.watch.%'")[0][0]


def start_triggerer(dep: AirflowDeployment, n_tables: int, ready_timeout: float, out: dict, tag: str) -> int:
    since = dep.log("triggerer").stat().st_size if dep.log("triggerer").exists() else 0
    dep.start("triggerer", "triggerer")
    t_trig = time.monotonic()

    def all_watching() -> int | None:
        dep.check_alive()
        n = watching(dep, since)
        return n if n >= n_tables else None

    try:
        _wait_for("every watcher's first poll", all_watching, timeout=ready_timeout, every=2)
    except AssertionError:  # measure anyway, and say how far the start-up got
        pass
    out[f"{tag}all_watching_s"] = time.monotonic() - t_trig
    out[f"{tag}watching"] = watching(dep, since)
    out[f"{tag}assigned"] = dep.query("SELECT count(*) FROM trigger WHERE triggerer_id IS NOT NULL")[0][0]
    return dep.procs["triggerer"].pid


def tree_rss_mb(pid: int) -> float:
    import psutil

    proc = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20


def commit_latency(
    dep: AirflowDeployment, warehouse: Path, sample: list[str], poll: float, pid: int, tag: str
) -> dict[str, Any]:
    """One commit on each sample table at a random phase of the poll; seconds to each run's start."""
    out: dict[str, Any] = {}
    last_run = dep.query("SELECT coalesce(max(id), 0) FROM dag_run")[0][0]
    cpu0, w0 = tree_cpu(pid), time.monotonic()
    committed: dict[str, float] = {}
    for name in sample:
        time.sleep(random.uniform(0, poll))  # a random phase of the watchers' poll
        commit(warehouse, name)
        committed[name] = time.time()

    def started() -> dict[str, list[float]] | None:
        dep.check_alive()
        found: dict[str, list[float]] = {}
        for name, at in committed.items():
            rows = dep.query(
                "SELECT start_date FROM dag_run WHERE dag_id LIKE :d AND run_type = 'asset_triggered' "
                "AND id > :last AND start_date IS NOT NULL",
                d=f"bench__{name}__%",
                last=last_run,
            )
            if len(rows) < len(ACTIONS):
                return None
            found[name] = [_utc(r[0]).timestamp() - at for r in rows]
        return found

    runs = _wait_for("every sample table's four runs to start", started, timeout=900, every=1)
    out[f"{tag}commit_cpu_pct"] = 100 * (tree_cpu(pid) - cpu0) / (time.monotonic() - w0)
    out[f"{tag}latencies"] = sorted(x for xs in runs.values() for x in xs)
    out[f"{tag}phases"] = phases(dep, committed, last_run)
    events = dep.query("SELECT count(*) FROM asset_event WHERE id > 0 AND extra LIKE '%from_trigger%'")[0][0]
    out[f"{tag}asset_events"] = events
    return out


def phases(dep: AirflowDeployment, committed: dict[str, float], last_run: int) -> dict[str, list[float]]:
    """Where each commit's time went (medians over the sample, seconds): commit -> the watcher's
    "new snapshot" log line (poll phase + read), -> the asset event in Airflow's DB (the triggerer's
    supervisor), -> the first run queued (the scheduler), -> that run's start."""
    text = dep.log("triggerer").read_text(errors="replace")
    found: dict[str, list[float]] = {"detect": [], "event": [], "queue": [], "start": []}
    for name, at in committed.items():
        table = f"{CATALOG}.{NAMESPACE}.{name}"
        seen = [
            _utc(m.group(1)).timestamp()
            for m in re.finditer(rf"^(\S+) \[info\s*\] {re.escape(table)}: new snapshot", text, re.M)
        ]
        seen = [t for t in seen if t >= at - 1]
        events = dep.query(
            "SELECT min(timestamp) FROM asset_event WHERE extra LIKE :t AND extra LIKE '%from_trigger%'",
            t=f'%"{table}"%',
        )
        runs = dep.query(
            "SELECT min(queued_at), min(start_date) FROM dag_run WHERE dag_id LIKE :d AND id > :last "
            "AND run_type = 'asset_triggered'",
            d=f"bench__{name}__%",
            last=last_run,
        )
        if not seen or events[0][0] is None or runs[0][0] is None:
            continue
        detected, evented = min(seen), _utc(events[0][0]).timestamp()
        queued, started = _utc(runs[0][0]).timestamp(), _utc(runs[0][1]).timestamp()
        for key, value in (
            ("detect", detected - at),
            ("event", evented - detected),
            ("queue", queued - evented),
            ("start", started - queued),
        ):
            found[key].append(value)
    return found


def phases_cell(found: dict[str, list[float]]) -> str:
    return ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in found.items() if v)


def latency_cell(xs: list[float]) -> str:
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    return f"{statistics.median(xs):.1f} / {p90:.1f} / {max(xs):.1f} s ({len(xs)})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument("--poll", type=float, default=8.0, help="poll-interval of every action (default 8 s)")
    parser.add_argument("--idle-window", type=float, default=60.0, help="seconds of idle CPU measurement")
    parser.add_argument(
        "--per-loop", type=int, default=50, help="[triggerer] max_trigger_to_select_per_loop (Airflow: 50)"
    )
    parser.add_argument(
        "--ready-timeout",
        type=float,
        default=3600.0,
        help="seconds to wait for every watcher's first poll before measuring anyway",
    )
    parser.add_argument(
        "--restart",
        action="store_true",
        help="then restart the triggerer: time until all watch again and commit latency right after",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep each run's tables and metadata DB under KEEP/tables-<n> (for --reuse)",
    )
    parser.add_argument(
        "--reuse",
        type=Path,
        default=None,
        help="measure again on a kept KEEP/tables-<n> (no table creation, no parse; one --tables value)",
    )
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    # A TERM (or a background job's ignored INT) must still stop the deployment: exit through finally.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    random.seed(args.seed)
    print(
        f"poll-interval {args.poll:g} s, [triggerer] max_trigger_to_select_per_loop {args.per_loop}, "
        f"capacity = tables + 100; {os.cpu_count()} cores\n",
        flush=True,
    )
    print(
        "| tables | watcher triggers (rows) | all watching (first poll) | state recorded then | "
        "triggerer RSS | triggerer CPU idle-polling | triggerer CPU during commits | "
        "commit→run start median / p90 / max (runs) | after a restart: all watching | "
        "after a restart: commit→run start |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    notes = []
    for n in args.tables:
        if args.reuse is not None:
            r = measure(
                n,
                0,
                args.poll,
                args.idle_window,
                args.per_loop,
                args.ready_timeout,
                args.reuse,
                restart=args.restart,
                reuse=args.reuse,
            )
        else:
            with tempfile.TemporaryDirectory(prefix="tms-watchers-") as tmp:
                work = args.keep / f"tables-{n}" if args.keep is not None else Path(tmp)
                work.mkdir(parents=True, exist_ok=True)
                r = measure(
                    n,
                    min(args.sample, n // 2),
                    args.poll,
                    args.idle_window,
                    args.per_loop,
                    args.ready_timeout,
                    work,
                    restart=args.restart,
                )
        restarted = (
            (
                f"{r['restart_watching']:,} after {r['restart_all_watching_s']:.0f} s",
                latency_cell(r["restart_latencies"]),
            )
            if args.restart
            else ("—", "—")
        )
        print(
            f"| {r['tables']:,} | {r['trigger_rows_total']:,} | {r['watching']:,} after {r['all_watching_s']:.0f} s | "
            f"{r['state_recorded_at_ready']:,} | {r['rss_mb']:.0f} MB | {r['idle_cpu_pct']:.1f} % | "
            f"{r['commit_cpu_pct']:.1f} % | {latency_cell(r['latencies'])} | {restarted[0]} | {restarted[1]} |",
            flush=True,
        )
        notes.append(
            f"{r['tables']:,} tables: {json.dumps({k: v for k, v in r.items() if 'latencies' not in k and 'phases' not in k})}\n"
            f"  latencies (s): {[round(x, 1) for x in r['latencies']]}\n"
            f"  medians by phase (s): {phases_cell(r['phases'])}"
            + (
                f"\n  after restart (s): {[round(x, 1) for x in r['restart_latencies']]}"
                if args.restart
                else ""
            )
        )
    print("\n" + "\n".join(notes))


if __name__ == "__main__":
    main()
