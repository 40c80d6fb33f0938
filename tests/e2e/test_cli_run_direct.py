"""`tablemgmt run` without importing Airflow, when Airflow's answer for the Spark connection is known.

With ``--store-url`` and ``AIRFLOW_CONN_SPARK_DEFAULT`` holding a JSON connection (and no secrets
backend configured) the CLI submits the job with the command line SparkSubmitHook would build, and
never imports Airflow. These tests hold that path to the Airflow one: the same process row, summary
and result on twin tables; a connection Airflow would take from elsewhere (a secrets backend) is still
Airflow's to resolve; a bad master in the connection fails the run naming it. Real subprocesses, real
SQLite, real Spark and Iceberg.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import BIN, IcebergTable, make_table
from tests.e2e.iceberg_reads import read_state

pytestmark = pytest.mark.e2e

INSTANT = "2026-03-01T00:00:00+00:00"
LOCAL = json.dumps({"conn_type": "spark", "host": "local[2]"})
# Importing Airflow first makes the run take SparkSubmitHook, as in a worker (stdout swapped as the CLI
# does, so Airflow's log handlers write to stderr and stdout stays the JSON result).
THROUGH_AIRFLOW = (
    "import sys; out, sys.stdout = sys.stdout, sys.stderr; import airflow; sys.stdout = out; "
    "from airflow_tablemgmt.cli import main; sys.exit(main(sys.argv[1:]))"
)
DIRECT = "import sys; from airflow_tablemgmt.cli import main; sys.exit(main(sys.argv[1:]))"


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env["AIRFLOW_CONN_SPARK_DEFAULT"] = LOCAL
    for key in [k for k in env if k.startswith(("AIRFLOW__SECRETS__", "AIRFLOW__WORKERS__SECRETS_BACKEND"))]:
        del env[key]
    env.update(extra)
    return env


def cli(
    store_url: str,
    *args: str,
    program: str = DIRECT,
    importtime: bool = False,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    flags = ["-X", "importtime"] if importtime else []
    argv = [sys.executable, *flags, "-c", program, "--store-url", store_url, *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env or _env(), timeout=600)


def ok(res: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert res.returncode == 0, (
        f"exit {res.returncode}\nstdout:\n{res.stdout[-3000:]}\nstderr:\n{res.stderr[-3000:]}"
    )
    return res


def imported_airflow(stderr: str) -> list[str]:
    """Modules of Airflow that ``-X importtime`` reports as imported."""
    names = [ln.rsplit("|", 1)[-1].strip() for ln in stderr.splitlines() if ln.startswith("import time:")]
    return [n for n in names if n == "airflow" or n.startswith("airflow.")]


def register(store_url: str, table: IcebergTable) -> None:
    ok(
        cli(
            store_url,
            "register",
            table.table_id,
            "--catalog-type",
            "hadoop",
            "--warehouse",
            str(table.warehouse),
            "--action",
            "rewrite-files",
            "--set",
            "rewrite-files.min-input-files=2",
        )
    )


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, IcebergTable, IcebergTable]:
    """Two tables with the same data in one warehouse, registered in one store."""
    root = tmp_path_factory.mktemp("cli-direct")
    store_url = f"sqlite:///{root / 'store.db'}"
    a = make_table(root / "wh", "direct.db.a", files=24, rows=2400)
    b = make_table(root / "wh", "direct.db.b", files=24, rows=2400)
    register(store_url, a)
    register(store_url, b)
    return store_url, a, b


def _comparable(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary without what differs between two runs of the same work (ids, times, durations)."""
    out = {k: v for k, v in summary.items() if k not in ("timings", "duration_seconds", "application_id")}
    for side in ("before", "after"):
        out[side] = {k: v for k, v in summary[side].items() if k != "current_snapshot_id"}
    del out["after"]["data_bytes"]  # the rewritten files' sizes vary by a few bytes between two rewrites
    return out


@pytest.mark.on_demand(
    reason="two spark-submits on twin tables (≈ 3 min); CI: e2e/test_cli_run_connection.py (the direct command "
    "line equals SparkSubmitHook's for every accepted connection), the direct path's failures below and "
    "e2e/test_cli.py's runs"
)
def test_run_without_airflow_matches_the_run_through_sparksubmithook(
    twins: tuple[str, IcebergTable, IcebergTable],
) -> None:
    store_url, a, b = twins
    direct = ok(
        cli(store_url, "run", a.table_id, "rewrite-files", "--instant", INSTANT, "--json", importtime=True)
    )
    assert imported_airflow(direct.stderr) == []
    hooked = ok(
        cli(
            store_url,
            "run",
            b.table_id,
            "rewrite-files",
            "--instant",
            INSTANT,
            "--json",
            program=THROUGH_AIRFLOW,
        )
    )
    one, two = json.loads(direct.stdout), json.loads(hooked.stdout)
    assert one["status"] == two["status"] == "SUCCESS"
    assert (one["attempt"], one["reused"]) == (two["attempt"], two["reused"]) == (1, False)
    # Progress and Spark's output reach stderr on both paths.
    for res in (direct, hooked):
        assert "tablemgmt: submitting rewrite-files" in res.stderr
        assert "tablemgmt: timings:" in res.stderr
    s1, s2 = one["summary"], two["summary"]
    assert set(s1) == set(s2)
    assert set(s1["timings"]) == set(s2["timings"])
    assert set(s1["before"]) == set(s2["before"]) and set(s1["after"]) == set(s2["after"])
    assert _comparable(s1) == _comparable(s2)
    assert s1["after"]["data_files"] < s1["before"]["data_files"]
    for table, out in ((a, one), (b, two)):
        state = read_state(table.metadata_dir)
        assert out["summary"]["after"]["current_snapshot_id"] == state.snapshot_id
        assert out["summary"]["after"]["data_files"] == state.data_files
    rows = [json.loads(ok(cli(store_url, "process", str(o["process"]), "--json")).stdout) for o in (one, two)]
    for row, out in zip(rows, (one, two), strict=True):
        assert row["status"] == "SUCCESS" and row["attempt"] == 1 and row["summary"] == out["summary"]
    assert {k for k in rows[0] if rows[0][k] != rows[1][k]} <= {
        "id",
        "table_id",
        "external_id",
        "snapshot_id",
        "summary",
        "created_at",
        "started_at",
        "finished_at",
        "heartbeat_at",
        "lease_acquired_at",
        "timings",
    }


@pytest.fixture
def failing_table(tmp_path: Path) -> tuple[str, IcebergTable]:
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    table = make_table(tmp_path / "wh", "direct.db.bad", files=4, rows=100)
    register(store_url, table)
    return store_url, table


def _failure(res: subprocess.CompletedProcess[str], store_url: str, table: IcebergTable) -> str:
    """The failure as the user sees it: the CLI's error or the recorded process's reason."""
    listed = json.loads(ok(cli(store_url, "processes", "--table", table.table_id, "--json")).stdout)
    assert [p["status"] for p in listed] == ["FAILED"], listed
    return res.stdout + res.stderr + (listed[0].get("failure_reason") or "")


def listed_reason(store_url: str, table: IcebergTable) -> str:
    listed = json.loads(ok(cli(store_url, "processes", "--table", table.table_id, "--json")).stdout)
    return str(listed[0].get("failure_reason"))


def test_an_invalid_master_in_the_environment_connection_fails_the_run_naming_it(
    failing_table: tuple[str, IcebergTable],
) -> None:
    store_url, table = failing_table
    env = _env(AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "bogus-env-master"}))
    res = cli(store_url, "run", table.table_id, "rewrite-files", "--json", importtime=True, env=env)
    assert res.returncode != 0
    assert imported_airflow(res.stderr) == []
    assert "bogus-env-master" in _failure(res, store_url, table)
    # --json: a script gets the failed process as a document on stdout too (issue 37: it got nothing)
    doc = json.loads(res.stdout)
    assert doc["status"] == "FAILED" and isinstance(doc["process"], int), doc
    assert doc["failure_reason"] and doc["failure_reason"] in listed_reason(store_url, table), doc


def test_a_secrets_backend_is_asked_before_the_environment_connection(
    failing_table: tuple[str, IcebergTable], tmp_path: Path
) -> None:
    """Airflow asks a configured secrets backend first: its ``spark_default`` wins over the variable's."""
    store_url, table = failing_table
    connections = tmp_path / "connections.json"
    connections.write_text(
        json.dumps({"spark_default": {"conn_type": "spark", "host": "bogus-backend-master"}})
    )
    env = _env(
        AIRFLOW__SECRETS__BACKEND="airflow.secrets.local_filesystem.LocalFilesystemBackend",
        AIRFLOW__SECRETS__BACKEND_KWARGS=json.dumps({"connections_file_path": str(connections)}),
    )
    res = cli(store_url, "run", table.table_id, "rewrite-files", "--json", env=env)
    assert res.returncode != 0
    assert "bogus-backend-master" in _failure(res, store_url, table)
