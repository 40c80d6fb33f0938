"""The demo's other formats (``DEMO_FORMATS=iceberg,hudi,delta,paimon make demo``): one table of each, written
by Spark so that it needs maintenance, declared, maintained by its actions, and reported before / after.

Subcommands (scripts/demo_formats.sh calls them in this order, per format):

* ``write FORMAT`` — writes the table with Spark in a session of that format alone (as a job builds it),
  plants what the destructive actions should remove (untracked files, an old partition), and records the
  table as read back independently into ``<demo>/formats/FORMAT-before.json``.
* ``declare FORMAT...`` — the declarations, ``$AIRFLOW_HOME/dags/tables.d/formats.yaml`` (the DAG file reads
  ``tables.d/*.yaml`` beside ``tables.yaml``).
* ``read FORMAT`` — the table read back again, into ``FORMAT-after.json``.
* ``report FORMAT`` — before / after side by side, what each process of the store says it did, and the
  checks: rows and checksum unchanged by the non-destructive actions, the planted files gone, the live
  files kept. Exits non-zero if a check fails.

Read back independently of our processes: Delta from its ``_delta_log`` and the Parquet files themselves
(pyarrow, no JVM); Hudi from ``.hoodie`` and its files on disk, rows and a checksum by a snapshot query in a
fresh Spark session; Paimon from its snapshot files and files on disk, rows and a checksum by Spark.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

FORMATS = ("hudi", "delta", "paimon")
TABLES = {
    "hudi": ("lake", "app", "events"),
    "delta": ("lake", "sales", "orders"),
    "paimon": ("plake", "sales", "orders"),
}
ACTIONS = {
    # "+upsert": the writer commits again after the compaction (the same values: rows and checksum stay), so the
    # clean, retaining one commit, may remove the slices the compaction superseded; the clean runs before the
    # clustering (after a clustering, retaining one commit keeps the file groups it replaced)
    "hudi": ["compaction", "+upsert", "clean", "clustering", "archive"],
    # vacuum's first run is a dry run (the first-run policy), the second deletes
    "delta": ["optimize", "vacuum", "vacuum"],
    "paimon": ["compact", "expire-partitions", "expire-snapshots", "remove-orphans"],
}
DECLARED = {
    "hudi": {
        "compaction": {"min-delta-commits": 2},
        "clustering": {"sort-columns": ["v", "id"], "layout": "z-order"},
        "clean": {"retain-commits": 1},
        # below the 5-commit floor so that a table a few minutes old shows archiving
        "archive": {"min-commits": 2, "max-commits": 3, "retain-commits": 1, "allow-below-floor": True},
    },
    "delta": {"optimize": {}, "vacuum": {}},
    "paimon": {
        "compact": {},
        "expire-partitions": {"expiration-time": "30d", "timestamp-formatter": "yyyy-MM-dd"},
        # retain-max 1: the demo expires the snapshots it just made
        "expire-snapshots": {"retain-max": 1},
        "remove-orphans": {"older-than": "3d", "confirm": True},
    },
}
# Which actions may change rows (the others must leave rows and checksum as they were).
DESTRUCTIVE = {"expire-partitions"}
OLD_PARTITION = "2020-01-01"
HUDI_WRITE = {
    "hoodie.table.name": "events",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.partitionpath.field": "part",
    # the writer runs no table service of its own: they are the service's work
    "hoodie.compact.inline": "false",
    "hoodie.datasource.compaction.async.enable": "false",
    "hoodie.clean.automatic": "false",
    "hoodie.archive.automatic": "false",
    "hoodie.insert.shuffle.parallelism": "2",
    "hoodie.upsert.shuffle.parallelism": "2",
}


def demo_dir() -> Path:
    out = Path(os.environ["DEMO"]) / "formats"
    out.mkdir(parents=True, exist_ok=True)
    return out


def warehouse(catalog: str) -> Path:
    return Path(os.environ["WAREHOUSE"]) / catalog


def location(fmt: str) -> Path:
    catalog, namespace, name = TABLES[fmt]
    if fmt == "paimon":
        return warehouse(catalog) / f"{namespace}.db" / name
    return warehouse(catalog) / namespace / name


def table_id(fmt: str) -> str:
    return ".".join(TABLES[fmt])


def session(fmt: str) -> Any:
    """A local session of ``fmt`` alone, as a job builds it for the table's catalog (its jars from the
    resolver's cache, its extensions and catalog from ``session_conf``)."""
    from pyspark.sql import SparkSession

    from airflow_tablemgmt.core.formats import TABLE_FORMAT_PROPERTY
    from airflow_tablemgmt.core.tables import CatalogSpec
    from airflow_tablemgmt.hooks.airflow_settings import artifact_settings
    from airflow_tablemgmt.spark.conf import session_conf
    from airflow_tablemgmt.spark.launch.artifacts import catalog_needs, jar_paths
    from airflow_tablemgmt.spark.launch.java import resolve_java_home

    if fmt == "paimon":
        import tablemgmt_paimon.job  # noqa: F401  (registers the plugin's session, as the job does)
    os.environ.setdefault("JAVA_HOME", str(resolve_java_home()))
    name = TABLES[fmt][0]
    catalog = CatalogSpec(
        name=name, type="hadoop", warehouse=str(warehouse(name)), properties={TABLE_FORMAT_PROPERTY: fmt}
    )
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(f"demo-{fmt}")
        .config("spark.jars", ",".join(jar_paths(catalog_needs(catalog), artifact_settings())))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in session_conf(catalog).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def backdate(path: Path, days: float) -> None:
    past = time.time() - days * 86400
    os.utime(path, (past, past))


# ---- write -------------------------------------------------------------------------------------------


def write_hudi(spark: Any) -> dict[str, Any]:
    """A merge-on-read table: one insert, then four upserts, each leaving log files in the file groups."""
    path = str(location("hudi"))

    def write(first: int, count: int, ts: int, operation: str) -> None:
        (
            spark.range(first, first + count)
            .selectExpr("id", "CAST(id % 2 AS INT) AS part", f"{ts} AS ts", f"concat('v{ts}-', id) AS v")
            .write.format("hudi")
            .options(**HUDI_WRITE)
            .option("hoodie.datasource.write.operation", operation)
            .mode("append")
            .save(path)
        )

    write(0, 400, 0, "insert")
    for ts in range(1, 5):
        write(ts * 50, 100, ts, "upsert")
    return {}


def write_delta(spark: Any) -> dict[str, Any]:
    """Twelve small appends (4 files each, in 2 partitions), then three untracked files a crashed writer
    left 8 days ago (older than the table's 7-day retention: VACUUM's to delete) and one left just now
    (younger: kept)."""
    path = location("delta")
    for i in range(12):
        (
            spark.range(i * 100, i * 100 + 100)
            .selectExpr("id", "CAST(id % 2 AS INT) AS part", "CAST(id * 7 % 13 AS BIGINT) AS v")
            .repartition(4)
            .write.format("delta")
            .partitionBy("part")
            .mode("append")
            .save(str(path))
        )
    from airflow_tablemgmt.formats.delta.metadata import read_delta

    live = sorted(read_delta(str(path)).files)
    planted = {
        "old": [f"part=0/orphan-old-{i}.parquet" for i in range(3)],
        "young": ["part=1/orphan-young-0.parquet"],
    }
    for rel in planted["old"] + planted["young"]:
        shutil.copyfile(path / live[0], path / rel)
    for rel in planted["old"]:
        backdate(path / rel, 8)
    return {"planted": planted}


def write_paimon(spark: Any) -> dict[str, Any]:
    """An append table (no buckets) of many small files: eight inserts over two recent days, one into a
    day of 2020 (expire-partitions' to drop); then untracked files 5 days old (remove-orphans' to delete)
    and one just now (kept)."""
    spark.sql("CREATE DATABASE IF NOT EXISTS plake.sales")
    # compaction.max.file-num: Paimon 0.9 compacts a small append table's files in bins of this many
    spark.sql(
        "CREATE TABLE plake.sales.orders (id BIGINT, v STRING, dt STRING) PARTITIONED BY (dt) "
        "TBLPROPERTIES ('bucket' = '-1', 'compaction.max.file-num' = '5')"
    )
    today = time.strftime("%Y-%m-%d", time.gmtime())
    yesterday = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 86400))
    for i in range(8):
        rows = ", ".join(f"({i * 100 + k}, 'v{k % 7}', '{(today, yesterday)[k % 2]}')" for k in range(40))
        spark.sql(f"INSERT INTO plake.sales.orders VALUES {rows}")
    rows = ", ".join(f"({10_000 + k}, 'old{k}', '{OLD_PARTITION}')" for k in range(25))
    spark.sql(f"INSERT INTO plake.sales.orders VALUES {rows}")
    bucket = next(p for p in sorted(location("paimon").glob(f"dt={today}/bucket-*")))
    live = next(p for p in sorted(bucket.iterdir()) if p.name.startswith("data-"))
    planted: dict[str, list[str]] = {"old": [], "young": []}
    for kind, count in (("old", 2), ("young", 1)):
        for i in range(count):
            target = bucket / f"data-orphan-{kind}-{i}.parquet"
            shutil.copyfile(live, target)
            if kind == "old":
                backdate(target, 5)
            planted[kind].append(str(target.relative_to(location("paimon"))))
    return {"planted": planted}


# ---- read back -----------------------------------------------------------------------------------------


def read_hudi(spark: Any) -> dict[str, Any]:
    from airflow_tablemgmt.formats.hudi.metadata import list_files, read_timeline

    row = (
        spark.read.format("hudi")
        .load(str(location("hudi")))
        .selectExpr("count(*) AS n", "sum(crc32(concat_ws('|', id, part, ts, v))) AS c")
        .first()
    )
    timeline = read_timeline(str(location("hudi")))
    return {
        "rows": int(row["n"]),
        "checksum": int(row["c"]),
        **list_files(str(location("hudi"))).summary(),
        "pending_compactions": len(timeline.pending_compactions()),
        "delta_commits_since_compaction": timeline.delta_commits_since_compaction(),
        "active_instants": len(timeline.completed),
        "completed_compactions": len(timeline.completed_compactions()),
        "archived_files": _count(location("hudi") / ".hoodie", ("archived", "history")),
    }


def _count(root: Path, markers: tuple[str, ...]) -> int:
    return sum(
        len(names) for dirpath, _, names in os.walk(root) if any(m in Path(dirpath).name for m in markers)
    )


def read_delta_table() -> dict[str, Any]:
    """Live files from the log; rows and an order-free digest of (id, part, v) from those Parquet files."""
    import pyarrow.parquet as pq

    from airflow_tablemgmt.formats.delta.metadata import read_delta

    path = location("delta")
    state = read_delta(str(path))
    values: list[tuple[int, int]] = []
    for rel in state.files:
        t = pq.read_table(path / rel, columns=["id", "v"])
        values += list(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))
    on_disk = sorted(
        str(Path(d, n).relative_to(path))
        for d, dirs, names in os.walk(path)
        if "_delta_log" not in d
        for n in names
        if n.endswith(".parquet")
    )
    return {
        "rows": len(values),
        "checksum": hashlib.sha256(repr(sorted(values)).encode()).hexdigest()[:16],
        "version": state.version,
        "live_files": state.data_files,
        "files_on_disk": len(on_disk),
        "on_disk": on_disk,
        "live": sorted(state.files),
    }


def read_paimon(spark: Any) -> dict[str, Any]:
    from tablemgmt_paimon.snapshots import read_table

    q = "SELECT count(*) AS n, sum(crc32(concat_ws('|', id, v, dt))) AS c FROM plake.sales.orders"
    row = spark.sql(q).first()
    kept = spark.sql(f"{q} WHERE dt <> '{OLD_PARTITION}'").first()
    state = read_table(str(location("paimon")))
    root = location("paimon")
    on_disk = sorted(
        str(Path(d, n).relative_to(root)) for d, _, names in os.walk(root) if "bucket-" in d for n in names
    )
    return {
        "rows": int(row["n"]),
        "checksum": int(row["c"] or 0),
        "rows_outside_old_partition": int(kept["n"]),
        "checksum_outside_old_partition": int(kept["c"] or 0),
        "current_files": int(spark.sql("SELECT count(*) FROM plake.sales.`orders$files`").first()[0]),
        "partitions": sorted(r[0] for r in spark.sql("SELECT DISTINCT dt FROM plake.sales.orders").collect()),
        **state.figures(),
        "on_disk": on_disk,
    }


def read(fmt: str, spark: Any | None) -> dict[str, Any]:
    if fmt == "delta":
        return read_delta_table()
    return read_hudi(spark) if fmt == "hudi" else read_paimon(spark)


def cmd_write(fmt: str) -> None:
    spark = session(fmt)
    t = time.perf_counter()
    extra = {"hudi": write_hudi, "delta": write_delta, "paimon": write_paimon}[fmt](spark)
    state = {"written_in_s": round(time.perf_counter() - t, 1), **extra, **read(fmt, spark)}
    spark.stop()
    (demo_dir() / f"{fmt}-before.json").write_text(json.dumps(state, indent=1))
    print(f"  {table_id(fmt)} at {location(fmt)}: " + brief(fmt, state))


def cmd_upsert(fmt: str) -> None:
    """A writer's commit between two actions: rows 0-99 upserted with the values they have (a new delta commit
    with log files; the table's rows and checksum unchanged)."""
    spark = session(fmt)
    path = str(location(fmt))
    rows = spark.read.format("hudi").load(path).where("id < 100").select("id", "part", "ts", "v")
    rows.write.format("hudi").options(**HUDI_WRITE).option(
        "hoodie.datasource.write.operation", "upsert"
    ).mode("append").save(path)
    spark.stop()
    print(f"  a writer upserted 100 rows of {table_id(fmt)} with the values they have (a new delta commit)")


def cmd_read(fmt: str) -> None:
    spark = None if fmt == "delta" else session(fmt)
    state = read(fmt, spark)
    if spark is not None:
        spark.stop()
    (demo_dir() / f"{fmt}-after.json").write_text(json.dumps(state, indent=1))


def brief(fmt: str, s: dict[str, Any]) -> str:
    if fmt == "hudi":
        return f"{s['rows']} rows, {s['base_files']} base files, {s['log_files']} log files in {s['file_groups']} file groups"
    if fmt == "delta":
        return f"{s['rows']} rows, {s['live_files']} live files (version {s['version']}), {s['files_on_disk']} Parquet files on disk"
    return f"{s['rows']} rows, {s['current_files']} current files, {s['snapshots']} snapshots, partitions {s['partitions']}"


# ---- declare --------------------------------------------------------------------------------------------


def cmd_declare(formats: list[str], out: Path) -> None:
    catalogs = sorted({TABLES[f][0] for f in formats})
    doc: dict[str, Any] = {
        "version": 1,
        "catalogs": [{"name": c, "type": "hadoop", "warehouse": str(warehouse(c))} for c in catalogs],
        "tables": [
            {
                "catalog": TABLES[f][0],
                "namespace": TABLES[f][1],
                "name": TABLES[f][2],
                "format": f,
                "owner": "data-platform",
                "actions": DECLARED[f],
            }
            for f in formats
        ],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        "# The demo's Delta, Hudi and Paimon tables (scripts/demo_formats.py declare)\n"
        + json.dumps(doc, indent=1)
    )


# ---- report ---------------------------------------------------------------------------------------------


def processes(fmt: str) -> list[Any]:
    from airflow_tablemgmt.hooks.tablemgmt import TableMgmtHook

    store = TableMgmtHook().get_store()
    return sorted(store.processes.list(table_id=table_id(fmt), limit=50), key=lambda p: p.id)


SUMMARY_KEYS = (
    "scheduled_instant",
    "executed_instant",
    "adopted_pending",
    "instants",
    "file_groups_rewritten",
    "deleted_files",
    "would_delete_files",
    "dry_run",
    "archived_instants",
    "expired_snapshots",
    "expired_partitions",
    "deleted_orphans",
    "orphan_files",
    "files_removed",
    "files_added",
    "skipped",
    "reason",
)


def describe(proc: Any) -> str:
    s = proc.summary or {}
    parts = [f"{k}={s[k]}" for k in SUMMARY_KEYS if k in s and s[k] not in (None, [], {})]
    if proc.action == "remove-orphans" and s.get("result"):
        parts.append(f"procedure result={json.dumps(s['result'])[:80]}")  # Paimon: the files it deleted
    before, after = s.get("before") or {}, s.get("after") or {}
    for key in ("data_files", "log_files", "base_files", "snapshots", "active_commits"):
        if key in before and key in after and before[key] != after[key]:
            parts.append(f"{key} {before[key]}->{after[key]}")
    return f"  #{proc.id} {proc.action:<18} {proc.status!s:<8} " + (", ".join(parts) or "-")[:150]


def cmd_report(fmt: str) -> int:
    before = json.loads((demo_dir() / f"{fmt}-before.json").read_text())
    after = json.loads((demo_dir() / f"{fmt}-after.json").read_text())
    procs = processes(fmt)
    print(f"{table_id(fmt)} ({fmt}, {location(fmt)})")
    print("  processes (from the store):")
    for proc in procs:
        print(describe(proc))
    print("  read back from the table itself:")
    keys = [
        k for k in before if k in after and not isinstance(before[k], (list, dict)) and k != "written_in_s"
    ]
    width = max(len(k) for k in keys)
    print(f"    {'':<{width}}  {'before':>18}  {'after':>18}")
    for k in keys:
        mark = "" if before[k] == after[k] else "  *"
        print(f"    {k:<{width}}  {before[k]!s:>18}  {after[k]!s:>18}{mark}")
    failures = checks(fmt, before, after, procs)
    for line in failures:
        print(f"  CHECK FAILED: {line}")
    if not failures:
        print("  checks: passed")
    return 1 if failures else 0


def checks(fmt: str, before: dict[str, Any], after: dict[str, Any], procs: list[Any]) -> list[str]:
    bad = [
        f"process #{p.id} {p.action}: {p.status} {p.failure_reason or ''}"
        for p in procs
        if str(p.status) != "SUCCESS"
    ]
    if fmt == "paimon":
        # expire-partitions dropped the 2020 day: every other row is there, unchanged
        same = ("rows_outside_old_partition", "checksum_outside_old_partition")
        if OLD_PARTITION in after["partitions"]:
            bad.append(f"the partition dt={OLD_PARTITION} is still there")
        if after["current_files"] >= before["current_files"]:
            bad.append(f"compact left {after['current_files']} current files of {before['current_files']}")
    else:
        same = ("rows", "checksum")
    for key in same:
        if before[key] != after[key]:
            bad.append(f"{key} changed: {before[key]} -> {after[key]}")
    if fmt == "hudi" and (after["pending_compactions"] or not after["completed_compactions"]):
        bad.append("no completed compaction, or one left pending")
    planted = before.get("planted") or {}
    disk = set(after.get("on_disk", []))
    for rel in planted.get("old", []):
        if rel in disk:
            bad.append(f"{rel} (untracked, old) is still on disk")
    for rel in planted.get("young", []):
        if rel not in disk:
            bad.append(f"{rel} (untracked, young) was deleted")
    if fmt == "delta":
        gone = set(after["live"]) - disk
        if gone:
            bad.append(f"live files deleted: {sorted(gone)[:3]}")
    return bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("write", "read", "report", "actions", "upsert"):
        sub.add_parser(name).add_argument("format", choices=FORMATS)
    declare = sub.add_parser("declare")
    declare.add_argument("formats", nargs="+", choices=FORMATS)
    declare.add_argument("--out", type=Path, required=True)
    sub.add_parser("table-id").add_argument("format", choices=FORMATS)
    args = parser.parse_args()
    if args.cmd == "write":
        cmd_write(args.format)
    elif args.cmd == "read":
        cmd_read(args.format)
    elif args.cmd == "report":
        return cmd_report(args.format)
    elif args.cmd == "upsert":
        cmd_upsert(args.format)
    elif args.cmd == "actions":
        print(" ".join(ACTIONS[args.format]))
    elif args.cmd == "table-id":
        print(table_id(args.format))
    else:
        cmd_declare(args.formats, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
