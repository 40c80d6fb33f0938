"""`tablemgmt dt ...` end to end: the real console script, a real SQLite store, a real spark-submit for
the creation. Messages are the services' (the REST API answers the same text)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from airflow_tablemgmt.core.dynamic.incremental import WHEN_APPENDS
from tests.e2e.conftest import make_table
from tests.e2e.test_cli import ok, tablemgmt

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def fails(res: subprocess.CompletedProcess[str], message: str) -> None:
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and message in lines[0], res.stderr
    assert "Traceback" not in res.stderr


def test_bad_definitions_are_one_error_line_and_store_nothing() -> None:
    fails(
        tablemgmt(
            "dt",
            "create",
            "clidt.db.bad",
            "--query",
            "SELECT 1",
            "--freshness",
            "1 HOUR",
            "--refresh-mode",
            "continuous",
        ),
        "refresh-mode: 'continuous' is not a refresh mode; allowed: AUTO",
    )
    fails(
        tablemgmt("dt", "create", "clidt.db.bad", "--query", "SELECT 1", "--freshness", "7 HOUR"),
        "allowed for HOUR: 1, 2, 3, 4, 6, 8, 12, 24",
    )
    fails(tablemgmt("dt", "show", "clidt.db.bad"), "dynamic table clidt.db.bad is not registered")
    assert "clidt.db.bad" not in {
        t["table"] for t in json.loads(ok(tablemgmt("dt", "list", "--json")).stdout)
    }


def test_create_refresh_validation_suspend_resume_history(airflow_db: str, tmp_path: Path) -> None:
    src = make_table(tmp_path / "warehouse", "clidt.db.events", files=4, rows=400)
    ok(tablemgmt("catalog", "set", "clidt", "--warehouse", str(src.warehouse)))
    tid = "clidt.db.daily"
    created = ok(
        tablemgmt(
            "dt",
            "create",
            tid,
            "--query",
            "SELECT day, count(*) AS n FROM clidt.db.events GROUP BY day",
            "--freshness",
            "1 DAY",
            "--partitioned-by",
            "day",
            "--date-formatter",
            "day=yyyy-MM-dd",
            "--suspend-after-failures",
            "3",
            "--json",
            timeout=600,
        )
    )
    out = json.loads(created.stdout)
    assert out["table"]["state"] == "ACTIVE"
    assert out["table"]["definition"]["source-tables"] == ["clidt.db.events"]
    assert [c["name"] for c in out["table"]["definition"]["schema"]] == ["day", "n"]
    assert out["process"]["trigger"] == "CREATION" and out["process"]["state"] == "SUCCESS"
    assert out["process"]["rows_written"] == 4  # one row per day
    assert out["process"]["application_id"]
    # issue 41: the creation's mode and why, and the analysis spark-submit's driver made of the query
    assert (out["process"]["refresh_mode"], out["process"]["refresh_mode_reason"]) == (
        "FULL",
        "no previous state: the table's first refresh computes the whole query",
    )
    assert out["table"]["incremental"]["strategy"] == "MERGE_BY_KEY"

    [listed] = [t for t in json.loads(ok(tablemgmt("dt", "list", "--json")).stdout) if t["table"] == tid]
    assert (listed["cron"], listed["freshness"], listed["managed_by"]) == ("0 0 * * *", "1 DAY", "store")

    fails(
        tablemgmt("dt", "refresh", tid, "--periodic"), "Schedule time must be specified for periodic refresh."
    )
    fails(tablemgmt("dt", "refresh", tid, "--partition", "hour=01"), "partition keys: day")
    fails(tablemgmt("dt", "create", tid, "--query", "SELECT 1", "--freshness", "1 HOUR"), "already exists")

    assert f"{tid}: SUSPENDED" in ok(tablemgmt("dt", "suspend", tid)).stdout
    fails(tablemgmt("dt", "suspend", tid), f"dynamic table {tid} is already suspended")
    resumed = ok(tablemgmt("dt", "resume", tid, "--option", "spark.sql.shuffle.partitions=4"))
    assert f"{tid}: ACTIVE" in resumed.stdout

    history = json.loads(ok(tablemgmt("dt", "history", tid, "--json")).stdout)
    assert [(h["trigger"], h["state"], h["refresh_action"]) for h in history] == [
        ("CREATION", "SUCCESS", "FULL")
    ]
    assert set(history[0]["source_snapshots"]) == {"clidt.db.events"}
    table = ok(tablemgmt("dt", "history", tid)).stdout
    assert "CREATION" in table and "SCHEDULE TIME" in table

    ok(tablemgmt("dt", "alter", tid, "--freshness", "1 HOUR"))
    shown = json.loads(ok(tablemgmt("dt", "show", tid, "--json")).stdout)
    assert (shown["cron"], shown["dynamic_options"]) == ("0 * * * *", {"spark.sql.shuffle.partitions": "4"})
    assert {k: shown["refresh_mode"][k] for k in ("declared", "mode", "reason")} == {
        "declared": "AUTO",
        "mode": "INCREMENTAL",
        "reason": f"MERGE_BY_KEY: {WHEN_APPENDS}",
    }

    assert "dropped" in ok(tablemgmt("dt", "drop", tid)).stdout
    fails(tablemgmt("dt", "show", tid), "removed")
    assert len(json.loads(ok(tablemgmt("dt", "history", tid, "--json")).stdout)) == 1  # history stays
