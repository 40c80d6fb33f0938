"""Event latency of policy-enrolled and declared tables under a real Airflow deployment, at a given number of
watched tables: snapshot commit -> the start of the run that the commit's asset event started.

``event_latency.py`` times declared tables only (one DAG per table, Spark commits, 20 tables). This one puts
``--enrolled`` tables of one policy (``fleet``: ``rewrite-files``, event-driven by default) and ``--declared``
store tables (``rewrite-files`` each) in one deployment: api-server, scheduler, dag-processor and triggerer
(LocalExecutor, SQLite metadata DB, ``tests/e2e/test_real_scheduler.py``'s deployment; Airflow's and this
package's default settings, ``[triggerer] capacity`` = watched tables + 100). The tables are real Iceberg tables
of a SQL catalog on SQLite written by pyiceberg (no JVM): ``--commits`` of the enrolled ones and every declared
one are tables of their own (one append each); the other enrolled tables are further rows of the catalog's
``iceberg_tables`` pointing at the first table's metadata (the triggerer's JDBC check lists that table once a
tick whatever the rows point at; none of them is committed to). The policy's enrolled rows are written as
``EnrolmentRepository.enrol`` writes them, in bulk (``dag_parse.py``'s), each with stored health (the first
table's), and ``rewrite-files`` has a ``min-small-files`` threshold no table reaches, so every run is a plan
that maps nothing or a recorded skip: no Spark job competes with the samples. The policy's discovery DAG is
paused before the scheduler starts (it would list the catalog's rows).

After every watcher's first observation and the start-up runs, commits one append (pyiceberg) to each sampled
table, enrolled and declared in a random order, each at a random phase of the poll (``--gap`` seconds more
between commits), and reads from Airflow's DB the run each commit's asset event started (``dagrun_asset_event``:
the planned DAG's run for an enrolled table, the table's own DAG's run for a declared one). An enrolled table's
event that arrived after a run's queue row was written is in no run's ``dagrun_asset_event`` until the DAG's
next event; that run's ``plan`` task plans it (``dag_factory/plan_events.py``, its XCom ``late_events``): that
run's start counts as the event's run start when the event was stored before it (``how``: ``late``; the run
was created after the event, as for one it consumed), else the moment the task read it; the next run's start
if earlier. Beside it, per enrolled sample: commit -> its table planned (the run's ``plan`` task start, or that
task's read of a late event).
A commit neither consumed nor planned within ``--run-wait`` seconds counts as not started. Prints per kind
p50 / p95 / max of commit -> run start and where the median went (-> asset event stored, -> run queued, ->
run started), the triggerer's CPU (process tree, % of one core) idle and during the commits, its RSS, and
``uptime`` before and after.

    .venv/bin/python benchmarks/event_latency_fleet.py [--enrolled 1000] [--declared 10] [--commits 10]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="tms-bench-home-"))
from event_latency import default_poll, p95, uptime  # noqa: E402
from watchers import tree_cpu, tree_rss_mb  # noqa: E402

from tests.e2e.test_real_scheduler import _utc, _wait_for, local_deployment  # noqa: E402

ACTION = "rewrite-files"
POLICY = "fleet"
PLAN_DAG = f"tms__plan__{POLICY}__{ACTION}"
QUIET = {"thresholds": {"min-small-files": 1_000_000}}  # no table reaches it: plans map nothing, runs skip


def lake(work: Path) -> tuple[Any, Any, Any]:
    """Two SQL catalogs on SQLite written by pyiceberg: ``lake`` (the policy's) and ``decl`` (the declared
    tables, another catalog so that the policy never matches them); the first's database file."""
    from pyiceberg.catalog.sql import SqlCatalog

    from airflow_tablemgmt.core.tables import CatalogSpec, CatalogType

    clients, specs = {}, {}
    for name, ns in (("lake", "db"), ("decl", "own")):
        db, warehouse = work / f"{name}.db", work / f"{name}-warehouse"
        warehouse.mkdir()
        clients[name] = SqlCatalog(name, uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
        clients[name].create_namespace(ns)
        specs[name] = CatalogSpec(
            name=name,
            type=CatalogType.JDBC,
            warehouse=f"file://{warehouse}",
            properties={"uri": f"jdbc:sqlite:{db}"},
        )
    db = work / "lake.db"
    return clients, specs, db


def append(client: Any, ident: str) -> float:
    """One append (a new snapshot); the time it became visible (the catalog row moved)."""
    import pyarrow as pa

    table = client.load_table(ident)
    table.append(pa.table({"id": [1, 2, 3], "v": ["x", "y", "z"]}, schema=table.schema().as_arrow()))
    return time.time()


def create(client: Any, ident: str) -> None:
    import pyarrow as pa

    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
    table = client.create_table(ident, schema=schema)
    table.append(pa.table({"id": [0], "v": ["a"]}, schema=schema))


def populate(
    store_url: str, clients: dict[str, Any], specs: dict[str, Any], db: Path, args: Any
) -> dict[str, list[str]]:
    """The catalogs, the policy, its enrolled rows (with stored health) and the declared tables; the
    tables to commit to, by kind."""
    from airflow_tablemgmt.core.policies import parse_policy
    from airflow_tablemgmt.core.tables import Owner, TableSpec, parse_table
    from airflow_tablemgmt.services import health
    from airflow_tablemgmt.store import Store
    from airflow_tablemgmt.store.clock import utcnow
    from airflow_tablemgmt.store.models import TableRow
    from airflow_tablemgmt.store.policies import PolicyRepository
    from airflow_tablemgmt.store.tables import _columns_of, _validated

    store = Store(store_url)
    for spec in specs.values():
        store.catalogs.upsert(spec, Owner.STORE)
    policy = {"name": POLICY, "match": {"catalog": "lake", "format": "iceberg"}, "actions": {ACTION: QUIET}}
    PolicyRepository.of(store).upsert(parse_policy(policy), Owner.STORE)
    names = [f"t{i:05d}" for i in range(args.enrolled)]
    real = names[: max(1, args.commits)]
    for name in real:
        create(clients["lake"], f"db.{name}")
    with sqlite3.connect(db) as conn:  # the others: rows pointing at the first table's metadata
        row = conn.execute(
            "SELECT metadata_location, previous_metadata_location FROM iceberg_tables "
            "WHERE catalog_name = 'lake' AND table_name = ?",
            (real[0],),
        ).fetchone()
        conn.executemany(
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, "
            "previous_metadata_location) VALUES ('lake', 'db', ?, ?, ?)",
            [(n, *row) for n in names[len(real) :]],
        )
    small = health.read_file_stats(specs["lake"], TableSpec(catalog="lake", namespace="db", name=real[0]))
    now, rows = utcnow(), []
    for name in names:
        doc = {"catalog": "lake", "namespace": "db", "name": name, "actions": {ACTION: QUIET}}
        rows.append(
            dict(
                _columns_of(_validated(parse_table(doc))),
                table_id=f"lake.db.{name}",
                managed_by=str(Owner.POLICY),
                policy=POLICY,
                created_at=now,
                updated_at=now,
            )
        )
    with store.engine.begin() as conn:
        for k in range(0, len(rows), 5000):
            conn.execute(TableRow.__table__.insert(), rows[k : k + 5000])
    health.remember_many(store, {f"lake.db.{n}": small for n in names})
    declared = [f"d{i:03d}" for i in range(args.declared)]
    for name in declared:
        create(clients["decl"], f"own.{name}")
        store.tables.upsert(
            TableSpec(catalog="decl", namespace="own", name=name, actions={ACTION: QUIET}), Owner.STORE
        )
    store.dispose()
    return {
        "enrolled": [f"lake.db.{n}" for n in real[: args.commits]],
        "declared": [f"decl.own.{n}" for n in declared],
    }


def pause_discovery(db_url: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(db_url, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE dag SET is_paused = 1 WHERE dag_id LIKE 'tms__discover__%'"))
    finally:
        engine.dispose()


def measure(args: Any, work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"uptime_before": uptime()}
    watched = args.enrolled + args.declared
    dep = local_deployment(work / "airflow", AIRFLOW__TRIGGERER__CAPACITY=str(watched + 100))
    try:
        assert dep.cli("db", "migrate").returncode == 0
        clients, specs, db = lake(work)
        t0 = time.monotonic()
        sample = populate(dep.env["TABLEMGMT_STORE_URL"], clients, specs, db, args)
        out["populate_s"] = time.monotonic() - t0
        (dep.home / "dags" / "tablemgmt_dags.py").write_bytes(
            (ROOT / "dags" / "tablemgmt_dags.py").read_bytes()
        )
        dep.start("api-server", "api-server", "--port", str(dep.api_port), "--host", "127.0.0.1")
        dep.start("dag-processor", "dag-processor")

        def registered() -> bool:
            dep.check_alive()
            ids = {r[0] for r in dep.query("SELECT dag_id FROM dag")}
            return PLAN_DAG in ids and all(f"tms__{t}__{ACTION}" in ids for t in sample["declared"])

        _wait_for("the planned and declared DAGs registered", registered, timeout=900, every=2)
        # Discovery would list the catalog's rows in a task of its own while the samples run.
        pause_discovery(dep.db_url)
        dep.start("scheduler", "scheduler")
        dep.start("triggerer", "triggerer")
        pid = dep.procs["triggerer"].pid

        keys = {f"tablemgmt.watch.{t}" for kind in sample.values() for t in kind}

        def first_observations() -> int | None:
            # Every sampled table's, and every table's or --observe seconds: a fresh triggerer writes its
            # first observations in the background, a few per second (benchmarks/README.md).
            dep.check_alive()
            rows = dep.query("SELECT key FROM asset_state_store WHERE key LIKE 'tablemgmt.watch.%'")
            have = {r[0] for r in rows}
            enough = len(have) >= watched or time.monotonic() - t1 > args.observe
            return len(have) if keys <= have and enough else None

        t1 = time.monotonic()
        out["observed"] = _wait_for(
            "the watchers' first observations", first_observations, timeout=3600, every=3
        )
        out["observed_s"] = time.monotonic() - t1

        def settled() -> int | None:
            dep.check_alive()
            runs = dep.query("SELECT id, state FROM dag_run WHERE dag_id NOT LIKE 'tms__discover__%'")
            if not runs or any(s not in ("success", "failed") for _, s in runs):
                return None
            return None if dep.query("SELECT 1 FROM asset_dag_run_queue") else max(i for i, _ in runs)

        def settled_twice() -> int | None:
            first = settled()
            if first is None:
                return None
            time.sleep(2 * default_poll() + 2)
            return first if settled() == first else None

        last = _wait_for("the start-up runs to settle", settled_twice, timeout=900, every=2)
        c0, w0 = tree_cpu(pid), time.monotonic()
        time.sleep(args.window)
        out["cpu_idle_pct"] = 100 * (tree_cpu(pid) - c0) / (time.monotonic() - w0)
        out["rss_mb"] = tree_rss_mb(pid)

        order = [("enrolled", t) for t in sample["enrolled"]] + [("declared", t) for t in sample["declared"]]
        random.shuffle(order)
        committed: dict[str, tuple[str, float]] = {}
        c1, w1 = tree_cpu(pid), time.monotonic()
        for kind, table in order:
            time.sleep(random.uniform(0, default_poll()) + args.gap)
            catalog, ns, name = table.split(".")
            committed[table] = (kind, append(clients[catalog], f"{ns}.{name}"))

        def evented() -> dict[str, float] | None:
            dep.check_alive()
            found = {}
            for table, (_kind, at) in committed.items():
                rows = dep.query(
                    "SELECT e.timestamp FROM asset_event e WHERE e.extra LIKE :t ORDER BY e.id",
                    t=f'%"{table}"%',
                )
                times = [_utc(r[0]).timestamp() - at for r in rows if _utc(r[0]).timestamp() >= at - 1.0]
                if not times:
                    return None
                found[table] = times[0]
            return found

        events = _wait_for("every commit's asset event", evented, timeout=600, every=1)

        def late_taken() -> dict[int, tuple[float, float, str]]:
            """Event id -> (when the plan task that took it as a late event read it, the start of that task's
            run, the run id): a planned DAG's event run also plans the policy's events after its queue row that
            no run consumed (dag_factory/plan_events.py); the plan's XCom lists them (``late_events``,
            ``late_read_at``)."""
            rows = dep.query(
                "SELECT x.value, r.start_date, r.run_id FROM xcom x JOIN dag_run r ON r.id = x.dag_run_id "
                "WHERE x.dag_id = :d AND x.task_id = 'plan' AND x.key = 'plan' AND r.start_date IS NOT NULL",
                d=PLAN_DAG,
            )
            taken: dict[int, tuple[float, float, str]] = {}
            for value, start, run_id in rows:
                while isinstance(value, (str, bytes)):
                    value = json.loads(value)
                value = value or {}
                if not value.get("late_read_at"):
                    continue
                read = _utc(value["late_read_at"]).timestamp()
                for event_id in value.get("late_events", []):
                    if event_id not in taken or read < taken[event_id][0]:
                        taken[event_id] = (read, _utc(start).timestamp(), run_id)
            return taken

        def plan_started(run_id: str) -> float | None:
            rows = dep.query(
                "SELECT start_date FROM task_instance WHERE dag_id = :d AND run_id = :r AND task_id = 'plan' "
                "AND start_date IS NOT NULL",
                d=PLAN_DAG,
                r=run_id,
            )
            return _utc(rows[0][0]).timestamp() if rows else None

        def runs() -> dict[str, dict[str, Any]]:
            found = {}
            taken = late_taken()
            for table, (kind, at) in committed.items():
                rows = dep.query(
                    "SELECT e.id, e.timestamp, r.queued_at, r.start_date, r.dag_id, r.run_id FROM asset_event e "
                    "LEFT JOIN dagrun_asset_event x ON x.event_id = e.id LEFT JOIN dag_run r ON r.id = x.dag_run_id "
                    "AND r.id > :last AND r.start_date IS NOT NULL WHERE e.extra LIKE :t ORDER BY e.id, r.id",
                    t=f'%"{table}"%',
                    last=last,
                )
                rows = [r for r in rows if _utc(r[1]).timestamp() >= at - 1.0]
                sample: dict[str, Any] = {"kind": kind, "event": events[table]}
                consumed = [r for r in rows if r[3] is not None]
                if consumed:
                    _id, _ev, qu, st, dag, run_id = consumed[0]
                    sample.update(
                        dag=dag,
                        queued=_utc(qu).timestamp() - at,
                        started=_utc(st).timestamp() - at,
                        how="run",
                    )
                    if dag == PLAN_DAG and (planned := plan_started(run_id)) is not None:
                        sample["plan"] = planned - at
                # An event after a run's queue row, planned by that run's plan task (dag_factory/plan_events.py):
                # that run is the one that takes it; its start counts when the event was stored before it (the
                # run was created after the event, as for a consumed one), else the moment the task read it.
                late = []
                for r in rows:
                    if r[0] in taken:
                        read, run_start, _run = taken[r[0]]
                        stored = _utc(r[1]).timestamp()
                        late.append((run_start if run_start >= stored else read, read))
                if late and ("started" not in sample or min(late)[0] - at < sample["started"]):
                    start, read = min(late)
                    sample.update(dag=PLAN_DAG, started=start - at, plan=read - at, how="late")
                found[table] = sample
            return found

        # A commit whose event no run consumed or planned within --run-wait is reported as such: Airflow creates
        # an asset-triggered run for the events up to its queue row's creation; an event that arrived after that
        # is planned by that run's plan task (its read counts as the run start), or by the next run.
        deadline = time.monotonic() + args.run_wait
        while True:
            dep.check_alive()
            out["samples"] = runs()
            # every sample started, and every plan task of the planned DAG ended (a later run's plan may list an
            # event as late with an earlier run start than the one seen first)
            busy = dep.query(
                "SELECT count(*) FROM task_instance WHERE dag_id = :d AND task_id = 'plan' "
                "AND (state IS NULL OR state NOT IN ('success', 'failed', 'skipped', 'upstream_failed'))",
                d=PLAN_DAG,
            )[0][0]
            if (
                all("started" in x for x in out["samples"].values())
                and not busy
                or time.monotonic() > deadline
            ):
                break
            time.sleep(1)
        out["cpu_commits_pct"] = 100 * (tree_cpu(pid) - c1) / (time.monotonic() - w1)
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
    parser.add_argument("--enrolled", type=int, default=1000, help="tables the policy enrolled (all watched)")
    parser.add_argument("--declared", type=int, default=10, help="declared store tables (each committed to)")
    parser.add_argument("--commits", type=int, default=10, help="enrolled tables committed to")
    parser.add_argument(
        "--gap", type=float, default=0.0, help="seconds between commits beyond the poll phase"
    )
    parser.add_argument("--window", type=float, default=30.0, help="idle seconds of triggerer CPU measured")
    parser.add_argument(
        "--run-wait", type=float, default=120.0, help="seconds after the last event to wait for the runs"
    )
    parser.add_argument(
        "--observe", type=float, default=600.0, help="seconds to wait for every first observation at most"
    )
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    random.seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="tms-latency-fleet-") as work:
        r = measure(args, Path(work))
    print(json.dumps(r))
    print(
        "\n| tables | watched | samples | commit → run start p50 / p95 / max (s) "
        "| median: → asset event / → queued / → started (s) |"
    )
    print("|---|---:|---:|---:|---:|")
    for kind in ("enrolled", "declared"):
        xs = [s for s in r["samples"].values() if s["kind"] == kind]
        if not xs:
            continue
        ran = [s for s in xs if "started" in s]
        by_run = [s for s in ran if s.get("how") == "run"]
        # p95 over every sample: one whose run did not start within --run-wait counts as infinitely late.
        starts = sorted([s["started"] for s in ran] + [float("inf")] * (len(xs) - len(ran)))
        ev = statistics.median(s["event"] for s in xs)
        qu = statistics.median(s["queued"] - s["event"] for s in by_run) if by_run else float("nan")
        st = statistics.median(s["started"] - s["queued"] for s in by_run) if by_run else float("nan")
        notes = []
        if len(ran) > len(by_run):
            notes.append(f"{len(ran) - len(by_run)} after a run's queue row, planned by that run")
        if len(ran) < len(xs):
            notes.append(f"{len(xs) - len(ran)} not started within {args.run_wait:g} s")
        print(
            f"| {kind} | {args.enrolled + args.declared:,} | {len(xs)}{'; ' if notes else ''}{'; '.join(notes)} | "
            f"{statistics.median(starts):.1f} / {p95(starts):.1f} / {max(starts):.1f} | {ev:.1f} / {qu:.1f} / "
            f"{st:.1f} |"
        )
    for kind in ("enrolled", "declared"):
        xs = sorted(
            (
                round(s.get("started", float("inf")), 1),
                s.get("how", "-"),
                round(s.get("plan", float("nan")), 1),
            )
            for s in r["samples"].values()
            if s["kind"] == kind
        )
        print(
            f"{kind} samples (commit -> run start s, how, commit -> its plan task's start or late read s): {xs}"
        )
    plans = sorted(s["plan"] for s in r["samples"].values() if s["kind"] == "enrolled" and "plan" in s)
    if plans:
        print(
            f"enrolled: commit -> its table planned (the plan task's start, or its read of a late event) p50 / p95 / "
            f"max {statistics.median(plans):.1f} / {p95(plans):.1f} / {max(plans):.1f} s ({len(plans)} samples)"
        )
    print(
        f"\ntriggerer: {r['cpu_idle_pct']:.0f} % of a core idle, {r['cpu_commits_pct']:.0f} % during the commits, "
        f"{r['rss_mb']:.0f} MB; {r['observed']:,} of {args.enrolled + args.declared:,} first observations stored "
        f"{r['observed_s']:.0f} s after its start"
    )
    print(f"`{r['uptime_before']}` → `{r['uptime_after']}`")


if __name__ == "__main__":
    main()
