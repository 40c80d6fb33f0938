"""The first hour after `make demo`: what a new user sees in a new shell.

The demo itself takes minutes and is not run here; its parts are: the next-steps printer
(``scripts/demo_report.py``), ids printed as ids, the CLI naming the store it opened when that store
holds no tables, and ``scripts/ui.sh`` (``make ui``) started in its smoke mode on a fresh home.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest

from airflow_tablemgmt.core.process import Process, ProcessStatus
from tests.e2e.conftest import BIN, ROOT, run

pytestmark = pytest.mark.e2e

SNAPSHOT_ID = 3924933435076606422


def _demo_report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_report", ROOT / "scripts" / "demo_report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_snapshot_ids_print_as_ids_and_counts_keep_separators(capsys: pytest.CaptureFixture[str]) -> None:
    report = _demo_report()
    proc = Process(
        id=3,
        table_id="demo.db.events",
        action="rewrite-files",
        instant=datetime(2026, 2, 1, tzinfo=UTC),
        status=ProcessStatus.SUCCESS,
        snapshot_id=SNAPSHOT_ID,
        summary={
            "current_snapshot_id": SNAPSHOT_ID,
            "rewritten_bytes_count": 1234567,
            "before": {"data_files": 520, "physical_rows": 52000, "snapshot_id": SNAPSHOT_ID},
            "after": {"data_files": 4, "physical_rows": 51000},
        },
    )
    report.print_process(proc)
    out = capsys.readouterr().out
    assert f"current_snapshot_id={SNAPSHOT_ID}" in out
    assert "3,924" not in out
    assert "rewritten_bytes_count=1,234,567" in out  # a count stays readable
    assert re.search(r"physical_rows\s+52,000\s+51,000", out)


def test_next_steps_name_the_environment_the_page_and_the_rest_calls(tmp_path: Path) -> None:
    report = _demo_report()
    home = tmp_path / ".demo" / "airflow"
    home.mkdir(parents=True)
    text = report.next_steps(home=home, table="demo.db.events", process_ids=[4, 5], port=8080)
    store_url = f"sqlite:///{home / 'tablemgmt.db'}"
    assert f"export AIRFLOW_HOME={home}" in text
    assert f"export TABLEMGMT_STORE_URL={store_url}" in text
    assert "export AIRFLOW__CORE__LOAD_EXAMPLES=False" in text
    assert "tablemgmt tables" in text and "tablemgmt processes --table demo.db.events" in text
    assert f"DEMO_DIR={home.parent} make -C {ROOT} ui" in text  # not the default home: named
    assert "http://127.0.0.1:8080/plugin/tablemgmt" in text
    password = report.ui_password(home)
    assert len(password) >= 12 and password in text  # the same password `make ui` logs in with
    assert report.ui_password(home) == password  # stable across calls (a file under the home)
    assert "curl -s -X POST http://127.0.0.1:8080/auth/token" in text
    for path in (
        "/tablemgmt/v1/tables/demo.db.events",
        "/tablemgmt/v1/tables/demo.db.events/health",
        "/tablemgmt/v1/processes?table=demo.db.events",
        "/tablemgmt/v1/processes/4",
        "/tablemgmt/v1/processes/5",
    ):
        assert f"http://127.0.0.1:8080{path}" in text, path
    assert "Authorization: Bearer $TOKEN" in text


def test_cli_names_the_store_it_opened_when_it_holds_no_tables(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TABLEMGMT_STORE_URL"}
    env.update(AIRFLOW_HOME=str(home), PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    up = subprocess.run(
        [str(BIN / "tablemgmt"), "db", "upgrade"], env=env, capture_output=True, text=True, timeout=120
    )
    assert up.returncode == 0, up.stderr[-2000:]
    res = subprocess.run(
        [str(BIN / "tablemgmt"), "tables"], env=env, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert f"no tables in the store at sqlite:///{home / 'tablemgmt.db'}" in res.stdout
    assert "TABLEMGMT_STORE_URL" in res.stdout and "tablemgmt_default" in res.stdout
    # --json stays parseable: an empty list, the note on stderr.
    res = subprocess.run(
        [str(BIN / "tablemgmt"), "tables", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert json.loads(res.stdout) == [] and "no tables in the store at" in res.stderr


def test_cli_never_prints_the_store_password(pg_url_with_password: str) -> None:
    res = run([str(BIN / "tablemgmt"), "--store-url", pg_url_with_password, "tables"], timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "no tables in the store at postgresql" in res.stdout
    assert "s3cret" not in res.stdout + res.stderr and "***" in res.stdout


@pytest.fixture
def pg_url_with_password() -> str:
    """A fresh, migrated PostgreSQL store reached with a password in its URL (trust auth ignores it)."""
    pytest.importorskip("psycopg2")
    from sqlalchemy import create_engine, text

    from airflow_tablemgmt.store import Store

    schema = f"tms_first_hour_{os.getpid()}"
    admin = create_engine("postgresql+psycopg2://postgres@127.0.0.1:5432/test")
    with admin.begin() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = f"postgresql+psycopg2://postgres:s3cret@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"
    Store.for_url(url).upgrade()
    yield url  # type: ignore[misc]
    with admin.begin() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    admin.dispose()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.on_demand(
    reason="a third start of the whole UI stack (≈ 70 s); CI's first start from nothing with the same checks is "
    "tests/e2e/test_make_ui.py::test_make_ui_runs_on_postgresql (the SQLite home: its other test)"
)
@pytest.mark.timeout(420)
def test_make_ui_starts_airflow_on_the_demo_home_and_prints_url_and_login(tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "TABLEMGMT_"))}
    env.update(
        DEMO_DIR=str(demo), UI_PORT=str(port), UI_SMOKE="1", VENV=str(Path(sys.executable).parent.parent)
    )
    res = subprocess.run(
        ["bash", str(ROOT / "scripts" / "ui.sh")], env=env, capture_output=True, text=True, timeout=400
    )
    out = res.stdout
    assert res.returncode == 0, f"stdout:\n{out[-3000:]}\nstderr:\n{res.stderr[-3000:]}"
    assert f"http://127.0.0.1:{port}/plugin/tablemgmt" in out
    password = json.loads((demo / "airflow" / "ui-passwords.json").read_text())["admin"]
    assert f"login: admin / {password}" in out
    assert "api-server answers" in out and '"version"' in out
    for component in ("api-server", "scheduler", "dag-processor", "triggerer"):
        assert f"started {component}" in out, component
    assert "stopped" in out
    cfg = (demo / "airflow" / "airflow.cfg").read_text()
    assert re.search(r"^load_examples = False$", cfg, re.M)
    # Every component was stopped: nothing listens on the port any more.
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0
