"""Two processes on one Delta or Hudi table (run by test_format_concurrent_writers.py): ``actions`` writes the
table, then runs each mutating action's job (made by the format's factory, run through the job's entry) while
``writer``, a second process with its own JVM, appends batches of new ids and records each batch it committed.

They meet through files in a signals directory: ``base`` (the table exists), ``writer-started`` (the writer's
first commit), ``actions-done``, ``writer-stopped``; the writer's commits in ``committed.jsonl`` (ids, and when
the commit returned) and its failed writes in ``failed.jsonl``. ``actions`` prints one step line per action
(start, end, outcome, a retry's outcome) and, for Hudi, the ids a snapshot query reads once the writer stopped.

    python -m tests.faults.format_concurrent_scenario <variant: a key of VARIANTS> <actions|writer> <warehouse> <signals>
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.integration.formats.format_jobs import format_catalog, run_job, start_session, step

BATCH = 50
BASE = 600  # ids 0..599 written before the writer starts
WRITER_FIRST_ID = 1_000_000
CLUSTERING_ROUNDS = int(os.environ.get("TABLEMGMT_CLUSTERING_ROUNDS", "4"))
HUDI_WRITE = {
    "hoodie.table.name": "events",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.partitionpath.field": "part",
    "hoodie.compact.inline": "false",
    "hoodie.datasource.compaction.async.enable": "false",
    "hoodie.clean.automatic": "false",
    "hoodie.archive.automatic": "false",
    "hoodie.insert.shuffle.parallelism": "2",
    "hoodie.upsert.shuffle.parallelism": "2",
}
# Each as aggressive as its floors allow, or past them with the logged override.
HUDI_ACTIONS: list[tuple[str, dict[str, Any]]] = [
    ("compaction", {"min-delta-commits": 1}),
    ("clustering", {"sort-columns": ["id"], "layout": "linear"}),
    ("clean", {"retain-commits": 1}),
    ("archive", {"min-commits": 2, "max-commits": 3, "retain-commits": 1, "allow-below-floor": True}),
]
# variant -> (format, the actions run in order while the writer appends)
VARIANTS: dict[str, tuple[str, list[tuple[str, dict[str, Any]]]]] = {
    "delta": (
        "delta",
        [
            ("optimize", {"min-new-files": 0}),
            ("vacuum", {"retain": "1h", "allow-below-floor": True, "confirm": True}),
        ],
    ),
    "hudi": ("hudi", HUDI_ACTIONS),
    "hudi-no-clustering": ("hudi", [a for a in HUDI_ACTIONS if a[0] != "clustering"]),
    # clustering alone, several times over (each replaces every file group): our job, and Hudi's own
    # procedure called directly (``CALL run_clustering``, no job code) beside the same writer
    "hudi-clustering": ("hudi", [(f"clustering-{i}", HUDI_ACTIONS[1][1]) for i in range(CLUSTERING_ROUNDS)]),
    "hudi-call-clustering": ("hudi", [(f"call-clustering-{i}", {}) for i in range(CLUSTERING_ROUNDS)]),
}


def location(warehouse: Path, fmt: str) -> Path:
    return warehouse / ("app/events" if fmt == "hudi" else "sales/orders")


def wait_for(path: Path, timeout: float = 1200) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path.name} did not appear in {timeout:.0f} s")
        time.sleep(0.2)


def commits(signals: Path) -> int:
    path = signals / "committed.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def wait_for_commits(signals: Path, seen: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while commits(signals) <= seen and time.monotonic() < deadline:
        time.sleep(0.2)


def write_batch(spark: Any, fmt: str, where: Path, first: int, count: int, operation: str = "insert") -> None:
    df = spark.range(first, first + count).selectExpr(
        "id", "CAST(id % 2 AS INT) AS part", "CAST(1 AS BIGINT) AS ts", "concat('v', id) AS v"
    )
    if fmt == "hudi":
        df.write.format("hudi").options(**HUDI_WRITE).option(
            "hoodie.datasource.write.operation", operation
        ).mode("append").save(str(where))
    else:
        df.repartition(2).write.format("delta").partitionBy("part").mode("append").save(str(where))


def hudi_info_logs(spark: Any) -> None:
    """With ``TABLEMGMT_HUDI_INFO_LOGS=1``: Hudi's locks, conflict checks, table-service scheduling and the
    timeline server's view syncs at INFO (the session's level stays ERROR), for reading a lost batch's story."""
    if os.environ.get("TABLEMGMT_HUDI_INFO_LOGS") != "1":
        return
    jvm = spark.sparkContext._jvm
    info = jvm.org.apache.logging.log4j.Level.INFO
    for name in (
        "org.apache.hudi.client.transaction",
        "org.apache.hudi.client.utils.TransactionUtils",
        "org.apache.hudi.client.BaseHoodieTableServiceClient",
        "org.apache.hudi.client.BaseHoodieWriteClient",
        "org.apache.hudi.timeline.service.RequestHandler",
        "org.apache.hudi.table.action.cluster",
        "org.apache.hudi.table.action.commit",
        "org.apache.hudi.table.action.deltacommit",
        "org.apache.hudi.common.table.view.AbstractTableFileSystemView",
        "org.apache.hudi.common.table.view.PriorityBasedFileSystemView",
    ):
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, info)


def writer(variant: str, warehouse: Path, signals: Path) -> None:
    """Append ``BATCH`` new ids at a time until the actions are done (and one batch after)."""
    fmt = VARIANTS[variant][0]
    spark = start_session(fmt)
    hudi_info_logs(spark)
    where = location(warehouse, fmt)
    wait_for(signals / "base")
    next_id, after_done = WRITER_FIRST_ID, 0
    while after_done < 1:
        done = (signals / "actions-done").exists()
        first, next_id = next_id, next_id + BATCH
        started = time.time()
        try:
            write_batch(spark, fmt, where, first, BATCH)
        except Exception as e:  # noqa: BLE001 - a write the format refused: not committed, recorded
            with (signals / "failed.jsonl").open("a") as out:
                error = f"{type(e).__name__}: {str(e)[:400]}"
                row = {"first": first, "count": BATCH, "started": started, "at": time.time(), "error": error}
                out.write(json.dumps(row) + "\n")
            continue
        with (signals / "committed.jsonl").open("a") as out:
            out.write(
                json.dumps({"first": first, "count": BATCH, "started": started, "at": time.time()}) + "\n"
            )
        (signals / "writer-started").touch()
        after_done += done
    (signals / "writer-stopped").touch()
    spark.stop()


def run_action(spark: Any, fmt: str, warehouse: Path, action: str, options: dict[str, Any]) -> dict[str, Any]:
    """One action's job from the factory, through the job's entry; a failed attempt is retried once (as a
    new attempt of the same process would be), its reason kept."""
    from airflow_tablemgmt.core.factory import TriggerContext
    from airflow_tablemgmt.core.tables import TableSpec
    from airflow_tablemgmt.formats.delta.factory import DeltaProcessFactory
    from airflow_tablemgmt.formats.hudi.factory import HudiProcessFactory

    out: dict[str, Any] = {"action": action, "attempts": []}
    out["started"] = time.time()
    if action.startswith("call-clustering"):  # Hudi's procedure itself, no job code
        sql = f"CALL run_clustering(path => '{location(warehouse, fmt)}', order => 'id', order_strategy => 'linear')"
        try:
            rows = [r.asDict() for r in spark.sql(sql).collect()]
            out["attempts"].append({"outcome": "succeeded", "reason": None, "summary": {"rows": rows}})
        except Exception as e:  # noqa: BLE001 - a conflict: recorded as the job's failure would be
            out["attempts"].append({"outcome": "failed", "reason": str(e)[:600], "summary": {}})
        out["ended"] = time.time()
        return out
    action = action.split("-")[0] if action.startswith("clustering-") else action
    factory = HudiProcessFactory() if fmt == "hudi" else DeltaProcessFactory()
    catalog = format_catalog(warehouse, fmt)
    ns, name = ("app", "events") if fmt == "hudi" else ("sales", "orders")
    spec = TableSpec(catalog="lake", namespace=ns, name=name, format=fmt, actions={action: options})
    for _ in range(2):
        job = factory.trigger(spec, action, TriggerContext(instant=datetime.now(UTC), catalog=catalog))
        if job is None:
            out["attempts"].append({"outcome": "skipped"})
            break
        result = run_job(spark, job)
        ok = result["exit_code"] == 0
        out["attempts"].append(
            {
                "outcome": "succeeded" if ok else "failed",
                "reason": None if ok else str(result.get("error") or result)[:600],
                "summary": {
                    k: v for k, v in (result.get("summary") or {}).items() if k not in ("before", "after")
                },
            }
        )
        if ok:
            break
    out["ended"] = time.time()
    return out


def actions(variant: str, warehouse: Path, signals: Path) -> None:
    fmt, todo = VARIANTS[variant]
    spark = start_session(fmt)
    hudi_info_logs(spark)
    where = location(warehouse, fmt)
    for chunk in range(3):  # several commits of small files
        write_batch(spark, fmt, where, chunk * BASE // 3, BASE // 3)
    if fmt == "hudi":  # log files for the compaction to merge
        write_batch(spark, fmt, where, 0, 100, "upsert")
        write_batch(spark, fmt, where, 300, 100, "upsert")
    else:  # vacuum's part: the table keeps removed files 1 hour; a crashed writer left files 2 hours ago
        spark.sql(
            f"ALTER TABLE delta.`{where}` SET TBLPROPERTIES ('delta.deletedFileRetentionDuration' = 'interval 1 hours')"
        )
        live = next(p for p in sorted((where / "part=0").iterdir()) if p.suffix == ".parquet")
        for i in range(2):
            shutil.copyfile(live, where / "part=0" / f"orphan-{i}.parquet")
            past = time.time() - 2 * 3600
            os.utime(where / "part=0" / f"orphan-{i}.parquet", (past, past))
    (signals / "base").touch()
    wait_for(signals / "writer-started")
    seen = 0
    for i, (action, options) in enumerate(todo):
        if i and "-" in action:  # a repeated action: once the writer committed again (else it would skip)
            wait_for_commits(signals, seen)
        step(action, **run_action(spark, fmt, warehouse, action, dict(options)))
        seen = commits(signals)
    (signals / "actions-done").touch()
    wait_for(signals / "writer-stopped")
    if fmt == "hudi":
        ids = [int(r.id) for r in spark.read.format("hudi").load(str(where)).select("id").collect()]
        step("read", ids=ids)
    spark.stop()


if __name__ == "__main__":
    variant_, role, wh, sig = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
    (writer if role == "writer" else actions)(variant_, wh, sig)
