"""The Paimon format plugin (plugins/paimon, a separate distribution) end to end: a Paimon table written by
Spark in a local warehouse, registered like any table, ``compact`` and ``expire-snapshots`` run by the
ProcessRunner as real spark-submit jobs (the job imports the plugin's driver module by the name the job
spec carries), each effect read back: the files and snapshots on disk without a JVM (the plugin's reader),
the rows and a checksum by a separate Spark session.

On demand (TABLEMGMT_FORMATS_FULL=1): four JVMs, 470 s measured on 2 cores at load 25-36; CI runs the plugin's
registration (tests/unit/factories/test_format_plugin.py). Needs the plugin installed
(``.venv/bin/pip install -e plugins/paimon``)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.environ.get("TABLEMGMT_FORMATS_FULL") != "1",
        reason="the Paimon plugin scenario runs with TABLEMGMT_FORMATS_FULL=1",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("tablemgmt_paimon") is None and os.environ.get("CI") != "true",
        reason="the Paimon plugin is not installed: .venv/bin/pip install -e plugins/paimon",
    ),
]

ROOT = Path(__file__).resolve().parents[3]

# Writes (or reads) the table in a Paimon session built as a job's is (session_conf of the job's catalog);
# prints one JSON line: rows, a checksum, the current files and the snapshots Spark sees.
CHILD = r"""
import json, os, sys
from airflow_tablemgmt.core.formats import TABLE_FORMAT_PROPERTY
from airflow_tablemgmt.core.tables import CatalogSpec
import tablemgmt_paimon.job  # registers the format's session, as the job does
from tests.integration.formats.format_jobs import start_session
warehouse, mode = sys.argv[1], sys.argv[2]
catalog = CatalogSpec(name="lake", type="hadoop", warehouse=warehouse, properties={TABLE_FORMAT_PROPERTY: "paimon"})
spark = start_session("paimon", catalog)
if mode == "write":
    spark.sql("CREATE DATABASE IF NOT EXISTS lake.sales")
    # compaction.max.file-num: Paimon 0.9 compacts a small append table's files in bins of this many
    # (default 50, or twice target-file-size's bytes)
    spark.sql("CREATE TABLE lake.sales.orders (id BIGINT, v STRING, dt STRING) PARTITIONED BY (dt) "
              "TBLPROPERTIES ('bucket' = '-1', 'compaction.max.file-num' = '5')")
    for i in range(6):
        rows = ", ".join(f"({i * 100 + k}, 'v{k % 7}', '2026-11-{24 + k % 2}')" for k in range(40))
        spark.sql(f"INSERT INTO lake.sales.orders VALUES {rows}")
out = {}
r = spark.sql("SELECT count(*) AS n, sum(crc32(concat_ws('|', id, v, dt))) AS c FROM lake.sales.orders").first()
out["rows"], out["checksum"] = int(r["n"]), int(r["c"])
out["files"] = int(spark.sql("SELECT count(*) FROM lake.sales.`orders$files`").first()[0])
out["snapshots"] = [(int(s[0]), s[1]) for s in spark.sql(
    "SELECT snapshot_id, commit_kind FROM lake.sales.`orders$snapshots` ORDER BY snapshot_id").collect()]
print("PAIMON " + json.dumps(out), flush=True)
spark.stop()
"""


def spark_child(warehouse: Path, mode: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(warehouse), mode],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("PAIMON ")]
    assert proc.returncode == 0 and lines, proc.stderr[-6000:]
    return json.loads(lines[-1][len("PAIMON ") :])


def test_compact_and_expire_snapshots_through_the_process_runner(tmp_path: Path) -> None:
    from tablemgmt_paimon.snapshots import read_table

    from airflow_tablemgmt.core.factory import TriggerContext
    from airflow_tablemgmt.core.tables import CatalogSpec, Owner
    from airflow_tablemgmt.factories.discovery import default_factories
    from airflow_tablemgmt.hooks.spark_job import SparkJobHook
    from airflow_tablemgmt.lifecycle import ProcessRunner, RunRequest
    from airflow_tablemgmt.services.tables import RegisterRequest, register_table
    from airflow_tablemgmt.store import Store

    warehouse = tmp_path / "paimon-warehouse"
    warehouse.mkdir()
    location = str(warehouse / "sales.db" / "orders")
    before = spark_child(warehouse, "write")
    on_disk_before = read_table(location)
    assert before["rows"] == 240 and before["files"] >= 10, before
    assert on_disk_before.commits_since_compaction() == 6

    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    catalog = CatalogSpec(name="lake", type="hadoop", warehouse=str(warehouse))
    store.catalogs.upsert(catalog, Owner.STORE)
    register_table(
        store,
        RegisterRequest(
            spec={
                "catalog": "lake",
                "namespace": "sales",
                "name": "orders",
                "format": "paimon",
                "actions": {"compact": {}, "expire-snapshots": {"retain-max": 1}},
            }
        ),
    )
    workdir = tmp_path / "jobs"
    workdir.mkdir()
    factories = default_factories()
    assert "paimon" in factories.factories, factories.errors
    runner = ProcessRunner(store, factories, SparkJobHook("spark_default", workdir=str(workdir)))

    def run(action: str) -> Any:
        outcome = runner.run(
            RunRequest(
                table_id="lake.sales.orders",
                action=action,
                instant=datetime.now(UTC),
                dag_id="d",
                run_id=f"r-{action}",
                task_id=action,
                try_number=1,
                holder=f"d/{action}",
            )
        )
        process = store.processes.get(outcome.process.id)
        assert str(process.status) == "SUCCESS", process.failure_reason
        return outcome.summary

    compacted = run("compact")
    assert compacted["before"]["data_files"] == before["files"]
    assert compacted["after"]["data_files"] < compacted["before"]["data_files"]
    assert compacted["after"]["snapshots"] == compacted["before"]["snapshots"] + 1
    assert read_table(location).commits_since_compaction() == 0
    # nothing written since: the factory skips without a JVM
    spec = store.tables.get("lake.sales.orders")
    factory = factories.for_action(spec.format, "compact")
    assert factory.trigger(spec, "compact", TriggerContext(datetime.now(UTC), catalog)) is None

    expired = run("expire-snapshots")
    assert expired["before"]["snapshots"] == 7 and expired["after"]["snapshots"] == 1, expired
    assert expired["expired_snapshots"] == 6

    after = spark_child(warehouse, "read")
    on_disk_after = read_table(location)
    # rows and checksum unchanged; fewer current files; snapshots expired, on disk too, and the files
    # only the expired snapshots referenced are gone from disk
    assert (after["rows"], after["checksum"]) == (before["rows"], before["checksum"])
    assert after["files"] == compacted["after"]["data_files"] < before["files"]
    assert after["snapshots"] == [[7, "COMPACT"]]
    assert [s.id for s in on_disk_after.snapshots] == [7]
    assert on_disk_before.data_files == before["files"]
    assert on_disk_after.data_files == after["files"], (on_disk_before.figures(), on_disk_after.figures())
