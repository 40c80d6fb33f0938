"""Scheduler load at fleet scale (issue 40): DAG runs and task instances per hour at N tables x 7 actions, the
planned shape (one DAG per (policy, action), ADR 0004) against one DAG per (table, action).

**Computed**, from three real inputs and a simulation of Airflow's asset-triggered runs:

1. **The plans.** N tables enrolled by one policy with Iceberg's 7 policy actions (compute-stats,
   delete-orphans, expire-data, expire-snapshots, rewrite-deletes, rewrite-files, rewrite-manifests) and
   **synthetic** stored health (``tms_table_health`` rows written directly, as ``plan_scale.py``): each table
   independently has small files (``--small``, default 20 %), delete files (``--deletes`` 5 %), too many
   manifests (``--manifests`` 10 %), expirable snapshots (``--expirable`` 30 %); 5 % never measured, 5 %
   measured 2 days ago. ``services.planning.plan_action`` plans each action over them: what fraction needs work,
   how many batches of 50 (at most ``[core] max_map_length`` = 1,024 a run).
2. **The schedules.** The DAGs the project builds for one such table (``dag_factory.build``) and for the policy
   (``dag_factory.plan``, ``dag_factory.discovery``): their task ids, triggers, and time-based runs per day
   from Airflow's own timetables (``next_dagrun_info`` over 7 days).
3. **Events.** ``--commits`` per table per day (default 1; 0 is the floor); a table's watcher reports a commit
   for the actions due (each at most once per its interval). A table's own DAG runs once per event. The
   policy's planned DAGs of event-driven actions share the policy's asset; their event runs are simulated as
   Airflow 3.3 makes them (``scheduler_model.py``): one queue row per (asset, DAG), a run at a scheduler loop
   (``--loop-seconds``) only while the DAG has fewer than ``max_active_runs`` runs active, taking the events up
   to the row's ``created_at``; its plan task (``--read-seconds`` after the run's creation) also reads the
   events after its ``run_after`` that no run took and plans only the tables all those events name for its
   action. ``--max-active-runs`` defaults to the project's ``[tablemgmt] plan_max_active_runs`` default (16,
   ``services/plan_settings.py``); 1 is the model before overlapping runs. Every figure with commits is printed
   for the default and for 1 (and ``--max-active-runs`` when it is neither). ``--run-seconds`` (default 60):
   how long a planned event run stays active on average (each a uniform draw from half to 1.5 times it), an
   input of the model, not an outcome.

Per hour: DAG runs, task instances (a mapped batch is one per map index; a run with no batch has one skipped
``run_batch``), task starts (a skipped ``run_batch`` starts no process), and for the planned event runs the
runs active at once, events and tables planned per run, and an event -> the first plan that has it.

``--scheduler``: the planned shape's event runs against a real Airflow scheduler at the project's default
``plan_max_active_runs`` (``scheduler_check.py``: LocalExecutor, SQLite metadata DB, api-server,
dag-processor; no triggerer): a policy with rewrite-files over ``--real-tables`` real pyiceberg tables (one
data file each: the plan finds nothing to do, no Spark job runs), ``--events`` asset events put on the policy's
asset through Airflow's asset manager at ``--rate`` per second; then the runs, their overlap, what each
planned and the ``task_instance`` rows.

    .venv/bin/python benchmarks/scheduler_load.py [--tables 100000] [--commits 1] [--run-seconds 60]
        [--max-active-runs 16] [--loop-seconds 1] [--read-seconds 3]
        [--scheduler] [--real-tables 20] [--events 120] [--rate 1]

Left out: the jobs' own time and the executor's slots (a task instance counts whatever it waits for; a run's
duration is ``--run-seconds`` whatever it plans, although the batches of overlapping runs share
``plan_max_active_batches`` and so lengthen each other); the full plan on the fallback interval taking one of
the ``max_active_runs`` slots; the dag-processor's parse (``dag_parse.py``) and the triggerer
(``triggerer_scale.py``); other policies; real health (synthetic figures; with real tables the fractions are
the fleet's own); retries; the plan's measuring cost per table (``plan_scale.py``).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
POLICY = "fleet"
ACTIONS: dict[str, dict[str, Any]] = {
    "compute-stats": {},
    "delete-orphans": {},
    "expire-data": {"column": "ts", "retention": "30d"},
    "expire-snapshots": {},
    "rewrite-deletes": {},
    "rewrite-files": {},
    "rewrite-manifests": {},
}
sys.path.insert(0, str(Path(__file__).parent))
from scheduler_model import BATCH, MAX_MAP, EventModel, load, print_events, print_rows  # noqa: E402


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _stats(small: bool, deletes: bool, manifests: bool, expirable: bool) -> Any:
    from airflow_tablemgmt.metadata.files import FileStats

    mib = 1024 * 1024
    s = FileStats(
        snapshot_id=1,
        snapshots=3,
        data_files=4,
        small_data_files=4,
        small_file_threshold_bytes=384 * mib,
        delete_files=0,
        data_bytes=4 * 512 * mib,
        delete_bytes=0,
        records=400_000,
        compacted_data_files=4,
        partitions=4,
        removable_data_files=0,
        manifests=2,
        manifest_bytes=2 * 64 * 1024,
        thresholds={"rewrite-files": {"min-small-files": 5, "small-file-fraction": 0.75}},
    )
    if small:
        s = replace(s, data_files=60, small_data_files=60, compacted_data_files=1, partitions=1)
        s = replace(s, removable_data_files=59, data_bytes=60 * mib)
    if deletes:
        s = replace(s, delete_files=8, position_delete_files=8, deleted_rows=60_000, delete_bytes=8 * mib)
    if manifests:
        s = replace(s, manifests=40, manifest_bytes=40 * 64 * 1024)
    if expirable:
        s = replace(s, snapshots=15, expirable_snapshots=10)
    return s


def fill(url: str, n: int, shares: dict[str, float], seed: int) -> dict[str, int]:
    """N enrolled tables with the 7 actions and their synthetic stored health, written directly."""
    from airflow_tablemgmt.core.tables import Owner, TableSpec
    from airflow_tablemgmt.metadata.health import score
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.clock import utcnow
    from airflow_tablemgmt.store.models import TableRow
    from airflow_tablemgmt.store.table_health import HealthRecord, TableHealthRepository

    rng = random.Random(seed)
    store = Store(url)
    store._ensure_schema()
    now = utcnow()
    doc = TableSpec(catalog="lake", namespace="db", name="t", actions=ACTIONS).model_dump(
        mode="json", by_alias=True
    )
    memo: dict[tuple[bool, ...], tuple[Any, Any]] = {}
    counts = dict.fromkeys(["unmeasured", "stale", *shares], 0)
    rows, health = [], {}
    for i in range(n):
        name = f"t{i:06d}"
        table_id = f"lake.db.{name}"
        spec = dict(doc, name=name)
        rows.append(
            {
                "table_id": table_id,
                "catalog": "lake",
                "namespace": "db",
                "name": name,
                "format": "iceberg",
                "owner_team": spec["owner"] if "owner" in spec else None,
                "managed_by": str(Owner.POLICY),
                "queue": spec["queue"],
                "priority": spec["priority"],
                "actions": spec["actions"],
                "spec": spec,
                "policy": POLICY,
                "created_at": now,
                "updated_at": now,
            }
        )
        u = rng.random()
        if u < 0.05:
            counts["unmeasured"] += 1
            continue
        flags = tuple(rng.random() < shares[k] for k in ("small", "deletes", "manifests", "expirable"))
        for k, f in zip(("small", "deletes", "manifests", "expirable"), flags, strict=True):
            counts[k] += f
        if flags not in memo:
            stats = _stats(*flags)
            memo[flags] = (stats, score(stats))
        stats, scored = memo[flags]
        stale = u < 0.10
        counts["stale"] += stale
        at = now - (timedelta(days=2) if stale else timedelta(minutes=10))
        findings = tuple((f.kind, f.action) for f in scored.findings)
        removable = stats.removable_data_files or 0
        health[table_id] = HealthRecord(
            scored.score, findings, stats.data_files, stats.data_bytes, removable, asdict(stats), at
        )
    with store.engine.begin() as conn:
        for at_row in range(0, len(rows), 5000):
            conn.execute(TableRow.__table__.insert(), rows[at_row : at_row + 5000])
    TableHealthRepository.of(store).put_many(health)
    store.dispose()
    return counts


def plans(url: str) -> dict[str, dict[str, Any]]:
    """Each action planned over the synthetic fleet: the plan's counts and its CPU seconds."""
    from airflow_tablemgmt.services.planning import plan_action
    from airflow_tablemgmt.store import Store

    store = Store(url)
    out = {}
    for action in ACTIONS:
        c = time.process_time()
        p = plan_action(store, POLICY, action, batch_size=BATCH, max_age=timedelta(days=1))
        out[action] = {**p.counts(), "cpu_s": time.process_time() - c}
    store.dispose()
    return out


def _per_day(timetable: Any) -> float:
    """Time-based runs per day of ``timetable`` (Airflow's core timetable), counted over 7 days."""
    import pendulum
    from airflow.serialization.encoders import coerce_to_core_timetable
    from airflow.timetables.base import TimeRestriction

    tt = coerce_to_core_timetable(timetable)
    start = pendulum.datetime(2026, 1, 5, tz="UTC")
    end = start + timedelta(days=7)
    last, n = None, 0
    while n < 10**6:
        info = tt.next_dagrun_info(
            last_automated_data_interval=last, restriction=TimeRestriction(start, end, True)
        )
        if info is None or info.run_after >= end:
            break
        n, last = n + 1, info.data_interval
    return n / 7


def schedules() -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The DAGs of one table of the per-table shape and of the policy (planned + discovery): per action its
    tasks, whether events start it, its time-based runs per day, and a table's event spacing (hours)."""
    from airflow_tablemgmt.core.actions import ACTIONS as REGISTRY
    from airflow_tablemgmt.core.naming import parse_dag_id, plan_of
    from airflow_tablemgmt.core.policies import parse_policy
    from airflow_tablemgmt.core.schedule import SchedulePlan
    from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
    from airflow_tablemgmt.dag_factory.build import build_dags
    from airflow_tablemgmt.dag_factory.discovery import build_discovery_dags
    from airflow_tablemgmt.dag_factory.plan import build_plan_dags
    from airflow_tablemgmt.factories.discovery import default_factories

    factories = default_factories()
    spec = TableSpec(catalog="lake", namespace="db", name="t", actions=ACTIONS)
    built = build_dags([spec], factories, catalogs={"lake": CatalogSpec(name="lake", warehouse="/tmp/x")})
    assert not built.errors, built.errors
    policy = parse_policy(
        {"name": POLICY, "match": {"catalog": "lake", "format": "iceberg"}, "actions": ACTIONS}
    )
    planned = {**build_plan_dags([policy]), **build_discovery_dags([policy])}

    def spacing(action: str) -> float:
        settings = REGISTRY.get(action, "iceberg").settings(ACTIONS[action])
        strategy = factories.for_action("iceberg", action).trigger_strategy("iceberg", action)
        return SchedulePlan.resolve(settings, strategy).interval.min_spacing().total_seconds() / 3600

    def describe(dag: Any, action: str | None) -> dict[str, Any]:
        kind = type(dag.timetable).__name__
        return {
            "dag": dag.dag_id,
            "tasks": [t.task_id for t in dag.tasks],
            "events": "Asset" in kind,
            "per_day": _per_day(dag.timetable),
            "spacing_h": spacing(action) if action else None,
        }

    per_table = {parse_dag_id(d)[1]: describe(dag, parse_dag_id(d)[1]) for d, dag in built.dags.items()}  # type: ignore[index]
    policy_dags = {}
    for d, dag in planned.items():
        of = plan_of(d)
        policy_dags[of[1] if of else "discovery"] = describe(dag, of[1] if of else None)
    return per_table, policy_dags


def main() -> None:
    from airflow_tablemgmt.services.plan_settings import DEFAULT_MAX_ACTIVE_RUNS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=100_000)
    ap.add_argument("--commits", type=float, default=1.0, help="commits per table per day (events model)")
    ap.add_argument("--run-seconds", type=float, default=60.0, help="a planned event run's duration (model)")
    ap.add_argument(
        "--max-active-runs",
        type=int,
        default=DEFAULT_MAX_ACTIVE_RUNS,
        help="an event-driven planned DAG's max_active_runs (default: plan_max_active_runs' default; 1: the old model)",
    )
    ap.add_argument("--loop-seconds", type=float, default=1.0, help="a scheduler loop (model)")
    ap.add_argument(
        "--read-seconds", type=float, default=3.0, help="a run's creation -> its plan's read of late events"
    )
    ap.add_argument("--small", type=float, default=0.20)
    ap.add_argument("--deletes", type=float, default=0.05)
    ap.add_argument("--manifests", type=float, default=0.10)
    ap.add_argument("--expirable", type=float, default=0.30)
    ap.add_argument("--seed", type=int, default=40)
    ap.add_argument(
        "--scheduler", action="store_true", help="also the real-scheduler check (scheduler_check.py)"
    )
    ap.add_argument("--real-tables", type=int, default=20)
    ap.add_argument("--events", type=int, default=120)
    ap.add_argument("--rate", type=float, default=1.0)
    args = ap.parse_args()
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="tms-sched-load-home-"))
    started = uptime()
    shares = {
        "small": args.small,
        "deletes": args.deletes,
        "manifests": args.manifests,
        "expirable": args.expirable,
    }
    with tempfile.TemporaryDirectory(prefix="tms-sched-load-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'tablemgmt.db'}"
        t = time.perf_counter()
        mix = fill(url, args.tables, shares, args.seed)
        fill_s = time.perf_counter() - t
        plan = plans(url)
    per_table, policy_dags = schedules()
    n = args.tables
    print(
        f"\n{n:,} tables enrolled by one policy, 7 actions; synthetic stored health (written in {fill_s:.0f} s): {mix}\n"
    )
    print(
        "| action | pays | measure first | idle | share needing work (of enabled) | batches of 50 | run's batches (max 1,024) | beyond them (left for the next run) | plan CPU (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for action, p in plan.items():
        enabled = p["pays"] + p["measure"] + p["idle"]
        left = max(p["pays"] - MAX_MAP * BATCH, 0)
        print(
            f"| {action} | {p['pays']:,} | {p['measure']:,} | {p['idle']:,} | {100 * p['pays'] / enabled:.1f} % "
            f"| {p['batches']:,} | {min(p['batches'], MAX_MAP):,} | {left:,} | {p['cpu_s']:.2f} |"
        )
    if any(p["pays"] > MAX_MAP * BATCH for p in plan.values()):
        print(
            f"\nBeyond {MAX_MAP:,} batches of {BATCH} a run maps the worst-scored tables first; an action without "
            "thresholds scores every table alike (100), and past the cut equal scores go by the table's newest "
            f"process of the action, never run first: a run takes {MAX_MAP * BATCH:,} and leaves the rest to the "
            "next run, which starts with them (services/plan_runs.py)."
        )
    print("\nSchedules of the built DAGs (time-based runs per day from Airflow's timetables):\n")
    print(
        "| action | per-table DAG: tasks / events / runs per day / a table's event spacing | planned DAG: tasks / events / runs per day |"
    )
    print("|---|---|---|")
    for action in [*ACTIONS, "discovery"]:
        a, b = per_table.get(action), policy_dags.get(action)
        left = (
            f"{'+'.join(a['tasks'])} / {'yes' if a['events'] else 'no'} / {a['per_day']:g} / {a['spacing_h']:g} h"
            if a
            else "—"
        )
        right = f"{'+'.join(b['tasks'])} / {'yes' if b['events'] else 'no'} / {b['per_day']:g}" if b else "—"
        print(f"| {action} | {left} | {right} |")
    settings = sorted({args.max_active_runs, DEFAULT_MAX_ACTIVE_RUNS, 1}, reverse=True)
    summary: list[tuple[str, list[float], list[float], float]] = []
    for commits in sorted({0.0, args.commits}):
        label = "no commits (time-based runs only)"
        for mar in settings if commits else [args.max_active_runs]:
            model = EventModel(mar, args.run_seconds, args.loop_seconds, args.read_seconds, seed=args.seed)
            rows, events = load(n, plan, per_table, policy_dags, commits, model)
            if commits:
                label = (
                    f"{commits:g} commit(s) per table per day; an event-driven planned DAG at max_active_runs "
                    f"{mar}, a planned event run active {args.run_seconds:g} s"
                )
            totals = print_rows(n, label, rows)
            if commits:
                print_events(mar, events)
            summary.append(
                (f"{commits:g}" if commits else "0", totals["per (table, action)"], totals["planned"], mar)
            )
    print(
        f"\nPer hour at {n:,} tables x 7 actions, both shapes (planned event runs active {args.run_seconds:g} s, "
        f"a scheduler loop {args.loop_seconds:g} s, the late read {args.read_seconds:g} s after a run's creation):\n"
    )
    print(
        "| commits / table / day | event runs' max_active_runs | per (table, action): runs / h | task instances / h "
        "| planned: runs / h | task instances / h | task starts / h | runs per-table / planned | task instances |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for commits_text, per, planned, mar in summary:
        mar_text = str(mar) if commits_text != "0" else "—"
        print(
            f"| {commits_text} | {mar_text} | {per[1]:,.1f} | {per[2]:,.1f} | {planned[1]:,.1f} | {planned[2]:,.1f} "
            f"| {planned[3]:,.1f} | {per[1] / planned[1]:,.0f}x | {per[2] / planned[2]:,.0f}x |"
        )
    if args.scheduler:
        from scheduler_check import check

        check(args.real_tables, args.events, args.rate)
    print(f"\nuptime at the start: {started}\nuptime at the end:   {uptime()} ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
