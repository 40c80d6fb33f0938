"""What each Delta, Hudi (and Paimon) action costs through the service against its bare procedure, in one run.

Per format and action, on twin tables written once up front (identical data, one table per side):

- **project** — ``tablemgmt run <table> <action> --json`` in a fresh process: the CLI, the store (SQLite),
  the process row and lease, ``spark-submit`` of ``job/main.py`` with the format's session (its jars
  only), the factory's checks on the timeline or log, the maintainer's before/after figures;
- **bare** — a fresh Python that starts a local SparkSession with the same jars and session settings,
  runs the procedure a hand-written job would (Hudi ``run_compaction(op => 'scheduleandexecute')``,
  ``run_clean``, ``run_clustering``, ``archive_commits``; Delta ``OPTIMIZE``, ``VACUUM ... DRY RUN`` (a
  first vacuum through the service is a dry run too); Paimon ``sys.compact``, the plugin's own
  statement, when the plugin is installed), and stops. A Hudi bare run first sets ``hoodie.metadata.enable``
  as the table has it (off on these twins), as the maintainers do; Hudi's default would create a metadata
  table, more work than the job does.

With ``--registered`` a Hudi action gets a third side, **registered**: the bare run on a third twin, after
registering the path as a session-catalog table first (``CREATE TABLE IF NOT EXISTS ... USING hudi
LOCATION``, what the maintainers did before they took the table by path), each statement timed.

The sides alternate their order per action so machine load hits them alike; one round (each run is a
JVM start). Printed: per action the wall time of both sides, the project's job phases (the procedure and
the figures before/after) and the ratio. Left out: Airflow around the task (scheduling, the executor, the
gate task, XCom), an object store (the warehouse is local), repeated rounds.

    .venv/bin/python benchmarks/format_actions.py [--formats hudi delta paimon] [--actions compaction ...]
        [--registered]
        [--workdir DIR] [--master local[2]]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CATALOG = "lake"
ACTIONS = {
    "hudi": {
        "compaction": {"min-delta-commits": 2},
        "clean": {"retain-commits": 1},
        "clustering": {"sort-columns": ["v", "id"], "layout": "z-order"},
        "archive": {"min-commits": 3, "max-commits": 4, "retain-commits": 2, "allow-below-floor": True},
    },
    "delta": {"optimize": {}, "vacuum": {}},
    "paimon": {"compact": {}},  # the plugin (plugins/paimon) when installed
}
PAIMON_TABLE = (
    "(id BIGINT, v STRING, dt STRING) PARTITIONED BY (dt) "
    "TBLPROPERTIES ('bucket' = '-1', 'compaction.max.file-num' = '5')"
)
HUDI_WRITE = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.partitionpath.field": "part",
    "hoodie.compact.inline": "false",
    "hoodie.clean.automatic": "false",
    "hoodie.archive.automatic": "false",
}


def _conf(fmt: str, warehouse: str) -> dict[str, str]:
    """The settings a job on a ``fmt`` table of the benchmark's catalog starts its session with."""
    from airflow_tablemgmt.core.formats import TABLE_FORMAT_PROPERTY
    from airflow_tablemgmt.core.tables import CatalogSpec
    from airflow_tablemgmt.hooks.airflow_settings import artifact_settings
    from airflow_tablemgmt.spark.conf import base_conf, session_conf
    from airflow_tablemgmt.spark.launch.artifacts import catalog_needs, jar_paths

    if fmt == "paimon":
        import tablemgmt_paimon.job  # noqa: F401  # registers the format's session, as a job's import does

    catalog = CatalogSpec(
        name=CATALOG, type="hadoop", warehouse=warehouse, properties={TABLE_FORMAT_PROPERTY: fmt}
    )
    conf = {**base_conf(), **session_conf(catalog)}
    conf["spark.jars"] = ",".join(jar_paths(catalog_needs(catalog), artifact_settings()))
    conf["spark.ui.showConsoleProgress"] = "false"
    return conf


def _session(conf: dict[str, str], master: str, app: str) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def table_dir(fmt: str, warehouse: str, name: str) -> str:
    """Where the benchmark's ``fmt`` table ``name`` lives (Paimon: ``<warehouse>/<database>.db/<table>``)."""
    return f"{warehouse}/{fmt}.db/{name}" if fmt == "paimon" else f"{warehouse}/{fmt}/{name}"


# -- children ----------------------------------------------------------------------------------------
def make_tables(fmt: str, warehouse: str, master: str, names: list[str]) -> None:
    """Write the first table in ``names`` (under namespace ``fmt``), then copy it to the others (twins:
    the same files, the same timeline or log)."""
    import shutil

    spark = _session(_conf(fmt, warehouse), master, f"format-actions-{fmt}-tables")
    if fmt == "paimon":  # written twice alike (its files name no path, but a copy is not Paimon's own)
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {CATALOG}.paimon")
        for name in names:
            spark.sql(f"CREATE TABLE {CATALOG}.paimon.{name} {PAIMON_TABLE}")
            for i in range(6):
                rows = ", ".join(f"({i * 100 + k}, 'v{k % 7}', '2026-11-{24 + k % 2}')" for k in range(40))
                spark.sql(f"INSERT INTO {CATALOG}.paimon.{name} VALUES {rows}")
        spark.stop()
        return
    for name in names[:1]:
        location = f"{warehouse}/{fmt}/{name}"
        if fmt == "hudi":
            for ts, (first, count, op) in enumerate(
                [
                    (0, 400, "insert"),
                    (0, 200, "upsert"),
                    (100, 200, "upsert"),
                    (200, 200, "upsert"),
                    (0, 100, "upsert"),
                ]
            ):
                spark.range(first, first + count).selectExpr(
                    "id", "CAST(id % 2 AS INT) AS part", f"{ts} AS ts", f"concat('v{ts}-', id) AS v"
                ).write.format("hudi").options(**HUDI_WRITE).option(
                    "hoodie.datasource.write.operation", op
                ).mode("append").save(location)
        else:
            for i in range(6):
                spark.range(i * 500, i * 500 + 500).selectExpr(
                    "id", "CAST(id % 2 AS INT) AS part", "CAST(id * 7 % 13 AS BIGINT) AS v"
                ).repartition(4).write.format("delta").partitionBy("part").mode("append").save(location)
    spark.stop()
    for name in names[1:]:
        shutil.copytree(f"{warehouse}/{fmt}/{names[0]}", f"{warehouse}/{fmt}/{name}")


def bare(conf_json: str, master: str, statements_json: str) -> None:
    """Start a session, run the statements, stop; print the phases as one JSON line."""
    t0 = time.perf_counter()
    import pyspark  # noqa: F401

    t1 = time.perf_counter()
    spark = _session(json.loads(conf_json), master, "bare-procedure")
    t2 = time.perf_counter()
    each = []
    for sql in json.loads(statements_json):
        started = time.perf_counter()
        spark.sql(sql).collect()
        each.append(time.perf_counter() - started)
    t3 = time.perf_counter()
    spark.stop()
    out = {"imports": t1 - t0, "session": t2 - t1, "procedure": t3 - t2, "stop": time.perf_counter() - t3}
    out.update({f"statement_{i + 1}": seconds for i, seconds in enumerate(each)})
    print("BARE " + json.dumps(out), flush=True)


def bare_sql(fmt: str, action: str, location: str) -> list[str]:
    """The procedure a hand-written job runs for ``action`` with the benchmark's options."""
    if fmt == "paimon":
        from tablemgmt_paimon.procedures import compact_sql

        return [compact_sql(CATALOG, f"paimon.{location.rsplit('/', 1)[1]}", {})]
    if fmt == "delta":
        return (
            [f"OPTIMIZE delta.`{location}`"]
            if action == "optimize"
            else [f"VACUUM delta.`{location}` DRY RUN"]
        )
    # As the maintainers run them (hudi/table.py, metadata_as_on_table): with the metadata table as the
    # table has it, off here (HUDI_WRITE); Hudi's default would create one and do more work than the job.
    return [f"SET hoodie.metadata.enable={'true' if _has_metadata_table(location) else 'false'}"] + {
        "compaction": [f"CALL run_compaction(op => 'scheduleandexecute', path => '{location}')"],
        "clean": [
            f"CREATE TABLE IF NOT EXISTS bare_t USING hudi LOCATION '{location}'",
            "CALL run_clean(table => 'bare_t', clean_policy => 'KEEP_LATEST_COMMITS', retain_commits => 1, "
            "hours_retained => 24, file_versions_retained => 1)",
        ],
        "clustering": [
            f"CALL run_clustering(path => '{location}', order => 'v,id', order_strategy => 'z-order')"
        ],
        "archive": [
            f"CALL archive_commits(path => '{location}', min_commits => 3, max_commits => 4, retain_commits => 2, "
            "enable_metadata => false)"
        ],
    }[action]


def _has_metadata_table(location: str) -> bool:
    props = Path(location, ".hoodie", "hoodie.properties").read_text().splitlines()
    return any(ln.startswith("hoodie.table.metadata.partitions=") and ln.split("=", 1)[1] for ln in props)


# -- parent ------------------------------------------------------------------------------------------
def _run(argv: list[str], env: dict[str, str], timeout: float = 1800) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:6])} ... exited {done.returncode}:\n{done.stderr[-3000:]}")
    return wall, done.stdout


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_make":
        make_tables(sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "_bare":
        bare(sys.argv[2], sys.argv[3], sys.argv[4])
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--formats", nargs="+", default=["hudi", "delta"], choices=list(ACTIONS))
    p.add_argument("--master", default="local[2]")
    p.add_argument("--workdir", type=Path, help="default: a new temporary directory")
    p.add_argument("--actions", nargs="+", help="only these actions (default: every action of the formats)")
    p.add_argument(
        "--registered",
        action="store_true",
        help="Hudi: a third side, the bare procedure after registering the path as a session-catalog table",
    )
    args = p.parse_args()

    from airflow_tablemgmt.spark.launch.java import resolve_java_home

    work = args.workdir or Path(tempfile.mkdtemp(prefix="tms-format-actions-"))
    work.mkdir(parents=True, exist_ok=True)
    warehouse = str(work / "warehouse")
    store = f"sqlite:///{work / 'tablemgmt.db'}"
    venv_bin = Path(sys.executable).parent
    env = {
        **os.environ,
        "JAVA_HOME": resolve_java_home(),
        "PYSPARK_PYTHON": sys.executable,
        "AIRFLOW_HOME": str(work / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": args.master}),
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    me, tablemgmt = str(Path(__file__).resolve()), str(venv_bin / "tablemgmt")
    print(f"# format actions: {', '.join(args.formats)}, master {args.master}, work {work}")
    print(f"# start {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load {_load()}", flush=True)
    lines = [
        "version: 1",
        "catalogs:",
        f"  - {{name: {CATALOG}, type: hadoop, warehouse: {warehouse}}}",
        "tables:",
    ]
    for fmt in args.formats:
        ACTIONS[fmt] = {a: o for a, o in ACTIONS[fmt].items() if not args.actions or a in args.actions}
        sides = ("p", "b", "r") if args.registered and fmt == "hudi" else ("p", "b")
        names = [f"{action}_{side}" for action in ACTIONS[fmt] for side in sides]
        if not names:
            continue
        if Path(table_dir(fmt, warehouse, names[0])).exists():  # a --workdir reused: its twins are there
            print(f"# {fmt}: tables kept from an earlier run in {work}", flush=True)
        else:
            wall, _ = _run([sys.executable, me, "_make", fmt, warehouse, args.master, json.dumps(names)], env)
            print(f"# {fmt}: {len(names)} tables written in {wall:.0f}s (load {_load()})", flush=True)
        for action, options in ACTIONS[fmt].items():
            lines.append(
                f"  - {{catalog: {CATALOG}, namespace: {fmt}, name: {action}_p, format: {fmt}, "
                f"actions: {{{action}: {json.dumps(options)}}}}}"
            )
    decl = work / "tables.yaml"
    decl.write_text("\n".join(lines) + "\n")
    _run([tablemgmt, "--store-url", store, "apply", str(decl)], env)

    rows: list[dict[str, Any]] = []
    for fmt in args.formats:
        conf = json.dumps(_conf(fmt, warehouse))
        for i, action in enumerate(ACTIONS[fmt]):
            figures: dict[str, Any] = {"format": fmt, "action": action}
            order = ["project", "bare"]
            statements_b = bare_sql(fmt, action, table_dir(fmt, warehouse, f"{action}_b"))
            if args.registered and fmt == "hudi" and not any(x.startswith("CREATE") for x in statements_b):
                order.append("registered")
            for side in order if i % 2 == 0 else order[::-1]:
                if side == "project":
                    argv = [
                        tablemgmt,
                        "--store-url",
                        store,
                        "run",
                        f"{CATALOG}.{fmt}.{action}_p",
                        action,
                        "--json",
                    ]
                    wall, out = _run(argv, env)
                    summary = json.loads(out).get("summary") or {}
                    timings = summary.get("timings") or {}
                    figures.update(
                        project=wall,
                        procedure=timings.get("procedure"),
                        figures=(timings.get("metrics_before") or 0) + (timings.get("metrics_after") or 0),
                        job_total=timings.get("total"),
                    )
                else:
                    if side == "bare":
                        statements = statements_b
                    else:
                        location = table_dir(fmt, warehouse, f"{action}_r")
                        statements = [
                            f"CREATE TABLE IF NOT EXISTS bare_r USING hudi LOCATION '{location}'",
                            *bare_sql(fmt, action, location),
                        ]  # statement_1 the registration, statement_2 the SET, statement_3 the procedure
                    argv = [sys.executable, me, "_bare", conf, args.master, json.dumps(statements)]
                    wall, out = _run(argv, env)
                    inner = json.loads(next(ln for ln in out.splitlines() if ln.startswith("BARE "))[5:])
                    if side == "bare":
                        figures.update(bare=wall, bare_procedure=inner["procedure"])
                    else:
                        figures.update(
                            registered=wall,
                            registration=inner["statement_1"],
                            registered_procedure=inner["statement_3"],
                        )
                phases = timings if side == "project" else inner
                rounded = {k: round(v, 1) for k, v in phases.items() if isinstance(v, int | float)}
                print(
                    f"#   {fmt} {action} {side}: {wall:.1f}s (load {_load()}) {json.dumps(rounded)}",
                    flush=True,
                )
            rows.append(figures)
    print(f"# end {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC, load {_load()}\n")
    print(
        "| format | action | project wall | of which the procedure | figures before/after | bare wall "
        "| bare procedure | project / bare |"
    )
    print("|---|---|---|---|---|---|---|---|")

    def s(v: Any) -> str:
        return f"{v:.1f} s" if isinstance(v, int | float) else "–"

    for r in rows:
        ratio = r["project"] / r["bare"] if r.get("bare") else 0
        print(
            f"| {r['format']} | {r['action']} | {s(r.get('project'))} | {s(r.get('procedure'))} | "
            f"{s(r.get('figures'))} | {s(r.get('bare'))} | {s(r.get('bare_procedure'))} | {ratio:.2f} |"
        )
    for r in rows:
        if r.get("registered"):
            print(
                f"registered side, {r['format']} {r['action']}: {s(r['registered'])} wall, of which the "
                f"registration {s(r['registration'])} and the procedure {s(r['registered_procedure'])} "
                f"(bare without it: {s(r.get('bare'))}, procedure {s(r.get('bare_procedure'))})"
            )


if __name__ == "__main__":
    main()
