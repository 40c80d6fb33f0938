"""``scheduler_load.py --scheduler``: the planned shape's event runs against a real Airflow scheduler.

A LocalExecutor deployment (``tests/e2e/test_real_scheduler.local_deployment``: SQLite metadata DB,
api-server, scheduler, dag-processor; no triggerer; ``[core] parallelism`` 4) with one policy (``fleet``,
rewrite-files, event-driven by default) over ``tables`` real Iceberg tables written by pyiceberg (a SQL catalog
on SQLite, one data file each, their health stored: no plan finds work, so no Spark job starts), every
tablemgmt setting at its default: the planned DAG's ``max_active_runs`` is ``[tablemgmt] plan_max_active_runs``'
default (16; read back from the scheduler's ``dag`` row). Once the planned DAG's first run is done, ``events``
asset events naming the tables in turn (the watcher's payload) are put on the policy's asset through Airflow's
asset manager (what the triggerer does with a watcher's event), ``rate`` per second. Then, when no run is left,
what the scheduler did: the asset-triggered ``dag_run`` rows, the most of them active at once (queued to end),
the events each consumed (``dagrun_asset_event``), what each run's ``plan`` task planned (its XCom ``plan``:
the tables it measured, the late events it read beyond Airflow's), its run's creation to the ``plan`` start,
the runs' durations and their ``task_instance`` rows; beside them what ``scheduler_model.py`` predicts at the
same rate, run duration (queued to end, median) and read delay. Nothing is asserted about how the events are
grouped.
One DAG per (table, action) would have made one run per event.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DAG_ID = "tms__plan__fleet__rewrite-files"

INJECT = r"""
import json, sys, time
from airflow.assets.manager import AssetManager
from airflow.models.asset import AssetModel
from airflow.utils.session import create_session
from sqlalchemy import select

name, events, rate, tables = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
start = time.monotonic()
for i in range(events):
    time.sleep(max(0.0, start + i / rate - time.monotonic()))
    table = tables[i % len(tables)]
    extra = {"from_trigger": True, "payload": {"table": table, "snapshot_id": i + 1, "previous_snapshot_id": i,
                                               "actions": {"rewrite-files": i}}}
    for attempt in range(20):
        try:
            with create_session() as session:
                asset = session.scalar(select(AssetModel).where(AssetModel.name == name))
                AssetManager.register_asset_change(asset=asset, extra=extra, session=session)
            break
        except Exception as e:  # SQLite busy under the scheduler: try again
            time.sleep(0.2)
    else:
        raise SystemExit(f"event {i} not registered: {e}")
print(json.dumps({"seconds": time.monotonic() - start}))
"""


def check(tables: int, events: int, rate: float) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    from airflow_tablemgmt.core.policies import parse_policy
    from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType, Owner, TableSpec
    from airflow_tablemgmt.services import health
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.enrolment import EnrolmentRepository
    from airflow_tablemgmt.store.policies import PolicyRepository
    from tests.e2e.conftest import BIN
    from tests.e2e.test_real_scheduler import _wait_for, local_deployment

    work = Path(tempfile.mkdtemp(prefix="tms-sched-check-"))
    dep = local_deployment(
        work / "airflow",
        AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="1",
        AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC="1",
        AIRFLOW__TABLEMGMT__DAG_CACHE_DIR="off",
    )
    try:
        migrate = subprocess.Popen(
            [str(BIN / "airflow"), "db", "migrate"],
            env=dep.env,
            stdout=dep.log("db-migrate").open("wb"),
            stderr=subprocess.STDOUT,
        )
        db, warehouse = work / "catalog.db", work / "warehouse"
        warehouse.mkdir()
        client = SqlCatalog("lake", uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
        client.create_namespace("db")
        catalog = CatalogSpec(
            name="lake",
            type=CatalogType.JDBC,
            warehouse=f"file://{warehouse}",
            properties={"uri": f"jdbc:sqlite:{db}"},
        )
        store = Store.for_url(dep.env["TABLEMGMT_STORE_URL"])
        store.catalogs.upsert(catalog, Owner.STORE)
        policy = {
            "name": "fleet",
            "match": {"catalog": "lake", "format": "iceberg"},
            "actions": {"rewrite-files": {}},
        }
        PolicyRepository.of(store).upsert(parse_policy(policy), Owner.STORE)
        schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
        enrol = EnrolmentRepository.of(store)
        ids = []
        for i in range(tables):
            name = f"t{i:03d}"
            t = client.create_table(f"db.{name}", schema=schema)
            t.append(pa.table({"id": list(range(10)), "v": ["x"] * 10}, schema=schema))
            spec = TableSpec(catalog="lake", namespace="db", name=name, actions={"rewrite-files": {}})
            enrol.enrol(spec, "fleet", "matched")
            ids.append(spec.id)
            health.remember(store, spec.id, health.read_file_stats(catalog, spec))
        (dep.home / "dags" / "tablemgmt_dags.py").write_bytes(
            (ROOT / "dags" / "tablemgmt_dags.py").read_bytes()
        )
        assert migrate.wait(timeout=300) == 0, dep.log("db-migrate").read_text()[-3000:]
        dep.start("api-server", "api-server", "--port", str(dep.api_port), "--host", "127.0.0.1")
        dep.start("scheduler", "scheduler")
        dep.start("dag-processor", "dag-processor")

        def registered() -> bool:
            dep.check_alive()
            rows = dep.query("SELECT is_paused, is_stale FROM dag WHERE dag_id = :d", d=DAG_ID)
            return bool(rows) and rows[0] == (False, False)

        _wait_for(f"{DAG_ID} registered", registered, timeout=300)

        def idle() -> bool:
            dep.check_alive()
            busy = dep.query(
                "SELECT count(*) FROM dag_run WHERE dag_id = :d AND state IN ('queued', 'running')", d=DAG_ID
            )[0][0]
            return (
                busy == 0 and dep.query("SELECT count(*) FROM dag_run WHERE dag_id = :d", d=DAG_ID)[0][0] > 0
            )

        _wait_for("the first (time-based) run to finish", idle, timeout=300, every=2)
        before = dep.query("SELECT max(id) FROM dag_run WHERE dag_id = :d", d=DAG_ID)[0][0]
        t0 = time.monotonic()
        inject = subprocess.run(
            [sys.executable, "-c", INJECT, "tablemgmt.policy.fleet", str(events), str(rate), *ids],
            env=dep.env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert inject.returncode == 0, inject.stderr[-3000:]
        injected_s = time.monotonic() - t0
        time.sleep(3)
        _wait_for("every asset-triggered run to finish", idle, timeout=900, every=2)
        drained_s = time.monotonic() - t0
        max_active = dep.query("SELECT max_active_runs FROM dag WHERE dag_id = :d", d=DAG_ID)[0][0]
        runs = dep.query(
            "SELECT r.id, r.run_type, r.state, r.start_date, r.end_date, "
            "(SELECT count(*) FROM dagrun_asset_event e WHERE e.dag_run_id = r.id), r.queued_at, "
            "(SELECT ti.start_date FROM task_instance ti WHERE ti.dag_id = r.dag_id AND ti.run_id = r.run_id "
            "AND ti.task_id = 'plan'), "
            "(SELECT x.value FROM xcom x WHERE x.dag_run_id = r.id AND x.task_id = 'plan' AND x.key = 'plan') "
            "FROM dag_run r WHERE r.dag_id = :d AND r.id > :b ORDER BY r.id",
            d=DAG_ID,
            b=before,
        )
        tis = dep.query(
            "SELECT ti.task_id, ti.state, count(*) FROM task_instance ti JOIN dag_run r "
            "ON r.dag_id = ti.dag_id AND r.run_id = ti.run_id WHERE r.dag_id = :d AND r.id > :b "
            "GROUP BY ti.task_id, ti.state",
            d=DAG_ID,
            b=before,
        )
        store.dispose()
        client.engine.dispose()
    except BaseException:
        dep.print_log_tails(30)
        raise
    finally:
        dep.stop()
    return report(tables, events, rate, max_active, injected_s, drained_s, runs, tis)


def report(
    tables: int,
    events: int,
    rate: float,
    max_active: int,
    injected_s: float,
    drained_s: float,
    runs: list[tuple[Any, ...]],
    tis: list[tuple[Any, ...]],
) -> dict[str, Any]:
    """What the scheduler did (the module docstring), printed and returned."""
    from tests.e2e.test_real_scheduler import _utc

    asset_runs = [r for r in runs if r[1] == "asset_triggered"]
    durations = [(_utc(r[4]) - _utc(r[3])).total_seconds() for r in asset_runs if r[3] and r[4]]
    to_plan = [(_utc(r[7]) - _utc(r[6])).total_seconds() for r in asset_runs if r[6] and r[7]]
    consumed = [r[5] for r in asset_runs]
    plans = [_plan(r[8]) for r in asset_runs]
    measured = [p.get("counts", {}).get("measured", 0) + len(p.get("unmeasured") or {}) for p in plans]
    late = [p.get("counts", {}).get("late_events", 0) for p in plans]
    ti_count = sum(c for _, _, c in tis)
    out = {
        "events": events,
        "rate": rate,
        "max_active_runs": max_active,
        "injected_s": injected_s,
        "drained_s": drained_s,
        "runs": len(runs),
        "asset_runs": len(asset_runs),
        "most_active": _most_active([(r[6] or r[3], r[4]) for r in asset_runs]),
        "states": sorted({r[2] for r in runs}),
        "consumed": consumed,
        "measured": measured,
        "late": late,
        "to_plan": to_plan,
        "durations": durations,
        "tis": tis,
        "ti_count": ti_count,
    }

    def mm(xs: list, fmt: str = "g") -> str:
        return f"{statistics.median(xs) if xs else 0:{fmt}} / {max(xs, default=0):{fmt}}"

    print(
        f"\nReal scheduler: {events} asset events on the policy's asset at {rate:g}/s over {tables} tables, the "
        f"planned DAG's max_active_runs {max_active}:\n"
    )
    print(
        "| events | injected in | last run done after | asset-triggered runs (others) | most active at once "
        "| events per run median / max | tables planned per run median / max | late events read per run "
        "median / max | run created -> plan start median / max | run duration median / max "
        "| task instances (by task, state) | per run |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    ti_text = ", ".join(f"{t} {s}: {c}" for t, s, c in sorted(tis))
    print(
        f"| {events} | {injected_s:.0f} s | {drained_s:.0f} s | {len(asset_runs)} ({len(runs) - len(asset_runs)}) "
        f"| {out['most_active']} | {mm(consumed)} | {mm(measured)} | {mm(late)} | {mm(to_plan, '.1f')} s "
        f"| {mm(durations, '.1f')} s | {ti_text} | {ti_count / len(runs) if runs else 0:.2f} |"
    )
    print(
        f"\nRun states: {', '.join(out['states'])}. Events consumed by a run: {sum(consumed)} of {events}; "
        f"tables planned in all {sum(measured)} "
        f"(an event's table planned by two runs counts twice; {sum(late)} late events read)."
    )
    reads = [
        (_utc(p["late_read_at"]) - _utc(r[6])).total_seconds()
        for r, p in zip(asset_runs, plans, strict=True)
        if r[6] and p.get("late_read_at")
    ]  # the run's creation -> its plan's read of the late events (runs that found some)
    if active_s := [(_utc(r[4]) - _utc(r[6])).total_seconds() for r in asset_runs if r[4] and r[6]]:
        from scheduler_model import EventModel, simulate

        read_s = statistics.median(reads or to_plan or [3.0])
        m = EventModel(max_active, statistics.median(active_s), 1.0, read_s, regular=True)
        sim = simulate(rate * 3600, 1.0, 0.0, m)
        out["model_runs"] = sim.runs_h * events / rate / 3600
        print(
            f"scheduler_model.py at this rate (events evenly spaced), a scheduler loop 1 s, a run active "
            f"{m.run_s:.1f} s (the median queued -> end), the late read {read_s:.1f} s after its creation (median of "
            f"{len(reads)} plans' late_read_at): {out['model_runs']:.0f} runs for {events} events, "
            f"{sim.events_per_run:.1f} events per run, {sim.active:.1f} runs active on average."
        )
    print(f"One DAG per (table, action): {events} runs and {events} task instances for the same events.")
    return out


def _plan(value: Any) -> dict[str, Any]:
    """A plan task's XCom ``plan`` as read by plain SQL (JSON text, possibly JSON of JSON)."""
    while isinstance(value, (str, bytes)):
        value = json.loads(value)
    return value if isinstance(value, dict) else {}


def _most_active(spans: list[tuple[Any, Any]]) -> int:
    """The most runs active at once, each from its queueing (else start) to its end."""
    from tests.e2e.test_real_scheduler import _utc

    edges = sorted(
        (_utc(t), step) for a, b in spans if a and b for t, step in ((a, 1), (b, -1))
    )  # an end before a start at the same instant
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


if __name__ == "__main__":
    check(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
