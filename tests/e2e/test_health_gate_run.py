"""Runs only where they pay (issue 39, item 3), for real: an Iceberg table written by Spark (24 small files in 4
day partitions), registered with rewrite-files, rewrite-manifests and expire-snapshots, run with ``tablemgmt
run`` (real subprocesses, real SQLite store, real spark-submit). What does not pay is skipped before any Spark
job, as a recorded process whose summary carries the figures and thresholds that decided it (read back with
``tablemgmt processes`` and ``tablemgmt process``); the compaction the table needs runs, and once the table
scores 100 its rewrite-files is skipped too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_tablemgmt.core.tables import CatalogSpec, TableSpec
from airflow_tablemgmt.metadata.files import read_file_stats
from airflow_tablemgmt.metadata.health import score
from tests.e2e.conftest import IcebergTable, make_table
from tests.e2e.test_cli_run_direct import _env, cli, ok

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.on_demand(
        reason="≈ 5 min at load 20 (a Spark-written table, a spark-submit and seven CLI runs); CI runs the gate "
        "through the real lifecycle in tests/unit/formats/test_health_gate.py and, with real Spark, "
        "e2e/test_cli.py::test_run_compacts_records_a_process_and_reuses_it_for_the_same_instant (its "
        "compaction pays, its expiry is skipped with the figures)"
    ),
]

ACTIONS = {
    # on-new-snapshot off: the gate, not the snapshot check, decides the second run below
    "rewrite-files": {"on-new-snapshot": False, "thresholds": {"min-small-files": 10}},
    "rewrite-manifests": {},
    "expire-snapshots": {},
}


def _health(table: IcebergTable) -> tuple[int, list[str]]:
    catalog, namespace, name = table.table_id.split(".")
    spec = TableSpec(catalog=catalog, namespace=namespace, name=name, actions=ACTIONS)
    result = score(
        read_file_stats(CatalogSpec(name=catalog, type="hadoop", warehouse=str(table.warehouse)), spec)
    )
    return result.score, [f.action for f in result.findings]


def test_only_what_pays_runs_and_skips_carry_their_figures(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    table = make_table(tmp_path / "wh", "gate.db.events", files=24, rows=2400)
    actions = [a for name in ACTIONS for a in ("--action", name)]
    sets = [
        "--set",
        "rewrite-files.on-new-snapshot=false",
        "--set",
        "rewrite-files.thresholds={min-small-files: 10}",
    ]
    ok(
        cli(
            store_url,
            "register",
            table.table_id,
            "--catalog-type",
            "hadoop",
            "--warehouse",
            str(table.warehouse),
            *actions,
            *sets,
        )
    )
    before, findings = _health(table)
    assert before < 100 and findings == ["rewrite-files"]
    env = _env(TABLEMGMT_HEALTH_GATE="1")

    def run(action: str, instant: str) -> dict[str, Any]:
        res = ok(cli(store_url, "run", table.table_id, action, "--instant", instant, "--json", env=env))
        out: dict[str, Any] = json.loads(res.stdout)
        assert out["status"] == "SUCCESS", out
        return out

    # 1. a few manifests and no snapshot old enough: nothing to run
    manifests = run("rewrite-manifests", "2026-03-01T00:00:00+00:00")
    expiry = run("expire-snapshots", "2026-03-01T00:00:00+00:00")
    for out, figure, threshold in (
        (manifests, "manifests", "min-manifests"),
        (expiry, "expirable_snapshots", "min-expirable-snapshots"),
    ):
        summary = out["summary"]
        assert summary["skipped"] and summary["gate"] == "health", summary
        assert summary["reason"].startswith("does not pay now")
        assert (
            figure in summary["health"]["figures"] and threshold in summary["health"]["figures"]["thresholds"]
        )
    assert expiry["summary"]["health"]["figures"]["expirable_snapshots"] == 0

    # 2. the compaction the table needs runs (24 small files, the table's own min-small-files 10)
    ran = run("rewrite-files", "2026-03-01T00:00:00+00:00")
    assert not ran["summary"].get("skipped")
    assert ran["summary"]["before"]["data_files"] == 24 and ran["summary"]["after"]["data_files"] == 4
    after, findings = _health(table)
    assert after == 100 and findings == []

    # 3. now the table scores 100: rewrite-files is skipped, with the figures that decided it
    again = run("rewrite-files", "2026-03-01T01:00:00+00:00")
    summary = again["summary"]
    assert summary["skipped"] and summary["gate"] == "health" and summary["health"]["score"] == 100
    figures = summary["health"]["figures"]
    assert (figures["data_files"], figures["removable_data_files"], figures["partitions"]) == (4, 0, 4)
    assert figures["thresholds"] == {"min-small-files": 10, "small-file-fraction": 0.75}

    # why nothing happened, where processes are read: the process in full, and the list's reason
    row = json.loads(ok(cli(store_url, "process", str(again["process"]), "--json", env=env)).stdout)
    assert row["external_id"] is None and row["summary"]["health"]["figures"] == figures
    listing = ok(cli(store_url, "processes", "--table", table.table_id, env=env)).stdout
    assert listing.count("does not pay now") == 3
    print(f"health of {table.table_id}: {before} before the compaction, {after} after; 3 runs skipped")
