"""What a maintenance run costs on top of the Iceberg procedure it runs.

One action on a table of N small files, both ways, in one run:

- **project** — ``tablemgmt run <table> <action>`` in a fresh process: the CLI, the store (SQLite),
  the process row and lease, ``SparkSubmitHook`` → ``spark-submit`` → ``job/main.py`` with the
  before/after metrics, the result line back into the store;
- **bare** — a fresh Python process that imports pyspark, starts a local SparkSession with the same
  Iceberg jar and the same settings (``base_conf`` + the catalog's, the same master), runs the same
  ``CALL <catalog>.system.<procedure>(...)`` (the SQL the project's maintainer would run, built here
  with the project's own ``procedure_sql``), and stops.

Before the rounds, one project run on a table of its own: a host's first job writes the driver JVM's
class archive (``spark/launch/class_cache.py``, ≈ 10 s once), which every measured project run then maps. The
bare side maps none unless ``--bare-class-cache`` is given: then it maps that same archive, and the ratio
is the project's own cost over a hand-written job that also set up class data sharing.

Each round runs every action on fresh twin tables (identical data, written once up front), the two
sides interleaved and their order alternated, so machine load hits both alike. Printed: the ratio and
the overhead per action (median of the rounds), each round's own ratio, both sides' CPU time (user +
system of the whole process tree: what a side costs the machine, which other load inflates far less than
wall time), the breakdown of both sides (with the job's time between its phases), and a no-op run
(``rewrite-files`` on a table with nothing to compact).

The project's figure includes the start-up of a fresh ``tablemgmt`` process (Python and the CLI's
own imports, printed apart). It does not include Airflow's import: the benchmark passes ``--store-url``
and gives ``spark_default`` as a JSON ``AIRFLOW_CONN_SPARK_DEFAULT`` with no secrets backend and no
metrics exporter configured, and then ``tablemgmt run`` submits the job without importing Airflow.
A run that needs Airflow (the store through the ``tablemgmt_default`` connection, ``spark_default`` in
a secrets backend or as a URI, StatsD/OpenTelemetry on, secret references in the catalog) pays its
import on top (printed apart too; an Airflow worker has paid it before the task starts).

Left out: everything an Airflow deployment adds around the job (scheduling latency, the executor and
task runner, DAG parse at task start, the gate task, XCom); the store is SQLite (PostgreSQL
round-trips differ); the warehouse is the local file system (an object store makes metadata reads
dearer, for the procedure as for the metrics, and the job's early metadata read is for local warehouses
only); cluster deploy modes (a YARN/Kubernetes driver start, no class archive); a host's first run (it
writes the class archive); tables with delete files (their live-record count is a Spark scan).

    .venv/bin/python benchmarks/job_overhead.py [--files 500] [--rounds 3] [--master local[2]]
        [--actions rewrite-files expire-snapshots delete-orphans] [--workdir DIR] [--keep]
        [--baseline TREE] [--bare-class-cache] [--first-run]

``--first-run`` adds, before the rounds, each side's first job on a host: ``rewrite-files`` with a class
archive directory of its own, empty (``[tablemgmt] jvm_class_cache_dir``), printing its JVM exit, and how
long after the job the archive was there (written by a run of its own, ``spark/launch/archive_builder.py``;
with ``--baseline`` before that, by the job's JVM at its exit).

``--baseline TREE`` adds a third side, **before**: the same ``tablemgmt run`` with the
``airflow_tablemgmt`` package taken from TREE (a directory holding an ``airflow_tablemgmt/``, e.g.
``git archive <commit> airflow_tablemgmt | tar -x -C TREE``) instead of the installed one, on its
own twin tables and store, interleaved with the other two: a before/after comparison in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CATALOG, NAMESPACE = "lake", "db"
ACTIONS = ("rewrite-files", "expire-snapshots", "delete-orphans")
DAYS, BUCKETS, COMMITS = 4, 4, 4  # bucket(4, user_id) x days(ts): 16 partitions, 4 append commits
ORPHANS_OLD, ORPHANS_YOUNG = 10, 2
# Declared options: each action does real work on a table a few minutes old.
OPTIONS: dict[str, dict[str, Any]] = {
    "rewrite-files": {},
    "expire-snapshots": {"older-than": "1s", "retain-last": 1, "allow-below-floor": True},
    "delete-orphans": {},
}
NOOP = "noop"
# What a fresh `tablemgmt run` imports before it submits the job (no Airflow on that path).
CLI_RUN_IMPORTS = (
    "import airflow_tablemgmt.cli, airflow_tablemgmt.store, airflow_tablemgmt.hooks.spark_job, "
    "airflow_tablemgmt.lifecycle, airflow_tablemgmt.factories.discovery"
)
SIDES = {"project": "p", "bare": "b", "before": "o"}
# Put in front of the installed (editable) package for the ``before`` side, in every Python it starts
# (the CLI, and the job that spark-submit runs): a sitecustomize that swaps the import source.
_BASELINE_SITE = """import os, sys
_tree = os.environ.get("TMS_BASELINE_TREE")
if _tree:
    sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
    sys.path.insert(0, _tree)
"""

# The project's job phases, grouped as the bare side can be compared with them.
GROUPS = (
    ("start-up: process, imports", ("outside_job",), ("python_and_imports",)),
    (
        "spark-submit, JVM, session",
        ("hook_setup", "spark_submit", "driver_jvm", "python_startup", "imports", "session"),
        ("session",),
    ),
    ("table load", ("table_load",), ()),
    ("metrics before", ("metrics_before",), ()),
    ("procedure", ("procedure",), ("procedure",)),
    ("metrics after", ("metrics_after",), ()),
    ("maintainer other", ("maintainer_other",), ()),
    ("cost (the application's figures)", ("cost",), ()),
    ("result, stop, exit", ("session_stop", "jvm_exit", "result_parse"), ("stop_and_exit",)),
    ("in no phase (between phases)", ("unaccounted",), ()),
)


# -- child: the bare procedure in a fresh Python -------------------------------------------------------
def bare(conf_json: str, master: str, sql: str) -> None:
    """Import pyspark, start a session, run ``sql``, stop. Prints its own phases as one JSON line."""
    t0 = time.perf_counter()
    from pyspark.sql import SparkSession

    t1 = time.perf_counter()
    builder = SparkSession.builder.master(master).appName("bare-procedure")
    for key, value in json.loads(conf_json).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    t2 = time.perf_counter()
    rows = [r.asDict(recursive=True) for r in spark.sql(sql).collect()]
    t3 = time.perf_counter()
    gateway = spark.sparkContext._gateway  # noqa: SLF001 - its JVM process, to wait for its exit
    spark.stop()
    # The JVM exits when its stdin closes (as at this Python's exit); waited for here, it is reaped by this
    # process, so its CPU time counts in this process's children's (the parent's RUSAGE_CHILDREN), as the
    # project's driver JVM counts in `tablemgmt run`'s.
    jvm = getattr(gateway, "proc", None)
    if jvm is not None and jvm.stdin is not None:
        jvm.stdin.close()
        jvm.wait(timeout=600)
    t4 = time.perf_counter()
    out = {"imports": t1 - t0, "session": t2 - t1, "procedure": t3 - t2, "stop": t4 - t3, "rows": len(rows)}
    print("BARE " + json.dumps(out, default=str), flush=True)


# -- child: the twin tables ---------------------------------------------------------------------------
def make_tables(warehouse: str, master: str, names_json: str, files: int, rows_per_file: int) -> None:
    """Create every table in ``names`` (name -> file count) with the same data, in one session."""
    from pyspark.sql import SparkSession

    from airflow_tablemgmt.core.tables import CatalogSpec
    from airflow_tablemgmt.spark.conf import base_conf, catalog_conf
    from airflow_tablemgmt.spark.launch.artifacts import iceberg_runtime_jar

    builder = SparkSession.builder.master(master).appName("job-overhead-tables")
    conf = {**base_conf(), **catalog_conf(CatalogSpec(name=CATALOG, warehouse=warehouse))}
    conf["spark.jars"] = str(iceberg_runtime_jar())
    conf["spark.ui.showConsoleProgress"] = "false"
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}")
    partitions = DAYS * BUCKETS
    for name, n_files in json.loads(names_json).items():
        table = f"{CATALOG}.{NAMESPACE}.{name}"
        spark.sql(
            f"CREATE TABLE {table} (id BIGINT, user_id INT, ts TIMESTAMP, kind STRING, amount DOUBLE) "
            "USING iceberg PARTITIONED BY (bucket(4, user_id), days(ts)) TBLPROPERTIES ("
            "'format-version'='2', 'write.distribution-mode'='none', 'write.spark.fanout.enabled'='true')"
        )
        commits = COMMITS if n_files >= partitions * COMMITS else 1
        # Each write task holds rows of every partition and leaves one file in each.
        tasks = max(1, -(-n_files // (partitions * commits)))
        per_commit = tasks * partitions * rows_per_file
        for c in range(commits):
            spark.range(c * per_commit, (c + 1) * per_commit, 1, numPartitions=tasks).selectExpr(
                "id",
                "cast(id % 9973 AS int) AS user_id",
                f"timestamp_seconds(1767225600 + (id % {DAYS}) * 86400 + id % 86400) AS ts",
                "element_at(array('view', 'click', 'buy'), cast(id % 3 + 1 AS int)) AS kind",
                "(id % 1000) / 10.0 AS amount",
            ).writeTo(table).append()
    spark.stop()


# -- parent ------------------------------------------------------------------------------------------
def _venv_bin() -> Path:
    return Path(sys.executable).parent


def _children_cpu() -> float:
    """User + system CPU seconds of this process's reaped descendants so far."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str], env: dict[str, str], timeout: float = 1800) -> tuple[float, str, str, float]:
    """Run ``argv``; its wall time, stdout, stderr and CPU time (user + system, the whole process tree
    that was waited for: the CLI, spark-submit's JVM and the job's Python; the bare Python and its JVM).
    CPU time is what a side costs the machine, and far less sensitive to other load than wall time."""
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    wall = time.perf_counter() - started
    cpu = _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:6])} ... exited {done.returncode}:\n{done.stderr[-3000:]}")
    return wall, done.stdout, done.stderr, cpu


def _table(action: str, side: str, round_: int) -> str:
    return f"{side}_{action.replace('-', '_')}_{round_}"


def _load() -> str:
    """The 1/5/15-minute load averages, as `uptime` prints them."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _bare_sql(action: str, table: str) -> str:
    """The CALL the project's maintainer runs for ``action`` with the declared options."""
    from datetime import UTC, datetime

    from airflow_tablemgmt.core.identifiers import TableIdentifier
    from airflow_tablemgmt.formats.iceberg.actions import (
        DeleteOrphansSettings,
        ExpireSnapshotsSettings,
        RewriteFilesSettings,
    )
    from airflow_tablemgmt.spark.job import literals
    from airflow_tablemgmt.spark.job.procedures import procedure_sql

    ident = TableIdentifier(CATALOG, NAMESPACE, table)
    now = datetime.now(UTC)
    if action in ("rewrite-files", NOOP):
        s = RewriteFilesSettings.model_validate(OPTIONS["rewrite-files"])
        options = {
            "target-file-size-bytes": s.target_file_size_bytes,
            "min-input-files": s.min_input_files,
            "partial-progress.enabled": s.partial_progress,
            "max-concurrent-file-group-rewrites": s.max_concurrent_file_group_rewrites,
            "rewrite-all": s.rewrite_all,
        }
        args = {"strategy": literals.string("binpack"), "options": literals.string_map(options)}
        return procedure_sql(ident, "rewrite_data_files", args)
    if action == "expire-snapshots":
        e = ExpireSnapshotsSettings.model_validate(OPTIONS[action])
        args = {
            "older_than": literals.timestamp(now - e.older_than),
            "retain_last": literals.integer(e.retain_last),
            "max_concurrent_deletes": literals.integer(e.max_concurrent_deletes),
            "stream_results": literals.boolean(True),
        }
        return procedure_sql(ident, "expire_snapshots", args)
    if action == "delete-orphans":
        d = DeleteOrphansSettings.model_validate(OPTIONS[action])
        args = {"older_than": literals.timestamp(now - d.older_than), "dry_run": literals.boolean(d.dry_run)}
        return procedure_sql(ident, "remove_orphan_files", args)
    raise ValueError(action)


def _plant_orphans(warehouse: Path, table: str) -> None:
    data = warehouse / NAMESPACE / table / "data"
    old = time.time() - 5 * 86400
    for i in range(ORPHANS_OLD):
        path = data / f"orphan-old-{i}.parquet"
        path.write_text("orphan")
        os.utime(path, (old, old))
    for i in range(ORPHANS_YOUNG):
        (data / f"orphan-young-{i}.parquet").write_text("orphan")


def _declarations(warehouse: Path, tables: dict[str, str]) -> str:
    """tables.yaml for the project's tables (name -> action)."""
    lines = [
        "version: 1",
        "catalogs:",
        f"  - name: {CATALOG}",
        "    type: hadoop",
        f"    warehouse: {warehouse}",
    ]
    lines.append("tables:")
    for name, action in tables.items():
        declared = "rewrite-files" if action == NOOP else action
        lines += [
            f"  - catalog: {CATALOG}",
            f"    namespace: {NAMESPACE}",
            f"    name: {name}",
            "    actions:",
        ]
        lines.append(f"      {declared}: {json.dumps(OPTIONS[declared])}")
    return "\n".join(lines) + "\n"


def _class_cache_dir() -> Path:
    from airflow_tablemgmt.hooks.airflow_settings import setting
    from airflow_tablemgmt.spark.launch.class_cache import DEFAULT_DIR

    return Path(setting("tablemgmt", "jvm_class_cache_dir") or DEFAULT_DIR).expanduser()


def _class_archive() -> Path | None:
    """The newest finished driver class archive in the configured directory."""
    found = sorted(_class_cache_dir().glob("driver-*-*.jsa"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _wait_for_builds(directory: Path, timeout: float = 1800) -> float:
    """Wait until no class-archive build is pending or running in ``directory``; the seconds waited."""
    from airflow_tablemgmt.spark.launch.archive_builder import building

    started = time.perf_counter()
    time.sleep(0.5)
    while building(directory) and time.perf_counter() - started < timeout:
        time.sleep(1)
    return time.perf_counter() - started


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_bare":
        bare(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_make":
        make_tables(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=500, help="small data files per table (default 500)")
    p.add_argument("--rows-per-file", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds per action (median)")
    p.add_argument("--actions", nargs="+", default=list(ACTIONS), choices=ACTIONS)
    p.add_argument("--no-noop", action="store_true", help="skip the no-op run")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--workdir", type=Path, help="default: a new temporary directory")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--json", type=Path, help="also write every run's figures here")
    p.add_argument("--baseline", type=Path, metavar="TREE", help="add a 'before' side from this package tree")
    p.add_argument(
        "--bare-class-cache",
        action="store_true",
        help="the bare side's driver JVM maps the project's class archive too (what is left of the overhead "
        "when a hand-written job also sets up class data sharing)",
    )
    p.add_argument("--first-run", action="store_true", help="each side's first job with an empty class cache")
    args = p.parse_args()
    if args.baseline is not None and not (args.baseline / "airflow_tablemgmt" / "__init__.py").is_file():
        p.error(f"--baseline: {args.baseline} holds no airflow_tablemgmt/ package")

    import shutil
    import tempfile

    from airflow_tablemgmt.core.tables import CatalogSpec
    from airflow_tablemgmt.spark.conf import base_conf, catalog_conf
    from airflow_tablemgmt.spark.launch.artifacts import iceberg_runtime_jar
    from airflow_tablemgmt.spark.launch.java import resolve_java_home

    work = args.workdir or Path(tempfile.mkdtemp(prefix="tms-job-overhead-"))
    work.mkdir(parents=True, exist_ok=True)
    warehouse = work / "warehouse"
    stores = {"project": f"sqlite:///{work / 'tablemgmt.db'}", "before": f"sqlite:///{work / 'before.db'}"}
    env = {
        **os.environ,
        "JAVA_HOME": resolve_java_home(),
        "PYSPARK_PYTHON": sys.executable,
        "AIRFLOW_HOME": str(work / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": args.master}),
        "PATH": f"{_venv_bin()}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    bare_conf = {**base_conf(), **catalog_conf(CatalogSpec(name=CATALOG, warehouse=str(warehouse)))}
    bare_conf["spark.jars"] = str(iceberg_runtime_jar())

    plan = [(a, r) for r in range(args.rounds) for a in args.actions]
    if not args.no_noop:
        plan += [(NOOP, r) for r in range(args.rounds)]
    sides = ["project", "bare"] + (["before"] if args.baseline else [])
    names = {_table(a, SIDES[side], r): (16 if a == NOOP else args.files) for a, r in plan for side in sides}
    # One project run before the rounds, on a table of its own: a host's first job makes the driver's JVM
    # class archive (spark/launch/class_cache.py), which every later run on that host uses.
    warm = {_table(NOOP, "w", 0): 16}
    names.update(warm)
    first = {side: _table("rewrite-files", f"f{SIDES[side]}", 0) for side in sides if side != "bare"}
    if args.first_run:
        names.update(dict.fromkeys(first.values(), 16))
    print(f"# job overhead: {args.files} files, {args.rounds} rounds, master {args.master}, work {work}")
    print(f"# start {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load {_load()}", flush=True)
    started = time.perf_counter()
    me = str(Path(__file__).resolve())
    _run(
        [
            sys.executable,
            me,
            "_make",
            str(warehouse),
            args.master,
            json.dumps(names),
            str(args.files),
            str(args.rows_per_file),
        ],
        env,
    )
    for a, r in plan:
        if a == "delete-orphans":
            for side in sides:
                _plant_orphans(warehouse, _table(a, SIDES[side], r))
    tablemgmt = str(_venv_bin() / "tablemgmt")
    envs = {"project": env}
    if args.baseline:
        site = work / "baseline-site"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(_BASELINE_SITE)
        pythonpath = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
        # The job's environment is allow-listed ([tablemgmt] job_env_allow): let the swap reach the driver.
        envs["before"] = {
            **env,
            "TMS_BASELINE_TREE": str(args.baseline.resolve()),
            "PYTHONPATH": pythonpath,
            "AIRFLOW__TABLEMGMT__JOB_ENV_ALLOW": "PYTHONPATH TMS_BASELINE_TREE",
        }
    for side, side_env in envs.items():
        decl = work / f"tables-{side}.yaml"
        declared = {_table(a, SIDES[side], r): a for a, r in plan}
        if side == "project":
            declared.update(dict.fromkeys(warm, NOOP))
        if args.first_run:
            declared[first[side]] = "rewrite-files"
        decl.write_text(_declarations(warehouse, declared))
        _run([tablemgmt, "--store-url", stores[side], "apply", str(decl)], side_env)
    print(f"# {len(names)} tables written in {time.perf_counter() - started:.0f}s", flush=True)

    def run_project(
        action: str,
        r: int,
        side: str = "project",
        prefix: str | None = None,
        extra: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        declared = "rewrite-files" if action == NOOP else action
        table = f"{CATALOG}.{NAMESPACE}.{_table(action, prefix or SIDES[side], r)}"
        argv = [tablemgmt, "--store-url", stores[side], "run", table, declared, "--json"]
        wall, out, err, cpu = _run(argv, {**envs[side], **(extra or {})})
        summary = json.loads(out)["summary"]
        timings = dict(summary.get("timings") or {})
        total = float(timings.get("total", 0.0))
        # The job's time in none of its phases (between them: the session's catalog check, the watchdog,
        # the commit mark, the result line); the phases are sequential, so this is total minus their sum.
        inside = sum(float(v) for k, v in timings.items() if k not in ("total", "store_before_job"))
        timings["unaccounted"] = max(0.0, total - inside)
        timings["outside_job"] = wall - total
        # Spark's log and the job's, as the CLI passed them on (a task log's length, and work for both).
        lines = len(err.splitlines())
        return {"wall": wall, "cpu": cpu, "lines": lines, "timings": timings, "summary": summary}

    def run_bare(action: str, r: int) -> dict[str, Any]:
        sql = _bare_sql(action, _table(action, "b", r))
        wall, out, err, cpu = _run(
            [sys.executable, me, "_bare", json.dumps(bare_conf), args.master, sql], env
        )
        line = next(ln for ln in out.splitlines() if ln.startswith("BARE "))
        inner = json.loads(line[5:])
        timings = {"session": inner["session"], "procedure": inner["procedure"]}
        # The interpreter's start and exit are not visible inside: they go with imports / stop.
        timings["python_and_imports"] = inner["imports"]
        timings["stop_and_exit"] = wall - inner["imports"] - inner["session"] - inner["procedure"]
        return {
            "wall": wall,
            "cpu": cpu,
            "lines": len(err.splitlines()) + len(out.splitlines()),
            "timings": timings,
        }

    # A throw-away bare run warms the page cache (jars, Python) for both sides.
    run_bare(NOOP, 0) if not args.no_noop else None
    if args.first_run:
        for side in first:
            fresh = work / f"jvm-first-{side}"
            got = run_project(
                "rewrite-files",
                0,
                side,
                f"f{SIDES[side]}",
                {"AIRFLOW__TABLEMGMT__JVM_CLASS_CACHE_DIR": str(fresh)},
            )
            waited = _wait_for_builds(fresh)
            archives = [p.name for p in fresh.glob("driver-*.jsa")]
            print(
                f"# first run on a host, {side}: {got['wall']:.1f}s, jvm_exit "
                f"{float(got['timings'].get('jvm_exit', 0.0)):.1f}s; archive there {waited:.0f}s after the "
                f"job: {archives} (load {_load()})",
                flush=True,
            )
            print(f"#   timings: {json.dumps(got['timings'])}", flush=True)
    warm_up = run_project(NOOP, 0, prefix="w")
    waited = _wait_for_builds(_class_cache_dir())
    print(
        f"# warm-up project run (asks for the JVM class archive if the host has none): {warm_up['wall']:.1f}s "
        f"(jvm_exit {float(warm_up['timings'].get('jvm_exit', 0.0)):.1f}s; then {waited:.0f}s until no "
        f"archive build was running)",
        flush=True,
    )
    if args.bare_class_cache:
        archive = _class_archive()
        if archive is None:
            raise SystemExit("--bare-class-cache: the warm-up run left no class archive")
        bare_conf["spark.driver.extraJavaOptions"] = f"-XX:SharedArchiveFile={archive}"
        print(f"# bare side maps {archive}", flush=True)
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for i, (action, r) in enumerate(plan):
        order = sides[i % len(sides) :] + sides[: i % len(sides)]
        if i // len(sides) % 2:
            order.reverse()
        for side in order:
            figures = run_bare(action, r) if side == "bare" else run_project(action, r, side)
            results.setdefault(action, {}).setdefault(side, []).append(figures)
            print(
                f"#   {action} round {r} {side}: {figures['wall']:.1f}s, CPU {figures['cpu']:.1f}s, "
                f"{figures['lines']} log lines (load {_load()})",
                flush=True,
            )
            # Each run's phases as it ends, and every figure so far in --json: a run cut short (a loaded
            # machine, a time limit) still leaves its finished pairs.
            phases = {k: round(float(v), 2) for k, v in figures["timings"].items()}
            print(f"#     phases: {json.dumps(phases)}", flush=True)
            if args.json:
                args.json.write_text(json.dumps(results, indent=1, default=str))

    cli_imports, airflow_imports = [], []
    for _ in range(3):
        wall, *_ = _run([sys.executable, "-c", CLI_RUN_IMPORTS], env)
        cli_imports.append(wall)
        wall, *_ = _run([sys.executable, "-c", "import airflow"], env)
        airflow_imports.append(wall)
    print(f"# end {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load {_load()}\n")
    _report(results, _median(cli_imports), _median(airflow_imports))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    if not args.keep and args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


def _wall(sides: dict[str, list[dict[str, Any]]], side: str) -> float:
    return _median([f["wall"] for f in sides[side]])


def _phase(figures: list[dict[str, Any]], keys: tuple[str, ...]) -> float:
    return _median([sum(float(f["timings"].get(k, 0.0)) for k in keys) for f in figures])


def _report(
    results: dict[str, dict[str, list[dict[str, Any]]]], cli_imports: float, airflow_import: float
) -> None:
    before = all("before" in sides for sides in results.values())
    head = "| action | bare (s) |" + (" before (s) | before ratio |" if before else "")
    head += " project (s) | ratio | overhead (s) | project without CLI start-up (s) | ratio |"
    print(head)
    print("|---|" + "---:|" * (head.count("|") - 2))
    for action, sides in results.items():
        b, pr = _wall(sides, "bare"), _wall(sides, "project")
        row = f"| {action} | {b:.1f} |"
        if before:
            o = _wall(sides, "before")
            row += f" {o:.1f} | {o / b:.2f}x |"
        pw = pr - cli_imports
        row += f" {pr:.1f} | {pr / b:.2f}x | {pr - b:+.1f} | {pw:.1f} | {pw / b:.2f}x |"
        print(row)
    print(
        "\nCPU time (user + system s of the whole process tree, median of the rounds; other load "
        "inflates it far less than wall time) and the wall ratio of each round's pair:\n"
    )
    shown_cpu = ["bare", "before", "project"] if before else ["bare", "project"]
    print(
        "| action | "
        + " | ".join(f"{side} CPU (s)" for side in shown_cpu)
        + " | CPU ratio | wall ratio per round |"
    )
    print("|---|" + "---:|" * (len(shown_cpu) + 1) + "---|")
    for action, sides in results.items():
        cpu = {side: _median([f.get("cpu", 0.0) for f in sides[side]]) for side in shown_cpu}
        rounds = ", ".join(
            f"{p['wall'] / b['wall']:.2f}x" for p, b in zip(sides["project"], sides["bare"], strict=True)
        )
        cells = " | ".join(f"{cpu[side]:.1f}" for side in shown_cpu)
        ratio = cpu["project"] / cpu["bare"] if cpu["bare"] else 0.0
        print(f"| {action} | {cells} | {ratio:.2f}x | {rounds} |")
    print(
        f"\nCLI start-up (a fresh Python importing what `tablemgmt run` imports): {cli_imports:.2f}s; "
        f"a fresh Python importing Airflow (paid on top when the run needs Airflow, already paid in a "
        f"worker): {airflow_import:.2f}s (medians of 3).\n"
    )
    print("Breakdown (s, median of the rounds; the project's phases from its summary `timings`):\n")
    shown = ["before", "project", "bare"] if before else ["project", "bare"]
    print("| phase | " + " | ".join(f"{a} {side}" for a in results for side in shown) + " |")
    print("|---|" + "---:|" * (len(results) * len(shown)))
    for label, project_keys, bare_keys in GROUPS:
        cells = []
        for sides in results.values():
            for side in shown:
                if side == "bare":
                    cells.append(f"{_phase(sides[side], bare_keys):.2f}" if bare_keys else "—")
                else:
                    cells.append(f"{_phase(sides[side], project_keys):.2f}")
        print(f"| {label} | " + " | ".join(cells) + " |")
    print(
        "| **wall** | "
        + " | ".join(f"{_wall(s, side):.2f}" for s in results.values() for side in shown)
        + " |"
    )
    print("\nPhases in detail (median s):")
    for action, sides in results.items():
        for side in shown:
            keys: list[str] = []
            for f in sides[side]:
                keys += [k for k in f["timings"] if k not in keys]
            detail = ", ".join(f"{k} {_phase(sides[side], (k,)):.2f}" for k in keys)
            print(f"- {action} {side}: {detail}")


if __name__ == "__main__":
    main()
